//! The engine API: what the control thread tells a dataplane thread ([`EngineCmd`]), what the
//! dataplane threads report back ([`EngineEvent`]), how a QP is bound to its work queues
//! ([`QpBinding`]), and the MPA policy ([`MpaPolicy`]). docs/rdma-seams.md is the contract.
//!
//! Plumbing: [`engine_channels`] makes one bounded command queue per dataplane thread (the
//! control thread is the producer; the thread drains it once per poll-loop iteration with a
//! single atomic load when it is empty) and one event queue all threads feed and the control
//! thread waits on.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

use iwarp::error::TermCode;
use iwarp::mpa::startup::{CrcPolicy, Established, Role, RtrSet, StartupConfig, StartupError};
use iwarp::mpa::wire::RtrKind;
use iwarp::rdmap::qp::{Completion, RecvRequest, WorkRequest};
use iwarp::rdmap::terminate::TermLayout;
use iwarp::stag::PdId;
use netcore::Duration;

use super::ids::{ClientId, ConnId, IdGen, ListenerId, QpNum};
use super::memory::{MappedMemory, MemTable};
use super::stats::{QpCounters, SharedRdmaStats};

/// CRC policy of [`MpaPolicy`] (RFC 5044 §7.1: the CRC is used when either side asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrcMode {
    /// We do not ask; a peer that asks gets it (stock siw's behaviour).
    #[default]
    Off,
    /// We ask (C=1): the CRC is used in both directions.
    On,
    /// We ask, and refuse a peer whose Request/Reply does not set C (siw's `crc` build).
    Require,
}

impl CrcMode {
    /// The MPA negotiation's CRC policy for this choice.
    pub fn policy(self) -> CrcPolicy {
        match self {
            CrcMode::Off => CrcPolicy::IfPeerAsks,
            CrcMode::On => CrcPolicy::Always,
            CrcMode::Require => CrcPolicy::Require,
        }
    }
}

/// Peer-to-peer ready-to-receive message an initiator offers (RFC 6581 §5). As a responder we
/// honour whatever the initiator offers, as siw does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtrMode {
    /// No peer-to-peer mode.
    #[default]
    None,
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read.
    Read,
    /// A zero-length Send.
    Send,
}

/// How MPA is negotiated on a connection (`[mpa]` in the config, overridable per connect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpaPolicy {
    /// CRC policy.
    pub crc: CrcMode,
    /// Ask the peer to put markers in what it sends (RFC 5044 §5). We always send markers when
    /// the peer asks.
    pub markers: bool,
    /// MPA revision we send (initiator) or the highest we accept (responder): 1 or 2. With 2,
    /// the RFC 6581 IRD/ORD words are exchanged.
    pub revision: u8,
    /// RTR we offer as initiator.
    pub rtr: RtrMode,
    /// Inbound RDMA Read/atomic depth we offer (initiator) or grant at least (responder).
    pub ird: u16,
    /// Outbound RDMA Read/atomic depth we want.
    pub ord: u16,
    /// Largest ULP private data accepted from the peer (and sent), in bytes (siw: 252).
    pub private_data_max: usize,
    /// How long MPA startup may take before the connection is abandoned.
    pub timeout: Duration,
    /// Initiator: delay between the MPA Reply and our first FPDU (siw's responder race,
    /// `iwarp::mpa::StartupConfig::first_fpdu_delay`).
    pub first_fpdu_delay: Duration,
}

impl Default for MpaPolicy {
    fn default() -> Self {
        MpaPolicy {
            crc: CrcMode::Off,
            markers: false,
            revision: 2,
            rtr: RtrMode::None,
            ird: 16,
            ord: 16,
            private_data_max: 252,
            timeout: Duration::from_secs(10),
            first_fpdu_delay: Duration::from_millis(50),
        }
    }
}

impl MpaPolicy {
    /// The negotiation settings for `role`, sending `private_data`. A responder does not
    /// accept automatically: the control thread answers with `Accept` or `Reject`.
    pub fn startup_config(&self, role: Role, private_data: &[u8]) -> StartupConfig {
        let mut c = StartupConfig::new(role);
        c.revision = self.revision.clamp(1, 2);
        c.enhanced = c.revision == 2;
        c.crc = self.crc.policy();
        c.markers_rx = self.markers;
        c.markers_tx_supported = true;
        c.ird = self.ird.min(iwarp::mpa::wire::IrdOrd::VALUE_MASK);
        c.ord = self.ord.min(iwarp::mpa::wire::IrdOrd::VALUE_MASK);
        let (p2p, rtr) = match (role, self.rtr) {
            (Role::Responder, _) => (true, RtrSet::default()),
            (Role::Initiator, RtrMode::None) => (false, RtrSet::default()),
            (Role::Initiator, k) => (
                true,
                RtrSet {
                    write: k == RtrMode::Write,
                    read: k == RtrMode::Read,
                    send: k == RtrMode::Send,
                },
            ),
        };
        c.p2p = p2p;
        c.rtr = rtr;
        c.private_data = private_data.to_vec();
        c.max_ulp_private_data = self.private_data_max.min(iwarp::mpa::wire::MAX_PD_LEN - 4);
        c.max_peer_private_data = (self.private_data_max + 4).min(iwarp::mpa::wire::MAX_PD_LEN);
        c.auto_accept = false;
        c.reply_timeout = self.timeout;
        c.request_timeout = self.timeout;
        c.first_fpdu_delay = self.first_fpdu_delay;
        c
    }
}

/// What MPA negotiation produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// MPA revision.
    pub revision: u8,
    /// CRC in use (both directions).
    pub crc: bool,
    /// Markers in what we receive.
    pub markers_rx: bool,
    /// Markers in what we send.
    pub markers_tx: bool,
    /// Inbound Read/atomic depth.
    pub ird: u16,
    /// Outbound Read/atomic depth.
    pub ord: u16,
    /// Peer-to-peer RTR type, if that mode was negotiated.
    pub rtr: Option<RtrKind>,
}

impl From<&Established> for Negotiated {
    fn from(e: &Established) -> Self {
        Negotiated {
            revision: e.revision,
            crc: e.crc,
            markers_rx: e.markers_rx,
            markers_tx: e.markers_tx,
            ird: e.ird,
            ord: e.ord,
            rtr: e.rtr,
        }
    }
}

/// Where a ring lives inside a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLocation {
    /// Byte offset of the ring header in the segment.
    pub offset: usize,
    /// Entries (a power of two).
    pub entries: u32,
}

/// A completion queue as one dataplane thread sees it: the CQ's layout (armed flag, one
/// sub-ring per dataplane thread; this thread produces into sub-ring number `thread`) and the
/// completion channel to signal when it pushes into an armed CQ (docs/rdma-seams.md "Rings").
/// QPs of one thread that share a CQ share one producer (the engine keys it by `cq`).
#[derive(Debug, Clone)]
pub struct CqBinding {
    /// The CQ's number, unique in the daemon (the engine's producer key; logs, stats).
    pub cq: u32,
    /// Segment holding the CQ.
    pub segment: Arc<dyn MappedMemory>,
    /// Where the CQ is in the segment.
    pub layout: abi::ring::CqLayout,
    /// Completion channel, signalled when a CQE lands in an armed CQ.
    pub eventfd: Option<Arc<shm::EventFd>>,
}

/// A client's shared-memory work queues (the `abi` ring layout).
#[derive(Debug, Clone)]
pub struct RingBinding {
    /// Segment holding the SQ and RQ rings.
    pub segment: Arc<dyn MappedMemory>,
    /// Send queue (client -> dataplane).
    pub sq: RingLocation,
    /// Receive queue (client -> dataplane).
    pub rq: RingLocation,
    /// CQ for send-queue completions.
    pub send_cq: CqBinding,
    /// CQ for receive completions.
    pub recv_cq: CqBinding,
}

/// In-process work queues (the diagnostic RDMA service, tests): the engine pops work requests
/// and pushes completions under a mutex.
#[derive(Debug, Clone, Default)]
pub struct LocalQueues {
    inner: Arc<Mutex<LocalInner>>,
}

#[derive(Debug, Default)]
struct LocalInner {
    sq: VecDeque<WorkRequest>,
    rq: VecDeque<RecvRequest>,
    cq: VecDeque<Completion>,
}

impl LocalQueues {
    fn lock(&self) -> std::sync::MutexGuard<'_, LocalInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Post a send-queue work request.
    pub fn post_send(&self, wr: WorkRequest) {
        self.lock().sq.push_back(wr);
    }
    /// Post a receive.
    pub fn post_recv(&self, rr: RecvRequest) {
        self.lock().rq.push_back(rr);
    }
    /// Take the next completion (send and receive completions share this queue).
    pub fn poll_cq(&self) -> Option<Completion> {
        self.lock().cq.pop_front()
    }
    /// Engine side: whether a send WR or a receive is waiting.
    pub fn has_work(&self) -> bool {
        let g = self.lock();
        !g.sq.is_empty() || !g.rq.is_empty()
    }
    /// Engine side: the next posted send WR.
    pub fn take_send(&self) -> Option<WorkRequest> {
        self.lock().sq.pop_front()
    }
    /// Engine side: the next posted receive.
    pub fn take_recv(&self) -> Option<RecvRequest> {
        self.lock().rq.pop_front()
    }
    /// Engine side: deliver a completion.
    pub fn complete(&self, c: Completion) {
        self.lock().cq.push_back(c);
    }
}

/// The work queues a QP consumes and the CQs it fills.
#[derive(Debug, Clone)]
pub enum QpQueues {
    /// A client's shared-memory rings (untrusted).
    Rings(RingBinding),
    /// In-process queues.
    Local(LocalQueues),
}

/// A QP handed to a dataplane thread with `Connect` or `Accept`.
#[derive(Debug, Clone)]
pub struct QpBinding {
    /// The QP's number.
    pub qp: QpNum,
    /// Owning client (regions of other clients are invisible to this QP).
    pub owner: ClientId,
    /// Protection domain (STags and lkeys of other PDs are refused).
    pub pd: PdId,
    /// Send-queue depth (work requests outstanding at once).
    pub sq_depth: u32,
    /// Receive-queue depth.
    pub rq_depth: u32,
    /// Its work queues.
    pub queues: QpQueues,
}

/// Control thread -> dataplane thread.
#[derive(Debug)]
pub enum EngineCmd {
    /// Listen on a TCP port (sent to every thread: a connection lands where RSS puts it).
    Listen {
        /// Id reported in `ConnectRequest`.
        listener: ListenerId,
        /// TCP port.
        port: u16,
        /// Negotiation policy for connections to it.
        policy: MpaPolicy,
    },
    /// Stop listening (connections already accepted are not affected).
    Unlisten {
        /// The listener.
        listener: ListenerId,
    },
    /// Active open: TCP connect, MPA as initiator, then the QP.
    Connect {
        /// Id chosen by the control thread (from the shared [`IdGen`]).
        conn: ConnId,
        /// Peer address.
        remote: SocketAddrV4,
        /// Negotiation policy.
        policy: MpaPolicy,
        /// ULP private data of the MPA Request.
        private_data: Vec<u8>,
        /// The QP the stream drives once established.
        qp: QpBinding,
    },
    /// Accept a `ConnectRequest`: the MPA Reply goes out, the QP takes over.
    Accept {
        /// The connection of the `ConnectRequest`.
        conn: ConnId,
        /// The QP.
        qp: QpBinding,
        /// ULP private data of the MPA Reply.
        private_data: Vec<u8>,
        /// Inbound Read depth granted.
        ird: u16,
        /// Outbound Read depth taken.
        ord: u16,
        /// CRC choice for this connection's Reply instead of the listener's (`None`: keep).
        crc: Option<CrcMode>,
    },
    /// Reject a `ConnectRequest` (MPA Reply with the R bit, then close).
    Reject {
        /// The connection.
        conn: ConnId,
        /// ULP private data of the Reject.
        private_data: Vec<u8>,
    },
    /// Graceful disconnect: queued work drains, then FIN (outstanding WRs are flushed).
    Disconnect {
        /// The connection.
        conn: ConnId,
    },
    /// Forget a QP: answered by `QpReleased` once the thread no longer touches its rings. A
    /// connected QP is torn down first (TERMINATE if work was outstanding, then close).
    DestroyQp {
        /// The QP.
        qp: QpNum,
    },
    /// Move a QP to ERROR (the client's `ModifyQp` to ERROR): every outstanding work request
    /// completes flushed, a TERMINATE (RDMAP, local catastrophic error: RFC 5040 §7.4) goes to
    /// the peer, then the stream closes; answered by `QpError`. Work requests posted later
    /// complete flushed while the connection lingers. A QP whose connect is still pending
    /// ends with `ConnectFailed { Aborted }`.
    FlushQp {
        /// The QP.
        qp: QpNum,
    },
    /// A QP no connection has (never connected) goes to ERROR: this thread completes every
    /// work request posted to it flushed until `DestroyQp`, as for a QP whose connection
    /// ended.
    FlushUnbound {
        /// The QP and its queues.
        qp: QpBinding,
    },
    /// Test-only fault switch: the QP's next outgoing FPDU (not a TERMINATE) is sent broken
    /// as `fault` says (docs/rdma-seams.md "Fault switches"). A QP that is not (yet) on this
    /// thread ignores it with a log line.
    InjectFault {
        /// The QP.
        qp: QpNum,
        /// What to break.
        fault: TxFault,
    },
}

/// A test-only transmit fault ([`EngineCmd::InjectFault`]), applied to the next FPDU the QP
/// sends. Names (for configs and tools): `badcrc`, `truncate`, `fin`, `rst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxFault {
    /// The FPDU goes out whole with its MPA CRC inverted (CRC on); the stream goes on, the peer
    /// must answer with the LLP CRC TERMINATE (RFC 5044 §8). Without CRC the FPDU is sent
    /// unchanged (nothing to break) and a warning is logged.
    BadCrc,
    /// Only the first half of the FPDU goes out, then nothing more on the stream: the peer's
    /// receive timer must end it (`EngineConfig::rx_timeout`).
    Truncate,
    /// The first half of the FPDU, then FIN: a FIN inside an FPDU.
    FinInside,
    /// The first half of the FPDU, then, once TCP has it acknowledged, an RST.
    RstInside,
}

impl TxFault {
    /// Parse `badcrc`, `truncate`, `fin`, `rst`.
    pub fn parse(s: &str) -> Option<TxFault> {
        match s {
            "badcrc" => Some(TxFault::BadCrc),
            "truncate" => Some(TxFault::Truncate),
            "fin" => Some(TxFault::FinInside),
            "rst" => Some(TxFault::RstInside),
            _ => None,
        }
    }

    /// The name [`TxFault::parse`] takes.
    pub fn name(self) -> &'static str {
        match self {
            TxFault::BadCrc => "badcrc",
            TxFault::Truncate => "truncate",
            TxFault::FinInside => "fin",
            TxFault::RstInside => "rst",
        }
    }
}

/// Why an active open failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// No route or no ARP answer for the peer.
    Unreachable,
    /// The peer answered the SYN with a reset.
    Refused,
    /// TCP gave up (retransmission limit).
    Timeout,
    /// MPA negotiation failed (timeout, malformed frame, incompatible policy).
    Mpa(StartupError),
    /// A `Disconnect` or `DestroyQp` arrived before the connection was established.
    Aborted,
    /// No local port or memory.
    NoResources,
}

/// Why a QP went to ERROR (besides a received TERMINATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpErrorReason {
    /// We detected a protocol error and sent a TERMINATE with this code.
    TerminateSent(TermCode),
    /// The stream ended (FIN or RST) in the middle of an FPDU.
    StreamBroken,
    /// An FPDU stayed half-received past the receive timeout (a TERMINATE was sent).
    RxTimeout,
    /// The TCP connection was reset or timed out.
    StreamLost,
    /// The client's shared-memory rings are corrupt (indices or entries out of range).
    CorruptRing,
}

/// Dataplane thread -> control thread.
#[derive(Debug)]
pub enum EngineEvent {
    /// An MPA Request arrived on a listener; answer with `Accept` or `Reject` to `thread`.
    ConnectRequest {
        /// New connection id.
        conn: ConnId,
        /// The listener it arrived on.
        listener: ListenerId,
        /// The dataplane thread that owns it.
        thread: usize,
        /// Our address.
        local: SocketAddrV4,
        /// The peer's address.
        peer: SocketAddrV4,
        /// MPA revision asked for.
        revision: u8,
        /// The peer asked for CRC.
        crc: bool,
        /// The peer asked for markers.
        markers: bool,
        /// The peer's IRD (RFC 6581; 0 without the enhanced words).
        ird: u16,
        /// The peer's ORD.
        ord: u16,
        /// RTR types the peer offered, if it asked for peer-to-peer mode.
        rtr: Option<RtrSet>,
        /// The peer's ULP private data.
        private_data: Vec<u8>,
    },
    /// MPA done, the QP is in RTS.
    Established {
        /// The connection.
        conn: ConnId,
        /// Its QP.
        qp: QpNum,
        /// The negotiated parameters.
        negotiated: Negotiated,
        /// The peer's ULP private data.
        private_data: Vec<u8>,
    },
    /// The peer rejected our MPA Request.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// The peer's ULP private data.
        private_data: Vec<u8>,
    },
    /// An active open failed.
    ConnectFailed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: ConnectFailure,
    },
    /// The stream closed at an FPDU boundary (FIN exchanged); the QP's work was flushed.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Its QP, if one was bound.
        qp: Option<QpNum>,
    },
    /// The peer sent a TERMINATE; the QP is in ERROR.
    TerminateReceived {
        /// The connection.
        conn: ConnId,
        /// Its QP.
        qp: QpNum,
        /// The decoded (layer, etype, ecode).
        code: TermCode,
        /// Which header layout it arrived in (siw uses a nibble-swapped one).
        layout: TermLayout,
    },
    /// The QP entered ERROR for a local reason; its work was flushed.
    QpError {
        /// The connection.
        conn: ConnId,
        /// The QP.
        qp: QpNum,
        /// Why.
        reason: QpErrorReason,
    },
    /// The thread no longer touches the QP's rings: the control thread may unmap them.
    QpReleased {
        /// The QP.
        qp: QpNum,
        /// Its counters as they were when it was destroyed (none if it never ran); the
        /// thread has forgotten them.
        counters: Option<Box<QpCounters>>,
    },
}

/// Knobs of the engine that are not per connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// An FPDU that stays half-received this long ends the stream with a TERMINATE (siw has no
    /// such timer and hangs: siw-peer/README.md §10).
    pub rx_timeout: Duration,
    /// Commands queued per thread before `EngineHandle::send` reports the queue full.
    pub cmd_queue_depth: usize,
    /// A `Disconnect` whose graceful close (queued work drained, FIN exchanged) takes longer
    /// than this ends with a reset.
    pub close_timeout: Duration,
    /// How FPDU payload goes into frames ([`TxPayload`]).
    pub tx_payload: TxPayload,
}

/// How FPDU payload goes into transmitted frames (`[mpa] tx_payload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxPayload {
    /// Copy on devices that copy frames with the CPU anyway
    /// ([`crate::port::PortInfo::is_virtual`]: memif, af_xdp, af_packet), by reference on
    /// the others.
    #[default]
    Auto,
    /// Copied behind the headers, one buffer per frame.
    Copy,
    /// Attached by reference to the registered memory (the NIC reads it by DMA).
    ByRef,
}

impl TxPayload {
    /// Whether payload goes by reference on a port that is (or is not) `virtual_device`.
    pub fn by_ref(self, virtual_device: bool) -> bool {
        match self {
            TxPayload::Auto => !virtual_device,
            TxPayload::Copy => false,
            TxPayload::ByRef => true,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            rx_timeout: Duration::from_secs(5),
            cmd_queue_depth: 4096,
            close_timeout: Duration::from_secs(5),
            tx_payload: TxPayload::Auto,
        }
    }
}

/// A bounded command queue (one producer in practice: the control thread). The consumer's
/// empty check is one atomic load.
#[derive(Debug)]
pub struct CmdQueue {
    len: AtomicUsize,
    q: Mutex<VecDeque<EngineCmd>>,
    cap: usize,
}

impl CmdQueue {
    /// A queue of at most `cap` commands.
    pub fn new(cap: usize) -> Self {
        CmdQueue {
            len: AtomicUsize::new(0),
            q: Mutex::new(VecDeque::new()),
            cap: cap.max(1),
        }
    }

    /// Queue a command; gives it back when the queue is full.
    pub fn push(&self, c: EngineCmd) -> Result<(), Box<EngineCmd>> {
        let mut q = self.q.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= self.cap {
            return Err(Box::new(c));
        }
        q.push_back(c);
        self.len.store(q.len(), Ordering::Release);
        Ok(())
    }

    /// Move every queued command to `out` (nothing locked when the queue is empty).
    pub fn drain(&self, out: &mut Vec<EngineCmd>) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut q = self.q.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(q.drain(..));
        self.len.store(0, Ordering::Release);
    }
}

/// Why a command could not be queued.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No such dataplane thread.
    #[error("no dataplane thread {0}")]
    NoThread(usize),
    /// The thread's command queue is full (it is not keeping up, or stopped).
    #[error("command queue of dataplane thread {0} is full")]
    QueueFull(usize, Box<EngineCmd>),
}

/// The control thread's end: command queues of every thread, the event queue, the memory
/// table and the id generator.
#[derive(Debug)]
pub struct EngineHandle {
    /// Registered memory, shared with every thread.
    pub mem: Arc<MemTable>,
    /// Connection and listener ids.
    pub ids: Arc<IdGen>,
    cmds: Vec<Arc<CmdQueue>>,
    stats: Vec<Arc<SharedRdmaStats>>,
    // A Mutex so the handle is Sync: the control plane shares it (Arc) between the thread
    // serving client requests and the thread waiting for events (docs/rdma-seams.md).
    events: Mutex<Receiver<EngineEvent>>,
}

impl EngineHandle {
    /// Number of dataplane threads.
    pub fn threads(&self) -> usize {
        self.cmds.len()
    }

    /// Queue `cmd` for thread `thread`.
    pub fn send(&self, thread: usize, cmd: EngineCmd) -> Result<(), EngineError> {
        let q = self.cmds.get(thread).ok_or(EngineError::NoThread(thread))?;
        q.push(cmd).map_err(|c| EngineError::QueueFull(thread, c))
    }

    /// Queue the command `make(thread)` for every thread (`Listen`, `Unlisten`).
    pub fn broadcast(&self, make: impl Fn(usize) -> EngineCmd) -> Result<(), EngineError> {
        (0..self.cmds.len()).try_for_each(|t| self.send(t, make(t)))
    }

    /// Every QP's counters, over all threads.
    pub fn qp_stats(&self) -> std::collections::BTreeMap<QpNum, QpCounters> {
        let mut all = std::collections::BTreeMap::new();
        for s in &self.stats {
            all.extend(s.snapshot());
        }
        all
    }

    /// The next event, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Option<EngineEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recv_timeout(timeout)
            .ok()
    }

    /// The next event, if one is queued.
    pub fn try_recv(&self) -> Option<EngineEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .try_recv()
            .ok()
    }
}

/// One dataplane thread's end (part of its `LcoreSetup`).
#[derive(Debug, Clone)]
pub struct RdmaSetup {
    /// Thread index.
    pub thread: usize,
    /// Registered memory.
    pub mem: Arc<MemTable>,
    /// Id generator (passive opens take their `ConnId` from it).
    pub ids: Arc<IdGen>,
    /// This thread's commands.
    pub cmds: Arc<CmdQueue>,
    /// Events to the control thread.
    pub events: Sender<EngineEvent>,
    /// Engine knobs.
    pub cfg: EngineConfig,
    /// This thread's per-QP counters, read by the control thread.
    pub stats: Arc<SharedRdmaStats>,
}

/// Make the queues between the control thread and `threads` dataplane threads.
pub fn engine_channels(
    threads: usize,
    mem: Arc<MemTable>,
    cfg: EngineConfig,
) -> (EngineHandle, Vec<RdmaSetup>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let ids = Arc::new(IdGen::default());
    let cmds: Vec<Arc<CmdQueue>> = (0..threads)
        .map(|_| Arc::new(CmdQueue::new(cfg.cmd_queue_depth)))
        .collect();
    let stats: Vec<Arc<SharedRdmaStats>> = (0..threads).map(|_| Arc::default()).collect();
    let setups = cmds
        .iter()
        .zip(&stats)
        .enumerate()
        .map(|(thread, (q, st))| RdmaSetup {
            thread,
            mem: mem.clone(),
            ids: ids.clone(),
            cmds: q.clone(),
            events: tx.clone(),
            cfg: cfg.clone(),
            stats: st.clone(),
        })
        .collect();
    let handle = EngineHandle {
        mem,
        ids,
        cmds,
        stats,
        events: Mutex::new(rx),
    };
    (handle, setups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_queue_is_bounded_and_drains() {
        let mem = MemTable::new(4, 1);
        let cfg = EngineConfig {
            cmd_queue_depth: 2,
            ..Default::default()
        };
        let (h, setups) = engine_channels(2, mem, cfg);
        assert_eq!(h.threads(), 2);
        let l = h.ids.listener();
        h.broadcast(|_| EngineCmd::Listen {
            listener: l,
            port: 7174,
            policy: MpaPolicy::default(),
        })
        .unwrap();
        h.send(0, EngineCmd::Unlisten { listener: l }).unwrap();
        assert!(matches!(
            h.send(0, EngineCmd::Unlisten { listener: l }),
            Err(EngineError::QueueFull(0, _))
        ));
        assert!(matches!(
            h.send(5, EngineCmd::Unlisten { listener: l }),
            Err(EngineError::NoThread(5))
        ));
        let mut out = Vec::new();
        setups[0].cmds.drain(&mut out);
        assert_eq!(out.len(), 2);
        setups[0].cmds.drain(&mut out);
        assert_eq!(out.len(), 2);
        setups[1]
            .events
            .send(EngineEvent::QpReleased {
                qp: QpNum(3),
                counters: None,
            })
            .unwrap();
        assert!(matches!(
            h.recv_timeout(std::time::Duration::from_millis(10)),
            Some(EngineEvent::QpReleased { qp: QpNum(3), .. })
        ));
        assert!(h.try_recv().is_none());
    }

    #[test]
    fn policy_maps_to_startup_config() {
        let p = MpaPolicy {
            crc: CrcMode::Require,
            markers: true,
            revision: 1,
            rtr: RtrMode::Read,
            ird: 200,
            ord: 3,
            private_data_max: 100,
            timeout: Duration::from_millis(1500),
            first_fpdu_delay: Duration::from_millis(7),
        };
        let c = p.startup_config(Role::Initiator, b"hi");
        assert_eq!(c.first_fpdu_delay, Duration::from_millis(7));
        assert_eq!(c.crc, CrcPolicy::Require);
        assert!(c.markers_rx && c.p2p && c.rtr.read && !c.rtr.write);
        assert_eq!((c.revision, c.enhanced), (1, false));
        assert_eq!(c.max_peer_private_data, 104);
        assert!(!c.auto_accept);
        assert_eq!(c.private_data, b"hi");
        let r = MpaPolicy::default().startup_config(Role::Responder, b"");
        assert_eq!(r.crc, CrcPolicy::IfPeerAsks);
        assert!(r.p2p && r.rtr.write && r.rtr.read && r.rtr.send);
    }
}
