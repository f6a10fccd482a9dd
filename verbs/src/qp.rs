//! Reliable-connected queue pairs: work requests in, completions out.
//!
//! The send queue (`Wqe`) and the receive queue (`RecvWqe`) are rings in a shared segment
//! that the owning dataplane thread polls (docs/rdma-seams.md). Posting writes one entry and
//! publishes it with a release store: no system call, no allocation.

use crate::cq::Cq;
use crate::device::unexpected;
use crate::error::{Error, Result};
use crate::mem::Segment;
use crate::pd::Pd;
use abi::ctl::{QpAttrs, QpId, Request, Response};
use abi::ring::{Producer, ring_bytes};
use abi::wqe::{MAX_RECV_SGE, MAX_SEND_SGE, WQE_FENCE, WQE_SIGNALED, WQE_SOLICITED};
use abi::{RecvWqe, Sge, Wqe, WqeOpcode};
use std::sync::{Arc, Mutex};

/// A send work request. Build it with one of the constructors, adjust it with the flag
/// methods, post it with [`Qp::post_send`].
///
/// ```
/// use verbs::SendWr;
/// # let sge = abi::Sge { lkey: 1, len: 64, offset: 0 };
/// let wr = SendWr::write(7, &[sge], 0x1000, 0xabcd_0100).unsignaled();
/// assert_eq!(wr.wqe().remote_addr, 0x1000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    wqe: Wqe,
    /// SGEs the caller gave (may exceed what a WQE holds: refused at post time).
    sges: usize,
}

impl SendWr {
    fn new(wr_id: u64, op: WqeOpcode, sges: &[Sge]) -> SendWr {
        SendWr {
            wqe: Wqe::new(wr_id, op, sges),
            sges: sges.len(),
        }
    }

    /// Send (RFC 5040 §5.3): the peer's next posted receive gets the bytes.
    pub fn send(wr_id: u64, sges: &[Sge]) -> SendWr {
        SendWr::new(wr_id, WqeOpcode::Send, sges)
    }

    /// Send with Solicited Event.
    pub fn send_se(wr_id: u64, sges: &[Sge]) -> SendWr {
        SendWr::new(wr_id, WqeOpcode::SendSe, sges)
    }

    /// Send with Invalidate: the peer invalidates its STag `rkey` (RFC 5040 §6.4).
    pub fn send_invalidate(wr_id: u64, sges: &[Sge], rkey: u32) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::SendInvalidate, sges);
        w.wqe.invalidate_stag = rkey;
        w
    }

    /// RDMA Write of the SGEs to the peer's `rkey` at tagged offset `remote_addr`.
    pub fn write(wr_id: u64, sges: &[Sge], remote_addr: u64, rkey: u32) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::Write, sges);
        w.wqe.remote_addr = remote_addr;
        w.wqe.rkey = rkey;
        w
    }

    /// RDMA Write followed by Immediate Data `imm` (RFC 7306 §5): consumes a receive at
    /// the peer, whose completion carries `imm`.
    pub fn write_imm(wr_id: u64, sges: &[Sge], remote_addr: u64, rkey: u32, imm: u64) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::WriteImm, sges);
        w.wqe.remote_addr = remote_addr;
        w.wqe.rkey = rkey;
        w.wqe.compare_add = imm;
        w
    }

    /// RDMA Read of the peer's `rkey` at `remote_addr` into `sges` (RFC 5040 §5.2): exactly one
    /// SGE, the local sink (of length 0 for a zero-byte Read); others are refused at post time.
    pub fn read(wr_id: u64, sges: &[Sge], remote_addr: u64, rkey: u32) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::Read, sges);
        w.wqe.remote_addr = remote_addr;
        w.wqe.rkey = rkey;
        w
    }

    /// Atomic FetchAdd of `add` on the 8 bytes at `remote_addr` (RFC 7306 §4); the original
    /// value lands in `sink` (8 bytes; the target and the sink hold native-endian `u64`s).
    pub fn fetch_add(wr_id: u64, sink: Sge, remote_addr: u64, rkey: u32, add: u64) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::FetchAdd, &[sink]);
        w.wqe.remote_addr = remote_addr;
        w.wqe.rkey = rkey;
        w.wqe.compare_add = add;
        w
    }

    /// Atomic CompareSwap: if the 8 bytes at `remote_addr` equal `compare`, they become
    /// `swap`; the original value lands in `sink`.
    pub fn cmp_swap(
        wr_id: u64,
        sink: Sge,
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    ) -> SendWr {
        let mut w = SendWr::new(wr_id, WqeOpcode::CmpSwap, &[sink]);
        w.wqe.remote_addr = remote_addr;
        w.wqe.rkey = rkey;
        w.wqe.compare_add = compare;
        w.wqe.swap = swap;
        w
    }

    /// No completion on success (errors still complete).
    pub fn unsignaled(mut self) -> SendWr {
        self.wqe.flags &= !WQE_SIGNALED;
        self
    }

    /// A completion on success (the default).
    pub fn signaled(mut self) -> SendWr {
        self.wqe.flags |= WQE_SIGNALED;
        self
    }

    /// Wait for every earlier Read and atomic to complete first (RFC 5040 §6.1).
    pub fn fence(mut self) -> SendWr {
        self.wqe.flags |= WQE_FENCE;
        self
    }

    /// Set the Solicited Event flag (Send, Write with Immediate).
    pub fn solicited(mut self) -> SendWr {
        self.wqe.flags |= WQE_SOLICITED;
        self
    }

    /// The entry as it goes into the ring.
    pub fn wqe(&self) -> &Wqe {
        &self.wqe
    }

    /// The caller's id.
    pub fn wr_id(&self) -> u64 {
        self.wqe.wr_id
    }

    fn check(&self) -> Result<()> {
        if self.sges > MAX_SEND_SGE {
            return Err(Error::InvalidArgument(format!(
                "{} SGEs in a send WR: at most {MAX_SEND_SGE}",
                self.sges
            )));
        }
        let op = self
            .wqe
            .validate()
            .map_err(|e| Error::InvalidArgument(format!("send WR {}: {e}", self.wqe.wr_id)))?;
        // The engine (as siw) takes one sink SGE for a Read and an atomic: refuse others
        // here, at post time, rather than with an error completion later.
        let one_sge = matches!(
            op,
            WqeOpcode::Read | WqeOpcode::FetchAdd | WqeOpcode::CmpSwap
        );
        if one_sge && self.sges != 1 {
            return Err(Error::InvalidArgument(format!(
                "send WR {}: {op:?} takes exactly one SGE (the local sink), got {}; a \
                 zero-byte Read takes one SGE of length 0",
                self.wqe.wr_id, self.sges
            )));
        }
        Ok(())
    }
}

/// A receive work request: buffers for the next incoming Send (or Immediate Data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    wqe: RecvWqe,
    sges: usize,
}

impl RecvWr {
    /// Receive into the SGEs, in order.
    pub fn new(wr_id: u64, sges: &[Sge]) -> RecvWr {
        RecvWr {
            wqe: RecvWqe::new(wr_id, sges),
            sges: sges.len(),
        }
    }

    /// The entry as it goes into the ring.
    pub fn wqe(&self) -> &RecvWqe {
        &self.wqe
    }
}

type SqProducer = Producer<Wqe, Arc<shm::Segment>>;
type RqProducer = Producer<RecvWqe, Arc<shm::Segment>>;

#[derive(Debug)]
pub(crate) struct QpInner {
    pub(crate) id: QpId,
    qp_num: u32,
    sq: Mutex<SqProducer>,
    rq: Mutex<RqProducer>,
    sq_entries: u32,
    rq_entries: u32,
    pd: Pd,
    send_cq: Cq,
    recv_cq: Cq,
    // Dropped after the QP is destroyed (fields drop after Drop::drop).
    _seg: Segment,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        if let Err(e) = self.pd.dev().call(&Request::DestroyQp { qp: self.id }) {
            tracing::debug!(qp = %self.id, "destroy: {e}");
        }
    }
}

/// Builder of an RC queue pair ([`Pd::create_qp`]).
#[derive(Debug)]
pub struct QpBuilder<'a> {
    pd: &'a Pd,
    send_cq: &'a Cq,
    recv_cq: &'a Cq,
    sq_depth: u32,
    rq_depth: u32,
    sig_all: bool,
}

impl<'a> QpBuilder<'a> {
    pub(crate) fn new(pd: &'a Pd, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpBuilder<'a> {
        QpBuilder {
            pd,
            send_cq,
            recv_cq,
            sq_depth: 64,
            rq_depth: 64,
            sig_all: false,
        }
    }

    /// Send-queue entries (rounded up to a power of two; default 64).
    pub fn sq_depth(mut self, n: u32) -> Self {
        self.sq_depth = n;
        self
    }

    /// Receive-queue entries (rounded up to a power of two; default 64).
    pub fn rq_depth(mut self, n: u32) -> Self {
        self.rq_depth = n;
        self
    }

    /// Every send WR completes, whatever its signaled flag (`sq_sig_all`).
    pub fn sig_all(mut self, on: bool) -> Self {
        self.sig_all = on;
        self
    }

    fn depth(what: &str, n: u32, max: u32) -> Result<u32> {
        if n == 0 || n > max {
            return Err(Error::InvalidArgument(format!(
                "{what} depth {n}: allowed 1..={max} (the device's max_qp_wr)"
            )));
        }
        Ok(n.next_power_of_two())
    }

    /// Create the QP (state IDLE until a CM id connects or accepts with it).
    pub fn build(self) -> Result<Qp> {
        let dev = self.pd.dev();
        let max = dev.attrs().max_qp_wr.clamp(1, abi::ring::MAX_ENTRIES);
        let sq_entries = Self::depth("send queue", self.sq_depth, max)?;
        let rq_entries = Self::depth("receive queue", self.rq_depth, max)?;
        let sq_bytes = ring_bytes::<Wqe>(sq_entries);
        let rq_offset = sq_bytes.next_multiple_of(abi::ring::CACHE_LINE);
        let total = rq_offset + ring_bytes::<RecvWqe>(rq_entries);
        let seg = Segment::alloc(dev, total, shm::HugepagePolicy::Off)?;
        let mem = &seg.inner.shm;
        abi::ring::init_ring::<Wqe, _>(mem, 0, sq_entries)?;
        abi::ring::init_ring::<RecvWqe, _>(mem, rq_offset, rq_entries)?;
        let r = dev.call(&Request::CreateQp {
            pd: self.pd.id(),
            send_cq: self.send_cq.id(),
            recv_cq: self.recv_cq.id(),
            segment: seg.inner.id,
            sq_offset: 0,
            sq_entries,
            rq_offset: rq_offset as u64,
            rq_entries,
            sq_sig_all: self.sig_all,
        })?;
        let Response::Qp { qp, qp_num } = r else {
            return Err(unexpected("CreateQp", &r));
        };
        let sq = Producer::attach(mem.clone(), 0, sq_entries)?;
        let rq = Producer::attach(mem.clone(), rq_offset, rq_entries)?;
        Ok(Qp {
            inner: Arc::new(QpInner {
                id: qp,
                qp_num,
                sq: Mutex::new(sq),
                rq: Mutex::new(rq),
                sq_entries,
                rq_entries,
                pd: self.pd.clone(),
                send_cq: self.send_cq.clone(),
                recv_cq: self.recv_cq.clone(),
                _seg: seg,
            }),
        })
    }
}

/// A reliable-connected queue pair. Cheap to clone; destroyed (its connection ended with a
/// TERMINATE or a close) when the last handle goes.
#[derive(Debug, Clone)]
pub struct Qp {
    pub(crate) inner: Arc<QpInner>,
}

impl Qp {
    /// The daemon's handle.
    pub fn id(&self) -> QpId {
        self.inner.id
    }

    /// The QP number (reported in completions).
    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num
    }

    /// Send-queue entries.
    pub fn sq_depth(&self) -> u32 {
        self.inner.sq_entries
    }

    /// Receive-queue entries.
    pub fn rq_depth(&self) -> u32 {
        self.inner.rq_entries
    }

    /// The protection domain.
    pub fn pd(&self) -> &Pd {
        &self.inner.pd
    }

    /// The CQ of send completions.
    pub fn send_cq(&self) -> &Cq {
        &self.inner.send_cq
    }

    /// The CQ of receive completions.
    pub fn recv_cq(&self) -> &Cq {
        &self.inner.recv_cq
    }

    /// Post one send WR. [`Error::QueueFull`] when the send queue has no free entry.
    pub fn post_send(&self, wr: &SendWr) -> Result<()> {
        wr.check()?;
        let mut sq = self.inner.sq.lock().unwrap_or_else(|e| e.into_inner());
        Ok(sq.push(wr.wqe)?)
    }

    /// Post several send WRs in order; returns how many were posted before the queue filled
    /// (an invalid WR is an error, and nothing after it is posted).
    pub fn post_send_many(&self, wrs: &[SendWr]) -> Result<usize> {
        let mut sq = self.inner.sq.lock().unwrap_or_else(|e| e.into_inner());
        for (i, wr) in wrs.iter().enumerate() {
            wr.check()?;
            match sq.push(wr.wqe) {
                Ok(()) => {}
                Err(abi::ring::PushError::Full) => return Ok(i),
                Err(abi::ring::PushError::Ring(e)) => return Err(e.into()),
            }
        }
        Ok(wrs.len())
    }

    /// Post one receive WR. [`Error::QueueFull`] when the receive queue is full.
    pub fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        if wr.sges > MAX_RECV_SGE {
            return Err(Error::InvalidArgument(format!(
                "{} SGEs in a receive WR: at most {MAX_RECV_SGE}",
                wr.sges
            )));
        }
        let mut rq = self.inner.rq.lock().unwrap_or_else(|e| e.into_inner());
        rq.push(wr.wqe).map_err(|e| match e {
            abi::ring::PushError::Full => Error::QueueFull("receive"),
            abi::ring::PushError::Ring(r) => Error::Ring(r),
        })
    }

    /// Free send-queue entries now.
    pub fn sq_free(&self) -> Result<u32> {
        let mut sq = self.inner.sq.lock().unwrap_or_else(|e| e.into_inner());
        Ok(sq.free()?)
    }

    /// The QP's attributes (state, negotiated IRD/ORD, CRC, markers, addresses).
    pub fn query(&self) -> Result<QpAttrs> {
        match self
            .inner
            .pd
            .dev()
            .call(&Request::QueryQp { qp: self.id() })?
        {
            Response::QpAttrs { attrs } => Ok(attrs),
            r => Err(unexpected("QueryQp", &r)),
        }
    }

    /// Test only: break this QP's next outgoing FPDU (`abi::ctl::tx_fault`: BAD_CRC, TRUNCATE,
    /// FIN, RST). The daemon must run with `[control] allow_faults = true`.
    pub fn inject_fault(&self, fault: u8) -> Result<()> {
        match self.inner.pd.dev().call(&Request::InjectFault {
            qp: self.id(),
            fault,
        })? {
            Response::Done {} => Ok(()),
            r => Err(unexpected("InjectFault", &r)),
        }
    }

    /// Move the QP to ERROR: every outstanding WR completes as flushed.
    pub fn modify_to_error(&self) -> Result<()> {
        match self
            .inner
            .pd
            .dev()
            .call(&Request::ModifyQpError { qp: self.id() })?
        {
            Response::Done {} => Ok(()),
            r => Err(unexpected("ModifyQpError", &r)),
        }
    }
}
