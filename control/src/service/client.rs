//! One client's objects and counters.

use super::EventSink;
use abi::ctl::{CmId, CqId, PdId, QpId, SegmentId};
use abi::ring::CqLayout;
use dataplane::rdma::{ConnId, ListenerId, QpNum, RingLocation};
use shm::Segment;
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::Arc;

/// An attached segment.
#[derive(Debug)]
pub(crate) struct Seg {
    pub(crate) seg: Arc<Segment>,
}

/// A registered MR (keyed by lkey in `Client::mrs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mr {
    pub(crate) pd: PdId,
    pub(crate) segment: SegmentId,
}

/// A CQ.
#[derive(Debug)]
pub(crate) struct Cq {
    pub(crate) segment: SegmentId,
    pub(crate) seg: Arc<Segment>,
    pub(crate) layout: CqLayout,
    pub(crate) eventfd: Option<Arc<shm::EventFd>>,
}

/// A QP.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) pd: PdId,
    pub(crate) send_cq: CqId,
    pub(crate) recv_cq: CqId,
    pub(crate) segment: SegmentId,
    pub(crate) sq: RingLocation,
    pub(crate) rq: RingLocation,
    pub(crate) qp_num: QpNum,
    /// The CM id it is bound to (Connect/Accept).
    pub(crate) cm: Option<CmId>,
    /// The dataplane thread that has (or had) it: DestroyQp must go there.
    pub(crate) thread: Option<usize>,
    /// `abi::ctl::qp_state`.
    pub(crate) state: u8,
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) crc: bool,
    pub(crate) markers: bool,
    pub(crate) revision: u8,
    pub(crate) local: SocketAddrV4,
    pub(crate) remote: SocketAddrV4,
}

/// A QP handed back to the dataplane (`DestroyQp`) whose release is awaited; holds what the
/// thread may still touch, so the mappings outlive its last access.
#[derive(Debug)]
pub(crate) struct Releasing {
    pub(crate) _segments: Vec<Arc<Segment>>,
}

/// A CM id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CmState {
    /// Created, unused.
    Idle,
    /// Listening.
    Listening {
        listener: ListenerId,
        addr: SocketAddrV4,
    },
    /// A connect request waits for Accept/Reject.
    Requested {
        conn: ConnId,
        thread: usize,
        local: SocketAddrV4,
        remote: SocketAddrV4,
    },
    /// Active open or accept in progress, or established, or closing.
    Conn {
        conn: ConnId,
        thread: usize,
        qp: QpId,
        established: bool,
        local: SocketAddrV4,
        remote: SocketAddrV4,
    },
    /// Over (rejected, failed, disconnected).
    Closed,
}

/// Per-client counters (the stats file's `[client.N]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Requests refused.
    pub errors: u64,
    /// Connections established.
    pub established: u64,
    /// Connect requests received on its listeners.
    pub connect_requests: u64,
    /// Connections rejected (by it or by the peer).
    pub rejected: u64,
    /// Active opens that failed.
    pub connect_failed: u64,
    /// Connections closed.
    pub disconnected: u64,
    /// TERMINATEs received from peers.
    pub terminates_received: u64,
    /// TERMINATEs we sent (the QP detected a protocol error).
    pub terminates_sent: u64,
    /// QPs that went to ERROR for a local reason.
    pub qp_errors: u64,
}

/// The dataplane's per-QP counters summed over a client's QPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpTotals {
    /// FPDUs received completely.
    pub fpdus_rx: u64,
    /// Payload bytes placed into its memory.
    pub bytes_placed: u64,
    /// FPDUs sent.
    pub fpdus_tx: u64,
    /// FPDU bytes sent.
    pub bytes_tx: u64,
    /// FPDUs refused for a bad CRC.
    pub crc_errors: u64,
    /// TERMINATEs its QPs sent.
    pub terminates_tx: u64,
    /// TERMINATEs its QPs received.
    pub terminates_rx: u64,
    /// Completions with status success.
    pub cqe_success: u64,
    /// Completions flushed.
    pub cqe_flushed: u64,
    /// Completions with a local error.
    pub cqe_local_error: u64,
}

impl QpTotals {
    pub(crate) fn add(&mut self, c: &dataplane::rdma::stats::QpCounters) {
        self.fpdus_rx += c.fpdus_rx;
        self.bytes_placed += c.bytes_placed;
        self.fpdus_tx += c.fpdus_tx;
        self.bytes_tx += c.bytes_tx;
        self.crc_errors += c.crc_errors;
        self.terminates_tx += c.terminates_tx.values().sum::<u64>();
        self.terminates_rx += c.terminates_rx.values().sum::<u64>();
        self.cqe_success += c.cqe_success;
        self.cqe_flushed += c.cqe_flushed;
        self.cqe_local_error += c.cqe_local_error;
    }

    /// Adds another sum (a freed client's) to this one.
    pub(crate) fn merge(&mut self, o: &QpTotals) {
        self.fpdus_rx += o.fpdus_rx;
        self.bytes_placed += o.bytes_placed;
        self.fpdus_tx += o.fpdus_tx;
        self.bytes_tx += o.bytes_tx;
        self.crc_errors += o.crc_errors;
        self.terminates_tx += o.terminates_tx;
        self.terminates_rx += o.terminates_rx;
        self.cqe_success += o.cqe_success;
        self.cqe_flushed += o.cqe_flushed;
        self.cqe_local_error += o.cqe_local_error;
    }

    /// The stats file's keys and values.
    pub(crate) fn fields(&self) -> [(&'static str, u64); 10] {
        [
            ("fpdus_rx", self.fpdus_rx),
            ("bytes_placed", self.bytes_placed),
            ("fpdus_tx", self.fpdus_tx),
            ("bytes_tx", self.bytes_tx),
            ("crc_errors", self.crc_errors),
            ("qp_terminates_tx", self.terminates_tx),
            ("qp_terminates_rx", self.terminates_rx),
            ("cqe_success", self.cqe_success),
            ("cqe_flushed", self.cqe_flushed),
            ("cqe_local_error", self.cqe_local_error),
        ]
    }
}

/// A connected client.
pub(crate) struct Client {
    pub(crate) hello: bool,
    pub(crate) pid: u32,
    pub(crate) peer_pid: Option<u32>,
    pub(crate) name: String,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) segments: HashMap<SegmentId, Seg>,
    pub(crate) pds: HashMap<PdId, ()>,
    pub(crate) mrs: HashMap<u32, Mr>,
    pub(crate) cqs: HashMap<CqId, Cq>,
    pub(crate) qps: HashMap<QpId, Qp>,
    pub(crate) cms: HashMap<CmId, CmState>,
    pub(crate) releasing: HashMap<QpNum, Releasing>,
    pub(crate) counters: ClientCounters,
    /// Completions of CQs already destroyed.
    pub(crate) completions_retired: u64,
    /// Dataplane counters of QPs already destroyed.
    pub(crate) qp_retired: QpTotals,
}

/// What a client holds (for stats and logs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Attached segments.
    pub segments: usize,
    /// Protection domains.
    pub pds: usize,
    /// Memory regions.
    pub mrs: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Queue pairs.
    pub qps: usize,
    /// CM ids.
    pub cm_ids: usize,
    /// QPs destroyed but not yet released by the dataplane.
    pub releasing_qps: usize,
}

impl Client {
    pub(crate) fn new(sink: Arc<dyn EventSink>) -> Client {
        Client {
            hello: false,
            pid: 0,
            peer_pid: None,
            name: String::new(),
            sink,
            segments: HashMap::new(),
            pds: HashMap::new(),
            mrs: HashMap::new(),
            cqs: HashMap::new(),
            qps: HashMap::new(),
            cms: HashMap::new(),
            releasing: HashMap::new(),
            counters: ClientCounters::default(),
            completions_retired: 0,
            qp_retired: QpTotals::default(),
        }
    }

    pub(crate) fn held(&self) -> Held {
        Held {
            segments: self.segments.len(),
            pds: self.pds.len(),
            mrs: self.mrs.len(),
            cqs: self.cqs.len(),
            qps: self.qps.len(),
            cm_ids: self.cms.len(),
            releasing_qps: self.releasing.len(),
        }
    }

    /// Completions pushed into its live CQs: the sum of every sub-ring's head (the dataplane
    /// is the only writer of a head; a client that scribbles on it only falsifies its own
    /// count).
    pub(crate) fn live_completions(&self) -> u64 {
        self.cqs.values().map(cq_completions).sum()
    }
}

pub(crate) fn cq_completions(cq: &Cq) -> u64 {
    use abi::ring::RingMemory;
    (0..cq.layout.subs)
        .filter_map(|i| cq.seg.u32_at(cq.layout.sub_offset(i)))
        .map(|h| u64::from(h.load(std::sync::atomic::Ordering::Relaxed)))
        .sum()
}

/// A client that left, kept until the dataplane released its QPs.
#[derive(Debug)]
pub(crate) struct Departed {
    pub(crate) pid: u32,
    pub(crate) name: String,
    pub(crate) releasing: HashMap<QpNum, Releasing>,
    pub(crate) counters: ClientCounters,
    pub(crate) completions: u64,
    pub(crate) qp_totals: QpTotals,
}

impl Departed {
    pub(crate) fn from_client(c: Client) -> Departed {
        Departed {
            pid: c.pid,
            name: c.name,
            releasing: c.releasing,
            counters: c.counters,
            completions: c.completions_retired,
            qp_totals: c.qp_retired,
        }
    }
}
