//! A test double of `iwarpd` for the library's own tests: it speaks the real control protocol
//! over a real `SOCK_SEQPACKET` socket, maps the client's real memfd segments, and consumes
//! and produces the real `abi` rings — but instead of iWARP over TCP it "connects" QPs of its
//! own clients to each other and carries out work requests with memory copies. It checks
//! what the library does (ring layout, fd passing, segment use, CM event plumbing, release on
//! drop), not the protocol: the real daemon is tested end to end in `verbs/tests/e2e_*.rs`.
#![allow(dead_code, unreachable_pub)]

use abi::ctl::{self, Body, CmId, CqId, Event, PdId, QpId, Request, Response, SegmentId};
use abi::ring::{Consumer, CqLayout, CqProducer};
use abi::{Cqe, CqeOpcode, CqeStatus, RecvWqe, Sge, Wqe, WqeOpcode};
use shm::{EventFd, SeqPacket, SeqPacketListener};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Mem = Arc<shm::Segment>;

struct Mr {
    client: u32,
    pd: PdId,
    seg: Mem,
    offset: usize,
    len: usize,
    iova: u64,
    access: u32,
}

struct Cq {
    prod: CqProducer<Mem>,
    efd: Option<EventFd>,
}

struct Qp {
    client: u32,
    pd: PdId,
    sq: Consumer<Wqe, Mem>,
    rq: Consumer<RecvWqe, Mem>,
    send_cq: CqId,
    recv_cq: CqId,
    qp_num: u32,
    sig_all: bool,
    peer: Option<QpId>,
    cm: Option<CmId>,
    pending: Option<Wqe>,
}

struct Conn {
    client: u32,
    peer: Option<CmId>,
    qp: Option<QpId>,
    listener: Option<CmId>,
}

/// Counters the tests look at.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub segments: usize,
    pub mrs: usize,
    pub cqs: usize,
    pub qps: usize,
    pub pds: usize,
    pub cm_ids: usize,
}

#[derive(Default)]
struct State {
    next: u32,
    segments: HashMap<(u32, SegmentId), Mem>,
    pds: HashMap<PdId, u32>,
    mrs: HashMap<u32, Mr>,
    cqs: HashMap<CqId, Cq>,
    qps: HashMap<QpId, Qp>,
    cms: HashMap<CmId, Conn>,
    listeners: HashMap<u16, CmId>,
    outbox: Vec<(u32, Event)>,
}

pub struct FakeDaemon {
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub const IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);

impl FakeDaemon {
    pub fn start(name: &str) -> FakeDaemon {
        let path =
            std::env::temp_dir().join(format!("verbs-fake-{name}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let lis = SeqPacketListener::bind(&path).expect("bind fake daemon socket");
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State {
            next: 100,
            ..State::default()
        }));
        let (s2, st2) = (stop.clone(), state.clone());
        let thread = std::thread::spawn(move || serve(lis, s2, st2));
        FakeDaemon {
            path,
            stop,
            state,
            thread: Some(thread),
        }
    }

    pub fn spec(&self) -> String {
        format!("unix:{}", self.path.display())
    }

    pub fn counts(&self) -> Counts {
        let st = self.state.lock().unwrap();
        Counts {
            segments: st.segments.len(),
            mrs: st.mrs.len(),
            cqs: st.cqs.len(),
            qps: st.qps.len(),
            pds: st.pds.len(),
            cm_ids: st.cms.len(),
        }
    }
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(lis: SeqPacketListener, stop: Arc<AtomicBool>, state: Arc<Mutex<State>>) {
    let mut clients: Vec<(u32, SeqPacket)> = Vec::new();
    let mut next_client = 1;
    while !stop.load(Ordering::Relaxed) {
        if lis.wait_readable(Duration::ZERO).unwrap_or(false)
            && let Ok(s) = lis.accept()
        {
            clients.push((next_client, s));
            next_client += 1;
        }
        let mut closed = Vec::new();
        for (c, s) in &clients {
            while s.wait_readable(Duration::ZERO).unwrap_or(false) {
                let mut buf = [0u8; ctl::MAX_MESSAGE];
                let Ok(m) = s.recv(&mut buf) else { break };
                if m.len == 0 {
                    closed.push(*c);
                    break;
                }
                let Ok(ctl::Message {
                    id,
                    body: Body::Request(req),
                }) = ctl::decode(&buf[..m.len])
                else {
                    let _ = s.send(
                        &Response::error(ctl::ErrorCode::BadMessage, "bad").encode(0),
                        &[],
                    );
                    continue;
                };
                let resp = handle(&mut state.lock().unwrap(), *c, req, m.fds);
                let _ = s.send(&resp.encode(id), &[]);
            }
        }
        let mut st = state.lock().unwrap();
        for c in closed {
            clients.retain(|(k, _)| *k != c);
            release_client(&mut st, c);
        }
        step(&mut st);
        for (c, e) in std::mem::take(&mut st.outbox) {
            if let Some((_, s)) = clients.iter().find(|(k, _)| *k == c) {
                let _ = s.send(&e.encode(), &[]);
            }
        }
        drop(st);
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn release_client(st: &mut State, c: u32) {
    st.segments.retain(|(k, _), _| *k != c);
    st.mrs.retain(|_, m| m.client != c);
    st.pds.retain(|_, k| *k != c);
    st.qps.retain(|_, q| q.client != c);
    st.cms.retain(|_, m| m.client != c);
}

fn err(code: ctl::ErrorCode, m: &str) -> Response {
    Response::error(code, m)
}

fn attrs() -> ctl::DeviceAttrs {
    ctl::DeviceAttrs {
        version: "fake-iwarpd".into(),
        mac: [2, 0, 0, 0, 0, 1],
        ip: SocketAddrV4::new(IP, 0),
        cq_subs: 2,
        max_qp: 1024,
        max_qp_wr: 4096,
        max_send_sge: 5,
        max_recv_sge: 7,
        max_cq: 1024,
        max_cqe: 65536,
        max_mr: 4096,
        max_mr_size: 1 << 40,
        max_pd: 256,
        max_segments: 4096,
        max_ird: 128,
        max_ord: 128,
        max_private_data: 252,
    }
}

fn handle(st: &mut State, c: u32, req: Request, mut fds: Vec<std::os::fd::OwnedFd>) -> Response {
    use ctl::ErrorCode as E;
    st.next += 1;
    let n = st.next;
    match req {
        Request::Hello { abi_version, .. } if abi_version == abi::ABI_VERSION => Response::Hello {
            client: c,
            abi_version,
            device: attrs(),
        },
        Request::Hello { .. } => err(E::AbiVersion, "abi"),
        Request::QueryDevice {} => Response::Device { device: attrs() },
        Request::AttachSegment { len } => {
            let Some(fd) = fds.pop() else {
                return err(E::MissingFd, "AttachSegment needs an fd");
            };
            match shm::Segment::from_fd(fd, len) {
                Ok(s) => {
                    st.segments.insert((c, SegmentId(n)), Arc::new(s));
                    Response::Segment {
                        segment: SegmentId(n),
                    }
                }
                Err(e) => err(E::BadFd, &e.to_string()),
            }
        }
        Request::DetachSegment { segment } => {
            let used = st.mrs.values().any(|m| {
                st.segments
                    .get(&(c, segment))
                    .is_some_and(|s| Arc::ptr_eq(s, &m.seg))
            });
            if used {
                return err(E::Busy, "segment has MRs");
            }
            match st.segments.remove(&(c, segment)) {
                Some(_) => Response::Done {},
                None => err(E::UnknownHandle, "segment"),
            }
        }
        Request::AllocPd {} => {
            st.pds.insert(PdId(n), c);
            Response::Pd { pd: PdId(n) }
        }
        Request::DeallocPd { pd } => {
            if st.mrs.values().any(|m| m.pd == pd) || st.qps.values().any(|q| q.pd == pd) {
                return err(E::Busy, "pd in use");
            }
            match st.pds.remove(&pd) {
                Some(_) => Response::Done {},
                None => err(E::UnknownHandle, "pd"),
            }
        }
        Request::RegMr {
            pd,
            segment,
            offset,
            len,
            iova,
            access,
        } => {
            let Some(seg) = st.segments.get(&(c, segment)).cloned() else {
                return err(E::UnknownHandle, "segment");
            };
            if !seg.contains(offset, len) {
                return err(E::OutOfRange, "mr outside segment");
            }
            st.mrs.insert(
                n,
                Mr {
                    client: c,
                    pd,
                    seg,
                    offset: offset as usize,
                    len: len as usize,
                    iova,
                    access,
                },
            );
            Response::Mr { lkey: n, rkey: n }
        }
        Request::DeregMr { lkey } => match st.mrs.remove(&lkey) {
            Some(_) => Response::Done {},
            None => err(E::UnknownHandle, "lkey"),
        },
        Request::CreateCq {
            segment,
            offset,
            entries,
            subs,
            channel,
        } => {
            let Some(seg) = st.segments.get(&(c, segment)).cloned() else {
                return err(E::UnknownHandle, "segment");
            };
            let efd = if channel {
                match fds.pop().map(EventFd::from_fd) {
                    Some(Ok(e)) => Some(e),
                    _ => return err(E::MissingFd, "channel fd"),
                }
            } else {
                None
            };
            let layout = CqLayout {
                offset: offset as usize,
                subs,
                entries,
            };
            // Use the last sub-ring, to check the client polls all of them.
            match CqProducer::attach(seg, &layout, subs - 1) {
                Ok(prod) => {
                    st.cqs.insert(CqId(n), Cq { prod, efd });
                    Response::Cq { cq: CqId(n) }
                }
                Err(e) => err(E::OutOfRange, &e.to_string()),
            }
        }
        Request::DestroyCq { cq } => {
            if st.qps.values().any(|q| q.send_cq == cq || q.recv_cq == cq) {
                return err(E::Busy, "cq in use");
            }
            match st.cqs.remove(&cq) {
                Some(_) => Response::Done {},
                None => err(E::UnknownHandle, "cq"),
            }
        }
        Request::CreateQp {
            pd,
            send_cq,
            recv_cq,
            segment,
            sq_offset,
            sq_entries,
            rq_offset,
            rq_entries,
            sq_sig_all,
        } => {
            let Some(seg) = st.segments.get(&(c, segment)).cloned() else {
                return err(E::UnknownHandle, "segment");
            };
            if !st.cqs.contains_key(&send_cq) || !st.cqs.contains_key(&recv_cq) {
                return err(E::UnknownHandle, "cq");
            }
            let sq = Consumer::attach(seg.clone(), sq_offset as usize, sq_entries);
            let rq = Consumer::attach(seg, rq_offset as usize, rq_entries);
            match (sq, rq) {
                (Ok(sq), Ok(rq)) => {
                    st.qps.insert(
                        QpId(n),
                        Qp {
                            client: c,
                            pd,
                            sq,
                            rq,
                            send_cq,
                            recv_cq,
                            qp_num: n,
                            sig_all: sq_sig_all,
                            peer: None,
                            cm: None,
                            pending: None,
                        },
                    );
                    Response::Qp {
                        qp: QpId(n),
                        qp_num: n,
                    }
                }
                _ => err(E::OutOfRange, "rings"),
            }
        }
        Request::DestroyQp { qp } => match st.qps.remove(&qp) {
            Some(q) => {
                if let Some(p) = q.peer.and_then(|p| st.qps.get_mut(&p)) {
                    p.peer = None;
                    if let Some(cm) = p.cm {
                        let cl = p.client;
                        st.outbox.push((cl, Event::Disconnected { id: cm }));
                    }
                }
                Response::Done {}
            }
            None => err(E::UnknownHandle, "qp"),
        },
        Request::QueryQp { qp } => match st.qps.get(&qp) {
            Some(q) => Response::QpAttrs {
                attrs: ctl::QpAttrs {
                    qp_num: q.qp_num,
                    state: if q.peer.is_some() {
                        ctl::qp_state::RTS
                    } else {
                        ctl::qp_state::IDLE
                    },
                    cm_id: q.cm.unwrap_or_default(),
                    sq_entries: q.sq.entries(),
                    rq_entries: q.rq.entries(),
                    ird: 16,
                    ord: 16,
                    crc: false,
                    markers: false,
                    revision: 2,
                    local: SocketAddrV4::new(IP, 0),
                    remote: SocketAddrV4::new(IP, 0),
                },
            },
            None => err(E::UnknownHandle, "qp"),
        },
        Request::ModifyQpError { qp } => {
            flush_qp(st, qp);
            Response::Done {}
        }
        Request::CreateCmId {} => {
            st.cms.insert(
                CmId(n),
                Conn {
                    client: c,
                    peer: None,
                    qp: None,
                    listener: None,
                },
            );
            Response::CmId { id: CmId(n) }
        }
        Request::DestroyCmId { id } => {
            st.listeners.retain(|_, l| *l != id);
            match st.cms.remove(&id) {
                Some(_) => Response::Done {},
                None => err(E::UnknownHandle, "cm id"),
            }
        }
        Request::Listen { id, addr, .. } => {
            if st.listeners.contains_key(&addr.port()) {
                return err(E::AddressInUse, "port");
            }
            st.listeners.insert(addr.port(), id);
            Response::Done {}
        }
        Request::Connect {
            id,
            qp,
            remote,
            private_data,
            ird,
            ord,
            ..
        } => {
            let Some(&lis) = st.listeners.get(&remote.port()) else {
                st.outbox.push((
                    c,
                    Event::ConnectFailed {
                        id,
                        reason: ctl::connect_failure::REFUSED,
                    },
                ));
                return Response::Done {};
            };
            let lc = st.cms[&lis].client;
            let sid = CmId(n + 1_000_000);
            st.cms.insert(
                sid,
                Conn {
                    client: lc,
                    peer: Some(id),
                    qp: None,
                    listener: Some(lis),
                },
            );
            if let Some(m) = st.cms.get_mut(&id) {
                m.peer = Some(sid);
                m.qp = Some(qp);
            }
            st.outbox.push((
                lc,
                Event::ConnectRequest {
                    listener: lis,
                    id: sid,
                    local: SocketAddrV4::new(IP, remote.port()),
                    remote: SocketAddrV4::new(IP, 40000),
                    private_data,
                    ird,
                    ord,
                    rtr: 0,
                },
            ));
            Response::Done {}
        }
        Request::Accept {
            id,
            qp,
            private_data,
            ird,
            ord,
            ..
        } => {
            let Some(peer) = st.cms.get(&id).and_then(|m| m.peer) else {
                return err(E::InvalidState, "not a request");
            };
            let Some(pqp) = st.cms.get(&peer).and_then(|m| m.qp) else {
                return err(E::InvalidState, "peer gone");
            };
            let pc = st.cms[&peer].client;
            st.cms.get_mut(&id).unwrap().qp = Some(qp);
            if let Some(q) = st.qps.get_mut(&qp) {
                q.peer = Some(pqp);
                q.cm = Some(id);
            }
            if let Some(q) = st.qps.get_mut(&pqp) {
                q.peer = Some(qp);
                q.cm = Some(peer);
            }
            let est = |id, qp, pd: Vec<u8>| Event::Established {
                id,
                qp,
                local: SocketAddrV4::new(IP, 1),
                remote: SocketAddrV4::new(IP, 2),
                private_data: pd,
                ird,
                ord,
                crc: false,
                markers: false,
                revision: 2,
            };
            st.outbox.push((c, est(id, qp, Vec::new())));
            st.outbox.push((pc, est(peer, pqp, private_data)));
            Response::Done {}
        }
        Request::Reject { id, private_data } => {
            let Some(peer) = st.cms.get(&id).and_then(|m| m.peer) else {
                return err(E::InvalidState, "not a request");
            };
            let pc = st.cms[&peer].client;
            st.outbox.push((
                pc,
                Event::Rejected {
                    id: peer,
                    private_data,
                },
            ));
            Response::Done {}
        }
        Request::Disconnect { id } => {
            let Some(m) = st.cms.get(&id) else {
                return err(E::UnknownHandle, "cm id");
            };
            let peer = m.peer;
            let qp = m.qp;
            st.outbox.push((c, Event::Disconnected { id }));
            if let Some(p) = peer.and_then(|p| st.cms.get(&p)) {
                st.outbox
                    .push((p.client, Event::Disconnected { id: peer.unwrap() }));
            }
            if let Some(q) = qp {
                let peer_qp = st.qps.get(&q).and_then(|x| x.peer);
                flush_qp(st, q);
                if let Some(pq) = peer_qp {
                    flush_qp(st, pq);
                }
            }
            Response::Done {}
        }
        other => err(E::Unsupported, other.name()),
    }
}

fn push_cqe(st: &mut State, cq: CqId, cqe: Cqe) {
    if std::env::var_os("FAKE_TRACE").is_some() {
        eprintln!(
            "fake: cq {cq} <- wr {} qp {} op {} st {} len {}",
            cqe.wr_id, cqe.qp_num, cqe.opcode, cqe.status, cqe.byte_len
        );
    }
    let Some(c) = st.cqs.get_mut(&cq) else {
        panic!("fake: completion for unknown {cq}");
    };
    match c.prod.push(cqe) {
        Ok(true) => {
            if let Some(e) = &c.efd {
                let _ = e.signal(1);
            }
        }
        Ok(false) => {}
        Err(e) => panic!("fake: CQ {cq} push: {e:?}"),
    }
}

fn flush_qp(st: &mut State, qp: QpId) {
    let Some(q) = st.qps.get_mut(&qp) else { return };
    q.peer = None;
    let mut out = Vec::new();
    if let Some(w) = q.pending.take() {
        out.push((
            q.send_cq,
            Cqe::new(w.wr_id, q.qp_num, send_op(&w), CqeStatus::Flushed, 0),
        ));
    }
    while let Ok(Some(w)) = q.sq.pop() {
        out.push((
            q.send_cq,
            Cqe::new(w.wr_id, q.qp_num, send_op(&w), CqeStatus::Flushed, 0),
        ));
    }
    while let Ok(Some(r)) = q.rq.pop() {
        out.push((
            q.recv_cq,
            Cqe::new(r.wr_id, q.qp_num, CqeOpcode::Recv, CqeStatus::Flushed, 0),
        ));
    }
    for (cq, c) in out {
        push_cqe(st, cq, c);
    }
}

fn send_op(w: &Wqe) -> CqeOpcode {
    match w.opcode() {
        Ok(WqeOpcode::Write | WqeOpcode::WriteImm) => CqeOpcode::Write,
        Ok(WqeOpcode::Read) => CqeOpcode::Read,
        Ok(WqeOpcode::FetchAdd) => CqeOpcode::FetchAdd,
        Ok(WqeOpcode::CmpSwap) => CqeOpcode::CmpSwap,
        _ => CqeOpcode::Send,
    }
}

fn gather(st: &State, client: u32, sges: &[Sge]) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    for s in sges {
        let m = st.mrs.get(&s.lkey).filter(|m| m.client == client)?;
        if s.offset + u64::from(s.len) > m.len as u64 {
            return None;
        }
        let mut b = vec![0u8; s.len as usize];
        m.seg.read_at(m.offset as u64 + s.offset, &mut b);
        v.extend_from_slice(&b);
    }
    Some(v)
}

fn scatter(st: &State, client: u32, sges: &[Sge], data: &[u8]) -> bool {
    let cap: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
    if cap < data.len() as u64 {
        return false;
    }
    let mut off = 0;
    for s in sges {
        if off == data.len() {
            break;
        }
        let Some(m) = st.mrs.get(&s.lkey).filter(|m| m.client == client) else {
            return false;
        };
        let n = (s.len as usize).min(data.len() - off);
        m.seg
            .write_at(m.offset as u64 + s.offset, &data[off..off + n]);
        off += n;
    }
    true
}

/// Run every connected QP's send queue once.
fn step(st: &mut State) {
    let ids: Vec<QpId> = st.qps.keys().copied().collect();
    for id in ids {
        for _ in 0..64 {
            let Some(q) = st.qps.get_mut(&id) else { break };
            let Some(peer) = q.peer else { break };
            let w = match q.pending.take() {
                Some(w) => w,
                None => match q.sq.pop() {
                    Ok(Some(w)) => w,
                    _ => break,
                },
            };
            if !execute(st, id, peer, w) {
                if let Some(q) = st.qps.get_mut(&id) {
                    q.pending = Some(w);
                }
                break;
            }
        }
    }
}

/// Carry out one WQE; `false` when it must wait for a receive at the peer.
fn execute(st: &mut State, id: QpId, peer: QpId, w: Wqe) -> bool {
    let (client, qp_num, send_cq, sig_all) = {
        let q = &st.qps[&id];
        (q.client, q.qp_num, q.send_cq, q.sig_all)
    };
    let (pclient, pnum, precv_cq) = {
        let p = &st.qps[&peer];
        (p.client, p.qp_num, p.recv_cq)
    };
    let op = w.validate().unwrap_or(WqeOpcode::Send);
    let sges = w.sges().unwrap_or(&[]).to_vec();
    let mut status = CqeStatus::Success;
    let mut len = 0u32;
    let needs_recv = matches!(
        op,
        WqeOpcode::Send | WqeOpcode::SendSe | WqeOpcode::SendInvalidate | WqeOpcode::WriteImm
    );
    let recv = if needs_recv {
        match st.qps.get_mut(&peer).unwrap().rq.pop() {
            Ok(Some(r)) => Some(r),
            _ => return false,
        }
    } else {
        None
    };
    match op {
        WqeOpcode::Send | WqeOpcode::SendSe | WqeOpcode::SendInvalidate => {
            let r = recv.unwrap();
            match gather(st, client, &sges) {
                Some(data) if scatter(st, pclient, r.sges().unwrap_or(&[]), &data) => {
                    len = data.len() as u32;
                    let mut c = Cqe::new(r.wr_id, pnum, CqeOpcode::Recv, CqeStatus::Success, len);
                    if w.solicited() {
                        c.flags |= abi::cqe::CQE_SOLICITED;
                    }
                    if op == WqeOpcode::SendInvalidate {
                        st.mrs.remove(&w.invalidate_stag);
                        c = c.with_invalidated(w.invalidate_stag);
                    }
                    push_cqe(st, precv_cq, c);
                }
                _ => {
                    status = CqeStatus::RemoteOperation;
                    push_cqe(
                        st,
                        precv_cq,
                        Cqe::new(r.wr_id, pnum, CqeOpcode::Recv, CqeStatus::LocalLength, 0),
                    );
                }
            }
        }
        WqeOpcode::Write | WqeOpcode::WriteImm => {
            match (
                gather(st, client, &sges),
                st.mrs.get(&w.rkey).filter(|m| m.client == pclient),
            ) {
                (Some(data), Some(m)) if in_mr(m, w.remote_addr, data.len() as u64) => {
                    m.seg
                        .write_at(m.offset as u64 + w.remote_addr - m.iova, &data);
                    len = data.len() as u32;
                }
                _ => status = CqeStatus::RemoteAccess,
            }
            if let Some(r) = recv {
                let c =
                    Cqe::new(r.wr_id, pnum, CqeOpcode::RecvImm, status, 0).with_imm(w.compare_add);
                push_cqe(st, precv_cq, c);
            }
        }
        WqeOpcode::Read => {
            let total: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
            match st.mrs.get(&w.rkey).filter(|m| m.client == pclient) {
                Some(m) if in_mr(m, w.remote_addr, total) => {
                    let mut b = vec![0u8; total as usize];
                    m.seg
                        .read_at(m.offset as u64 + w.remote_addr - m.iova, &mut b);
                    scatter(st, client, &sges, &b);
                    len = total as u32;
                }
                _ => status = CqeStatus::RemoteAccess,
            }
        }
        WqeOpcode::FetchAdd | WqeOpcode::CmpSwap => {
            match st.mrs.get(&w.rkey).filter(|m| m.client == pclient) {
                Some(m) if in_mr(m, w.remote_addr, 8) => {
                    let at = m.offset as u64 + w.remote_addr - m.iova;
                    let mut b = [0u8; 8];
                    m.seg.read_at(at, &mut b);
                    let orig = u64::from_ne_bytes(b);
                    let new = if op == WqeOpcode::FetchAdd {
                        orig.wrapping_add(w.compare_add)
                    } else if orig == w.compare_add {
                        w.swap
                    } else {
                        orig
                    };
                    m.seg.write_at(at, &new.to_ne_bytes());
                    scatter(st, client, &sges, &orig.to_ne_bytes());
                    len = 8;
                }
                _ => status = CqeStatus::RemoteAccess,
            }
        }
    }
    if status != CqeStatus::Success || w.signaled() || sig_all {
        push_cqe(
            st,
            send_cq,
            Cqe::new(w.wr_id, qp_num, send_op(&w), status, len),
        );
    }
    true
}

/// A fresh unique name for a socket.
pub fn sock_dir() -> &'static Path {
    Path::new("/tmp")
}

fn in_mr(m: &Mr, to: u64, len: u64) -> bool {
    to >= m.iova && to - m.iova + len <= m.len as u64
}
