//! One TCP connection carrying an iWARP stream: MPA negotiation in either role, then the QP;
//! receive (in place from the TCP buffers, CRC fused with placement), transmit (the FPDU log),
//! the timers the protocol crates leave to us, and the connection's end.
//!
//! Heads up: read RFC 5044 §7 (MPA startup), RFC 5040 §5.1 and §7 (stream states, errors,
//! TERMINATE) and `../shared/siw-peer/README.md` §5 and §10 before editing.
//!
//! Call order (by the [`Engine`](super::engine::Engine), once per poll of the connection):
//! [`RdmaConn::service`] (TCP events, received bytes, timers, work requests, FPDUs to queue,
//! completions, closing), then the caller lets TCP transmit, reading bytes from
//! [`RdmaConn::log`], and arms [`RdmaConn::poll_timeout`].
//!
//! How a connection ends, and what the control thread hears:
//! - FIN from the peer at an FPDU boundary: the QP flushes its work, we close our side,
//!   `Disconnected`;
//! - FIN or RST in the middle of an FPDU: the QP goes to ERROR with every outstanding WR
//!   flushed, a TERMINATE (LLP, "stream lost") goes out when the stream still allows it,
//!   `QpError { StreamBroken }` — never a silent graceful close;
//! - an FPDU that stays half-received for `EngineConfig::rx_timeout`: TERMINATE,
//!   `QpError { RxTimeout }`;
//! - a protocol error we detect: TERMINATE with its code, `QpError { TerminateSent }`;
//! - a TERMINATE from the peer: `TerminateReceived`;
//! - an RST or a TCP timeout at a boundary: `QpError { StreamLost }`.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use iwarp::error::{LlpError, RdmapError, TermCode};
use iwarp::mpa::Framer;
use iwarp::mpa::framer::max_ulpdu_len_any_pos;
use iwarp::mpa::startup::{Established, FirstSend, Outcome, Role, Startup, StartupError};
use iwarp::rdmap::{Completion, PostError, Qp, QpConfig, QpState, WcStatus, recv_flush, sq_flush};
use netcore::{Duration, Instant};
use tcp::{CloseReason, Connection, Event, SegBuf};

use super::api::{
    ConnectFailure, CrcMode, EngineConfig, EngineEvent, MpaPolicy, Negotiated, QpBinding,
    QpErrorReason, TxFault,
};
use super::ids::{ConnId, ListenerId, QpNum};
use super::memory::{MemTable, QpMemory};
use super::queues::{CqMap, FlushedQp, QueueError, QueueIo};
use super::stats::QpCounters;
use super::txlog::{LogMode, TxLog};
use std::sync::Arc;

/// Who hears a connection's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The control thread (clients).
    Control,
    /// The in-process diagnostic service.
    Diag,
}

/// What a connection needs from its thread while it is serviced.
pub(crate) struct Ctx<'a> {
    pub(crate) thread: usize,
    pub(crate) cfg: &'a EngineConfig,
    pub(crate) mem: &'a Arc<MemTable>,
    pub(crate) cqs: &'a mut CqMap,
    /// Events produced, with their destination.
    pub(crate) out: &'a mut Vec<(Owner, EngineEvent)>,
}

/// A bound, running QP.
#[derive(Debug)]
pub(crate) struct QpRun {
    pub(crate) qp: Qp,
    pub(crate) mem: QpMemory,
    io: Option<QueueIo>,
    pub(crate) num: QpNum,
    sq_depth: usize,
    rq_depth: usize,
    pending: VecDeque<Completion>,
    pub(crate) stats: QpCounters,
    framer: Framer,
    markers_tx: bool,
    /// When the first FPDU may go (RFC 5044 §7.1 and siw's races); `None` once it may.
    first_send: Option<FirstSend>,
    /// Responder without peer-to-peer mode: when the first FPDU may go even though the
    /// initiator has not sent yet (see [`RESPONDER_FIRST_SEND_GRACE`]).
    first_send_anyway: Option<Instant>,
    /// CRC in use (the `badcrc` fault needs one to break).
    crc: bool,
    /// A test-only fault armed for the next FPDU ([`TxFault`]).
    fault: Option<TxFault>,
    /// A fault that ends the stream was applied: nothing more goes out.
    frozen: bool,
    /// The fault applied by the last `transmit`, for the connection to finish (FIN, RST).
    fault_done: Option<TxFault>,
    /// The last segment handed to TCP ended its message (DDP L flag): the next one starts one.
    msg_fresh: bool,
}

/// Largest payload of a Send/Write that completes once transmitted instead of once TCP has it
/// acknowledged: the FPDU is copied into the transmit log, so the application's buffer is free
/// at once, as with verbs' `IBV_SEND_INLINE` (`max_inline_data`). A lone small Write then does
/// not wait for the peer's delayed ACK (issue #8: `write_bw -t 1 -s 2` ran at ~55 msg/s).
/// Larger ones go by reference (zero-copy) and complete on the ACK (DESIGN.md §2.5).
pub(crate) const INLINE_MAX: usize = 256;

/// Most FPDUs logged as one run ([`TxLog::push_run`]).
const MAX_RUN: u64 = 256;

/// A responder without peer-to-peer mode waits for the initiator's first FPDU (RFC 5044
/// §7.1.2) but not forever: applications that send first as responders (perftest's
/// `ib_write_lat` server Writes first; siw<->siw tolerates it) would deadlock. After this
/// grace the first FPDU goes anyway; by then an initiator has long processed our Reply (siw
/// as initiator fails only when an FPDU is queued behind the Reply it is reading, README §5.11).
pub(crate) const RESPONDER_FIRST_SEND_GRACE: Duration = Duration::from_millis(200);

#[derive(Debug)]
enum Stage {
    /// MPA negotiation.
    Startup(Box<Startup>),
    /// Responder: the Request arrived, `Accept`/`Reject` pending.
    AwaitAccept(Box<Startup>),
    /// The QP runs.
    Running,
    /// Nothing more to do but wait for TCP to close.
    Done,
}

/// One iWARP connection (see the module docs).
#[derive(Debug)]
pub(crate) struct RdmaConn {
    pub(crate) id: ConnId,
    pub(crate) owner: Owner,
    pub(crate) role: Role,
    pub(crate) listener: Option<ListenerId>,
    pub(crate) local: SocketAddrV4,
    pub(crate) peer: SocketAddrV4,
    stage: Stage,
    /// Initiator: the QP to run once established.
    binding: Option<QpBinding>,
    pub(crate) run: Option<Box<QpRun>>,
    log: TxLog,
    tokens: Vec<iwarp::rdmap::SqToken>,
    connected: bool,
    peer_fin: bool,
    fin_handled: bool,
    tcp_closed: Option<CloseReason>,
    /// We called `close()` on TCP.
    closing: bool,
    /// `Disconnect` asked for a graceful close.
    disconnect: bool,
    close_deadline: Option<Instant>,
    rx_stall: Option<Instant>,
    /// Why the QP went to ERROR, when we caused it without a protocol error.
    reason: Option<QpErrorReason>,
    /// The terminal event was sent.
    reported: bool,
    /// A test-only fault waiting for the QP ([`RdmaConn::inject_fault`]).
    fault: Option<TxFault>,
    /// `rst` fault: reset once the stream is acknowledged up to this offset.
    rst_at: Option<u64>,
    /// A received message ended: acknowledge it at the next service (the next loop step),
    /// unless a segment of ours carries the ACK by then ([`RdmaConn::receive`]).
    ack_next_step: bool,
    /// `DestroyQp` took the QP away: its counters went out with `QpReleased`, and its number
    /// may already name another QP.
    qp_destroyed: bool,
}

fn addr(a: tcp::SockAddr) -> SocketAddrV4 {
    SocketAddrV4::new(a.0, a.1)
}

impl RdmaConn {
    /// An active open: MPA Request queued on `c` right away (TCP sends it after the SYN).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn initiator<B: SegBuf>(
        now: Instant,
        id: ConnId,
        owner: Owner,
        policy: &MpaPolicy,
        private_data: &[u8],
        binding: QpBinding,
        c: &mut Connection<B>,
        log: LogMode,
    ) -> Result<Self, StartupError> {
        let s = Startup::new(policy.startup_config(Role::Initiator, private_data), now)?;
        let mut me = Self::new(id, owner, Role::Initiator, None, c, log, s);
        me.binding = Some(binding);
        me.flush_startup(c);
        Ok(me)
    }

    /// A passive open on a listener.
    pub(crate) fn responder<B: SegBuf>(
        now: Instant,
        id: ConnId,
        owner: Owner,
        listener: ListenerId,
        policy: &MpaPolicy,
        c: &mut Connection<B>,
        log: LogMode,
    ) -> Result<Self, StartupError> {
        let s = Startup::new(policy.startup_config(Role::Responder, &[]), now)?;
        let mut me = Self::new(id, owner, Role::Responder, Some(listener), c, log, s);
        me.connected = true;
        Ok(me)
    }

    fn new<B: SegBuf>(
        id: ConnId,
        owner: Owner,
        role: Role,
        listener: Option<ListenerId>,
        c: &Connection<B>,
        log: LogMode,
        s: Startup,
    ) -> Self {
        RdmaConn {
            id,
            owner,
            role,
            listener,
            local: addr(c.local()),
            peer: addr(c.remote()),
            stage: Stage::Startup(Box::new(s)),
            binding: None,
            run: None,
            log: TxLog::with_mode(log),
            tokens: Vec::new(),
            connected: false,
            peer_fin: false,
            fin_handled: false,
            tcp_closed: None,
            closing: false,
            disconnect: false,
            qp_destroyed: false,
            close_deadline: None,
            rx_stall: None,
            reason: None,
            reported: false,
            fault: None,
            rst_at: None,
            ack_next_step: false,
        }
    }

    /// Arm a test-only fault for the QP's next FPDU ([`TxFault`], docs/rdma-seams.md).
    pub(crate) fn inject_fault(&mut self, fault: TxFault) {
        tracing::warn!(conn = %self.id, fault = fault.name(), "test fault armed for the next FPDU");
        self.fault = Some(fault);
    }

    /// The stream bytes TCP (re)transmits.
    pub(crate) fn log(&mut self) -> &mut TxLog {
        &mut self.log
    }

    /// The QP's number and counters while they are this connection's to publish (bound, not
    /// destroyed).
    pub(crate) fn qp_stats(&self) -> Option<(QpNum, &QpCounters)> {
        self.run
            .as_ref()
            .filter(|_| !self.qp_destroyed)
            .map(|r| (r.num, &r.stats))
    }

    /// `DestroyQp` took the QP away: nothing more is reported for this connection.
    pub(crate) fn qp_destroyed(&self) -> bool {
        self.qp_destroyed
    }

    /// The QP number while this connection runs it (bound, not destroyed).
    pub(crate) fn live_qp_num(&self) -> Option<QpNum> {
        self.qp_num().filter(|_| !self.qp_destroyed)
    }

    /// The QP number, once bound.
    pub(crate) fn qp_num(&self) -> Option<QpNum> {
        self.run
            .as_ref()
            .map(|r| r.num)
            .or(self.binding.as_ref().map(|b| b.qp))
    }

    /// Whether the terminal event was sent (the connection only waits for TCP to go).
    pub(crate) fn finished(&self) -> bool {
        self.reported
    }

    /// Queue the MPA frame the negotiation wants to send.
    fn flush_startup<B: SegBuf>(&mut self, c: &mut Connection<B>) {
        let s = match &mut self.stage {
            Stage::Startup(s) | Stage::AwaitAccept(s) => s,
            _ => return,
        };
        if let Some(bytes) = s.poll_transmit() {
            let n = self.log.push_bytes(&bytes, None);
            if c.send_record(u64::from(n)).is_err() {
                tracing::warn!(conn = %self.id, "MPA frame does not fit the send buffer");
            }
        }
    }

    /// `Accept` from the control thread (or the diagnostic service).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept<B: SegBuf>(
        &mut self,
        now: Instant,
        binding: QpBinding,
        private_data: &[u8],
        (ird, ord): (u16, u16),
        crc: Option<CrcMode>,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), StartupError> {
        let Stage::AwaitAccept(s) = &mut self.stage else {
            return Err(StartupError::InvalidState);
        };
        if let Some(m) = crc {
            s.set_crc_policy(m.policy())?;
        }
        s.accept_with(private_data, ird, ord)?;
        let s = std::mem::replace(&mut self.stage, Stage::Running);
        if let Stage::AwaitAccept(s) = s {
            self.stage = Stage::Startup(s);
        }
        self.flush_startup(c);
        self.binding = Some(binding);
        self.after_startup(now, c, ctx);
        Ok(())
    }

    /// `Reject` from the control thread: the MPA Reply with R set, then close.
    pub(crate) fn reject<B: SegBuf>(&mut self, private_data: &[u8], c: &mut Connection<B>) {
        if let Stage::AwaitAccept(s) = &mut self.stage {
            let _ = s.reject(private_data);
            self.flush_startup(c);
        }
        self.stage = Stage::Done;
        self.reported = true;
        self.close_tcp(c);
    }

    /// `Disconnect`: drain queued work, then FIN; before establishment, abort.
    pub(crate) fn disconnect<B: SegBuf>(
        &mut self,
        now: Instant,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) {
        self.disconnect = true;
        self.close_deadline = Some(now + ctx.cfg.close_timeout);
        match &mut self.run {
            Some(r) => r.qp.close(),
            None => {
                if !self.reported && self.role == Role::Initiator {
                    self.report(
                        ctx,
                        EngineEvent::ConnectFailed {
                            conn: self.id,
                            reason: ConnectFailure::Aborted,
                        },
                    );
                }
                self.reported = true;
                self.stage = Stage::Done;
                self.close_tcp(c);
            }
        }
    }

    /// `FlushQp`: the QP goes to ERROR now (TERMINATE, every WR flushed, then close); before
    /// establishment, the connection is abandoned like a `Disconnect`.
    pub(crate) fn flush_qp<B: SegBuf>(
        &mut self,
        now: Instant,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) {
        match &mut self.run {
            Some(r) => {
                tracing::info!(conn = %self.id, qp = %r.num, "QP moved to ERROR by its owner");
                r.qp.abort(RdmapError::LocalCatastrophic.into());
            }
            None => self.disconnect(now, c, ctx),
        }
    }

    /// `DestroyQp`: stop touching the QP's queues now; a QP with work outstanding ends the
    /// stream with a TERMINATE, an idle one with a close.
    ///
    /// Returns the QP's number and final counters (for `QpReleased`): they count the
    /// TERMINATE the QP still has to send (the abort's, or an earlier error's not yet framed),
    /// which leaves after them; not its FPDU's bytes (`fpdus_tx`, `bytes_tx`: counted when
    /// framed, then per thread only) nor the FIN (TCP's).
    pub(crate) fn destroy_qp<B: SegBuf>(
        &mut self,
        now: Instant,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) -> Option<(QpNum, QpCounters)> {
        let mut last = None;
        if let Some(r) = &mut self.run {
            if !r.qp.is_quiescent() && !matches!(r.qp.state(), QpState::Error) {
                r.qp.abort(RdmapError::LocalCatastrophic.into());
            }
            // In TERMINATE state the QP holds a TERMINATE to send, carrying its local error
            // (the transmit pass counts it by that code when it frames it, `transmit`).
            if r.qp.state() == QpState::Terminate
                && let Some(code) = r.qp.local_error()
            {
                r.stats.terminate_sent(code);
            }
            if let Some(io) = r.io.take() {
                io.unbind(ctx.cqs);
            }
            if !self.qp_destroyed {
                last = Some((r.num, r.stats.clone()));
            }
        }
        self.binding = None;
        // From here on the counters are not published: what the connection still sends is
        // not counted for the QP, whose number the control thread may reuse once
        // `QpReleased` is out.
        self.qp_destroyed = true;
        if !self.disconnect {
            self.disconnect(now, c, ctx);
        }
        last
    }

    /// Tell the control thread. Not once the QP is destroyed: the control thread closed the
    /// QP's CM id and forgot the connection then, and may have given the QP's number to a new
    /// QP (an event naming it would reach that one).
    fn report(&mut self, ctx: &mut Ctx<'_>, ev: EngineEvent) {
        if self.qp_destroyed {
            tracing::debug!(conn = %self.id, ?ev, "not reported: the QP was destroyed");
            return;
        }
        ctx.out.push((self.owner, ev));
    }

    fn close_tcp<B: SegBuf>(&mut self, c: &mut Connection<B>) {
        if !self.closing {
            self.closing = true;
            c.close();
        }
    }

    /// Everything for one poll of the connection.
    pub(crate) fn service<B: SegBuf>(
        &mut self,
        now: Instant,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) {
        let ack_owed = std::mem::take(&mut self.ack_next_step);
        if let Some(r) = &mut self.run {
            r.mem.release();
        }
        self.tcp_events(c);
        self.receive(now, c, ctx);
        self.timers(now, c, ctx);
        self.stream_end(now, c, ctx);
        if let Some(r) = &mut self.run {
            if let Some(f) = self.fault.take() {
                r.fault = Some(f);
            }
            r.intake(ctx);
            r.transmit(now, c, &mut self.log);
            r.deliver(ctx);
        }
        if ack_owed {
            // After `transmit`: an FPDU queued since carries the ACK (TCP sends data before
            // a pure ACK, and either clears the request).
            c.request_ack();
        }
        self.after_fault(now, c, ctx);
        self.finish(now, c, ctx);
        if let Some(r) = &mut self.run {
            r.mem.release();
            r.stats.bytes_tx_by_ref = self.log.bytes_by_ref;
        }
    }

    /// Finish what a stream-ending fault started: FIN now, or RST once the half FPDU is
    /// acknowledged (so the peer holds it when the reset arrives).
    fn after_fault<B: SegBuf>(&mut self, now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        match self.run.as_mut().and_then(|r| r.fault_done.take()) {
            Some(TxFault::FinInside) => {
                tracing::warn!(conn = %self.id, "test fault: FIN inside an FPDU");
                self.close_tcp(c);
            }
            Some(TxFault::RstInside) => self.rst_at = Some(self.log.end()),
            _ => {}
        }
        if self.rst_at.is_some_and(|e| self.log.start() >= e) && self.tcp_closed.is_none() {
            tracing::warn!(conn = %self.id, "test fault: RST inside an FPDU");
            self.rst_at = None;
            self.closing = true;
            c.abort();
            self.tcp_events(c);
            self.stream_end(now, c, ctx);
        }
    }

    fn tcp_events<B: SegBuf>(&mut self, c: &mut Connection<B>) {
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Connected => self.connected = true,
                Event::Acked { upto } => {
                    self.log.ack(upto, &mut self.tokens);
                    if let Some(r) = &mut self.run {
                        for t in self.tokens.drain(..) {
                            r.qp.handle_acked(t);
                        }
                    }
                    self.tokens.clear();
                }
                Event::PeerClosed => self.peer_fin = true,
                Event::Closed(r) => self.tcp_closed = Some(r),
            }
        }
    }

    /// Read in-order bytes in place and feed them to the negotiation or the QP; TCP frees
    /// each buffer as soon as its bytes are consumed.
    fn receive<B: SegBuf>(&mut self, now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        let mut fed = 0usize;
        loop {
            let n = {
                let Some((buf, range)) = c.peek_readable() else {
                    break;
                };
                let data = buf.as_ref().get(range).unwrap_or(&[]);
                match &mut self.stage {
                    Stage::Startup(s) => s.handle_stream(now, data),
                    Stage::AwaitAccept(_) => 0,
                    Stage::Running => match &mut self.run {
                        Some(r) => r.qp.handle_stream(now, &mut r.mem, data),
                        None => 0,
                    },
                    Stage::Done => data.len(),
                }
            };
            if n == 0 {
                if matches!(self.stage, Stage::Startup(_)) {
                    self.after_startup(now, c, ctx);
                    if matches!(self.stage, Stage::Running | Stage::Done) {
                        continue;
                    }
                }
                break;
            }
            c.consume_readable(n);
            if matches!(self.stage, Stage::Running) {
                fed += n;
            }
            if matches!(self.stage, Stage::Startup(_)) {
                self.after_startup(now, c, ctx);
            }
        }
        if fed > 0
            && c.readable_bytes() == 0
            && self.run.as_ref().is_some_and(|r| r.qp.rx_at_message_end())
        {
            // A message ended and nothing more of this stream waits in this burst: its sender
            // completes the message only when TCP acknowledges the last byte, so do not hold
            // the ACK for the delayed-ACK timer (issue #8: lone Writes paced by it). Not in
            // this step but in the next one: an application that answers the message (a
            // ping-pong) posts its reply in between when it drives the loop itself
            // (`crate::pump`), and the reply carries the ACK instead of a frame of its own.
            self.ack_next_step = true;
        }
        if let Some(r) = &mut self.run {
            r.stats.fpdus_rx = r.qp.rx_fpdus();
            r.stats.bytes_placed = r.mem.placed_bytes;
            if r.qp.rx_in_progress() {
                if fed > 0 || self.rx_stall.is_none() {
                    self.rx_stall = Some(now);
                }
            } else {
                self.rx_stall = None;
            }
        }
    }

    /// The negotiation moved: send its frame, and act on its outcome.
    fn after_startup<B: SegBuf>(&mut self, now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        self.flush_startup(c);
        let Stage::Startup(s) = &self.stage else {
            return;
        };
        if let Some(req) = s.peer_request() {
            let ev = EngineEvent::ConnectRequest {
                conn: self.id,
                listener: self.listener.unwrap_or(ListenerId::from_raw(0)),
                thread: ctx.thread,
                local: self.local,
                peer: self.peer,
                revision: req.revision,
                crc: req.crc,
                markers: req.markers,
                ird: req.ird_ord.map_or(0, |i| i.ird),
                ord: req.ird_ord.map_or(0, |i| i.ord),
                rtr: req
                    .ird_ord
                    .filter(|i| i.p2p)
                    .map(|i| iwarp::mpa::startup::RtrSet {
                        write: i.rtr_write,
                        read: i.rtr_read,
                        send: i.rtr_send,
                    }),
                private_data: req.private_data.clone(),
            };
            if let Stage::Startup(s) = std::mem::replace(&mut self.stage, Stage::Done) {
                self.stage = Stage::AwaitAccept(s);
            }
            self.report(ctx, ev);
            return;
        }
        let Some(outcome) = s.outcome().cloned() else {
            return;
        };
        match outcome {
            Outcome::Established(e) => self.established(now, &e, c, ctx),
            Outcome::Rejected { peer_private_data } => {
                let ev = EngineEvent::Rejected {
                    conn: self.id,
                    private_data: peer_private_data,
                };
                self.end_before_qp(ctx, Some(ev), c);
            }
            Outcome::Failed(e) => {
                tracing::info!(conn = %self.id, peer = %self.peer, "MPA negotiation failed: {e}");
                let ev = (self.role == Role::Initiator).then_some(EngineEvent::ConnectFailed {
                    conn: self.id,
                    reason: ConnectFailure::Mpa(e),
                });
                self.end_before_qp(ctx, ev, c);
            }
        }
    }

    fn end_before_qp<B: SegBuf>(
        &mut self,
        ctx: &mut Ctx<'_>,
        ev: Option<EngineEvent>,
        c: &mut Connection<B>,
    ) {
        self.stage = Stage::Done;
        if let Some(ev) = ev
            && !self.reported
        {
            self.report(ctx, ev);
        }
        self.reported = true;
        self.close_tcp(c);
    }

    fn established<B: SegBuf>(
        &mut self,
        now: Instant,
        e: &Established,
        c: &mut Connection<B>,
        ctx: &mut Ctx<'_>,
    ) {
        let Some(b) = self.binding.take() else {
            self.end_before_qp(ctx, None, c);
            return;
        };
        let io = match QueueIo::bind(&b.queues, ctx.thread, ctx.cqs) {
            Ok(io) => io,
            Err(err) => {
                tracing::warn!(conn = %self.id, qp = %b.qp, "cannot bind the QP's queues: {err}");
                let ev = match self.role {
                    Role::Initiator => EngineEvent::ConnectFailed {
                        conn: self.id,
                        reason: ConnectFailure::NoResources,
                    },
                    Role::Responder => EngineEvent::QpError {
                        conn: self.id,
                        qp: b.qp,
                        reason: QpErrorReason::CorruptRing,
                    },
                };
                self.end_before_qp(ctx, Some(ev), c);
                return;
            }
        };
        let mut cfg = QpConfig::from_established(e, self.role, b.pd);
        cfg.crc_by_placer = true;
        cfg.complete_on_ack = true;
        let mut qp = Qp::new(cfg);
        qp.establish();
        let run = QpRun {
            qp,
            mem: QpMemory::new(ctx.mem.clone(), b.owner, b.pd),
            io: Some(io),
            num: b.qp,
            sq_depth: b.sq_depth.max(1) as usize,
            rq_depth: b.rq_depth.max(1) as usize,
            pending: VecDeque::new(),
            stats: QpCounters::new(self.id),
            framer: Framer::new(e.framer_config()),
            markers_tx: e.markers_tx,
            first_send: Some(e.first_send),
            first_send_anyway: (e.first_send == FirstSend::AfterPeerFpdu && e.rtr.is_none())
                .then(|| now + RESPONDER_FIRST_SEND_GRACE),
            crc: e.crc,
            fault: None,
            frozen: false,
            fault_done: None,
            msg_fresh: true,
        };
        self.run = Some(Box::new(run));
        self.stage = Stage::Running;
        let ev = EngineEvent::Established {
            conn: self.id,
            qp: b.qp,
            negotiated: Negotiated::from(e),
            private_data: e.peer_private_data.clone(),
        };
        self.report(ctx, ev);
    }

    fn timers<B: SegBuf>(&mut self, now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        if let Stage::Startup(s) | Stage::AwaitAccept(s) = &mut self.stage
            && s.poll_timeout().is_some_and(|t| t <= now)
        {
            s.handle_timeout(now);
            if matches!(self.stage, Stage::AwaitAccept(_)) {
                // The control thread never answered: give up on the connection.
                let ev = (self.owner == Owner::Control).then_some(EngineEvent::ConnectFailed {
                    conn: self.id,
                    reason: ConnectFailure::Mpa(StartupError::Timeout),
                });
                self.end_before_qp(ctx, ev, c);
            } else {
                self.after_startup(now, c, ctx);
            }
        }
        if let (Some(t), Some(r)) = (self.rx_stall, &mut self.run)
            && now >= t + ctx.cfg.rx_timeout
            && r.qp.rx_in_progress()
        {
            tracing::warn!(conn = %self.id, qp = %r.num, "an FPDU stayed half-received for {:?}: TERMINATE", ctx.cfg.rx_timeout);
            r.qp.abort(LlpError::StreamLost.into());
            self.reason.get_or_insert(QpErrorReason::RxTimeout);
            self.rx_stall = None;
        }
        if self.close_deadline.is_some_and(|t| now >= t) && self.tcp_closed.is_none() {
            tracing::info!(conn = %self.id, "close timed out: reset");
            self.close_deadline = None;
            c.abort();
            self.tcp_events(c);
        }
    }

    /// The peer's FIN, or the TCP connection's end.
    fn stream_end<B: SegBuf>(&mut self, now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        if self.peer_fin && !self.fin_handled {
            self.fin_handled = true;
            let live = |q: &Qp| !matches!(q.state(), QpState::Error | QpState::Terminate);
            match &mut self.run {
                Some(r) if !live(&r.qp) => {}
                Some(r) if r.qp.rx_in_progress() => {
                    tracing::warn!(conn = %self.id, qp = %r.num, "FIN inside an FPDU: the QP goes to ERROR");
                    r.qp.abort(LlpError::StreamLost.into());
                    self.reason.get_or_insert(QpErrorReason::StreamBroken);
                }
                Some(r) => r.qp.handle_stream_closed(now),
                None => {
                    if !matches!(self.stage, Stage::Done) {
                        let ev =
                            (self.role == Role::Initiator).then_some(EngineEvent::ConnectFailed {
                                conn: self.id,
                                reason: ConnectFailure::Mpa(StartupError::Malformed(
                                    iwarp::mpa::wire::WireError::Truncated,
                                )),
                            });
                        self.end_before_qp(ctx, ev, c);
                    }
                }
            }
        }
        let Some(why) = self.tcp_closed else {
            return;
        };
        match &mut self.run {
            Some(r) if r.qp.state() != QpState::Error => {
                let broken = r.qp.rx_in_progress();
                r.qp.handle_stream_lost(now);
                if why != CloseReason::Normal || broken {
                    self.reason.get_or_insert(if broken {
                        QpErrorReason::StreamBroken
                    } else {
                        QpErrorReason::StreamLost
                    });
                }
            }
            Some(_) => {}
            None => {
                if !self.reported {
                    let reason = match (self.connected, why) {
                        (false, CloseReason::Reset) => ConnectFailure::Refused,
                        (false, _) => ConnectFailure::Timeout,
                        (true, CloseReason::Timeout) => ConnectFailure::Timeout,
                        (true, _) => ConnectFailure::Mpa(StartupError::Timeout),
                    };
                    let ev = (self.role == Role::Initiator).then_some(EngineEvent::ConnectFailed {
                        conn: self.id,
                        reason,
                    });
                    self.end_before_qp(ctx, ev, c);
                }
            }
        }
    }

    /// Report the QP's end once it is in ERROR (or back in IDLE after a graceful close), and
    /// close TCP once nothing is left to send.
    fn finish<B: SegBuf>(&mut self, _now: Instant, c: &mut Connection<B>, ctx: &mut Ctx<'_>) {
        let Some(r) = &mut self.run else {
            return;
        };
        // Disconnect: FIN once the queued work drained.
        if self.disconnect && r.qp.is_quiescent() {
            self.closing = true;
            c.close();
        }
        let state = r.qp.state();
        // A graceful close we started is over once the peer's FIN arrived too (both FINs
        // exchanged, RFC 5040 §5.1 Closing -> Idle); TCP's TIME-WAIT (60 s) is no reason to
        // keep the application waiting for its DISCONNECTED event, as siw does not either.
        let ended = matches!(state, QpState::Error)
            || (state == QpState::Idle
                && (self.tcp_closed.is_some() || (self.closing && self.peer_fin)));
        if !ended || self.reported {
            return;
        }
        self.reported = true;
        self.stage = Stage::Done;
        let (conn, qp) = (self.id, r.num);
        let ev = if let Some(t) = r.qp.remote_terminate() {
            let code = t.code();
            r.stats.terminate_received(code);
            EngineEvent::TerminateReceived {
                conn,
                qp,
                code,
                layout: t.layout,
            }
        } else if let Some(code) = r.qp.local_error() {
            if code == TermCode::from(LlpError::Crc) {
                r.stats.crc_errors += 1;
            }
            let reason = self.reason.unwrap_or(QpErrorReason::TerminateSent(code));
            tracing::info!(%conn, %qp, ?reason, "QP in ERROR: TERMINATE {code}");
            EngineEvent::QpError { conn, qp, reason }
        } else if let Some(reason) = self.reason {
            EngineEvent::QpError { conn, qp, reason }
        } else {
            EngineEvent::Disconnected { conn, qp: Some(qp) }
        };
        // Completions (flushes) go out before the event.
        r.deliver(ctx);
        self.report(ctx, ev);
        if !self.closing {
            self.closing = true;
            c.close();
        }
    }

    /// When [`RdmaConn::service`] must run again without TCP input.
    pub(crate) fn poll_timeout(&self, cfg: &EngineConfig) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        if let Stage::Startup(s) | Stage::AwaitAccept(s) = &self.stage
            && let Some(x) = s.poll_timeout()
        {
            at(x);
        }
        if let Some(s) = self.rx_stall {
            at(s + cfg.rx_timeout);
        }
        if let Some(d) = self.close_deadline {
            at(d);
        }
        if let Some(r) = &self.run {
            match (r.first_send, r.first_send_anyway) {
                (Some(FirstSend::NotBefore(x)), _) => at(x),
                (Some(FirstSend::AfterPeerFpdu), Some(x)) => at(x),
                _ => {}
            }
        }
        t
    }

    /// An ACK is owed at the next loop step ([`RdmaConn::receive`]).
    #[cfg(test)]
    pub(crate) fn ack_owed(&self) -> bool {
        self.ack_next_step
    }

    /// Whether work may be waiting in the QP's queues (the engine polls rings each loop).
    pub(crate) fn has_work(&mut self) -> bool {
        if self.ack_next_step {
            return true;
        }
        match &mut self.run {
            Some(r) => {
                // Not serviced for a while: let go of a deregistered region's mapping anyway.
                r.mem.release();
                !r.pending.is_empty()
                    || r.io
                        .as_mut()
                        .is_some_and(|io| io.has_work().unwrap_or(true))
            }
            None => false,
        }
    }

    /// The QP's queues once no connection will run it (the connection ended or is gone, or the
    /// QP was flushed before it was established): the QP is in ERROR from now on and the engine keeps
    /// completing whatever is posted to it flushed ([`FlushedQp`]) until `DestroyQp`. Moves the
    /// completions not delivered yet along. `None` when the QP is destroyed (or was never
    /// bound), or its queues cannot be bound (logged).
    pub(crate) fn take_queues(
        &mut self,
        now: Instant,
        thread: usize,
        cqs: &mut CqMap,
    ) -> Option<(QpNum, FlushedQp)> {
        if let Some(r) = &mut self.run {
            let io = r.io.take()?;
            if !matches!(r.qp.state(), QpState::Error) {
                // Closed gracefully (IDLE) or gone without the QP seeing it: ERROR now, so
                // what it still holds completes flushed (RFC 5040 §5.1).
                r.qp.handle_stream_lost(now);
            }
            let mut pending = std::mem::take(&mut r.pending);
            pending.extend(std::iter::from_fn(|| r.qp.poll_completion()));
            return Some((r.num, FlushedQp::new(io, pending)));
        }
        let b = self.binding.take()?;
        match QueueIo::bind(&b.queues, thread, cqs) {
            Ok(io) => Some((b.qp, FlushedQp::new(io, VecDeque::new()))),
            Err(e) => {
                tracing::warn!(conn = %self.id, qp = %b.qp, "cannot bind the QP's queues to flush them: {e}");
                None
            }
        }
    }
}

impl QpRun {
    /// Pull posted work requests from the queues into the QP, within the QP's depths.
    fn intake(&mut self, ctx: &mut Ctx<'_>) {
        let Some(io) = &mut self.io else { return };
        let mut corrupt: Option<QueueError> = None;
        while self.qp.send_queue_len() < self.sq_depth {
            match io.next_send(|| self.qp.spare_sges()) {
                Ok(Some(wr)) => {
                    let (id, op) = (wr.wr_id, wr.opcode);
                    match self.qp.post_send(wr) {
                        Ok(()) => {}
                        Err(PostError::InvalidState) => {
                            self.pending.push_back(sq_flush(id, op, WcStatus::Flushed))
                        }
                        Err(_) => self
                            .pending
                            .push_back(sq_flush(id, op, WcStatus::LocalError)),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    corrupt = Some(e);
                    break;
                }
            }
        }
        while corrupt.is_none() && self.qp.recv_queue_len() < self.rq_depth {
            match io.next_recv() {
                Ok(Some(rr)) => {
                    let id = rr.wr_id;
                    if self.qp.post_recv(rr).is_err() {
                        self.pending.push_back(recv_flush(id));
                    }
                }
                Ok(None) => break,
                Err(e) => corrupt = Some(e),
            }
        }
        if let Some(e) = corrupt {
            tracing::warn!(qp = %self.num, "work queue corrupt: {e}; the QP goes to ERROR");
            if let Some(io) = self.io.take() {
                io.unbind(ctx.cqs);
            }
            self.qp.abort(RdmapError::LocalCatastrophic.into());
        }
    }

    fn may_send(&mut self, now: Instant) -> bool {
        let ok = match self.first_send {
            None => return true,
            Some(FirstSend::NotBefore(t)) => now >= t,
            Some(FirstSend::AfterPeerFpdu) => {
                self.qp.rx_fpdus() > 0 || self.first_send_anyway.is_some_and(|t| now >= t)
            }
        };
        if ok {
            self.first_send = None;
        }
        // A TERMINATE may always go.
        ok || matches!(self.qp.state(), QpState::Terminate)
    }

    /// Turn QP output into FPDUs (one per TCP record, never larger than the EMSS) while TCP
    /// has room. Returns true when the send buffer is full.
    fn transmit<B: SegBuf>(
        &mut self,
        now: Instant,
        c: &mut Connection<B>,
        log: &mut TxLog,
    ) -> bool {
        if self.frozen || !self.may_send(now) {
            return false;
        }
        let emss = usize::from(c.emss());
        loop {
            let room = c.send_capacity();
            if room < emss as u64 {
                self.stats.tx_sndbuf_full += 1;
                return true;
            }
            let max = if self.markers_tx {
                self.framer.max_ulpdu_len(emss)
            } else {
                max_ulpdu_len_any_pos(emss, false)
            };
            // As many FPDUs as the send buffer takes now, as one run where the log can hold
            // one (each FPDU is at most an EMSS).
            let fit = if self.markers_tx || self.fault.is_some() || !log.defers_crc() {
                1
            } else {
                (room / emss as u64).min(MAX_RUN) as u32
            };
            let Some(run) = self.qp.poll_run(max, fit, &mut self.mem) else {
                self.stats.tx_dry += 1;
                self.stats.tx_dry_wrs += self.qp.send_queue_len() as u64;
                return false;
            };
            if run.count() > 1 {
                self.queue_run(&run, c, log);
                continue;
            }
            let seg = run.first();
            if !seg.is_terminate()
                && let Some(f) = self.fault.take()
            {
                self.send_broken(f, seg, c, log);
                if self.frozen {
                    return false;
                }
                continue;
            }
            let inline = self.is_inline(seg);
            let len = if self.markers_tx {
                log.push_copy(&mut self.framer, seg, &mut self.mem)
                    .map(|r| r.0)
            } else if inline {
                log.push_inline(&mut self.framer, seg, &mut self.mem)
            } else {
                log.push_gather(&mut self.framer, seg, &mut self.mem)
            };
            if inline && len.is_ok() {
                self.complete_inline(log);
            }
            let len = match len {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(qp = %self.num, ?e, "a region went away under a work request");
                    u32::try_from(log.end() - c.queued_offset()).unwrap_or(0)
                }
            };
            if let Err(e) = c.send_record(u64::from(len)) {
                tracing::warn!(qp = %self.num, ?e, "FPDU not queued");
            }
            self.stats.fpdus_tx += 1;
            self.stats.bytes_tx += u64::from(len);
            if seg.is_terminate()
                && let Some(code) = self.qp.local_error()
            {
                self.stats.terminate_sent(code);
            }
        }
    }

    /// Log and queue a run of FPDUs of one message ([`TxLog::push_run`]): each is a TCP record.
    fn queue_run<B: SegBuf>(
        &mut self,
        run: &iwarp::rdmap::TxRun,
        c: &mut Connection<B>,
        log: &mut TxLog,
    ) {
        // A run never holds a message's last segment: the next one is no message start.
        self.msg_fresh = false;
        let (len, n, res) = log.push_run(&mut self.framer, run, &mut self.mem);
        if let Err(e) = res {
            tracing::warn!(qp = %self.num, ?e, "a region went away under a work request");
        }
        for _ in 0..n {
            if let Err(e) = c.send_record(u64::from(len)) {
                tracing::warn!(qp = %self.num, ?e, "FPDU not queued");
            }
        }
        self.stats.fpdus_tx += u64::from(n);
        self.stats.bytes_tx += u64::from(len) * u64::from(n);
    }

    /// Whether `seg` is a whole message of at most [`INLINE_MAX`] payload bytes that completes
    /// a work request (its first segment is also its last). Tracks message starts.
    fn is_inline(&mut self, seg: &iwarp::rdmap::TxSegment) -> bool {
        let last = seg
            .header()
            .first()
            .is_some_and(|c| c & iwarp::ddp::wire::FLAG_LAST != 0);
        let first = std::mem::replace(&mut self.msg_fresh, last);
        first
            && seg.completion().is_some()
            && !seg.is_terminate()
            && seg.pieces().iter().map(|p| p.len as usize).sum::<usize>() <= INLINE_MAX
    }

    /// The inline FPDU just logged holds its payload as a copy: its work request completes
    /// now: at the data source a Send/Write completion means its buffer may be reused (the
    /// verbs contract; iWARP never promised remote placement at completion). The QP still
    /// delivers completions in posting order.
    fn complete_inline(&mut self, log: &mut TxLog) {
        if let Some(t) = log.take_last_token() {
            self.qp.handle_acked(t);
            self.stats.inline_tx += 1;
        }
    }

    /// Send `seg` broken as `fault` says (test-only, [`TxFault`]). A truncated FPDU carries no
    /// completion token (its work request never completes: it is flushed with the QP).
    fn send_broken<B: SegBuf>(
        &mut self,
        fault: TxFault,
        seg: &iwarp::rdmap::TxSegment,
        c: &mut Connection<B>,
        log: &mut TxLog,
    ) {
        let (mut bytes, _) = log.frame_copy(&mut self.framer, seg, &mut self.mem);
        let token = match fault {
            TxFault::BadCrc => {
                match (self.crc, bytes.len().checked_sub(4)) {
                    (true, Some(at)) => bytes[at..].iter_mut().for_each(|b| *b = !*b),
                    _ => {
                        tracing::warn!(qp = %self.num, "test fault badcrc without CRC: FPDU sent intact")
                    }
                }
                seg.completion()
            }
            TxFault::Truncate | TxFault::FinInside | TxFault::RstInside => {
                bytes.truncate(bytes.len() / 2);
                self.frozen = true;
                self.fault_done = Some(fault);
                None
            }
        };
        tracing::warn!(qp = %self.num, fault = fault.name(), bytes = bytes.len(), "test fault: broken FPDU sent");
        let n = log.push_bytes(&bytes, token);
        if let Err(e) = c.send_record(u64::from(n)) {
            tracing::warn!(qp = %self.num, ?e, "broken FPDU not queued");
        }
        self.stats.fpdus_tx += 1;
        self.stats.bytes_tx += u64::from(n);
    }

    /// Hand completions to the CQs (those that do not fit wait for the next poll).
    fn deliver(&mut self, ctx: &mut Ctx<'_>) {
        loop {
            let Some(c) = self
                .pending
                .pop_front()
                .or_else(|| self.qp.poll_completion())
            else {
                return;
            };
            let delivered = match &mut self.io {
                Some(io) => match io.deliver(self.num, &c, ctx.cqs) {
                    Ok(d) => d,
                    Err(e) => {
                        tracing::warn!(qp = %self.num, "CQ corrupt: {e}");
                        if let Some(io) = self.io.take() {
                            io.unbind(ctx.cqs);
                        }
                        self.qp.abort(RdmapError::LocalCatastrophic.into());
                        true
                    }
                },
                // Detached (DestroyQp): nobody reads completions any more.
                None => true,
            };
            if !delivered {
                self.pending.push_front(c);
                return;
            }
            self.stats.completion(c.status);
        }
    }
}
