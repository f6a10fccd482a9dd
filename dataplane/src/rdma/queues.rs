//! A bound QP's work queues: where work requests come from and where completions go.
//!
//! Either in-process [`LocalQueues`] (the diagnostic service, tests) or a client's
//! shared-memory rings (`abi::ring`): the send and receive queues are consumed here, and
//! completions are produced into this thread's sub-ring of the QP's CQs, signalling the CQ's
//! eventfd when it was armed. Everything read from shared memory is untrusted: a WQE that does
//! not decode or a ring whose indices are impossible is an error the engine turns into
//! `QpError { CorruptRing }`, never a panic.
//!
//! QPs of this thread that share a CQ share its producer ([`CqMap`], keyed by CQ number), as
//! two producers on one sub-ring would overwrite each other's entries.

use std::collections::VecDeque;
use std::sync::Arc;

use abi::ring::{Consumer, CqProducer, PushError, RingError};
use abi::wqe::WqeError;
use abi::{Cqe, CqeOpcode, CqeStatus, RecvWqe, Wqe, WqeOpcode};
use iwarp::rdmap::WrOpcode;
use iwarp::rdmap::{
    Completion, CqOpcode, RecvRequest, Sge, WcStatus, WorkRequest, WrFlags, recv_flush, sq_flush,
};
use iwarp::stag::{MrHandle, Stag};

use super::api::{CqBinding, LocalQueues, QpQueues};
use super::ids::QpNum;
use super::memory::RingMem;

/// Why a queue could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// Ring indices impossible, or a ring outside its segment.
    Ring(RingError),
    /// A WQE that does not decode.
    Wqe(WqeError),
    /// A segment whose base is not 64-byte aligned.
    Misaligned,
}

impl From<RingError> for QueueError {
    fn from(e: RingError) -> Self {
        QueueError::Ring(e)
    }
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueError::Ring(e) => write!(f, "{e}"),
            QueueError::Wqe(e) => write!(f, "{e}"),
            QueueError::Misaligned => f.write_str("ring segment not 64-byte aligned"),
        }
    }
}

/// One CQ's producer on this thread.
#[derive(Debug)]
pub(crate) struct CqOut {
    prod: CqProducer<RingMem>,
    eventfd: Option<Arc<shm::EventFd>>,
    users: u32,
    /// Completion-channel signals sent.
    pub(crate) signals: u64,
}

/// This thread's CQ producers, by CQ number.
/// By CQ id (ours): FxHash, not SipHash, on the per-completion lookups.
pub(crate) type CqMap = rustc_hash::FxHashMap<u32, CqOut>;

fn attach_cq(b: &CqBinding, thread: usize, cqs: &mut CqMap) -> Result<(), QueueError> {
    if let Some(c) = cqs.get_mut(&b.cq) {
        c.users += 1;
        return Ok(());
    }
    let mem = RingMem::new(b.segment.clone()).ok_or(QueueError::Misaligned)?;
    let sub = u32::try_from(thread).unwrap_or(u32::MAX);
    let prod = CqProducer::attach(mem, &b.layout, sub)?;
    cqs.insert(
        b.cq,
        CqOut {
            prod,
            eventfd: b.eventfd.clone(),
            users: 1,
            signals: 0,
        },
    );
    Ok(())
}

fn detach_cq(cq: u32, cqs: &mut CqMap) {
    if let Some(c) = cqs.get_mut(&cq) {
        c.users -= 1;
        if c.users == 0 {
            cqs.remove(&cq);
        }
    }
}

/// The work queues of one bound QP.
#[derive(Debug)]
pub(crate) enum QueueIo {
    /// In-process.
    Local(LocalQueues),
    /// A client's rings.
    Rings {
        sq: Consumer<Wqe, RingMem>,
        rq: Consumer<RecvWqe, RingMem>,
        send_cq: u32,
        recv_cq: u32,
    },
}

impl QueueIo {
    /// Attach to the queues of `q` as dataplane thread `thread`.
    pub(crate) fn bind(q: &QpQueues, thread: usize, cqs: &mut CqMap) -> Result<Self, QueueError> {
        let r = match q {
            QpQueues::Local(l) => return Ok(QueueIo::Local(l.clone())),
            QpQueues::Rings(r) => r,
        };
        let mem = RingMem::new(r.segment.clone()).ok_or(QueueError::Misaligned)?;
        let sq = Consumer::attach(mem.clone(), r.sq.offset, r.sq.entries)?;
        let rq = Consumer::attach(mem, r.rq.offset, r.rq.entries)?;
        attach_cq(&r.send_cq, thread, cqs)?;
        if let Err(e) = attach_cq(&r.recv_cq, thread, cqs) {
            detach_cq(r.send_cq.cq, cqs);
            return Err(e);
        }
        Ok(QueueIo::Rings {
            sq,
            rq,
            send_cq: r.send_cq.cq,
            recv_cq: r.recv_cq.cq,
        })
    }

    /// Stop using the queues (the CQ producers go when their last QP goes).
    pub(crate) fn unbind(self, cqs: &mut CqMap) {
        if let QueueIo::Rings {
            send_cq, recv_cq, ..
        } = self
        {
            detach_cq(send_cq, cqs);
            detach_cq(recv_cq, cqs);
        }
    }

    /// Whether work requests are waiting.
    pub(crate) fn has_work(&mut self) -> Result<bool, QueueError> {
        match self {
            QueueIo::Local(l) => Ok(l.has_work()),
            QueueIo::Rings { sq, rq, .. } => Ok(sq.available()? > 0 || rq.available()? > 0),
        }
    }

    /// The next send-queue work request; a ring's WQE is decoded into a vector from `spare`
    /// (called only then: [`iwarp::rdmap::Qp::spare_sges`] reuses a completed WR's).
    pub(crate) fn next_send(
        &mut self,
        spare: impl FnOnce() -> Vec<Sge>,
    ) -> Result<Option<WorkRequest>, QueueError> {
        match self {
            QueueIo::Local(l) => Ok(l.take_send()),
            QueueIo::Rings { sq, .. } => match sq.pop()? {
                Some(w) => decode_wqe(&w, spare()).map(Some).map_err(QueueError::Wqe),
                None => Ok(None),
            },
        }
    }

    /// The next posted receive.
    pub(crate) fn next_recv(&mut self) -> Result<Option<RecvRequest>, QueueError> {
        match self {
            QueueIo::Local(l) => Ok(l.take_recv()),
            QueueIo::Rings { rq, .. } => match rq.pop()? {
                Some(r) => decode_recv(&r).map(Some).map_err(QueueError::Wqe),
                None => Ok(None),
            },
        }
    }

    /// Deliver a completion; `Ok(false)` when the CQ is full (keep it and retry).
    pub(crate) fn deliver(
        &mut self,
        qp: QpNum,
        c: &Completion,
        cqs: &mut CqMap,
    ) -> Result<bool, QueueError> {
        let (send_cq, recv_cq) = match self {
            QueueIo::Local(l) => {
                l.complete(*c);
                return Ok(true);
            }
            QueueIo::Rings {
                send_cq, recv_cq, ..
            } => (*send_cq, *recv_cq),
        };
        let recv = matches!(c.opcode, CqOpcode::Recv | CqOpcode::RecvImm);
        let Some(out) = cqs.get_mut(if recv { &recv_cq } else { &send_cq }) else {
            return Ok(true);
        };
        match out.prod.push(to_cqe(qp, c)) {
            Ok(armed) => {
                if armed && let Some(e) = &out.eventfd {
                    out.signals += 1;
                    if let Err(err) = e.signal(1) {
                        tracing::warn!(%qp, "completion channel signal failed: {err}");
                    }
                }
                Ok(true)
            }
            Err(PushError::Full) => Ok(false),
            Err(PushError::Ring(e)) => Err(QueueError::Ring(e)),
        }
    }
}

/// Work requests one [`FlushedQp::step`] takes at most (the rest wait for the next poll).
const FLUSH_BATCH: usize = 256;

/// The queues of a QP in ERROR that no connection runs any more (its connection ended, or a
/// flush came before it was established): every work request posted to it completes
/// flushed, as verbs has it for a QP in the ERROR state (`IBV_WC_WR_FLUSH_ERR`; siw and
/// rdma-core flush the same way, RFC 5040 §5.1), until the control thread destroys the QP.
#[derive(Debug)]
pub(crate) struct FlushedQp {
    io: QueueIo,
    /// Completions not delivered yet (the CQ was full), oldest first.
    pending: VecDeque<Completion>,
}

impl FlushedQp {
    /// Keep flushing `io`; `pending` are the completions its connection left undelivered.
    pub(crate) fn new(io: QueueIo, pending: VecDeque<Completion>) -> Self {
        FlushedQp { io, pending }
    }

    /// Deliver what is pending, then complete what was posted since, flushed, while the CQs
    /// have room. An error means the queues are corrupt: stop using them
    /// ([`FlushedQp::unbind`]).
    pub(crate) fn step(&mut self, qp: QpNum, cqs: &mut CqMap) -> Result<(), QueueError> {
        for _ in 0..FLUSH_BATCH {
            while let Some(c) = self.pending.front() {
                if !self.io.deliver(qp, c, cqs)? {
                    return Ok(());
                }
                self.pending.pop_front();
            }
            if let Some(wr) = self.io.next_send(Vec::new)? {
                self.pending
                    .push_back(sq_flush(wr.wr_id, wr.opcode, WcStatus::Flushed));
            } else if let Some(rr) = self.io.next_recv()? {
                self.pending.push_back(recv_flush(rr.wr_id));
            } else {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Stop using the queues (`DestroyQp`, or corrupt queues).
    pub(crate) fn unbind(self, cqs: &mut CqMap) {
        self.io.unbind(cqs);
    }
}

fn sges(s: &[abi::Sge]) -> Vec<Sge> {
    sges_into(s, Vec::with_capacity(s.len()))
}

/// `s` as SGEs in `into` (emptied first).
fn sges_into(s: &[abi::Sge], mut into: Vec<Sge>) -> Vec<Sge> {
    into.clear();
    into.extend(s.iter().map(|g| Sge {
        mr: MrHandle(g.lkey),
        offset: g.offset,
        len: g.len,
    }));
    into
}

/// An untrusted send WQE -> a work request, its SGEs in `sges` (emptied first).
pub(crate) fn decode_wqe(w: &Wqe, sges: Vec<Sge>) -> Result<WorkRequest, WqeError> {
    let op = w.validate()?;
    let opcode = match op {
        WqeOpcode::Send | WqeOpcode::SendSe => WrOpcode::Send,
        WqeOpcode::SendInvalidate => WrOpcode::SendInvalidate,
        WqeOpcode::Write => WrOpcode::Write,
        WqeOpcode::WriteImm => WrOpcode::WriteImm,
        WqeOpcode::Read => WrOpcode::Read,
        WqeOpcode::FetchAdd => WrOpcode::FetchAdd { add: w.compare_add },
        WqeOpcode::CmpSwap => WrOpcode::CmpSwap {
            compare: w.compare_add,
            swap: w.swap,
        },
    };
    let mut wr = WorkRequest::new(w.wr_id, opcode, sges_into(w.sges()?, sges));
    wr.remote_stag = Stag(w.rkey);
    wr.remote_to = w.remote_addr;
    wr.imm = w.compare_add;
    wr.invalidate = Stag(w.invalidate_stag);
    wr.flags = WrFlags {
        signaled: w.signaled(),
        fence: w.fence(),
        solicited: w.solicited(),
    };
    Ok(wr)
}

/// An untrusted receive WQE -> a receive request.
pub(crate) fn decode_recv(r: &RecvWqe) -> Result<RecvRequest, WqeError> {
    Ok(RecvRequest {
        wr_id: r.wr_id,
        sges: sges(r.sges()?),
    })
}

/// A completion -> the CQE the client reads.
pub(crate) fn to_cqe(qp: QpNum, c: &Completion) -> Cqe {
    let opcode = match c.opcode {
        CqOpcode::Send => CqeOpcode::Send,
        CqOpcode::Write => CqeOpcode::Write,
        CqOpcode::Read => CqeOpcode::Read,
        CqOpcode::FetchAdd => CqeOpcode::FetchAdd,
        CqOpcode::CmpSwap => CqeOpcode::CmpSwap,
        CqOpcode::Recv => CqeOpcode::Recv,
        CqOpcode::RecvImm => CqeOpcode::RecvImm,
    };
    let status = match c.status {
        WcStatus::Success => CqeStatus::Success,
        WcStatus::Flushed => CqeStatus::Flushed,
        WcStatus::LocalError => CqeStatus::LocalProtection,
    };
    let len = u32::try_from(c.byte_len).unwrap_or(u32::MAX);
    let mut q = Cqe::new(c.wr_id, qp.0, opcode, status, len);
    if let Some(v) = c.imm {
        q = q.with_imm(v);
    }
    if let Some(s) = c.invalidated {
        q = q.with_invalidated(s.0);
    }
    if c.solicited {
        q.flags |= abi::cqe::CQE_SOLICITED;
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::api::{RingBinding, RingLocation};
    use crate::rdma::memory::{HeapMemory, MappedMemory};
    use abi::ring::{CqConsumer, CqLayout, Producer, RingMemory, init_cq, init_ring, ring_bytes};

    fn binding(mem: &Arc<HeapMemory>) -> (RingBinding, CqLayout) {
        let sq = RingLocation {
            offset: 0,
            entries: 8,
        };
        let rq = RingLocation {
            offset: ring_bytes::<Wqe>(8),
            entries: 8,
        };
        let layout = CqLayout {
            offset: rq.offset + ring_bytes::<RecvWqe>(8),
            subs: 2,
            entries: 4,
        };
        let m: Arc<dyn MappedMemory> = mem.clone();
        let rm = RingMem::new(m.clone()).unwrap();
        init_ring::<Wqe, _>(&rm, sq.offset, sq.entries).unwrap();
        init_ring::<RecvWqe, _>(&rm, rq.offset, rq.entries).unwrap();
        init_cq(&rm, &layout).unwrap();
        let cq = CqBinding {
            cq: 7,
            segment: m.clone(),
            layout,
            eventfd: Some(Arc::new(shm::EventFd::new(true).unwrap())),
        };
        (
            RingBinding {
                segment: m,
                sq,
                rq,
                send_cq: cq.clone(),
                recv_cq: cq,
            },
            layout,
        )
    }

    #[test]
    fn rings_in_completions_out_and_corruption_detected() {
        let mem = HeapMemory::new(64 * 1024);
        let (b, layout) = binding(&mem);
        let efd = b.send_cq.eventfd.clone().unwrap();
        let mut cqs = CqMap::default();
        let q = QpQueues::Rings(b.clone());
        let mut io = QueueIo::bind(&q, 1, &mut cqs).unwrap();
        // A second QP on the same CQ shares the producer.
        let io2 = QueueIo::bind(&q, 1, &mut cqs).unwrap();
        assert_eq!(cqs.len(), 1);
        let rm = RingMem::new(mem.clone()).unwrap();
        let mut client_sq = Producer::<Wqe, _>::attach(rm.clone(), b.sq.offset, 8).unwrap();
        let sge = abi::Sge {
            lkey: 3,
            len: 100,
            offset: 5,
        };
        let mut w = Wqe::new(42, WqeOpcode::WriteImm, &[sge]);
        w.rkey = 0x1234;
        w.remote_addr = 0x9000;
        w.compare_add = 77;
        client_sq.push(w).unwrap();
        assert!(io.has_work().unwrap());
        let wr = io.next_send(Vec::new).unwrap().unwrap();
        assert_eq!(wr.opcode, WrOpcode::WriteImm);
        assert_eq!(
            (wr.imm, wr.remote_stag, wr.remote_to),
            (77, Stag(0x1234), 0x9000)
        );
        assert_eq!(wr.sges[0].mr, MrHandle(3));
        // An undecodable WQE is an error, not a panic.
        let mut bad = Wqe::new(43, WqeOpcode::Send, &[sge]);
        bad.opcode = 99;
        client_sq.push(bad).unwrap();
        assert_eq!(
            io.next_send(Vec::new),
            Err(QueueError::Wqe(WqeError::Opcode(99)))
        );
        // Completions land in sub-ring 1; the armed CQ signals its eventfd once.
        let mut client_cq = CqConsumer::attach(rm.clone(), &layout).unwrap();
        assert!(!client_cq.arm().unwrap());
        let c = Completion {
            wr_id: 42,
            opcode: CqOpcode::Recv,
            status: WcStatus::Success,
            byte_len: 100,
            imm: Some(5),
            invalidated: None,
            solicited: true,
        };
        for _ in 0..4 {
            assert!(io.deliver(QpNum(9), &c, &mut cqs).unwrap());
        }
        assert!(!io.deliver(QpNum(9), &c, &mut cqs).unwrap(), "CQ full");
        assert_eq!(efd.read().unwrap(), 1);
        let mut out = [Cqe::default(); 8];
        assert_eq!(client_cq.poll(&mut out).unwrap(), 4);
        assert_eq!(out[0].qp_num, 9);
        assert_eq!(out[0].imm(), Some(5));
        assert!(out[0].solicited());
        // Garbage in the SQ's head index: reported as corruption.
        rm.u32_at(b.sq.offset)
            .unwrap()
            .store(1000, std::sync::atomic::Ordering::Release);
        assert!(matches!(
            io.has_work(),
            Err(QueueError::Ring(RingError::Corrupt { .. }))
        ));
        io2.unbind(&mut cqs);
        assert_eq!(cqs.len(), 1);
        io.unbind(&mut cqs);
        assert!(cqs.is_empty());
    }

    #[test]
    fn a_flushed_qp_waits_for_room_in_the_cq_and_keeps_the_order() {
        let mem = HeapMemory::new(64 * 1024);
        let (b, layout) = binding(&mem);
        let mut cqs = CqMap::default();
        let io = QueueIo::bind(&QpQueues::Rings(b.clone()), 0, &mut cqs).unwrap();
        let rm = RingMem::new(mem.clone()).unwrap();
        let mut client_sq = Producer::<Wqe, _>::attach(rm.clone(), b.sq.offset, 8).unwrap();
        let mut client_rq = Producer::<RecvWqe, _>::attach(rm.clone(), b.rq.offset, 8).unwrap();
        let mut client_cq = CqConsumer::attach(rm, &layout).unwrap();
        // One completion left over by the connection, then six WRs posted: the CQ holds 4.
        let left = recv_flush(100);
        let mut f = FlushedQp::new(io, VecDeque::from([left]));
        for i in 0..3 {
            client_sq.push(Wqe::new(i, WqeOpcode::Send, &[])).unwrap();
            client_rq.push(RecvWqe::new(10 + i, &[])).unwrap();
        }
        f.step(QpNum(9), &mut cqs).unwrap();
        let mut out = [Cqe::default(); 8];
        assert_eq!(client_cq.poll(&mut out).unwrap(), 4, "the CQ was full");
        let mut got: Vec<(u64, Option<CqeStatus>)> =
            out[..4].iter().map(|c| (c.wr_id, c.status())).collect();
        f.step(QpNum(9), &mut cqs).unwrap();
        let n = client_cq.poll(&mut out).unwrap();
        got.extend(out[..n].iter().map(|c| (c.wr_id, c.status())));
        let fl = Some(CqeStatus::Flushed);
        // The leftover first, then the send queue, then the receive queue, nothing lost.
        assert_eq!(
            got,
            vec![
                (100, fl),
                (0, fl),
                (1, fl),
                (2, fl),
                (10, fl),
                (11, fl),
                (12, fl)
            ]
        );
        f.unbind(&mut cqs);
        assert!(cqs.is_empty());
    }

    #[test]
    fn local_queues_pass_through() {
        let l = LocalQueues::default();
        let mut cqs = CqMap::default();
        let mut io = QueueIo::bind(&QpQueues::Local(l.clone()), 0, &mut cqs).unwrap();
        assert!(!io.has_work().unwrap());
        l.post_recv(RecvRequest {
            wr_id: 1,
            sges: vec![],
        });
        assert!(io.has_work().unwrap());
        assert_eq!(io.next_recv().unwrap().unwrap().wr_id, 1);
        let c = Completion {
            wr_id: 1,
            opcode: CqOpcode::Send,
            status: WcStatus::Flushed,
            byte_len: 0,
            imm: None,
            invalidated: None,
            solicited: false,
        };
        assert!(io.deliver(QpNum(1), &c, &mut cqs).unwrap());
        assert_eq!(l.poll_cq().unwrap().status, WcStatus::Flushed);
        assert_eq!(to_cqe(QpNum(1), &c).status(), Some(CqeStatus::Flushed));
    }
}
