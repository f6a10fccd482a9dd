//! Segments, PDs, MRs, CQs and QPs of a client.

use super::client::{Client, Cq, Mr, Qp, Releasing, Seg, cq_completions};
use super::{Fail, Service, fail};
use abi::ctl::{
    CqId, ErrorCode, PdId, QpAttrs, QpId, Request, Response, SegmentId, access, qp_state,
};
use abi::ring::{Consumer, CqConsumer, CqLayout, MAX_CQ_SUBS, MAX_ENTRIES};
use abi::{RecvWqe, Wqe};
use dataplane::rdma::{
    ClientId, CqBinding, EngineCmd, MrRequest, QpBinding, QpQueues, RingBinding, RingLocation,
    TxFault,
};
use iwarp::stag::{Access, MrHandle, PdId as IwPdId};
use shm::{EventFd, Segment};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::sync::Arc;

const UNSPECIFIED: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);

fn offset(v: u64, field: &str) -> Result<usize, Fail> {
    usize::try_from(v).or_else(|_| fail(ErrorCode::OutOfRange, format!("{field} {v} is too large")))
}

fn ring_size(n: u32, field: &str) -> Result<u32, Fail> {
    if n == 0 || n > MAX_ENTRIES || !n.is_power_of_two() {
        return fail(
            ErrorCode::InvalidArgument,
            format!("{field} {n} is not allowed: a power of two in 1..={MAX_ENTRIES}"),
        );
    }
    Ok(n)
}

fn limit(have: usize, max: u32, what: &str) -> Result<(), Fail> {
    if have >= max as usize {
        return fail(
            ErrorCode::NoResources,
            format!("{what}: the limit of {max} per client is reached"),
        );
    }
    Ok(())
}

impl Client {
    pub(crate) fn segment(&self, id: SegmentId) -> Result<&Arc<Segment>, Fail> {
        match self.segments.get(&id) {
            Some(s) => Ok(&s.seg),
            None => fail(
                ErrorCode::UnknownHandle,
                format!("segment {} is not yours or unknown", id.0),
            ),
        }
    }
    pub(crate) fn pd(&self, id: PdId) -> Result<(), Fail> {
        match self.pds.get(&id) {
            Some(()) => Ok(()),
            None => fail(
                ErrorCode::UnknownHandle,
                format!("pd {} is not yours or unknown", id.0),
            ),
        }
    }
    pub(crate) fn cq(&self, id: CqId) -> Result<&Cq, Fail> {
        match self.cqs.get(&id) {
            Some(c) => Ok(c),
            None => fail(
                ErrorCode::UnknownHandle,
                format!("cq {} is not yours or unknown", id.0),
            ),
        }
    }
    pub(crate) fn qp(&self, id: QpId) -> Result<&Qp, Fail> {
        match self.qps.get(&id) {
            Some(q) => Ok(q),
            None => fail(
                ErrorCode::UnknownHandle,
                format!("qp {} is not yours or unknown", id.0),
            ),
        }
    }
}

impl Service {
    pub(crate) fn attach_segment(
        &mut self,
        client: ClientId,
        len: u64,
        fd: Option<OwnedFd>,
    ) -> Result<Response, Fail> {
        let max = self.cfg.limits.segments;
        let c = self.client(client)?;
        limit(c.segments.len(), max, "segments")?;
        let Some(fd) = fd else {
            return fail(
                ErrorCode::MissingFd,
                "AttachSegment needs the segment's memfd (SCM_RIGHTS)",
            );
        };
        let seg = Segment::from_fd(fd, len).or_else(|e| fail(ErrorCode::BadFd, e.to_string()))?;
        let backing = seg.backing();
        let id = SegmentId(self.handle_id());
        let c = self.client(client)?;
        c.segments.insert(id, Seg { seg: Arc::new(seg) });
        tracing::debug!(
            client = client.0,
            segment = id.0,
            len,
            ?backing,
            "segment attached"
        );
        Ok(Response::Segment { segment: id })
    }

    pub(crate) fn detach_segment(
        &mut self,
        client: ClientId,
        id: SegmentId,
    ) -> Result<Response, Fail> {
        let c = self.client(client)?;
        c.segment(id)?;
        let mrs = c.mrs.values().filter(|m| m.segment == id).count();
        let cqs = c.cqs.values().filter(|q| q.segment == id).count();
        let qps = c.qps.values().filter(|q| q.segment == id).count();
        if mrs + cqs + qps > 0 {
            return fail(
                ErrorCode::Busy,
                format!(
                    "segment {} is used by {mrs} MRs, {cqs} CQs, {qps} QPs",
                    id.0
                ),
            );
        }
        c.segments.remove(&id);
        Ok(Response::Done {})
    }

    pub(crate) fn alloc_pd(&mut self, client: ClientId) -> Result<Response, Fail> {
        let max = self.cfg.limits.pds;
        limit(self.client(client)?.pds.len(), max, "protection domains")?;
        let pd = PdId(self.handle_id());
        self.client(client)?.pds.insert(pd, ());
        Ok(Response::Pd { pd })
    }

    pub(crate) fn dealloc_pd(&mut self, client: ClientId, pd: PdId) -> Result<Response, Fail> {
        let c = self.client(client)?;
        c.pd(pd)?;
        let mrs = c.mrs.values().filter(|m| m.pd == pd).count();
        let qps = c.qps.values().filter(|q| q.pd == pd).count();
        if mrs + qps > 0 {
            return fail(
                ErrorCode::Busy,
                format!("pd {} is used by {mrs} MRs and {qps} QPs", pd.0),
            );
        }
        c.pds.remove(&pd);
        Ok(Response::Done {})
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reg_mr(
        &mut self,
        client: ClientId,
        pd: PdId,
        segment: SegmentId,
        off: u64,
        len: u64,
        iova: u64,
        bits: u32,
    ) -> Result<Response, Fail> {
        let max = self.cfg.limits.mrs;
        let c = self.client(client)?;
        limit(c.mrs.len(), max, "memory regions")?;
        c.pd(pd)?;
        let seg = c.segment(segment)?.clone();
        if bits & !access::ALL != 0 {
            return fail(
                ErrorCode::InvalidArgument,
                format!(
                    "access {bits:#x} has undefined bits (allowed {:#x})",
                    access::ALL
                ),
            );
        }
        // Verbs rule (IBV_ACCESS_*): remote write and remote atomic need local write.
        if bits & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0
            && bits & access::LOCAL_WRITE == 0
        {
            return fail(
                ErrorCode::InvalidArgument,
                "access: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE",
            );
        }
        if !seg.contains(off, len) {
            return fail(
                ErrorCode::OutOfRange,
                format!(
                    "MR [{off}, +{len}) lies outside segment {} ({} bytes)",
                    segment.0,
                    seg.len()
                ),
            );
        }
        let req = MrRequest {
            owner: client,
            pd: IwPdId(pd.0),
            mem: seg,
            offset: offset(off, "offset")?,
            len: offset(len, "len")?,
            base_to: iova,
            access: Access((bits & 0x1f) as u8 | Access::LOCAL_READ.0),
            remote_invalidate: bits & access::REMOTE_INVALIDATE != 0,
        };
        let keys = self.engine.mem.register(req).or_else(|e| {
            let code = match e {
                dataplane::rdma::MemError::Full => ErrorCode::NoResources,
                dataplane::rdma::MemError::ToWrap => ErrorCode::InvalidArgument,
                _ => ErrorCode::OutOfRange,
            };
            fail(code, format!("RegMr: {e}"))
        })?;
        let mr = Mr { pd, segment };
        self.client(client)?.mrs.insert(keys.lkey.0, mr);
        Ok(Response::Mr {
            lkey: keys.lkey.0,
            rkey: keys.rkey.0,
        })
    }

    pub(crate) fn dereg_mr(&mut self, client: ClientId, lkey: u32) -> Result<Response, Fail> {
        let c = self.client(client)?;
        if !c.mrs.contains_key(&lkey) {
            return fail(
                ErrorCode::UnknownHandle,
                format!("lkey {lkey:#x} is not yours or unknown"),
            );
        }
        c.mrs.remove(&lkey);
        self.engine
            .mem
            .deregister(client, MrHandle(lkey))
            .or_else(|e| fail(ErrorCode::Internal, format!("DeregMr: {e}")))?;
        Ok(Response::Done {})
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_cq(
        &mut self,
        client: ClientId,
        segment: SegmentId,
        off: u64,
        entries: u32,
        subs: u32,
        channel: bool,
        fd: Option<OwnedFd>,
    ) -> Result<Response, Fail> {
        let max = self.cfg.limits.cqs;
        let threads = self.engine.threads() as u32;
        let c = self.client(client)?;
        limit(c.cqs.len(), max, "completion queues")?;
        let seg = c.segment(segment)?.clone();
        ring_size(entries, "entries")?;
        if subs != threads || subs > MAX_CQ_SUBS {
            return fail(
                ErrorCode::InvalidArgument,
                format!("subs {subs}: a CQ needs one sub-ring per dataplane thread ({threads})"),
            );
        }
        let layout = CqLayout {
            offset: offset(off, "offset")?,
            subs,
            entries,
        };
        if let Err(e) = CqConsumer::attach(&*seg, &layout) {
            return fail(ErrorCode::OutOfRange, format!("CQ at offset {off}: {e}"));
        }
        let eventfd = match (channel, fd) {
            (false, _) => None,
            (true, None) => {
                return fail(
                    ErrorCode::MissingFd,
                    "CreateCq with channel needs an eventfd",
                );
            }
            (true, Some(fd)) => {
                let e = EventFd::from_fd(fd).or_else(|e| fail(ErrorCode::BadFd, e.to_string()))?;
                Some(Arc::new(e))
            }
        };
        let cq = CqId(self.handle_id());
        self.client(client)?.cqs.insert(
            cq,
            Cq {
                segment,
                seg,
                layout,
                eventfd,
            },
        );
        Ok(Response::Cq { cq })
    }

    pub(crate) fn destroy_cq(&mut self, client: ClientId, cq: CqId) -> Result<Response, Fail> {
        let c = self.client(client)?;
        c.cq(cq)?;
        let qps = c
            .qps
            .values()
            .filter(|q| q.send_cq == cq || q.recv_cq == cq)
            .count();
        if qps > 0 {
            return fail(ErrorCode::Busy, format!("cq {} is used by {qps} QPs", cq.0));
        }
        if let Some(q) = c.cqs.remove(&cq) {
            c.completions_retired += cq_completions(&q);
        }
        Ok(Response::Done {})
    }

    pub(crate) fn create_qp(&mut self, client: ClientId, req: Request) -> Result<Response, Fail> {
        let Request::CreateQp {
            pd,
            send_cq,
            recv_cq,
            segment,
            sq_offset,
            sq_entries,
            rq_offset,
            rq_entries,
            sq_sig_all: _,
        } = req
        else {
            return fail(ErrorCode::Internal, "not CreateQp");
        };
        let max = self.cfg.limits.qps;
        let c = self.client(client)?;
        limit(c.qps.len(), max, "queue pairs")?;
        c.pd(pd)?;
        c.cq(send_cq)?;
        c.cq(recv_cq)?;
        let seg = c.segment(segment)?.clone();
        let sq = RingLocation {
            offset: offset(sq_offset, "sq_offset")?,
            entries: ring_size(sq_entries, "sq_entries")?,
        };
        let rq = RingLocation {
            offset: offset(rq_offset, "rq_offset")?,
            entries: ring_size(rq_entries, "rq_entries")?,
        };
        if let Err(e) = Consumer::<Wqe, _>::attach(&*seg, sq.offset, sq.entries) {
            return fail(
                ErrorCode::OutOfRange,
                format!("SQ at offset {sq_offset}: {e}"),
            );
        }
        if let Err(e) = Consumer::<RecvWqe, _>::attach(&*seg, rq.offset, rq.entries) {
            return fail(
                ErrorCode::OutOfRange,
                format!("RQ at offset {rq_offset}: {e}"),
            );
        }
        let Some(qp_num) = self.qpnums.alloc() else {
            return fail(ErrorCode::NoResources, "no QP number left");
        };
        let qp = QpId(self.handle_id());
        self.qp_owner.insert(qp_num, (client, qp));
        self.client(client)?.qps.insert(
            qp,
            Qp {
                pd,
                send_cq,
                recv_cq,
                segment,
                sq,
                rq,
                qp_num,
                cm: None,
                thread: None,
                state: qp_state::IDLE,
                ird: 0,
                ord: 0,
                crc: false,
                markers: false,
                revision: 0,
                local: UNSPECIFIED,
                remote: UNSPECIFIED,
            },
        );
        Ok(Response::Qp {
            qp,
            qp_num: qp_num.0,
        })
    }

    pub(crate) fn query_qp(&mut self, client: ClientId, qp: QpId) -> Result<Response, Fail> {
        let c = self.client(client)?;
        let q = c.qp(qp)?;
        Ok(Response::QpAttrs {
            attrs: QpAttrs {
                qp_num: q.qp_num.0,
                state: q.state,
                cm_id: q.cm.unwrap_or_default(),
                sq_entries: q.sq.entries,
                rq_entries: q.rq.entries,
                ird: q.ird,
                ord: q.ord,
                crc: q.crc,
                markers: q.markers,
                revision: q.revision,
                local: q.local,
                remote: q.remote,
            },
        })
    }

    /// Move a QP to ERROR: from then on every work request posted to it completes flushed
    /// (verbs' `IBV_WC_WR_FLUSH_ERR`). A QP a dataplane thread has is flushed there
    /// (`FlushQp`); one no thread has (never connected) is handed to a thread that only
    /// flushes it (`FlushUnbound`), and can no longer be connected.
    pub(crate) fn modify_qp_error(&mut self, client: ClientId, qp: QpId) -> Result<Response, Fail> {
        let c = self.client(client)?;
        let q = c.qp(qp)?;
        if q.state != qp_state::ERROR && q.thread.is_none() {
            let binding = self.binding(client, qp)?;
            let thread = self.thread_for_connect();
            self.engine
                .send(thread, EngineCmd::FlushUnbound { qp: binding })
                .or_else(|e| fail(ErrorCode::NoResources, format!("ModifyQpError: {e}")))?;
            if let Some(q) = self.client(client)?.qps.get_mut(&qp) {
                q.thread = Some(thread);
                q.state = qp_state::ERROR;
            }
            return Ok(Response::Done {});
        }
        let c = self.client(client)?;
        let Some(q) = c.qps.get_mut(&qp) else {
            return fail(
                ErrorCode::UnknownHandle,
                format!("qp {} is not yours or unknown", qp.0),
            );
        };
        // A QP a dataplane thread runs: it flushes every outstanding WR, sends a TERMINATE
        // and closes; the QpError event follows.
        let flush = (q.state != qp_state::ERROR)
            .then_some(q.thread)
            .flatten()
            .map(|t| (t, q.qp_num));
        q.state = qp_state::ERROR;
        if let Some((thread, num)) = flush {
            self.engine
                .send(thread, EngineCmd::FlushQp { qp: num })
                .or_else(|e| fail(ErrorCode::NoResources, format!("ModifyQpError: {e}")))?;
        }
        Ok(Response::Done {})
    }

    /// Test only: arm a transmit fault on a connected QP (docs/rdma-seams.md).
    pub(crate) fn inject_fault(
        &mut self,
        client: ClientId,
        qp: QpId,
        fault: u8,
    ) -> Result<Response, Fail> {
        if !self.cfg.allow_faults {
            return fail(
                ErrorCode::Unsupported,
                "InjectFault is test only: set [control] allow_faults = true".to_string(),
            );
        }
        let f = match fault {
            abi::ctl::tx_fault::BAD_CRC => TxFault::BadCrc,
            abi::ctl::tx_fault::TRUNCATE => TxFault::Truncate,
            abi::ctl::tx_fault::FIN => TxFault::FinInside,
            abi::ctl::tx_fault::RST => TxFault::RstInside,
            v => {
                return fail(
                    ErrorCode::InvalidArgument,
                    format!("fault {v}: allowed 1 (badcrc), 2 (truncate), 3 (fin), 4 (rst)"),
                );
            }
        };
        let c = self.client(client)?;
        c.qp(qp)?;
        let Some(q) = c.qps.get(&qp) else {
            return fail(
                ErrorCode::UnknownHandle,
                format!("qp {} is not yours or unknown", qp.0),
            );
        };
        let (Some(thread), num) = (q.thread, q.qp_num) else {
            return fail(
                ErrorCode::InvalidState,
                format!("qp {} is not connected", qp.0),
            );
        };
        self.engine
            .send(thread, EngineCmd::InjectFault { qp: num, fault: f })
            .or_else(|e| fail(ErrorCode::NoResources, format!("InjectFault: {e}")))?;
        tracing::warn!(
            client = client.0,
            qp = qp.0,
            fault = f.name(),
            "test fault armed"
        );
        Ok(Response::Done {})
    }

    pub(crate) fn destroy_qp(&mut self, client: ClientId, qp: QpId) -> Result<Response, Fail> {
        let mut c = self
            .clients
            .remove(&client)
            .ok_or((ErrorCode::Internal, "client gone".to_string()))?;
        let r = c.qp(qp).map(|_| ());
        if r.is_ok() {
            // Its CM id no longer has a QP: the connection ends with it.
            if let Some(cm) = c.qps.get(&qp).and_then(|q| q.cm) {
                c.cms.insert(cm, super::client::CmState::Closed);
            }
            self.release_qp(client, &mut c, qp);
        }
        self.clients.insert(client, c);
        r.map(|()| Response::Done {})
    }

    /// Remove a QP from its client; if a dataplane thread has it, ask for it back and keep
    /// what the thread may touch until `QpReleased`.
    pub(crate) fn release_qp(&mut self, client: ClientId, c: &mut Client, qp: QpId) {
        let Some(q) = c.qps.remove(&qp) else {
            return;
        };
        if let Some(cm) = q.cm
            && let Some(&super::client::CmState::Conn { conn, .. }) = c.cms.get(&cm)
        {
            self.let_go(conn);
        }
        match q.thread {
            Some(t) => {
                // The QP's counters come back with `QpReleased` (`qp_released`), final.
                let mut keep = Vec::new();
                if let Some(s) = c.segments.get(&q.segment) {
                    keep.push(s.seg.clone());
                }
                for cq in [q.send_cq, q.recv_cq] {
                    if let Some(cq) = c.cqs.get(&cq) {
                        keep.push(cq.seg.clone());
                    }
                }
                c.releasing.insert(q.qp_num, Releasing { _segments: keep });
                if let Err(e) = self.engine.send(t, EngineCmd::DestroyQp { qp: q.qp_num }) {
                    tracing::error!(client = client.0, qp = %q.qp_num, "DestroyQp not queued: {e}");
                }
            }
            None => {
                self.qp_owner.remove(&q.qp_num);
                self.qpnums.free(q.qp_num);
            }
        }
    }

    /// The dataplane no longer touches `qp`'s rings.
    pub(crate) fn qp_released(
        &mut self,
        qp: dataplane::rdma::QpNum,
        counters: Option<&dataplane::rdma::stats::QpCounters>,
    ) {
        let Some((client, _)) = self.qp_owner.remove(&qp) else {
            self.totals.orphan_events += 1;
            return;
        };
        self.qpnums.free(qp);
        if let Some(c) = self.clients.get_mut(&client) {
            c.releasing.remove(&qp);
            if let Some(qc) = counters {
                c.qp_retired.add(qc);
            }
            return;
        }
        let done = match self.departed.get_mut(&client) {
            Some(d) => {
                d.releasing.remove(&qp);
                if let Some(qc) = counters {
                    d.qp_totals.add(qc);
                }
                d.releasing.is_empty()
            }
            None => false,
        };
        if done && let Some(d) = self.departed.remove(&client) {
            self.totals.clients_freed += 1;
            self.departed_done(client, d);
        }
    }

    /// The binding a dataplane thread gets for `qp` (it produces into its own sub-ring of
    /// each CQ).
    pub(crate) fn binding(&self, client: ClientId, qp: QpId) -> Result<QpBinding, Fail> {
        let c = self
            .clients
            .get(&client)
            .ok_or((ErrorCode::Internal, "client gone".to_string()))?;
        let q = c.qp(qp)?;
        let cq_binding = |id: CqId| -> Result<CqBinding, Fail> {
            let cq = c.cq(id)?;
            // The thread produces into its own sub-ring `thread` of the layout.
            Ok(CqBinding {
                cq: id.0,
                segment: cq.seg.clone(),
                layout: cq.layout,
                eventfd: cq.eventfd.clone(),
            })
        };
        Ok(QpBinding {
            qp: q.qp_num,
            owner: client,
            pd: IwPdId(q.pd.0),
            sq_depth: q.sq.entries,
            rq_depth: q.rq.entries,
            queues: QpQueues::Rings(RingBinding {
                segment: c.segment(q.segment)?.clone(),
                sq: q.sq,
                rq: q.rq,
                send_cq: cq_binding(q.send_cq)?,
                recv_cq: cq_binding(q.recv_cq)?,
            }),
        })
    }
}
