//! The queue pair: RDMAP/DDP state of one stream (RFC 5040 §5-§7, RFC 5041 §5-§7,
//! RFC 7306 §5-§8), sans-IO.
//!
//! Heads up: read RFC 5040 §5 (data transfer), §6 (ordering, fencing, IRD/ORD), §7 (errors)
//! and RFC 5041 §5, §7 before editing.
//!
//! API shape (quinn `Connection`): inputs are `handle_*`, outputs are `poll_*`, mutators are
//! `post_*`. Polling order after any input: [`Qp::poll_fpdu`] until `None`, then
//! [`Qp::poll_completion`] until `None`.
//! - [`Qp::handle_stream`]: in-order TCP payload; walks the MPA deframer, validates each DDP
//!   segment (STag, PD, rights, bounds, QN/MSN/MO) and hands payload bytes straight to the
//!   `Placer` (one copy from the input slice to the region).
//! - [`Qp::poll_fpdu`]: the next FPDU (one per TCP segment, never larger than the EMSS).
//!   [`Qp::poll_segment`] is the zero-copy seam: header bytes plus region ranges, for a TX path
//!   that attaches region memory to the packet and frames in gather mode.
//! - [`Qp::poll_completion`]: CQE data.
//!
//! The region bytes and STag table are the caller's (a [`Memory`]); the QP keeps no pointer to
//! them between calls. Send/Write WRs complete when their last FPDU has been handed out, or,
//! with [`QpConfig::complete_on_ack`], when the caller reports that FPDU acknowledged by the
//! LLP ([`TxSegment::completion`] -> [`Qp::handle_acked`]; DESIGN.md §2.5). Either way SQ
//! completions come out in posting order, and a QP entering ERROR flushes every WR that has
//! not completed, including those whose FPDUs are sent but not yet acknowledged.

use std::collections::VecDeque;

use netcore::Instant;

use crate::error::{FirstError, TermCode};
use crate::mpa::wire::RtrKind;
use crate::mpa::{Deframer, DeframerConfig, Framer, FramerConfig};
use crate::rdmap::rtr::Rtr;
use crate::rdmap::rx::RxState;
use crate::rdmap::terminate::{TermLayout, TerminateHdr};
use crate::rdmap::tx::{SqToken, TxMsg, TxRun, TxSegment};
use crate::rdmap::wire::qn;
use crate::stag::{MemoryTable, MrHandle, PdId, Placer, Stag};

/// The memory the QP works on: STag table plus data mover (the dataplane's registry, or
/// `testing::VecMemory`).
pub trait Memory: MemoryTable + Placer {}
impl<T: MemoryTable + Placer + ?Sized> Memory for T {}

/// QP states (RFC 5040 §5.1 and the verbs model siw follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Created, not connected: receives may be posted; sends are queued.
    Idle,
    /// Ready to send and receive.
    Rts,
    /// Graceful close requested: no new WRs; queued work still drains.
    Closing,
    /// An error was detected locally; a Terminate is queued and will be sent.
    Terminate,
    /// Dead: every outstanding WR was flushed.
    Error,
}

/// Parameters fixed at connection time (after MPA negotiation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpConfig {
    /// Protection domain of the QP (RFC 5042 §5.4: STags of other PDs are refused).
    pub pd: PdId,
    /// Inbound Read/atomic queue depth (Read Requests we serve at once).
    pub ird: u32,
    /// Outbound Read/atomic queue depth (Read Requests we may have outstanding).
    pub ord: u32,
    /// MPA CRC negotiated.
    pub crc: bool,
    /// Markers in the stream we receive.
    pub markers_rx: bool,
    /// Markers in the stream we send.
    pub markers_tx: bool,
    /// How to read an ambiguous received Terminate (see [`TermLayout`]).
    pub term_layout_hint: TermLayout,
    /// Peer-to-peer mode: the RTR this side sends first or expects first (RFC 6581 §5; see
    /// [`crate::rdmap::rtr`]). `None` without peer-to-peer mode.
    pub rtr: Option<Rtr>,
    /// The [`Placer`] computes the CRC32c of the payload it places (fused with the copy,
    /// DESIGN.md §2.4): the deframer runs in CRC-by-caller mode and the QP feeds it the header
    /// and discarded bytes itself.
    pub crc_by_placer: bool,
    /// Send and Write work requests complete when the caller reports their last FPDU
    /// acknowledged by the LLP ([`Qp::handle_acked`] with the segment's
    /// [`TxSegment::completion`](crate::rdmap::TxSegment::completion) token; DESIGN.md §2.5),
    /// instead of when their last FPDU is handed out.
    pub complete_on_ack: bool,
}

impl Default for QpConfig {
    fn default() -> Self {
        QpConfig {
            pd: PdId(0),
            ird: 16,
            ord: 16,
            crc: true,
            markers_rx: false,
            markers_tx: false,
            term_layout_hint: TermLayout::Rfc,
            rtr: None,
            crc_by_placer: false,
            complete_on_ack: false,
        }
    }
}

/// A local scatter/gather element: `len` bytes at `offset` of region `mr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Region.
    pub mr: MrHandle,
    /// Byte offset in the region.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// Operation of a send-queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOpcode {
    /// Send (with Solicited Event when `flags.solicited`).
    Send,
    /// Send with Invalidate of `WorkRequest::invalidate` at the peer.
    SendInvalidate,
    /// RDMA Write to `remote_stag`/`remote_to`.
    Write,
    /// RDMA Write followed by an RFC 7306 Immediate Data message carrying `imm`.
    WriteImm,
    /// RDMA Read of `sges` total bytes from `remote_stag`/`remote_to` into `sges[0]`.
    Read,
    /// RFC 7306 FetchAdd on the 8 bytes at `remote_stag`/`remote_to`; the original value is
    /// written to `sges[0]` (8 bytes).
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// RFC 7306 CompareSwap.
    CmpSwap {
        /// Compared value.
        compare: u64,
        /// New value.
        swap: u64,
    },
}

/// Work request flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WrFlags {
    /// Produce a completion on success.
    pub signaled: bool,
    /// Wait until every earlier Read/atomic completed (RFC 5040 §6.1 fence).
    pub fence: bool,
    /// Solicited event (Send with SE, Immediate Data with SE).
    pub solicited: bool,
}

/// A send-queue work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRequest {
    /// Caller's id, echoed in the completion.
    pub wr_id: u64,
    /// Operation.
    pub opcode: WrOpcode,
    /// Local buffers (source for Send/Write, sink for Read/atomics).
    pub sges: Vec<Sge>,
    /// Remote STag (Write, Read, atomics).
    pub remote_stag: Stag,
    /// Remote tagged offset.
    pub remote_to: u64,
    /// Immediate data (WriteImm).
    pub imm: u64,
    /// STag the peer must invalidate (SendInvalidate).
    pub invalidate: Stag,
    /// Flags.
    pub flags: WrFlags,
}

impl WorkRequest {
    /// A WR with no remote part and default flags (signaled).
    pub fn new(wr_id: u64, opcode: WrOpcode, sges: Vec<Sge>) -> Self {
        WorkRequest {
            wr_id,
            opcode,
            sges,
            remote_stag: Stag(0),
            remote_to: 0,
            imm: 0,
            invalidate: Stag(0),
            flags: WrFlags {
                signaled: true,
                ..Default::default()
            },
        }
    }

    /// Total bytes of the SGEs.
    pub fn total_len(&self) -> u64 {
        self.sges.iter().map(|s| u64::from(s.len)).sum()
    }
}

/// A receive-queue work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvRequest {
    /// Caller's id, echoed in the completion.
    pub wr_id: u64,
    /// Buffers, filled in order.
    pub sges: Vec<Sge>,
}

/// What a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqOpcode {
    /// A Send (any flavour) left.
    Send,
    /// An RDMA Write (or Write with Immediate) left.
    Write,
    /// An RDMA Read completed.
    Read,
    /// An RFC 7306 FetchAdd completed; the original value is in the sink.
    FetchAdd,
    /// An RFC 7306 CompareSwap completed; the original value is in the sink.
    CmpSwap,
    /// A Send arrived into a posted receive.
    Recv,
    /// An Immediate Data message (Write with Immediate) arrived into a posted receive.
    RecvImm,
}

/// Completion status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Flushed because the QP went to ERROR.
    Flushed,
    /// The WR was refused locally (bad SGE, ORD 0 for a Read...).
    LocalError,
}

/// Completion data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The WR's id.
    pub wr_id: u64,
    /// Operation.
    pub opcode: CqOpcode,
    /// Status.
    pub status: WcStatus,
    /// Bytes transferred (received bytes for Recv).
    pub byte_len: u64,
    /// Immediate data (RecvImm).
    pub imm: Option<u64>,
    /// STag invalidated by a received Send with Invalidate.
    pub invalidated: Option<Stag>,
    /// The message carried a Solicited Event.
    pub solicited: bool,
}

/// Why a WR was refused at post time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// The QP is closing or dead.
    InvalidState,
    /// The WR is malformed (e.g. Read without a sink, atomic sink shorter than 8 bytes,
    /// message longer than 2^32-1).
    Invalid,
}

/// An outstanding Read or atomic on the requester (ORQ entry).
#[derive(Debug, Clone)]
pub(crate) struct Outstanding {
    pub(crate) wr: WorkRequest,
    /// Read: sink STag and TO advertised; the response must land exactly there.
    pub(crate) sink: Option<(Stag, u64)>,
    pub(crate) size: u64,
    pub(crate) received: u64,
    /// Atomic request id.
    pub(crate) req_id: u32,
    /// Send-queue sequence number (completion order).
    pub(crate) seq: u64,
    /// The peer-to-peer Read RTR: no WR behind it, no completion.
    pub(crate) rtr: bool,
}

/// Most emptied SGE vectors a QP keeps for reuse ([`Qp::spare_sges`]).
const SPARE_SGES: usize = 32;

/// A queue pair. See the module docs for the call order.
#[derive(Debug)]
pub struct Qp {
    pub(crate) cfg: QpConfig,
    pub(crate) state: QpState,
    pub(crate) deframer: Deframer,
    pub(crate) framer: Framer,
    pub(crate) rx: RxState,
    pub(crate) rq: VecDeque<RecvRequest>,
    pub(crate) sq: VecDeque<WorkRequest>,
    /// Outbound Reads/atomics in flight (≤ ORD).
    pub(crate) orq: VecDeque<Outstanding>,
    /// Inbound Read/atomic responses to send (≤ IRD).
    pub(crate) irq: VecDeque<TxMsg>,
    pub(crate) cur_tx: Option<TxMsg>,
    pub(crate) term_tx: Option<TerminateHdr>,
    pub(crate) tx_msn: [u32; qn::COUNT],
    pub(crate) next_atomic_id: u32,
    pub(crate) cq: VecDeque<Completion>,
    /// Completion slots of started SQ WRs, oldest first: `None` = still running,
    /// `Some(None)` = done without a CQE (unsignaled). RFC 5040 §6.3 / verbs: SQ
    /// completions are delivered in posting order.
    pub(crate) sq_slots: VecDeque<Option<Option<Completion>>>,
    pub(crate) sq_base: u64,
    pub(crate) sq_next: u64,
    /// With `complete_on_ack`: WRs whose last FPDU is out, waiting for the LLP's ACK, oldest
    /// first: (send-queue sequence, id, opcode, the completion to deliver on success).
    pub(crate) wait_ack: VecDeque<(u64, u64, CqOpcode, Option<Completion>)>,
    pub(crate) local_error: FirstError,
    pub(crate) remote_term: Option<TerminateHdr>,
    pub(crate) scratch: Vec<u8>,
    /// Initiator: the RTR still to send (first FPDU).
    pub(crate) rtr_tx: Option<RtrKind>,
    /// Responder: the RTR still to receive; nothing is sent before it.
    pub(crate) rtr_rx: Option<RtrKind>,
    /// SGE vectors of completed send WRs, emptied, for the next ones ([`Qp::spare_sges`]).
    pub(crate) spare_sges: Vec<Vec<Sge>>,
}

impl Qp {
    /// A QP in [`QpState::Idle`] with the negotiated stream parameters.
    pub fn new(cfg: QpConfig) -> Self {
        Qp {
            cfg,
            state: QpState::Idle,
            deframer: Deframer::new(DeframerConfig {
                crc: cfg.crc,
                markers: cfg.markers_rx,
                crc_data_by_caller: cfg.crc_by_placer,
                ..Default::default()
            }),
            framer: Framer::new(FramerConfig {
                crc: cfg.crc,
                markers: cfg.markers_tx,
                stream_pos: 0,
            }),
            rx: RxState::default(),
            rq: VecDeque::new(),
            sq: VecDeque::new(),
            orq: VecDeque::new(),
            irq: VecDeque::new(),
            cur_tx: None,
            term_tx: None,
            tx_msn: [0; qn::COUNT],
            next_atomic_id: 1,
            cq: VecDeque::new(),
            sq_slots: VecDeque::new(),
            sq_base: 0,
            sq_next: 0,
            wait_ack: VecDeque::new(),
            spare_sges: Vec::new(),
            local_error: FirstError::default(),
            remote_term: None,
            scratch: vec![0; usize::from(u16::MAX)],
            rtr_tx: match cfg.rtr {
                Some(Rtr::Send(k)) => Some(k),
                _ => None,
            },
            rtr_rx: match cfg.rtr {
                Some(Rtr::Expect(k)) => Some(k),
                _ => None,
            },
        }
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Configuration.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }

    /// Move Idle -> RTS (the connection is established and MPA negotiated).
    pub fn establish(&mut self) {
        if self.state == QpState::Idle {
            self.state = QpState::Rts;
        }
    }

    /// Request a graceful close: new WRs are refused, queued ones still drain.
    pub fn close(&mut self) {
        if matches!(self.state, QpState::Idle | QpState::Rts) {
            self.state = QpState::Closing;
        }
    }

    /// The first error this side detected (the triple of the Terminate it sends).
    pub fn local_error(&self) -> Option<TermCode> {
        self.local_error.get()
    }

    /// The Terminate received from the peer, with the layout it arrived in.
    pub fn remote_terminate(&self) -> Option<&TerminateHdr> {
        self.remote_term.as_ref()
    }

    /// Nothing left to send or to wait for: no queued or running WR, no outstanding Read or
    /// atomic, no response to send.
    pub fn is_quiescent(&self) -> bool {
        self.sq.is_empty()
            && self.orq.is_empty()
            && self.irq.is_empty()
            && self.cur_tx.is_none()
            && self.term_tx.is_none()
            && self.wait_ack.is_empty()
    }

    /// The LLP acknowledged the last FPDU of the WR behind `token` (with
    /// [`QpConfig::complete_on_ack`]): its completion is released, in posting order.
    pub fn handle_acked(&mut self, token: SqToken) {
        let Some(i) = self.wait_ack.iter().position(|w| w.0 == token.0) else {
            return;
        };
        if let Some((seq, _, _, cqe)) = self.wait_ack.remove(i) {
            self.sq_done(seq, cqe);
        }
    }

    /// Number of WRs waiting for the LLP's acknowledgement.
    pub fn awaiting_ack(&self) -> usize {
        self.wait_ack.len()
    }

    /// FPDUs received completely (CRC checked) so far.
    pub fn rx_fpdus(&self) -> u64 {
        self.deframer.fpdus()
    }

    /// Send-queue work requests not yet completed (queued, running, waiting for a response
    /// or the LLP's ACK, or done but held back for posting order).
    pub fn send_queue_len(&self) -> usize {
        self.sq.len() + self.sq_slots.len()
    }

    /// Posted receives not yet completed.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len() + usize::from(self.rx.cur_recv.is_some())
    }

    /// True while an FPDU is partly received (the deframer is between an FPDU's first and
    /// last octet): a stream that ends or stalls now breaks an FPDU.
    pub fn rx_in_progress(&self) -> bool {
        !self.deframer.at_boundary()
    }

    /// True when the stream received so far ends exactly with the last FPDU of a message
    /// (DDP L flag, RFC 5041 §5.1): no FPDU is partly received. The sender of that message
    /// completes it when the LLP acknowledges its last byte, so this is when the LLP should
    /// not hold its ACK back (a delayed ACK, RFC 9293 §3.8.6.3).
    pub fn rx_at_message_end(&self) -> bool {
        self.rx.msg_end() && self.deframer.at_boundary()
    }

    /// Stop the stream for a reason found outside the protocol (an FPDU half-received past a
    /// timeout, a stream cut inside an FPDU, a corrupt work queue): record `code` as the first
    /// error and queue a Terminate carrying it without offending headers (RFC 5040 §4.8,
    /// §7.1). The QP enters ERROR once the Terminate is out. No-op after an earlier error.
    pub fn abort(&mut self, code: TermCode) {
        self.fail(code, TerminateHdr::new(code, None, None));
    }

    /// The LLP stream closed gracefully (FIN exchanged). A closing, quiescent QP goes back to
    /// IDLE (its posted receives are flushed, as siw does); otherwise the close was abortive
    /// and the QP enters ERROR with everything flushed (RFC 5040 §5.1).
    pub fn handle_stream_closed(&mut self, _now: Instant) {
        if self.state == QpState::Closing && self.is_quiescent() {
            self.enter_error();
            self.state = QpState::Idle;
        } else {
            self.enter_error();
        }
    }

    /// The LLP reports the stream lost (RST, timeout): go to ERROR and flush (RFC 5040 §5.1).
    pub fn handle_stream_lost(&mut self, _now: Instant) {
        self.enter_error();
    }

    /// Post a receive buffer.
    pub fn post_recv(&mut self, rr: RecvRequest) -> Result<(), PostError> {
        if self.state == QpState::Error {
            return Err(PostError::InvalidState);
        }
        self.rq.push_back(rr);
        Ok(())
    }

    /// An empty vector for the SGEs of a work request about to be posted: one a completed
    /// work request left behind when there is one (a caller that builds work requests from
    /// its own queue allocates nothing in steady state), else a new one.
    pub fn spare_sges(&mut self) -> Vec<Sge> {
        self.spare_sges.pop().unwrap_or_default()
    }

    /// Keep the SGE vector of a work request that is done, for [`Qp::spare_sges`].
    pub(crate) fn recycle_sges(&mut self, mut v: Vec<Sge>) {
        if self.spare_sges.len() < SPARE_SGES && v.capacity() > 0 {
            v.clear();
            self.spare_sges.push(v);
        }
    }

    /// Post a send-queue work request.
    pub fn post_send(&mut self, wr: WorkRequest) -> Result<(), PostError> {
        if !matches!(self.state, QpState::Idle | QpState::Rts) {
            return Err(PostError::InvalidState);
        }
        let total = wr.total_len();
        let ok = match wr.opcode {
            WrOpcode::Read => wr.sges.len() == 1 && self.cfg.ord > 0,
            WrOpcode::FetchAdd { .. } | WrOpcode::CmpSwap { .. } => {
                wr.sges.len() == 1 && wr.sges[0].len >= 8 && self.cfg.ord > 0
            }
            _ => true,
        };
        if !ok || total > u64::from(u32::MAX) {
            return Err(PostError::Invalid);
        }
        self.sq.push_back(wr);
        Ok(())
    }

    /// The next completion.
    #[must_use]
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }

    /// Feed in-order stream bytes; returns how many were consumed (all of them unless the
    /// stream is dead: then the rest is discarded and also counted as consumed).
    pub fn handle_stream(&mut self, _now: Instant, mem: &mut dyn Memory, input: &[u8]) -> usize {
        self.rx_stream(mem, input)
    }

    /// Build the next FPDU into `out` (no larger than `emss` bytes); returns its length.
    /// `out` must hold at least `emss` bytes.
    #[must_use]
    pub fn poll_fpdu(
        &mut self,
        _now: Instant,
        emss: usize,
        mem: &mut dyn Memory,
        out: &mut [u8],
    ) -> Option<usize> {
        let max_ulpdu = self.framer.max_ulpdu_len(emss.min(out.len()));
        let seg = self.poll_segment(max_ulpdu, mem)?;
        let hdr = seg.header();
        let mut n = 0;
        for p in seg.pieces() {
            let len = p.len as usize;
            if let Some(dst) = self.scratch.get_mut(n..n + len) {
                mem.read(p.mr, p.offset, dst);
            }
            n += len;
        }
        let payload = self.scratch.get(..n).unwrap_or(&[]);
        self.framer.frame(&[hdr, payload], out).ok()
    }

    /// Zero-copy seam: the next DDP segment as header bytes plus region ranges, at most
    /// `max_ulpdu` bytes in all. The caller frames it (MPA gather mode) with the payload read
    /// from the regions. State advances as if the segment was sent.
    #[must_use]
    pub fn poll_segment(&mut self, max_ulpdu: usize, mem: &mut dyn Memory) -> Option<TxSegment> {
        self.tx_next(max_ulpdu, mem)
    }

    /// Like [`Qp::poll_segment`], and then up to `max_count - 1` more segments of the same
    /// message as one [`TxRun`]: full-sized segments from consecutive octets of one region
    /// that differ from the first only in their offset field (the bulk of a large Write, Send
    /// or Read Response; never the message's last segment). State advances as if all were
    /// sent. `max_count <= 1` gives a run of one.
    #[must_use]
    pub fn poll_run(
        &mut self,
        max_ulpdu: usize,
        max_count: u32,
        mem: &mut dyn Memory,
    ) -> Option<TxRun> {
        let first = self.tx_next(max_ulpdu, mem)?;
        let more = self.extend_run(&first, max_count.saturating_sub(1));
        Some(TxRun::new(first, 1 + more))
    }

    /// Open a completion slot for a WR leaving the send queue.
    pub(crate) fn sq_begin(&mut self) -> u64 {
        self.sq_slots.push_back(None);
        self.sq_next += 1;
        self.sq_next - 1
    }

    /// Close slot `seq` and release every completion that is now in order.
    pub(crate) fn sq_done(&mut self, seq: u64, cqe: Option<Completion>) {
        let idx = seq.wrapping_sub(self.sq_base) as usize;
        if let Some(slot) = self.sq_slots.get_mut(idx) {
            *slot = Some(cqe);
        }
        while let Some(Some(_)) = self.sq_slots.front() {
            if let Some(Some(c)) = self.sq_slots.pop_front() {
                self.sq_base += 1;
                if let Some(c) = c {
                    self.cq.push_back(c);
                }
            }
        }
    }

    /// Record a local error, queue the Terminate and enter [`QpState::Terminate`].
    pub(crate) fn fail(&mut self, code: TermCode, term: TerminateHdr) {
        if self.local_error.record(code) && self.remote_term.is_none() {
            self.term_tx = Some(term);
            self.state = QpState::Terminate;
        }
    }

    /// Enter ERROR and flush every outstanding WR (RFC 5040 §5.1; verbs flush semantics), in
    /// posting order: completions already earned come out as they are, every WR still running
    /// (being sent, waiting for a response or for the LLP's ACK) and every queued WR is flushed.
    pub(crate) fn enter_error(&mut self) {
        if self.state == QpState::Error {
            return;
        }
        self.state = QpState::Error;
        let mut running: Vec<(u64, u64, CqOpcode)> = Vec::new();
        if let Some(m) = self.cur_tx.take()
            && let Some(wr) = m.wr
        {
            running.push((m.seq, wr.wr_id, sq_cq_opcode(wr.opcode)));
        }
        for o in self.orq.drain(..).filter(|o| !o.rtr) {
            running.push((o.seq, o.wr.wr_id, sq_cq_opcode(o.wr.opcode)));
        }
        running.extend(
            self.wait_ack
                .drain(..)
                .map(|(seq, id, op, _)| (seq, id, op)),
        );
        for (i, slot) in self.sq_slots.drain(..).enumerate() {
            let seq = self.sq_base + i as u64;
            match slot {
                Some(Some(c)) => self.cq.push_back(c),
                Some(None) => {}
                None => {
                    if let Some(&(_, id, op)) = running.iter().find(|r| r.0 == seq) {
                        self.cq.push_back(flushed(id, op));
                    }
                }
            }
        }
        self.sq_base = self.sq_next;
        for wr in self.sq.drain(..) {
            self.cq
                .push_back(flushed(wr.wr_id, sq_cq_opcode(wr.opcode)));
        }
        if let Some(rr) = self.rx.cur_recv.take() {
            self.cq.push_back(flushed(rr.wr_id, CqOpcode::Recv));
        }
        for rr in self.rq.drain(..) {
            self.cq.push_back(flushed(rr.wr_id, CqOpcode::Recv));
        }
        self.irq.clear();
    }
}

/// The completion of a send-queue WR that never reached the QP (refused at post time) with
/// `status` (`Flushed` for a QP in ERROR, `LocalError` for a malformed WR), for a caller that
/// takes WRs from a queue of its own.
pub fn sq_flush(wr_id: u64, opcode: WrOpcode, status: WcStatus) -> Completion {
    Completion {
        status,
        ..flushed(wr_id, sq_cq_opcode(opcode))
    }
}

/// The flushed completion of a receive posted to a QP in ERROR.
pub fn recv_flush(wr_id: u64) -> Completion {
    flushed(wr_id, CqOpcode::Recv)
}

/// A flushed completion (RFC 5040 §5.1; verbs `IBV_WC_WR_FLUSH_ERR`).
pub(crate) fn flushed(wr_id: u64, opcode: CqOpcode) -> Completion {
    Completion {
        wr_id,
        opcode,
        status: WcStatus::Flushed,
        byte_len: 0,
        imm: None,
        invalidated: None,
        solicited: false,
    }
}

/// The completion opcode of a send-queue WR.
pub(crate) fn sq_cq_opcode(op: WrOpcode) -> CqOpcode {
    match op {
        WrOpcode::Send | WrOpcode::SendInvalidate => CqOpcode::Send,
        WrOpcode::Write | WrOpcode::WriteImm => CqOpcode::Write,
        WrOpcode::Read => CqOpcode::Read,
        WrOpcode::FetchAdd { .. } => CqOpcode::FetchAdd,
        WrOpcode::CmpSwap { .. } => CqOpcode::CmpSwap,
    }
}
