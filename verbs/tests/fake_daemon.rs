//! The library against a test double of the daemon (`common/fake.rs`): real control socket,
//! real memfd segments and real rings, work requests carried out by memory copies. What is
//! checked here is the library's side of the ABI; the real daemon is tested in `e2e_*.rs`.
mod common;

use common::fake::FakeDaemon;
use std::time::Duration;
use verbs::{Access, CmEvent, ConnParam, Device, Error, RecvWr, SendWr, Wc, WcOpcode, WcStatus};

const T: Duration = Duration::from_secs(5);

struct Side {
    dev: Device,
    pd: verbs::Pd,
    cq: verbs::Cq,
    qp: verbs::Qp,
}

fn side(d: &FakeDaemon) -> Side {
    let dev = Device::open(&d.spec()).expect("open");
    let pd = dev.alloc_pd().unwrap();
    let ch = dev.create_comp_channel().unwrap();
    let cq = dev.create_cq(64, Some(&ch)).unwrap();
    let qp = pd
        .create_qp(&cq, &cq)
        .sq_depth(16)
        .rq_depth(16)
        .build()
        .unwrap();
    Side { dev, pd, cq, qp }
}

/// Two connected sides; returns (client, server, server's CM id, client's CM id).
fn pair(d: &FakeDaemon) -> (Side, Side, verbs::CmId, verbs::CmId) {
    let s = side(d);
    let c = side(d);
    let lis = s.dev.create_cm_id().unwrap();
    lis.listen("0.0.0.0:7174".parse().unwrap(), 4).unwrap();
    let cid = c.dev.create_cm_id().unwrap();
    cid.connect(
        &c.qp,
        "10.99.0.1:7174".parse().unwrap(),
        &ConnParam::new().private_data(b"hi"),
    )
    .unwrap();
    let req = lis.get_request(T).unwrap();
    assert_eq!(req.private_data, b"hi");
    req.id
        .accept(&s.qp, &ConnParam::new().private_data(b"welcome"))
        .unwrap();
    let est = cid.wait_established(T).unwrap();
    assert_eq!(est.private_data, b"welcome");
    req.id.wait_established(T).unwrap();
    (c, s, req.id, cid)
}

fn one(cq: &verbs::Cq) -> Wc {
    let wc = cq.wait_one(T).unwrap().expect("a completion within 5 s");
    assert!(wc.is_ok(), "{wc}");
    wc
}

#[test]
fn every_operation_moves_the_right_bytes() {
    let d = FakeDaemon::start("ops");
    let (c, s, _sid, _cid) = pair(&d);
    let rw =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let cm = c.pd.alloc_mr(8192, rw).unwrap();
    let sm = s.pd.alloc_mr(8192, rw | Access::REMOTE_INVALIDATE).unwrap();

    // Send -> Recv.
    cm.write(0, b"ping").unwrap();
    s.qp.post_recv(&RecvWr::new(10, &[sm.sge(100, 64).unwrap()]))
        .unwrap();
    c.qp.post_send(&SendWr::send(1, &[cm.sge(0, 4).unwrap()]))
        .unwrap();
    assert_eq!(one(&c.cq).opcode(), Some(WcOpcode::Send));
    let r = one(&s.cq);
    assert_eq!(
        (r.wr_id(), r.byte_len(), r.opcode()),
        (10, 4, Some(WcOpcode::Recv))
    );
    assert_eq!(sm.to_vec(100, 4).unwrap(), b"ping");

    // Write, then Read it back.
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    cm.write(0, &data).unwrap();
    let remote = sm.remote();
    c.qp.post_send(&SendWr::write(
        2,
        &[cm.sge(0, 4096).unwrap()],
        remote.at(1024),
        remote.rkey,
    ))
    .unwrap();
    assert_eq!(one(&c.cq).opcode(), Some(WcOpcode::Write));
    assert_eq!(sm.to_vec(1024, 4096).unwrap(), data);
    c.qp.post_send(&SendWr::read(
        3,
        &[cm.sge(4096, 4096).unwrap()],
        remote.at(1024),
        remote.rkey,
    ))
    .unwrap();
    let wc = one(&c.cq);
    assert_eq!((wc.opcode(), wc.byte_len()), (Some(WcOpcode::Read), 4096));
    assert_eq!(cm.to_vec(4096, 4096).unwrap(), data);

    // Write with Immediate consumes a receive that carries the immediate.
    s.qp.post_recv(&RecvWr::new(11, &[])).unwrap();
    c.qp.post_send(&SendWr::write_imm(
        4,
        &[cm.sge(0, 8).unwrap()],
        remote.at(0),
        remote.rkey,
        0xfeed,
    ))
    .unwrap();
    one(&c.cq);
    let r = one(&s.cq);
    assert_eq!(
        (r.opcode(), r.imm()),
        (Some(WcOpcode::RecvImm), Some(0xfeed))
    );

    // Atomics on a native-endian counter.
    sm.write(0, &40u64.to_ne_bytes()).unwrap();
    c.qp.post_send(&SendWr::fetch_add(
        5,
        cm.sge(0, 8).unwrap(),
        remote.at(0),
        remote.rkey,
        2,
    ))
    .unwrap();
    one(&c.cq);
    assert_eq!(cm.to_vec(0, 8).unwrap(), 40u64.to_ne_bytes());
    c.qp.post_send(&SendWr::cmp_swap(
        6,
        cm.sge(0, 8).unwrap(),
        remote.at(0),
        remote.rkey,
        42,
        7,
    ))
    .unwrap();
    one(&c.cq);
    assert_eq!(cm.to_vec(0, 8).unwrap(), 42u64.to_ne_bytes());
    assert_eq!(sm.to_vec(0, 8).unwrap(), 7u64.to_ne_bytes());

    // Send with Invalidate reports the invalidated STag.
    s.qp.post_recv(&RecvWr::new(12, &[sm.sge(0, 16).unwrap()]))
        .unwrap();
    c.qp.post_send(&SendWr::send_invalidate(
        7,
        &[cm.sge(0, 1).unwrap()],
        sm.rkey(),
    ))
    .unwrap();
    one(&c.cq);
    assert_eq!(one(&s.cq).invalidated_rkey(), Some(sm.rkey()));
}

#[test]
fn memory_outside_segments_is_refused_and_inside_is_registered() {
    let d = FakeDaemon::start("mem");
    let dev = Device::open(&d.spec()).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let heap = vec![0u8; 4096];
    match pd.reg_slice(&heap, Access::LOCAL_WRITE) {
        Err(Error::NotShared { len: 4096, .. }) => {}
        other => panic!("expected NotShared, got {other:?}"),
    }
    let seg = dev.alloc_segment(1 << 20).unwrap();
    let inside = seg.as_ptr().wrapping_add(4096);
    let mr = pd.reg_ptr(inside, 8192, Access::LOCAL_WRITE).unwrap();
    mr.write(0, b"x").unwrap();
    let mut b = [0u8; 1];
    seg.read(4096, &mut b).unwrap();
    assert_eq!(&b, b"x");
    // Straddling the end of the segment is outside too.
    let tail = seg.as_ptr().wrapping_add(seg.len() - 10);
    assert!(matches!(
        pd.reg_ptr(tail, 20, Access::LOCAL_WRITE),
        Err(Error::NotShared { .. })
    ));
    assert!(matches!(mr.sge(8000, 500), Err(Error::OutOfRange { .. })));
}

#[test]
fn dropping_everything_releases_everything() {
    let d = FakeDaemon::start("drop");
    {
        let (c, s, sid, cid) = pair(&d);
        let _m1 = c.pd.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();
        let _m2 = s.pd.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();
        let n = d.counts();
        assert!(
            n.qps == 2 && n.mrs == 2 && n.cqs == 2 && n.pds == 2,
            "{n:?}"
        );
        drop((c, s, sid, cid));
    }
    let n = d.counts();
    assert_eq!(
        (n.segments, n.mrs, n.cqs, n.qps, n.pds, n.cm_ids),
        (0, 0, 0, 0, 0, 0),
        "every object released by its Drop: {n:?}"
    );
}

#[test]
fn reject_carries_private_data_and_refused_connect_fails() {
    let d = FakeDaemon::start("rej");
    let s = side(&d);
    let c = side(&d);
    let lis = s.dev.create_cm_id().unwrap();
    lis.listen("0.0.0.0:9000".parse().unwrap(), 1).unwrap();
    let cid = c.dev.create_cm_id().unwrap();
    cid.connect(&c.qp, "10.99.0.1:9000".parse().unwrap(), &ConnParam::new())
        .unwrap();
    let req = lis.get_request(T).unwrap();
    req.id.reject(b"go away").unwrap();
    match cid.wait_established(T) {
        Err(Error::Rejected { private_data }) => assert_eq!(private_data, b"go away"),
        other => panic!("expected Rejected, got {other:?}"),
    }
    let cid2 = c.dev.create_cm_id().unwrap();
    cid2.connect(&c.qp, "10.99.0.1:9001".parse().unwrap(), &ConnParam::new())
        .unwrap();
    assert!(matches!(
        cid2.wait_established(T),
        Err(Error::ConnectFailed { .. })
    ));
    let too_long = ConnParam::new().private_data(&[0u8; 300]);
    assert!(matches!(
        cid2.connect(&c.qp, "10.99.0.1:9000".parse().unwrap(), &too_long),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn full_queue_is_an_error_and_disconnect_flushes() {
    let d = FakeDaemon::start("full");
    let (c, _s, _sid, cid) = pair(&d);
    let mr = c.pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    // No receive at the peer: the first Send waits, the rest fill the 16-entry ring.
    let wr = SendWr::send(0, &[mr.sge(0, 8).unwrap()]);
    let mut posted = 0;
    loop {
        match c.qp.post_send(&wr) {
            Ok(()) => posted += 1,
            Err(Error::QueueFull("send")) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(posted <= 64, "the ring never filled");
    }
    assert!((16..=17).contains(&posted), "{posted}");
    cid.disconnect().unwrap();
    let mut flushed = 0;
    let mut wcs = [Wc::default(); 8];
    let deadline = std::time::Instant::now() + T;
    while flushed < posted && std::time::Instant::now() < deadline {
        let n = c.cq.poll(&mut wcs).unwrap();
        for wc in &wcs[..n] {
            assert_eq!(wc.status(), WcStatus::Flushed, "{wc}");
            flushed += 1;
        }
    }
    assert_eq!(flushed, posted);
    match cid.get_event(Some(T)).unwrap() {
        Some(CmEvent::Disconnected { .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_spec_and_missing_daemon_are_clear_errors() {
    let e = Device::open("tcp:1.2.3.4").unwrap_err().to_string();
    assert!(
        e.contains("unknown scheme") && e.contains("unix:PATH"),
        "{e}"
    );
    let e = Device::open("/nonexistent/iwarpd.sock")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot connect") && e.contains("iwarpd"), "{e}");
    assert_eq!(
        verbs::DeviceSpec::parse("configs/memif-a.toml").unwrap(),
        verbs::DeviceSpec::Embedded("configs/memif-a.toml".into())
    );
    assert_eq!(
        verbs::DeviceSpec::parse("/run/iwarpd.sock").unwrap(),
        verbs::DeviceSpec::Daemon("/run/iwarpd.sock".into())
    );
}
