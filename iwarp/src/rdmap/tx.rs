//! Transmit path: work requests and responses -> DDP segments no larger than the MULPDU
//! (RFC 5041 §5.2 segmentation, RFC 5040 §5.2-§5.5 and §6 ordering, RFC 7306 §5).
//!
//! One message is sent at a time, segment after segment (TO or MO advancing, L on the last).
//! Order of service: a pending Terminate, the message in progress, Read/atomic responses
//! (in request order, RFC 5040 §6.3), then the send queue, honouring ORD (RFC 5040 §6.2) and
//! the fence flag (RFC 5040 §6.1: a fenced WR waits for every earlier Read/atomic).

use crate::ddp::wire::DdpBuf;
use crate::rdmap::qp::{
    Completion, Memory, Outstanding, Qp, QpState, Sge, WcStatus, WorkRequest, WrOpcode,
    sq_cq_opcode,
};
use crate::rdmap::terminate::TerminateHdr;
use crate::rdmap::wire::{
    self as rw, AtomicRequest, Header, MAX_HDR_LEN, Opcode, RdmapPart, ReadRequest, aopcode, qn,
};
use crate::stag::{Access, MemoryTable, MrHandle, Stag};

/// Most region ranges one segment gathers.
pub const MAX_PIECES: usize = 4;
const SEG_HDR_CAP: usize = 96;

/// A region range of a segment's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Piece {
    /// Region.
    pub mr: MrHandle,
    /// Byte offset.
    pub offset: u64,
    /// Length.
    pub len: u32,
}

/// Identifies a send-queue work request waiting for the LLP's acknowledgement
/// ([`QpConfig::complete_on_ack`](crate::rdmap::QpConfig)): carried by the WR's last segment,
/// handed back to [`Qp::handle_acked`] once the LLP acknowledged that segment's last octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqToken(pub u64);

/// One DDP segment to send: header bytes, then the payload gathered from `pieces()`.
#[derive(Debug, Clone)]
pub struct TxSegment {
    hdr: [u8; SEG_HDR_CAP],
    hdr_len: usize,
    pieces: [Piece; MAX_PIECES],
    npieces: usize,
    completion: Option<SqToken>,
}

impl TxSegment {
    /// DDP + RDMAP header bytes.
    pub fn header(&self) -> &[u8] {
        &self.hdr[..self.hdr_len]
    }
    /// Payload ranges, in order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces[..self.npieces]
    }
    /// ULPDU length (header + payload).
    pub fn ulpdu_len(&self) -> usize {
        self.hdr_len + self.pieces().iter().map(|p| p.len as usize).sum::<usize>()
    }
    /// The WR this segment ends, when it completes on the LLP's acknowledgement: pass the
    /// token to [`Qp::handle_acked`] once every octet of the segment's FPDU is acknowledged.
    pub fn completion(&self) -> Option<SqToken> {
        self.completion
    }
    /// This is a Terminate (the QP enters ERROR once it is out).
    pub fn is_terminate(&self) -> bool {
        self.hdr.get(1).map(|c| c & 0xf) == Some(Opcode::Terminate as u8)
    }
}

/// Consecutive DDP segments of one message ([`Qp::poll_run`]): the first as a [`TxSegment`],
/// then `count - 1` more that differ from it only in their offset field (TO or MO, advanced
/// by `payload_len` octets each, [`crate::ddp::wire::advance_offset`]) and in their payload,
/// the next `payload_len` octets of the same region. None of them is the message's last
/// (RFC 5041 §5.2), so they complete nothing; `count == 1` is any single segment.
#[derive(Debug, Clone)]
pub struct TxRun {
    first: TxSegment,
    count: u32,
}

impl TxRun {
    pub(crate) fn new(first: TxSegment, count: u32) -> TxRun {
        TxRun { first, count }
    }
    /// The first segment.
    pub fn first(&self) -> &TxSegment {
        &self.first
    }
    /// The first segment, owned (for a run of one).
    pub fn into_first(self) -> TxSegment {
        self.first
    }
    /// Segments in the run.
    pub fn count(&self) -> u32 {
        self.count
    }
    /// Payload octets of each segment (the first segment's; all are equal in a run of more
    /// than one).
    pub fn payload_len(&self) -> u32 {
        self.first.pieces().iter().map(|p| p.len).sum()
    }
    /// Segment `k` of the run (tests; a sender builds the segments from the first).
    pub fn segment(&self, k: u32) -> TxSegment {
        let mut seg = self.first.clone();
        let by = u64::from(k) * u64::from(self.payload_len());
        crate::ddp::wire::advance_offset(&mut seg.hdr[..seg.hdr_len], by);
        if let Some(p) = seg.pieces.get_mut(0) {
            p.offset += by;
        }
        seg
    }
}

/// Where a message's payload comes from.
#[derive(Debug, Clone)]
enum Src {
    None,
    Sges,
    Region { mr: MrHandle, offset: u64 },
}

/// What happens once the last segment is out.
#[derive(Debug, Clone)]
enum After {
    Nothing,
    Complete,
    ThenImmediate,
    /// Into the ORQ as [`Outstanding`] (built from the WR then, not cloned from it).
    ToOrq {
        sink: Option<(Stag, u64)>,
        size: u64,
        req_id: u32,
    },
}

/// A message being sent.
#[derive(Debug, Clone)]
pub(crate) struct TxMsg {
    hdr: Header,
    src: Src,
    total: u64,
    sent: u64,
    /// Byte length for the completion (the Write's length for Write with Immediate).
    report_len: u64,
    /// Send-queue sequence number (0 for responses).
    pub(crate) seq: u64,
    pub(crate) wr: Option<WorkRequest>,
    after: After,
}

impl TxMsg {
    pub(crate) fn is_response(&self) -> bool {
        self.wr.is_none()
    }

    pub(crate) fn read_response(r: &ReadRequest, mr: MrHandle, offset: u64) -> TxMsg {
        TxMsg {
            hdr: Header {
                opcode: Opcode::ReadResponse,
                ddp: rw::tagged(false, r.sink_stag, r.sink_to),
                rdmap: RdmapPart::None,
            },
            src: Src::Region { mr, offset },
            total: u64::from(r.size),
            sent: 0,
            report_len: 0,
            seq: 0,
            wr: None,
            after: After::Nothing,
        }
    }

    /// A payload-less message that completes nothing (the peer-to-peer RTR).
    pub(crate) fn control(hdr: Header) -> TxMsg {
        TxMsg {
            hdr,
            src: Src::None,
            total: 0,
            sent: 0,
            report_len: 0,
            seq: 0,
            wr: None,
            after: After::Nothing,
        }
    }

    pub(crate) fn atomic_response(a: rw::AtomicResponse, msn: u32) -> TxMsg {
        TxMsg {
            hdr: Header {
                opcode: Opcode::AtomicResponse,
                ddp: rw::untagged(true, qn::ATOMIC_RESP, msn, 0, 0),
                rdmap: RdmapPart::AtomicResponse(a),
            },
            src: Src::None,
            total: 0,
            sent: 0,
            report_len: 0,
            seq: 0,
            wr: None,
            after: After::Nothing,
        }
    }
}

impl TxMsg {
    /// Fill `seg` (empty) with this message's next segment of at most `max_ulpdu` octets
    /// (RFC 5041 §5.2: TO or MO of its first payload octet, L on the last) and advance.
    /// Returns whether it is the last; `None` (nothing changed) when not even one payload
    /// octet fits.
    fn next_segment(&mut self, max_ulpdu: usize, seg: &mut TxSegment) -> Option<bool> {
        let hdr_len = self.hdr.buffer_len();
        debug_assert!(hdr_len <= MAX_HDR_LEN);
        let room = max_ulpdu.checked_sub(hdr_len)? as u64;
        let remaining = self.total - self.sent;
        if room == 0 && remaining > 0 {
            return None;
        }
        let mut chunk = remaining.min(room);
        match self.src {
            Src::None => chunk = 0,
            Src::Region { mr, offset } => {
                seg.pieces[0] = Piece {
                    mr,
                    offset: offset + self.sent,
                    len: chunk as u32,
                };
                seg.npieces = usize::from(chunk > 0);
            }
            Src::Sges => {
                let sges: &[Sge] = self.wr.as_ref().map(|w| w.sges.as_slice()).unwrap_or(&[]);
                let (mut skip, mut want, mut got) = (self.sent, chunk, 0u64);
                for s in sges {
                    if want == 0 || seg.npieces == MAX_PIECES {
                        break;
                    }
                    let len = u64::from(s.len);
                    if skip >= len {
                        skip -= len;
                        continue;
                    }
                    let n = (len - skip).min(want);
                    seg.pieces[seg.npieces] = Piece {
                        mr: s.mr,
                        offset: s.offset + skip,
                        len: n as u32,
                    };
                    seg.npieces += 1;
                    skip = 0;
                    want -= n;
                    got += n;
                }
                chunk = got;
            }
        }
        let last = self.sent + chunk == self.total;
        self.hdr.ddp.last = last;
        let tagged = match &mut self.hdr.ddp.buf {
            DdpBuf::Untagged { mo, .. } => {
                *mo = self.sent as u32;
                false
            }
            DdpBuf::Tagged { .. } => true,
        };
        seg.hdr_len = self.hdr.emit(&mut seg.hdr);
        if tagged && self.sent > 0 {
            // The message's TO stays that of its first octet; this segment's is `sent` on.
            crate::ddp::wire::advance_offset(&mut seg.hdr[..seg.hdr_len], self.sent);
        }
        self.sent += chunk;
        Some(last)
    }
}

/// Every SGE lies inside a registered region that grants `need` (local access check).
pub(crate) fn sges_ok(mem: &dyn MemoryTable, sges: &[Sge], need: Access) -> bool {
    sges.iter().all(|s| {
        mem.by_handle(s.mr).is_some_and(|i| {
            i.valid
                && i.access.contains(need)
                && s.offset
                    .checked_add(u64::from(s.len))
                    .is_some_and(|end| end <= i.len)
        })
    })
}

impl Qp {
    pub(crate) fn next_msn(&mut self, q: u32) -> u32 {
        let m = &mut self.tx_msn[q as usize];
        *m = m.wrapping_add(1);
        *m
    }

    fn local_error_cqe(&mut self, seq: u64, wr: &WorkRequest) {
        let cqe = Some(Completion {
            wr_id: wr.wr_id,
            opcode: sq_cq_opcode(wr.opcode),
            status: WcStatus::LocalError,
            byte_len: 0,
            imm: None,
            invalidated: None,
            solicited: false,
        });
        self.sq_done(seq, cqe);
    }

    /// Turn the front SQ WR into a message, if ORD and fencing allow.
    fn start_wr(&mut self, mem: &mut dyn Memory) -> Option<TxMsg> {
        loop {
            let wr = self.sq.front()?;
            let needs_orq = matches!(
                wr.opcode,
                WrOpcode::Read | WrOpcode::FetchAdd { .. } | WrOpcode::CmpSwap { .. }
            );
            if wr.flags.fence && !self.orq.is_empty() {
                return None;
            }
            if needs_orq && self.orq.len() >= self.cfg.ord as usize {
                return None;
            }
            let wr = self.sq.pop_front()?;
            let seq = self.sq_begin();
            let need = if needs_orq {
                Access::LOCAL_WRITE
            } else {
                Access::LOCAL_READ
            };
            if !sges_ok(&*mem, &wr.sges, need) {
                self.local_error_cqe(seq, &wr);
                continue;
            }
            let se = wr.flags.solicited;
            let total = wr.total_len();
            let (hdr, src, after) = match wr.opcode {
                WrOpcode::Send | WrOpcode::SendInvalidate => {
                    let inv = wr.opcode == WrOpcode::SendInvalidate;
                    let opcode = match (inv, se) {
                        (false, false) => Opcode::Send,
                        (false, true) => Opcode::SendSe,
                        (true, false) => Opcode::SendInvalidate,
                        (true, true) => Opcode::SendSeInvalidate,
                    };
                    let msn = self.next_msn(qn::SEND);
                    let ulp = if inv { wr.invalidate.0 } else { 0 };
                    let ddp = rw::untagged(false, qn::SEND, msn, 0, ulp);
                    (
                        Header {
                            opcode,
                            ddp,
                            rdmap: RdmapPart::None,
                        },
                        Src::Sges,
                        After::Complete,
                    )
                }
                WrOpcode::Write | WrOpcode::WriteImm => {
                    let ddp = rw::tagged(false, wr.remote_stag, wr.remote_to);
                    let after = if wr.opcode == WrOpcode::WriteImm {
                        After::ThenImmediate
                    } else {
                        After::Complete
                    };
                    (
                        Header {
                            opcode: Opcode::Write,
                            ddp,
                            rdmap: RdmapPart::None,
                        },
                        Src::Sges,
                        after,
                    )
                }
                WrOpcode::Read => {
                    let s = wr.sges[0];
                    let Some(info) = mem.by_handle(s.mr) else {
                        self.local_error_cqe(seq, &wr);
                        continue;
                    };
                    let sink_to = info.base_to.wrapping_add(s.offset);
                    let rr = ReadRequest {
                        sink_stag: info.stag,
                        sink_to,
                        size: s.len,
                        src_stag: wr.remote_stag,
                        src_to: wr.remote_to,
                    };
                    let msn = self.next_msn(qn::READ_REQ);
                    let ddp = rw::untagged(true, qn::READ_REQ, msn, 0, 0);
                    let o = After::ToOrq {
                        sink: Some((info.stag, sink_to)),
                        size: u64::from(s.len),
                        req_id: 0,
                    };
                    let hdr = Header {
                        opcode: Opcode::ReadRequest,
                        ddp,
                        rdmap: RdmapPart::ReadRequest(rr),
                    };
                    (hdr, Src::None, o)
                }
                WrOpcode::FetchAdd { .. } | WrOpcode::CmpSwap { .. } => {
                    // Unmasked operations: add mask 0 (one 64-bit field), full compare and
                    // swap masks (RFC 7306 §4.3).
                    let (aop, add_swap, add_swap_mask, compare) = match wr.opcode {
                        WrOpcode::FetchAdd { add } => (aopcode::FETCH_ADD, add, 0, 0),
                        WrOpcode::CmpSwap { compare, swap } => {
                            (aopcode::CMP_SWAP, swap, u64::MAX, compare)
                        }
                        _ => (aopcode::FETCH_ADD, 0, 0, 0),
                    };
                    let req_id = self.next_atomic_id;
                    self.next_atomic_id = self.next_atomic_id.wrapping_add(1);
                    let a = AtomicRequest {
                        aopcode: aop,
                        req_id,
                        stag: wr.remote_stag,
                        to: wr.remote_to,
                        add_swap,
                        add_swap_mask,
                        compare,
                        compare_mask: u64::MAX,
                    };
                    let msn = self.next_msn(qn::READ_REQ);
                    let ddp = rw::untagged(true, qn::READ_REQ, msn, 0, 0);
                    let o = After::ToOrq {
                        sink: None,
                        size: 8,
                        req_id,
                    };
                    let hdr = Header {
                        opcode: Opcode::AtomicRequest,
                        ddp,
                        rdmap: RdmapPart::AtomicRequest(a),
                    };
                    (hdr, Src::None, o)
                }
            };
            let total = if matches!(src, Src::None) { 0 } else { total };
            return Some(TxMsg {
                hdr,
                src,
                total,
                sent: 0,
                report_len: total,
                seq,
                wr: Some(wr),
                after,
            });
        }
    }

    fn terminate_segment(&mut self, t: TerminateHdr, max_ulpdu: usize) -> Option<TxSegment> {
        let msn = self.tx_msn[qn::TERMINATE as usize].wrapping_add(1);
        let hdr = Header {
            opcode: Opcode::Terminate,
            ddp: rw::untagged(true, qn::TERMINATE, msn, 0, 0),
            rdmap: RdmapPart::Terminate(t),
        };
        let mut seg = TxSegment {
            hdr: [0; SEG_HDR_CAP],
            hdr_len: 0,
            pieces: [Piece::default(); MAX_PIECES],
            npieces: 0,
            completion: None,
        };
        if hdr.buffer_len() > max_ulpdu.min(SEG_HDR_CAP) {
            // Too small a segment for now: keep it for the next poll.
            self.term_tx = Some(t);
            return None;
        }
        self.tx_msn[qn::TERMINATE as usize] = msn;
        seg.hdr_len = hdr.emit(&mut seg.hdr);
        // RFC 5040 §5.5: after the Terminate the stream is dead.
        self.enter_error();
        Some(seg)
    }

    pub(crate) fn tx_next(&mut self, max_ulpdu: usize, mem: &mut dyn Memory) -> Option<TxSegment> {
        if let Some(t) = self.term_tx.take() {
            return self.terminate_segment(t, max_ulpdu);
        }
        if !matches!(self.state, QpState::Rts | QpState::Closing) {
            return None;
        }
        // RFC 6581 §5: the responder sends nothing before the initiator's RTR arrived; the
        // initiator's RTR is its first FPDU.
        if self.rtr_rx.is_some() {
            return None;
        }
        let mut seg = TxSegment {
            hdr: [0; SEG_HDR_CAP],
            hdr_len: 0,
            pieces: [Piece::default(); MAX_PIECES],
            npieces: 0,
            completion: None,
        };
        if let Some(m) = self.cur_tx.as_mut() {
            if m.next_segment(max_ulpdu, &mut seg)? {
                let done = self.cur_tx.take();
                if let Some(done) = done {
                    seg.completion = self.finish(done);
                }
            }
            return Some(seg);
        }
        // A new message: built here and kept in `cur_tx` only while segments remain (a
        // message of one segment, the common small one, is never copied into it and out).
        let mut m = match self.rtr_tx.take() {
            Some(kind) => self.rtr_message(kind),
            None => match self.irq.pop_front() {
                Some(m) => m,
                None => self.start_wr(mem)?,
            },
        };
        match m.next_segment(max_ulpdu, &mut seg) {
            Some(true) => {
                seg.completion = self.finish(m);
                Some(seg)
            }
            Some(false) => {
                self.cur_tx = Some(m);
                Some(seg)
            }
            None => {
                self.cur_tx = Some(m);
                None
            }
        }
    }

    /// Extend the run that starts with segment `first` (just taken from the message in
    /// progress, `cur_tx`) by up to `max_more` segments of the same length from the same
    /// contiguous source range, stopping before the message's last segment; state advances as
    /// if they were sent. Returns how many were added.
    pub(crate) fn extend_run(&mut self, first: &TxSegment, max_more: u32) -> u32 {
        if max_more == 0
            || first.completion.is_some()
            || first.npieces != 1
            || first.is_terminate()
            || !matches!(self.state, QpState::Rts | QpState::Closing)
        {
            return 0;
        }
        let Some(m) = self.cur_tx.as_mut() else {
            // `first` was its message's last segment.
            return 0;
        };
        let p = first.pieces[0];
        let step = u64::from(p.len);
        if step == 0 {
            return 0;
        }
        // Segments the source holds contiguously after the first one's range.
        let contiguous = match m.src {
            Src::None => 0,
            Src::Region { mr, offset } => {
                if mr == p.mr && offset + m.sent == p.offset + step {
                    u64::MAX
                } else {
                    0
                }
            }
            Src::Sges => {
                // Only within the scatter/gather element the first segment ended in.
                let sges: &[Sge] = m.wr.as_ref().map(|w| w.sges.as_slice()).unwrap_or(&[]);
                let mut skip = m.sent;
                let mut n = 0;
                for s in sges {
                    let len = u64::from(s.len);
                    if skip >= len {
                        skip -= len;
                        continue;
                    }
                    if s.mr == p.mr && s.offset + skip == p.offset + step {
                        n = (len - skip) / step;
                    }
                    break;
                }
                n
            }
        };
        // Whole segments that leave at least one octet for the last one.
        let n = contiguous.min((m.total - m.sent).saturating_sub(1) / step);
        let n = n.min(u64::from(max_more)) as u32;
        m.sent += u64::from(n) * step;
        n
    }

    /// The last segment of `m` is out. Returns the token to wait for when the WR completes on
    /// the LLP's acknowledgement.
    fn finish(&mut self, m: TxMsg) -> Option<SqToken> {
        let wr = m.wr?;
        match m.after {
            After::Nothing => {}
            After::Complete => {
                let opcode = sq_cq_opcode(wr.opcode);
                let cqe = wr.flags.signaled.then_some(Completion {
                    wr_id: wr.wr_id,
                    opcode,
                    status: WcStatus::Success,
                    byte_len: m.report_len,
                    imm: None,
                    invalidated: None,
                    solicited: false,
                });
                self.recycle_sges(wr.sges);
                if self.cfg.complete_on_ack {
                    self.wait_ack.push_back((m.seq, wr.wr_id, opcode, cqe));
                    return Some(SqToken(m.seq));
                }
                self.sq_done(m.seq, cqe);
            }
            After::ThenImmediate => {
                // RFC 7306 §5.3: Write with Immediate = the Write, then an Immediate Data
                // message on QN 0 that consumes a receive at the peer.
                let opcode = if wr.flags.solicited {
                    Opcode::ImmediateDataSe
                } else {
                    Opcode::ImmediateData
                };
                let msn = self.next_msn(qn::SEND);
                let hdr = Header {
                    opcode,
                    ddp: rw::untagged(true, qn::SEND, msn, 0, 0),
                    rdmap: RdmapPart::Immediate(wr.imm),
                };
                self.cur_tx = Some(TxMsg {
                    hdr,
                    src: Src::None,
                    total: 0,
                    sent: 0,
                    report_len: m.report_len,
                    seq: m.seq,
                    wr: Some(wr),
                    after: After::Complete,
                });
            }
            After::ToOrq { sink, size, req_id } => self.orq.push_back(Outstanding {
                wr,
                sink,
                size,
                received: 0,
                req_id,
                seq: m.seq,
                rtr: false,
            }),
        }
        None
    }
}
