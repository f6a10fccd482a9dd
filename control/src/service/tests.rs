//! Service tests: the real engine seam (`engine_channels`, `MemTable`) with the test playing
//! the dataplane threads (draining their command queues, sending their events).

use super::*;
use abi::ctl::{CqId, PdId, SegmentId, access, qp_state};
use abi::ring::{CqLayout, cq_bytes, init_cq, init_ring, ring_bytes};
use dataplane::rdma::{
    EngineCmd, EngineConfig, EngineEvent, MemTable, Negotiated, QpQueues, RdmaSetup,
    engine_channels,
};
use iwarp::error::{Layer, TermCode};
use shm::{EventFd, HugepagePolicy, Segment};
use std::os::fd::AsFd;
use std::sync::Mutex;

const THREADS: usize = 2;
/// The remote end of the connections the tests open (the peer's listener).
const PEER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7174);

#[derive(Default)]
struct VecSink(Mutex<Vec<Event>>);

impl EventSink for VecSink {
    fn deliver(&self, ev: &Event) -> bool {
        self.0.lock().unwrap().push(ev.clone());
        true
    }
}

impl VecSink {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

struct H {
    svc: Service,
    dp: Vec<RdmaSetup>,
}

impl H {
    fn new() -> H {
        let (engine, dp) =
            engine_channels(THREADS, MemTable::new(1024, 7), EngineConfig::default());
        let cfg = ServiceConfig {
            mac: [2, 0, 0, 0, 0, 1],
            ip: Ipv4Addr::new(10, 77, 0, 1),
            mpa: MpaPolicy::default(),
            max_clients: 4,
            limits: Limits::default(),
            allow_faults: false,
        };
        H {
            svc: Service::new(Arc::new(engine), cfg),
            dp,
        }
    }

    fn client(&mut self) -> (ClientId, Arc<VecSink>) {
        let sink = Arc::new(VecSink::default());
        let id = self.svc.connect_client(sink.clone(), None).unwrap();
        let r = self.req(
            id,
            Request::Hello {
                abi_version: abi::ABI_VERSION,
                pid: 42,
                name: "test".into(),
            },
        );
        assert!(matches!(r, Response::Hello { .. }), "{r:?}");
        (id, sink)
    }

    /// A new CM id of client `c`.
    fn cm_id(&mut self, c: ClientId) -> CmId {
        let r = self.req(c, Request::CreateCmId {});
        let Response::CmId { id } = r else {
            panic!("{r:?}")
        };
        id
    }

    fn req(&mut self, c: ClientId, r: Request) -> Response {
        self.svc.handle(c, r, Vec::new())
    }

    fn req_fd(&mut self, c: ClientId, r: Request, fd: OwnedFd) -> Response {
        self.svc.handle(c, r, vec![fd])
    }

    fn cmds(&self, thread: usize) -> Vec<EngineCmd> {
        let mut v = Vec::new();
        self.dp[thread].cmds.drain(&mut v);
        v
    }

    fn event(&mut self, ev: EngineEvent) {
        self.svc.handle_engine_event(ev);
    }
}

fn code(r: &Response) -> Option<ErrorCode> {
    match r {
        Response::Error { code, .. } => Some(*code),
        _ => None,
    }
}

/// A client with a segment holding a CQ and a QP's rings, a PD and an MR.
struct Setup {
    seg: Arc<Segment>,
    segment: SegmentId,
    pd: PdId,
    cq: CqId,
    qp: QpId,
    lkey: u32,
}

const CQ_OFF: usize = 0;
const SQ_OFF: usize = 64 * 1024;
const RQ_OFF: usize = 128 * 1024;
const MR_OFF: u64 = 256 * 1024;

fn setup(h: &mut H, c: ClientId) -> Setup {
    let seg = Arc::new(Segment::create("svc-test", 1 << 20, HugepagePolicy::Off).unwrap());
    let layout = CqLayout {
        offset: CQ_OFF,
        subs: THREADS as u32,
        entries: 64,
    };
    init_cq(&*seg, &layout).unwrap();
    init_ring::<abi::Wqe, _>(&*seg, SQ_OFF, 64).unwrap();
    init_ring::<abi::RecvWqe, _>(&*seg, RQ_OFF, 64).unwrap();
    let fd = seg.fd().try_clone_to_owned().unwrap();
    let Response::Segment { segment } = h.req_fd(c, Request::AttachSegment { len: 1 << 20 }, fd)
    else {
        panic!()
    };
    let Response::Pd { pd } = h.req(c, Request::AllocPd {}) else {
        panic!()
    };
    let Response::Mr { lkey, .. } = h.req(
        c,
        Request::RegMr {
            pd,
            segment,
            offset: MR_OFF,
            len: 4096,
            iova: 0x1000,
            access: access::LOCAL_WRITE | access::REMOTE_WRITE,
        },
    ) else {
        panic!()
    };
    let Response::Cq { cq } = h.req(
        c,
        Request::CreateCq {
            segment,
            offset: CQ_OFF as u64,
            entries: 64,
            subs: THREADS as u32,
            channel: false,
        },
    ) else {
        panic!()
    };
    let Response::Qp { qp, .. } = h.req(c, create_qp(pd, cq, segment)) else {
        panic!()
    };
    Setup {
        seg,
        segment,
        pd,
        cq,
        qp,
        lkey,
    }
}

fn create_qp(pd: PdId, cq: CqId, segment: SegmentId) -> Request {
    Request::CreateQp {
        pd,
        send_cq: cq,
        recv_cq: cq,
        segment,
        sq_offset: SQ_OFF as u64,
        sq_entries: 64,
        rq_offset: RQ_OFF as u64,
        rq_entries: 64,
        sq_sig_all: false,
    }
}

#[test]
fn hello_first_and_abi_version_checked() {
    let mut h = H::new();
    let sink = Arc::new(VecSink::default());
    let c = h.svc.connect_client(sink, None).unwrap();
    assert_eq!(
        code(&h.req(c, Request::AllocPd {})),
        Some(ErrorCode::NotHello)
    );
    let r = h.req(
        c,
        Request::Hello {
            abi_version: 99,
            pid: 1,
            name: "old".into(),
        },
    );
    assert_eq!(code(&r), Some(ErrorCode::AbiVersion));
    let Response::Error { message, .. } = r else {
        panic!()
    };
    assert!(message.contains("99") && message.contains(&abi::ABI_VERSION.to_string()));
    let r = h.req(
        c,
        Request::Hello {
            abi_version: abi::ABI_VERSION,
            pid: 1,
            name: "ok".into(),
        },
    );
    let Response::Hello { device, .. } = r else {
        panic!("{r:?}")
    };
    assert_eq!(device.cq_subs, THREADS as u32);
    assert_eq!(device.max_send_sge, 5);
    let r = h.req(
        c,
        Request::Hello {
            abi_version: abi::ABI_VERSION,
            pid: 1,
            name: "again".into(),
        },
    );
    assert_eq!(code(&r), Some(ErrorCode::NotHello));
}

#[test]
fn segments_need_a_sealed_fd_of_the_stated_size() {
    let mut h = H::new();
    let (c, _) = h.client();
    let r = h.req(c, Request::AttachSegment { len: 4096 });
    assert_eq!(code(&r), Some(ErrorCode::MissingFd));
    let seg = Segment::create("t", 8192, HugepagePolicy::Off).unwrap();
    let r = h.req_fd(
        c,
        Request::AttachSegment { len: 4096 },
        seg.fd().try_clone_to_owned().unwrap(),
    );
    assert_eq!(code(&r), Some(ErrorCode::BadFd));
    let f = std::fs::File::open("/proc/self/exe").unwrap();
    let r = h.req_fd(c, Request::AttachSegment { len: 8192 }, f.into());
    assert_eq!(code(&r), Some(ErrorCode::BadFd));
    // An fd with a request that takes none is refused (and closed).
    let r = h.req_fd(
        c,
        Request::AllocPd {},
        seg.fd().try_clone_to_owned().unwrap(),
    );
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
    let r = h.req_fd(
        c,
        Request::AttachSegment { len: 8192 },
        seg.fd().try_clone_to_owned().unwrap(),
    );
    assert!(matches!(r, Response::Segment { .. }), "{r:?}");
}

#[test]
fn handles_of_another_client_are_unknown() {
    let mut h = H::new();
    let (a, _) = h.client();
    let (b, _) = h.client();
    let s = setup(&mut h, a);
    let cm = h.cm_id(a);
    let unknown = Some(ErrorCode::UnknownHandle);
    assert_eq!(
        code(&h.req(b, Request::DetachSegment { segment: s.segment })),
        unknown
    );
    assert_eq!(code(&h.req(b, Request::DeallocPd { pd: s.pd })), unknown);
    assert_eq!(code(&h.req(b, Request::DeregMr { lkey: s.lkey })), unknown);
    assert_eq!(code(&h.req(b, Request::DestroyCq { cq: s.cq })), unknown);
    assert_eq!(code(&h.req(b, Request::DestroyQp { qp: s.qp })), unknown);
    assert_eq!(code(&h.req(b, Request::QueryQp { qp: s.qp })), unknown);
    assert_eq!(code(&h.req(b, Request::DestroyCmId { id: cm })), unknown);
    let r = h.req(
        b,
        Request::RegMr {
            pd: s.pd,
            segment: s.segment,
            offset: 0,
            len: 1,
            iova: 0,
            access: 0,
        },
    );
    assert_eq!(code(&r), unknown);
    // B with its own PD and A's segment: still unknown.
    let Response::Pd { pd } = h.req(b, Request::AllocPd {}) else {
        panic!()
    };
    assert_eq!(code(&h.req(b, create_qp(pd, s.cq, s.segment))), unknown);
    // A's MR is untouched by B's attempt.
    assert!(
        h.svc
            .engine()
            .mem
            .by_handle(iwarp::stag::MrHandle(s.lkey))
            .is_some()
    );
    assert!(matches!(
        h.req(a, Request::QueryQp { qp: s.qp }),
        Response::QpAttrs { .. }
    ));
}

#[test]
fn bad_ranges_sizes_and_access_are_refused() {
    let mut h = H::new();
    let (c, _) = h.client();
    let s = setup(&mut h, c);
    let mr = |offset, len, access| Request::RegMr {
        pd: s.pd,
        segment: s.segment,
        offset,
        len,
        iova: 0,
        access,
    };
    assert_eq!(
        code(&h.req(c, mr(1 << 20, 1, 0))),
        Some(ErrorCode::OutOfRange)
    );
    assert_eq!(
        code(&h.req(c, mr(u64::MAX, 2, 0))),
        Some(ErrorCode::OutOfRange)
    );
    assert_eq!(
        code(&h.req(c, mr(0, 1, 0x100))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(
        code(&h.req(c, mr(0, 1, access::REMOTE_WRITE))),
        Some(ErrorCode::InvalidArgument)
    );
    let cq = |offset, entries, subs, channel| Request::CreateCq {
        segment: s.segment,
        offset,
        entries,
        subs,
        channel,
    };
    assert_eq!(
        code(&h.req(c, cq(0, 64, 1, false))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(
        code(&h.req(c, cq(0, 100, 2, false))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(
        code(&h.req(c, cq(8, 64, 2, false))),
        Some(ErrorCode::OutOfRange)
    );
    let end = (1 << 20) - cq_bytes(2, 64) as u64 + 64;
    assert_eq!(
        code(&h.req(c, cq(end, 64, 2, false))),
        Some(ErrorCode::OutOfRange)
    );
    assert_eq!(
        code(&h.req(c, cq(0, 64, 2, true))),
        Some(ErrorCode::MissingFd)
    );
    let not_eventfd = s.seg.fd().try_clone_to_owned().unwrap();
    assert_eq!(
        code(&h.req_fd(c, cq(0, 64, 2, true), not_eventfd)),
        Some(ErrorCode::BadFd)
    );
    let e = EventFd::new(true).unwrap();
    let r = h.req_fd(
        c,
        cq(0, 64, 2, true),
        e.as_fd().try_clone_to_owned().unwrap(),
    );
    assert!(matches!(r, Response::Cq { .. }), "{r:?}");
    let mut q = create_qp(s.pd, s.cq, s.segment);
    if let Request::CreateQp { sq_offset, .. } = &mut q {
        *sq_offset = (1 << 20) - ring_bytes::<abi::Wqe>(64) as u64 + 128;
    }
    assert_eq!(code(&h.req(c, q)), Some(ErrorCode::OutOfRange));
    // In use: busy.
    assert_eq!(
        code(&h.req(c, Request::DeallocPd { pd: s.pd })),
        Some(ErrorCode::Busy)
    );
    assert_eq!(
        code(&h.req(c, Request::DestroyCq { cq: s.cq })),
        Some(ErrorCode::Busy)
    );
    assert_eq!(
        code(&h.req(c, Request::DetachSegment { segment: s.segment })),
        Some(ErrorCode::Busy)
    );
}

fn established(conn: ConnId, qp: QpNum) -> EngineEvent {
    EngineEvent::Established {
        conn,
        qp,
        negotiated: Negotiated {
            revision: 2,
            crc: true,
            markers_rx: false,
            markers_tx: false,
            ird: 8,
            ord: 8,
            rtr: None,
        },
        private_data: b"reply".to_vec(),
    }
}

#[test]
fn connect_binds_the_qp_to_a_thread_and_reports_events() {
    let mut h = H::new();
    let (c, sink) = h.client();
    let s = setup(&mut h, c);
    let id = h.cm_id(c);
    let remote = PEER;
    let r = h.req(
        c,
        Request::Connect {
            id,
            qp: s.qp,
            remote,
            private_data: b"hi".to_vec(),
            ird: 4,
            ord: 4,
            mpa: abi::ctl::MpaOverride {
                crc: 3,
                ..Default::default()
            },
        },
    );
    assert_eq!(r, Response::Done {});
    let (thread, cmd) = (0..THREADS)
        .flat_map(|t| h.cmds(t).into_iter().map(move |c| (t, c)))
        .next()
        .expect("a Connect command");
    let EngineCmd::Connect {
        conn,
        remote: r2,
        policy,
        private_data,
        qp,
    } = cmd
    else {
        panic!("{cmd:?}")
    };
    assert_eq!((r2, private_data.as_slice()), (remote, &b"hi"[..]));
    assert_eq!(policy.crc, CrcMode::Require);
    assert_eq!((policy.ird, policy.ord), (4, 4));
    let QpQueues::Rings(rb) = &qp.queues else {
        panic!()
    };
    assert_eq!((rb.sq.offset, rb.rq.offset), (SQ_OFF, RQ_OFF));
    let layout = CqLayout {
        offset: CQ_OFF,
        subs: THREADS as u32,
        entries: 64,
    };
    assert_eq!(rb.send_cq.layout, layout);
    assert!(thread < THREADS);
    // A second connect on the same QP is refused.
    let id2 = h.cm_id(c);
    let again = Request::Connect {
        id: id2,
        qp: s.qp,
        remote,
        private_data: vec![],
        ird: 1,
        ord: 1,
        mpa: Default::default(),
    };
    assert_eq!(code(&h.req(c, again)), Some(ErrorCode::InvalidState));
    h.event(established(conn, qp.qp));
    let evs = sink.take();
    assert!(
        matches!(&evs[..], [Event::Established { id: i, crc: true, private_data, .. }] if *i == id && private_data == b"reply"),
        "{evs:?}"
    );
    let Response::QpAttrs { attrs } = h.req(c, Request::QueryQp { qp: s.qp }) else {
        panic!()
    };
    assert_eq!(
        (attrs.state, attrs.ird, attrs.remote),
        (qp_state::RTS, 8, remote)
    );
    // ModifyQp to ERROR on the running QP: the engine flushes it (TERMINATE, every WR flushed).
    assert_eq!(
        h.req(c, Request::ModifyQpError { qp: s.qp }),
        Response::Done {}
    );
    assert!(
        matches!(&h.cmds(thread)[..], [EngineCmd::FlushQp { qp: q }] if *q == qp.qp),
        "no FlushQp to thread {thread}"
    );
    let Response::QpAttrs { attrs } = h.req(c, Request::QueryQp { qp: s.qp }) else {
        panic!()
    };
    assert_eq!(attrs.state, qp_state::ERROR);
    // Again: already in ERROR, nothing more to ask of the engine.
    assert_eq!(
        h.req(c, Request::ModifyQpError { qp: s.qp }),
        Response::Done {}
    );
    assert!(h.cmds(thread).is_empty());
    h.event(EngineEvent::TerminateReceived {
        conn,
        qp: qp.qp,
        code: TermCode {
            layer: Layer::Ddp,
            etype: 1,
            ecode: 2,
        },
        layout: iwarp::rdmap::terminate::TermLayout::Rfc,
    });
    let evs = sink.take();
    assert!(
        matches!(
            &evs[..],
            [Event::TerminateReceived {
                layer: 1,
                etype: 1,
                ecode: 2,
                ..
            }]
        ),
        "{evs:?}"
    );
    h.event(EngineEvent::Disconnected {
        conn,
        qp: Some(qp.qp),
    });
    assert!(matches!(&sink.take()[..], [Event::Disconnected { id: i }] if *i == id));
    // Disconnecting after the peer did is a no-op (the race every ULP's last message runs).
    assert_eq!(h.req(c, Request::Disconnect { id }), Response::Done {});
    let st = &h.svc.client_stats()[0];
    assert_eq!(
        (
            st.counters.established,
            st.counters.terminates_received,
            st.counters.disconnected
        ),
        (1, 1, 1)
    );
}

/// A peer's connect request on `listener` (port 7174), from thread 1.
fn connect_request(conn: ConnId, listener: ListenerId) -> EngineEvent {
    EngineEvent::ConnectRequest {
        conn,
        listener,
        thread: 1,
        local: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 7174),
        peer: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 40000),
        revision: 2,
        crc: false,
        markers: false,
        ird: 2,
        ord: 2,
        rtr: None,
        private_data: b"req".to_vec(),
    }
}

#[test]
fn listen_accept_reject_and_orphan_requests() {
    let mut h = H::new();
    let (c, sink) = h.client();
    let s = setup(&mut h, c);
    let lid = h.cm_id(c);
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7174);
    assert_eq!(
        h.req(
            c,
            Request::Listen {
                id: lid,
                addr,
                backlog: 8
            }
        ),
        Response::Done {}
    );
    // Every thread gets the Listen, with the same listener id.
    let listeners: Vec<_> = (0..THREADS)
        .map(|t| match h.cmds(t).pop() {
            Some(EngineCmd::Listen {
                listener,
                port: 7174,
                ..
            }) => listener,
            other => panic!("thread {t}: {other:?}"),
        })
        .collect();
    assert!(listeners.windows(2).all(|w| w[0] == w[1]));
    let listener = listeners[0];
    // The same port again (any client): in use.
    let (d, _) = h.client();
    let other = h.cm_id(d);
    assert_eq!(
        code(&h.req(
            d,
            Request::Listen {
                id: other,
                addr,
                backlog: 1
            }
        )),
        Some(ErrorCode::AddressInUse)
    );
    let request = |conn| connect_request(conn, listener);
    let conn = h.svc.engine().ids.conn();
    h.event(request(conn));
    let evs = sink.take();
    let [
        Event::ConnectRequest {
            id: rid,
            listener: l,
            private_data,
            ..
        },
    ] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    assert_eq!((*l, private_data.as_slice()), (lid, &b"req"[..]));
    let r = h.req(
        c,
        Request::Accept {
            id: *rid,
            qp: s.qp,
            private_data: b"ok".to_vec(),
            ird: 2,
            ord: 2,
            mpa: abi::ctl::MpaOverride {
                crc: 1,
                ..Default::default()
            },
        },
    );
    assert_eq!(r, Response::Done {});
    // The application's CRC choice reaches the engine (the listener's policy said nothing).
    assert!(matches!(&h.cmds(1)[..],
        [EngineCmd::Accept { conn: c2, crc: Some(dataplane::rdma::CrcMode::On), .. }] if *c2 == conn));
    // Test-only fault switch: refused unless [control] allow_faults, checked, then sent to the
    // QP's thread.
    let inject = |fault| Request::InjectFault { qp: s.qp, fault };
    let r = h.req(c, inject(abi::ctl::tx_fault::BAD_CRC));
    assert_eq!(code(&r), Some(ErrorCode::Unsupported), "{r:?}");
    h.svc.cfg.allow_faults = true;
    let r = h.req(c, inject(9));
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument), "{r:?}");
    assert_eq!(
        h.req(c, inject(abi::ctl::tx_fault::TRUNCATE)),
        Response::Done {}
    );
    assert!(matches!(
        &h.cmds(1)[..],
        [EngineCmd::InjectFault {
            fault: dataplane::rdma::TxFault::Truncate,
            ..
        }]
    ));
    h.svc.cfg.allow_faults = false;
    // A second request, rejected with private data.
    let conn2 = h.svc.engine().ids.conn();
    h.event(request(conn2));
    let Event::ConnectRequest { id: rid2, .. } = sink.take().remove(0) else {
        panic!()
    };
    let r = h.req(
        c,
        Request::Reject {
            id: rid2,
            private_data: b"no".to_vec(),
        },
    );
    assert_eq!(r, Response::Done {});
    assert!(
        matches!(&h.cmds(1)[..], [EngineCmd::Reject { conn: c3, private_data }] if *c3 == conn2 && private_data == b"no")
    );
    // Too much private data.
    let conn3 = h.svc.engine().ids.conn();
    h.event(request(conn3));
    let Event::ConnectRequest { id: rid3, .. } = sink.take().remove(0) else {
        panic!()
    };
    let r = h.req(
        c,
        Request::Reject {
            id: rid3,
            private_data: vec![0; 300],
        },
    );
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
    // A request for a listener nobody has is rejected by the daemon itself.
    let ghost = h.svc.engine().ids.listener();
    let conn4 = h.svc.engine().ids.conn();
    h.event(connect_request(conn4, ghost));
    assert!(matches!(&h.cmds(1)[..], [EngineCmd::Reject { conn: c4, .. }] if *c4 == conn4));
}

#[test]
fn a_leaving_client_frees_everything_after_the_dataplane_releases() {
    let mut h = H::new();
    let (c, _) = h.client();
    let (other, _) = h.client();
    let s = setup(&mut h, c);
    let s2 = setup(&mut h, other);
    // A listener, a pending request, a connected QP, an idle QP.
    let lid = h.cm_id(c);
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9000);
    h.req(
        c,
        Request::Listen {
            id: lid,
            addr,
            backlog: 1,
        },
    );
    let id = h.cm_id(c);
    let remote = PEER;
    let connect = connect_req(id, s.qp, remote);
    assert_eq!(h.req(c, connect), Response::Done {});
    let mut cmds: Vec<(usize, EngineCmd)> = Vec::new();
    for t in 0..THREADS {
        cmds.extend(h.cmds(t).into_iter().map(|c| (t, c)));
    }
    let listener = cmds
        .iter()
        .find_map(|(_, c)| match c {
            EngineCmd::Listen { listener, .. } => Some(*listener),
            _ => None,
        })
        .unwrap();
    let (thread, conn, qpnum) = cmds
        .iter()
        .find_map(|(t, c)| match c {
            EngineCmd::Connect { conn, qp, .. } => Some((*t, *conn, qp.qp)),
            _ => None,
        })
        .unwrap();
    h.event(established(conn, qpnum));
    let pending = h.svc.engine().ids.conn();
    h.event(EngineEvent::ConnectRequest {
        conn: pending,
        listener,
        thread: 0,
        local: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 9000),
        peer: remote,
        revision: 2,
        crc: false,
        markers: false,
        ird: 1,
        ord: 1,
        rtr: None,
        private_data: vec![],
    });
    let Response::Qp { .. } = h.req(c, create_qp(s.pd, s.cq, s.segment)) else {
        panic!()
    };
    assert!(h.svc.engine().mem.len() >= 2);
    h.svc.disconnect_client(c);
    // The connected QP goes back to its thread; the listener stops everywhere; the pending
    // request is rejected (the peer is not left waiting).
    let mut all: Vec<(usize, EngineCmd)> = Vec::new();
    for t in 0..THREADS {
        all.extend(h.cmds(t).into_iter().map(|c| (t, c)));
    }
    assert!(
        all.iter()
            .any(|(t, c)| *t == thread && matches!(c, EngineCmd::DestroyQp { qp } if *qp == qpnum))
    );
    assert_eq!(
        all.iter()
            .filter(|(_, c)| matches!(c, EngineCmd::Unlisten { .. }))
            .count(),
        THREADS
    );
    assert!(
        all.iter().any(
            |(t, c)| *t == 0 && matches!(c, EngineCmd::Reject { conn, .. } if *conn == pending)
        )
    );
    // Its MRs are gone from the table at once; the other client's stay.
    assert_eq!(h.svc.engine().mem.len(), 1);
    assert!(
        h.svc
            .engine()
            .mem
            .by_handle(iwarp::stag::MrHandle(s2.lkey))
            .is_some()
    );
    let st = h.svc.client_stats();
    let gone = st.iter().find(|s| s.client == c.0).unwrap();
    assert!(!gone.connected);
    assert_eq!(gone.held.releasing_qps, 1);
    assert_eq!(h.svc.totals().clients_freed, 0);
    assert!(h.svc.render_stats().contains("clients_releasing = 1"));
    // Events of the departed client's connection are counted, not delivered.
    h.event(EngineEvent::TerminateReceived {
        conn,
        qp: qpnum,
        code: TermCode {
            layer: Layer::Rdmap,
            etype: 0,
            ecode: 0,
        },
        layout: iwarp::rdmap::terminate::TermLayout::Rfc,
    });
    // The thread's QP counters as it destroyed the QP: they go to [freed_clients].
    let last = dataplane::rdma::stats::QpCounters {
        bytes_placed: 19_660_800,
        fpdus_rx: 13_600,
        ..Default::default()
    };
    h.event(EngineEvent::QpReleased {
        qp: qpnum,
        counters: Some(Box::new(last)),
    });
    assert_eq!(h.svc.totals().clients_freed, 1);
    assert_eq!(h.svc.releasing(), 0);
    assert!(h.svc.client_stats().iter().all(|s| s.client != c.0));
    // The segment mapping is dropped with the last reference: only ours is left.
    drop(s);
    let text = h.svc.render_stats();
    assert!(text.contains("clients_freed = 1"), "{text}");
    assert!(text.contains(&format!("[client.{}]", other.0)), "{text}");
    // The freed client's counters live on in [freed_clients]: the TERMINATE it received
    // completed nothing, but its section is there with every key.
    let freed = text
        .split("[freed_clients]")
        .nth(1)
        .expect("[freed_clients]");
    for key in [
        "completions",
        "bytes_placed",
        "cqe_flushed",
        "qp_terminates_rx",
    ] {
        assert!(freed.contains(&format!("\n{key} = ")), "{key}: {text}");
    }
    assert!(freed.contains("\nbytes_placed = 19660800\n"), "{text}");
    assert!(freed.contains("\nfpdus_rx = 13600\n"), "{text}");
}

#[test]
fn max_clients_is_enforced() {
    let mut h = H::new();
    for _ in 0..4 {
        h.client();
    }
    assert!(
        h.svc
            .connect_client(Arc::new(VecSink::default()), None)
            .is_none()
    );
}

#[test]
fn mpa_section_maps_to_the_dataplane_policy() {
    let cfg = crate::config::Config::parse(
        "[port]\ndevice = \"net_memif0\"\nip = \"10.0.0.1/24\"\n[mpa]\ncrc = \"require\"\nmarkers = true\nrevision = 1\nrtr = \"send\"\nird = 3\nord = 5\nprivate_data_max = 100\ntimeout_ms = 2500\nfirst_fpdu_delay_ms = 0\n",
        "t.toml",
    )
    .unwrap();
    let p = mpa_policy(&cfg.mpa);
    assert_eq!(p.crc, CrcMode::Require);
    assert!(p.markers);
    assert_eq!((p.revision, p.rtr, p.ird, p.ord), (1, RtrMode::Send, 3, 5));
    assert_eq!(p.private_data_max, 100);
    assert_eq!(p.timeout, netcore::Duration::from_millis(2500));
    assert_eq!(p.first_fpdu_delay, netcore::Duration::ZERO);
    let d = mpa_policy(&crate::config::MpaSection::default());
    assert_eq!((d.crc, d.rtr, d.revision), (CrcMode::Off, RtrMode::None, 2));
    assert_eq!(d.first_fpdu_delay, netcore::Duration::from_millis(50));
    let s = ServiceConfig::from_config(&cfg, [1; 6]);
    assert_eq!(s.ip, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(s.max_clients, 256);
}

#[test]
fn completions_are_counted_from_the_cq_sub_rings() {
    use abi::ring::CqProducer;
    use abi::{Cqe, CqeOpcode, CqeStatus};
    let mut h = H::new();
    let (c, _) = h.client();
    let s = setup(&mut h, c);
    let layout = CqLayout {
        offset: CQ_OFF,
        subs: THREADS as u32,
        entries: 64,
    };
    // Each dataplane thread produces into its own sub-ring.
    for (sub, n) in [(0u32, 3u64), (1, 2)] {
        let mut p = CqProducer::attach(s.seg.clone(), &layout, sub).unwrap();
        for i in 0..n {
            p.push(Cqe::new(i, 1, CqeOpcode::Send, CqeStatus::Success, 0))
                .unwrap();
        }
    }
    assert_eq!(h.svc.client_stats()[0].completions, 5);
    assert!(h.svc.render_stats().contains("completions = 5"));
    // Kept after the client leaves (its idle QP frees at once).
    h.svc.disconnect_client(c);
    assert_eq!(h.svc.totals().clients_freed, 1);
}

#[test]
fn modify_to_error_of_an_unconnected_qp_hands_it_to_a_thread_that_flushes_it() {
    let mut h = H::new();
    let (c, _sink) = h.client();
    let s = setup(&mut h, c);
    // A QP never connected: a thread gets its queues, only to flush what is posted to it.
    assert_eq!(
        h.req(c, Request::ModifyQpError { qp: s.qp }),
        Response::Done {}
    );
    let mut found = None;
    for t in 0..THREADS {
        for cmd in h.cmds(t) {
            match cmd {
                EngineCmd::FlushUnbound { qp } => found = Some((t, qp)),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let (thread, b) = found.expect("a FlushUnbound command");
    let QpQueues::Rings(rb) = &b.queues else {
        panic!()
    };
    assert_eq!((rb.sq.offset, rb.rq.offset), (SQ_OFF, RQ_OFF));
    let Response::QpAttrs { attrs } = h.req(c, Request::QueryQp { qp: s.qp }) else {
        panic!()
    };
    assert_eq!(attrs.state, qp_state::ERROR);
    // Once in ERROR it cannot be connected, and a second ModifyQpError asks nothing more.
    let id = h.cm_id(c);
    let connect = connect_req(
        id,
        s.qp,
        SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7174),
    );
    assert_eq!(code(&h.req(c, connect)), Some(ErrorCode::InvalidState));
    assert_eq!(
        h.req(c, Request::ModifyQpError { qp: s.qp }),
        Response::Done {}
    );
    assert!((0..THREADS).all(|t| h.cmds(t).is_empty()));
    // DestroyQp goes to the flushing thread, which answers QpReleased.
    assert_eq!(h.req(c, Request::DestroyQp { qp: s.qp }), Response::Done {});
    assert!(
        matches!(&h.cmds(thread)[..], [EngineCmd::DestroyQp { qp }] if *qp == b.qp),
        "no DestroyQp to thread {thread}"
    );
}

/// An active open of CM id `id` with QP `qp` to `remote`: no private data, IRD and ORD 1, the
/// default MPA options.
fn connect_req(id: CmId, qp: QpId, remote: SocketAddrV4) -> Request {
    Request::Connect {
        id,
        qp,
        remote,
        private_data: vec![],
        ird: 1,
        ord: 1,
        mpa: Default::default(),
    }
}

/// An application that destroys its CM id while the connection's end is on its way from the
/// dataplane: the late `Disconnected` (and a `QpError` before it) are counted as late, not as
/// orphans, and reach nobody; once the last event came the connection is forgotten. An event
/// for a connection nobody ever had is still an orphan.
#[test]
fn events_after_destroying_the_cm_id_are_late_not_orphans() {
    let mut h = H::new();
    let (c, sink) = h.client();
    let s = setup(&mut h, c);
    let id = h.cm_id(c);
    let remote = PEER;
    let connect = connect_req(id, s.qp, remote);
    assert_eq!(h.req(c, connect), Response::Done {});
    let (thread, cmd) = (0..THREADS)
        .flat_map(|t| h.cmds(t).into_iter().map(move |c| (t, c)))
        .next()
        .expect("a Connect command");
    let EngineCmd::Connect { conn, qp, .. } = cmd else {
        panic!("{cmd:?}")
    };
    h.event(established(conn, qp.qp));
    assert_eq!(sink.take().len(), 1);
    // The application destroys the CM id: the daemon disconnects the connection.
    assert_eq!(h.req(c, Request::DestroyCmId { id }), Response::Done {});
    assert!(
        matches!(&h.cmds(thread)[..], [EngineCmd::Disconnect { conn: c2 }] if *c2 == conn),
        "no Disconnect to thread {thread}"
    );
    let orphans = |h: &H| h.svc.totals().orphan_events;
    let late = |h: &H| h.svc.totals().late_events;
    assert_eq!((orphans(&h), late(&h)), (0, 0));
    h.event(EngineEvent::Disconnected {
        conn,
        qp: Some(qp.qp),
    });
    assert_eq!((orphans(&h), late(&h)), (0, 1));
    assert!(sink.take().is_empty(), "an event for a destroyed CM id");
    assert!(h.svc.render_stats().contains("late_events = 1"));
    // Its last event came: anything after it is unexpected again.
    h.event(EngineEvent::Disconnected { conn, qp: None });
    assert_eq!((orphans(&h), late(&h)), (1, 1));
    // A connection nobody ever had.
    let ghost = h.svc.engine().ids.conn();
    h.event(EngineEvent::Disconnected {
        conn: ghost,
        qp: None,
    });
    assert_eq!((orphans(&h), late(&h)), (2, 1));
    assert!(sink.take().is_empty());
}

/// A connect request for a listener the application has just destroyed (its Unlisten and the
/// request crossed) is rejected by the daemon and counted as `late_requests`, not as an orphan;
/// one over the listener's client's CM id limit is rejected as `refused_requests`; one for a
/// listener nobody ever had is still an orphan. None reaches the client.
#[test]
fn requests_for_a_destroyed_listener_are_late_and_over_the_limit_refused() {
    let mut h = H::new();
    h.svc.cfg.limits.cm_ids = 2;
    let (c, sink) = h.client();
    let lid = h.cm_id(c);
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7174);
    let listen = Request::Listen {
        id: lid,
        addr,
        backlog: 8,
    };
    assert_eq!(h.req(c, listen), Response::Done {});
    let Some(EngineCmd::Listen { listener, .. }) = h.cmds(1).pop() else {
        panic!("no Listen")
    };
    let counts = |h: &H| {
        let t = h.svc.totals();
        (t.orphan_events, t.late_requests, t.refused_requests)
    };
    let rejected = |h: &H, conn| {
        matches!(&h.cmds(1)[..], [EngineCmd::Reject { conn: c2, private_data }]
            if *c2 == conn && private_data.is_empty())
    };
    // The first request takes the client's second CM id: it reaches the client.
    h.event(connect_request(h.svc.engine().ids.conn(), listener));
    assert!(matches!(&sink.take()[..], [Event::ConnectRequest { .. }]));
    // The second finds no room.
    let full = h.svc.engine().ids.conn();
    h.event(connect_request(full, listener));
    assert!(rejected(&h, full), "no Reject for a request over the limit");
    assert_eq!(counts(&h), (0, 0, 1));
    // The application destroys the listening CM id; a request was already on its way.
    assert_eq!(
        h.req(c, Request::DestroyCmId { id: lid }),
        Response::Done {}
    );
    assert!(matches!(&h.cmds(1)[..], [EngineCmd::Unlisten { listener: l }] if *l == listener));
    let late = h.svc.engine().ids.conn();
    h.event(connect_request(late, listener));
    assert!(rejected(&h, late), "no Reject for a late request");
    assert_eq!(counts(&h), (0, 1, 1));
    // A listener nobody ever had.
    let ghost = h.svc.engine().ids.conn();
    h.event(connect_request(ghost, h.svc.engine().ids.listener()));
    assert!(rejected(&h, ghost), "no Reject for an orphan request");
    assert_eq!(counts(&h), (1, 1, 1));
    assert!(
        sink.take().is_empty(),
        "a refused request reached the client"
    );
    let stats = h.svc.render_stats();
    assert!(stats.contains("late_requests = 1"), "{stats}");
    assert!(stats.contains("refused_requests = 1"), "{stats}");
}
