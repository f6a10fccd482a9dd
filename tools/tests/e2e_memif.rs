//! RDMA end to end between two hosts on a memif wire (issue 7), with client processes: two
//! `iwarpd` daemons (A: memif server, 10.77.0.1; B: memif client, 10.77.0.2), or the same
//! engine embedded in the client processes (`Device::open` of an iwarpd config).
//!
//! - every operation (Send, Send+SE, Send+Inv, Write, Write+Imm, Read, FetchAdd, CmpSwap) at
//!   0 B, 1 B, 4 KiB, 1 MiB, 8 MiB, SHA-256 compared on both sides (`iwarp-opcheck`), with CRC
//!   off, CRC on, and CRC + markers; the negotiated CRC/markers as the server saw them;
//! - 100 QPs at once, each checking its data;
//! - every operation with CRC on while both loops hold their frames after a short TX burst
//!   (`dataplane.tx_backoff_ns`);
//! - embedded mode: an embedded client against daemon A, and two embedded processes;
//! - `iwarp-rping -c -C 100 -v -V` against `iwarp-rping -s -v` through the two daemons: the
//!   lines rping prints, checked against rping's format (and siw's own rping output).
//!
//! Root (DPDK, memif); skipped loudly otherwise. Run by hand under
//! `flock /tmp/iwarp-e2e.lock cargo test -p iwarp-tools --test e2e_memif`.
#[path = "../../control/tests/common/mod.rs"]
mod common;
mod e2e;

use common::{TempDir, counter, root_or_skip};
use e2e::{
    ALL_SIZES, Daemon, Wire, assert_every_op, checks_for, finish_server, host_config,
    opcheck_client, opcheck_server, run, serial,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const A_IP: &str = "10.77.0.1";
const SIZES: [usize; 5] = [0, 1, 4096, 1 << 20, 8 << 20];

fn wires(dir: &TempDir) -> (Wire, Wire) {
    let socket = dir.path("memif.sock");
    (
        Wire::Memif {
            role: "server",
            socket: socket.clone(),
        },
        Wire::Memif {
            role: "client",
            socket,
        },
    )
}

/// Configs of A and B (`extra` appended to both).
fn configs(dir: &TempDir, extra: &str) -> (PathBuf, PathBuf) {
    let (wa, wb) = wires(dir);
    (
        host_config(dir, "a", &wa, A_IP, 0, extra),
        host_config(dir, "b", &wb, "10.77.0.2", 1, extra),
    )
}

/// Both daemons, A first (the memif server).
fn daemons(dir: &TempDir, extra: &str) -> (Daemon, Daemon) {
    let (ca, cb) = configs(dir, extra);
    let a = Daemon::start(dir, "a", &ca, &[]);
    let b = Daemon::start(dir, "b", &cb, &[]);
    (a, b)
}

/// Wait until a daemon's stats show no client and no registered MR (everything freed).
fn all_freed(d: &Daemon) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = d.stats();
        if counter(&s, "control", "clients") == Some(0)
            && counter(&s, "control", "clients_releasing") == Some(0)
            && counter(&s, "control", "registered_mrs") == Some(0)
        {
            return;
        }
        assert!(Instant::now() < deadline, "resources left:\n{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The three opcheck client runs (CRC off, CRC on, CRC + markers) against one server that
/// does not ask for CRC itself, so the client's choice is what gets negotiated.
fn crc_off_on_markers(
    dir: &TempDir,
    server_spec: &str,
    client_spec: &str,
    others: &[&common::Proc],
) {
    let server = opcheck_server(dir, "opcheck-server.log", server_spec, 7471, 3, "8m");
    let variants: [(&str, &[&str]); 3] = [
        ("crc-off", &["--crc", "off"]),
        ("crc-on", &["--crc", "on"]),
        ("markers", &["--crc", "on", "--markers"]),
    ];
    for (name, v) in variants {
        let mut args = vec!["-v", "--sizes", ALL_SIZES];
        args.extend_from_slice(v);
        let t = Instant::now();
        let mut all = others.to_vec();
        all.push(&server);
        let out = opcheck_client(
            dir,
            &format!("opcheck-{name}.log"),
            client_spec,
            (A_IP, 7471),
            &args,
            (checks_for(SIZES.len()), 1),
            &all,
        );
        assert_every_op(&out, &SIZES);
        eprintln!("{name}: every operation at every size in {:?}", t.elapsed());
    }
    finish_server(
        server,
        &[
            "(CRC false, markers false)",
            "(CRC true, markers false)",
            "(CRC true, markers true)",
        ],
    );
}

#[test]
fn every_operation_between_two_daemons() {
    let _g = serial();
    if !root_or_skip("every_operation_between_two_daemons") {
        return;
    }
    let dir = TempDir::new("e2e-ops");
    let (a, b) = daemons(&dir, "");
    crc_off_on_markers(&dir, &a.spec, &b.spec, &[&a.proc, &b.proc]);
    // The daemons freed every client resource and counted the bytes. A QP's counts reach its
    // client when the QP is released, after its process has left, so they are read once
    // everything is freed: the client's counters then live on in [freed_clients].
    all_freed(&a);
    all_freed(&b);
    let sa = a.stats();
    let sum = |key| {
        common::counter_sum(&sa, "client.", key) + common::counter_sum(&sa, "freed_clients", key)
    };
    assert!(sum("bytes_placed") > 3 * (4 * (8 << 20)), "{sa}");
    assert_eq!(sum("crc_errors"), 0, "{sa}");
    a.stop();
    b.stop();
}

#[test]
fn hundred_qps_at_once() {
    let _g = serial();
    if !root_or_skip("hundred_qps_at_once") {
        return;
    }
    let dir = TempDir::new("e2e-100qp");
    let (a, b) = daemons(&dir, "");
    let server = opcheck_server(&dir, "opcheck-server.log", &a.spec, 7472, 100, "64k");
    let t = Instant::now();
    let out = opcheck_client(
        &dir,
        "opcheck-client.log",
        &b.spec,
        (A_IP, 7472),
        &["--qps", "100", "--sizes", "1,4k,64k"],
        (100 * checks_for(3), 100),
        &[&a.proc, &b.proc, &server],
    );
    eprintln!(
        "100 QPs: {} checks in {:?}",
        100 * checks_for(3),
        t.elapsed()
    );
    for i in 0..100 {
        assert!(
            out.contains(&format!("ok qp={i}: all checks passed")),
            "qp {i}:\n{out}"
        );
    }
    let expect = vec!["client said bye"; 100];
    finish_server(server, &expect);
    all_freed(&a);
    all_freed(&b);
    a.stop();
    b.stop();
}

/// Every operation at every size with CRC on, both daemons holding their frames after a
/// short TX burst (`dataplane.tx_backoff_ns`): nothing lost, reordered or stalled; when a
/// daemon's ring filled (`tx_short`), its loop held (`tx_held`).
#[test]
fn every_operation_with_a_tx_hold() {
    let _g = serial();
    if !root_or_skip("every_operation_with_a_tx_hold") {
        return;
    }
    let dir = TempDir::new("e2e-txhold");
    let (ca, cb) = configs(&dir, "");
    for c in [&ca, &cb] {
        let text = std::fs::read_to_string(c).expect("config");
        // A 64-slot ring (memif's rsize, log2), so that the bulk sizes fill it.
        let held = text
            .replace("[dataplane]\n", "[dataplane]\ntx_backoff_ns = 20000\n")
            .replace("socket-abstract=no", "socket-abstract=no,rsize=6");
        assert_eq!(
            held.len(),
            text.len() + 30,
            "no [dataplane] or memif device in\n{text}"
        );
        std::fs::write(c, held).expect("config");
    }
    let a = Daemon::start(&dir, "a", &ca, &[]);
    let b = Daemon::start(&dir, "b", &cb, &[]);
    let server = opcheck_server(&dir, "opcheck-server.log", &a.spec, 7473, 1, "8m");
    let out = opcheck_client(
        &dir,
        "opcheck-client.log",
        &b.spec,
        (A_IP, 7473),
        &["-v", "--sizes", ALL_SIZES, "--crc", "on"],
        (checks_for(SIZES.len()), 1),
        &[&a.proc, &b.proc, &server],
    );
    assert_every_op(&out, &SIZES);
    finish_server(server, &["(CRC true, markers false)"]);
    all_freed(&a);
    all_freed(&b);
    let mut filled = 0;
    for d in [&a, &b] {
        let s = d.stats();
        let short = counter(&s, "lcore.0", "tx_short").unwrap_or(0);
        let held = counter(&s, "lcore.0", "tx_held").unwrap_or(0);
        eprintln!("tx_short {short}, tx_held {held}");
        assert!(short < 16 || held > 0, "short bursts but no hold:\n{s}");
        assert_eq!(counter(&s, "lcore.0", "drop_tx_full"), Some(0), "{s}");
        filled += short;
    }
    assert!(
        filled > 0,
        "the rings never filled: the hold was not exercised"
    );
    a.stop();
    b.stop();
}

/// An embedded client process (the engine with B's config inside `iwarp-opcheck`) against
/// daemon A; then the other way round (an embedded server with A's config, daemon B's client).
#[test]
fn embedded_client_and_server_against_a_daemon() {
    let _g = serial();
    if !root_or_skip("embedded_client_and_server_against_a_daemon") {
        return;
    }
    let dir = TempDir::new("e2e-emb1");
    let (ca, cb) = configs(&dir, "");
    let a = Daemon::start(&dir, "a", &ca, &[]);
    let client_spec = format!("embedded:{}", cb.display());
    crc_off_on_markers(&dir, &a.spec, &client_spec, &[&a.proc]);
    all_freed(&a);
    a.stop();
    // The embedded side as the memif server (A's config), daemon B as the client host.
    let server = opcheck_server(
        &dir,
        "opcheck-emb-server.log",
        &format!("embedded:{}", ca.display()),
        7473,
        1,
        "8m",
    );
    let b = Daemon::start(&dir, "b", &cb, &[]);
    let out = opcheck_client(
        &dir,
        "opcheck-to-emb.log",
        &b.spec,
        (A_IP, 7473),
        &["-v", "--sizes", ALL_SIZES, "--crc", "on"],
        (checks_for(SIZES.len()), 1),
        &[&b.proc, &server],
    );
    assert_every_op(&out, &SIZES);
    finish_server(server, &["(CRC true, markers false)"]);
    all_freed(&b);
    b.stop();
}

/// Both ends embedded: two processes, each with its own engine, on one memif wire.
#[test]
fn embedded_to_embedded() {
    let _g = serial();
    if !root_or_skip("embedded_to_embedded") {
        return;
    }
    let dir = TempDir::new("e2e-emb2");
    let (ca, cb) = configs(&dir, "");
    crc_off_on_markers(
        &dir,
        &format!("embedded:{}", ca.display()),
        &format!("embedded:{}", cb.display()),
        &[],
    );
}

/// rping's `-v` line for ping `n` of `size` bytes (rdma-core's rping.c: "rdma-ping-%d: "
/// then printable characters from 'A' + n % 58 on, wrapping after 'z' to 'A', the last byte
/// the NUL).
fn rping_line(n: u64, size: usize) -> String {
    let mut s = format!("rdma-ping-{n}: ");
    let mut c = 65 + (n % 58) as u8;
    while s.len() < size - 1 {
        s.push(c as char);
        c = if c >= 122 { 65 } else { c + 1 };
    }
    s.truncate(size - 1);
    format!("ping data: {s}")
}

#[test]
fn rping_100_verified_pings_through_two_daemons() {
    let _g = serial();
    if !root_or_skip("rping_100_verified_pings_through_two_daemons") {
        return;
    }
    // The format above reproduces siw's rping output (recorded) line for line.
    let recorded = include_str!("data/rping.client.txt");
    let rec: Vec<&str> = recorded
        .lines()
        .filter(|l| l.starts_with("ping data"))
        .collect();
    for (i, l) in rec.iter().enumerate() {
        assert_eq!(*l, rping_line(i as u64, 64));
    }
    let dir = TempDir::new("e2e-rping");
    let (a, b) = daemons(&dir, "");
    let rounds: [&[&str]; 2] = [&["-v", "-V"], &["-v"]];
    for (round, flags) in rounds.into_iter().enumerate() {
        let port = (7174 + round as u16).to_string();
        let server = e2e::start_ready(
            &dir,
            &format!("rping-server{round}.log"),
            &[e2e::rping(), "-s", "-v", "-p", &port, "-d", &a.spec],
            "server listening",
        );
        let mut argv = vec![e2e::rping(), "-c"];
        argv.extend_from_slice(flags);
        argv.extend(["-C", "100", "-a", A_IP, "-p", &port, "-d", &b.spec]);
        let (code, out) = run(
            &dir,
            &format!("rping-client{round}.log"),
            &argv,
            Duration::from_secs(120),
        );
        assert_eq!(
            code,
            Some(0),
            "rping client:\n{out}\nserver:\n{}",
            server.output()
        );
        let got: Vec<&str> = out.lines().filter(|l| l.starts_with("ping data")).collect();
        let want: Vec<String> = (0..100).map(|n| rping_line(n, 64)).collect();
        assert_eq!(got, want, "client output:\n{out}");
        assert!(out.contains("client DISCONNECT EVENT..."), "{out}");
        let mut server = server;
        let scode = server.wait(Duration::from_secs(30));
        let sout = server.output();
        assert_eq!(scode, Some(0), "rping server:\n{sout}");
        let sgot: Vec<&str> = sout
            .lines()
            .filter(|l| l.starts_with("server ping data"))
            .collect();
        let swant: Vec<String> = want.iter().map(|l| format!("server {l}")).collect();
        assert_eq!(sgot, swant, "server output:\n{sout}");
    }
    all_freed(&a);
    all_freed(&b);
    a.stop();
    b.stop();
}

/// A daemon that stops (SIGTERM) resets its connections: the peer's application sees its QP
/// fail at once (rping exits with an error) instead of hanging until TCP gives up.
#[test]
fn a_stopping_daemon_resets_its_connections() {
    let _g = serial();
    if !root_or_skip("a_stopping_daemon_resets_its_connections") {
        return;
    }
    let dir = TempDir::new("e2e-stop");
    let (a, b) = daemons(&dir, "");
    let server = e2e::start_ready(
        &dir,
        "rping-server.log",
        &[e2e::rping(), "-s", "-v", "-p", "7176", "-d", &a.spec],
        "server listening",
    );
    // Pings until stopped (-C 0: forever).
    let argv = [
        e2e::rping(),
        "-c",
        "-v",
        "-a",
        A_IP,
        "-p",
        "7176",
        "-d",
        &b.spec,
    ];
    let mut client = common::Proc::spawn(&argv, &dir.path("rping-client.log"));
    assert!(
        client.wait_for("ping data: rdma-ping-50", Duration::from_secs(60)),
        "no pings:\n{}",
        client.output()
    );
    let a_out = a.stop();
    assert!(
        a_out.contains("resetting open connections"),
        "iwarpd a:\n{a_out}"
    );
    let t = Instant::now();
    let code = client.wait(Duration::from_secs(10));
    let out = client.output();
    assert!(
        code.is_some_and(|c| c != 0),
        "rping client still running or exited 0 {:?} after its peer's daemon stopped \
         ({code:?}):\n{}",
        t.elapsed(),
        e2e::tail(&out, 20)
    );
    eprintln!("rping client after the reset:\n{}", e2e::tail(&out, 4));
    drop(server);
    all_freed(&b);
    // B's TCP took the reset (its exit report has the TCP counters).
    let out_b = b.stop();
    assert!(
        common::counter_sum(&out_b, "lcore.", "resets_received") > 0,
        "{out_b}"
    );
}

/// The completions a CQ yields within `timeout` until `n` arrived, as (wr_id, status).
fn completions(cq: &verbs::Cq, n: usize, timeout: Duration) -> Vec<(u64, verbs::WcStatus)> {
    let deadline = Instant::now() + timeout;
    let mut v = Vec::new();
    while v.len() < n && Instant::now() < deadline {
        if let Some(wc) = cq.wait_one(Duration::from_millis(50)).expect("poll the CQ") {
            v.push((wc.wr_id(), wc.status()));
        }
    }
    v.sort_by_key(|c| c.0);
    v
}

/// Issue #7 follow-ups, through the daemons (IBV_WC_WR_FLUSH_ERR semantics: a QP in ERROR
/// completes every posted WR flushed):
/// (b) a QP whose active open is still in MPA startup (the server got the request but never
///     answers it) moved to ERROR: the connect fails, the receive and the Send posted before
///     complete flushed, and so does a receive posted afterwards;
/// (a) a QP whose connection the peer closed: WRs posted after the end complete flushed.
#[test]
fn flushed_completions_through_the_daemons() {
    use std::net::{Ipv4Addr, SocketAddrV4};
    use verbs::{Access, CmEvent, ConnParam, RecvWr, SendWr, WcStatus};
    let _g = serial();
    if !root_or_skip("flushed_completions_through_the_daemons") {
        return;
    }
    let dir = TempDir::new("e2e-flush");
    let (a, b) = daemons(&dir, "");
    let t = Duration::from_secs(10);
    let srv = verbs::Device::open(&a.spec).expect("open A");
    let cli = verbs::Device::open(&b.spec).expect("open B");
    let listen = srv.create_cm_id().unwrap();
    let at = SocketAddrV4::new(A_IP.parse::<Ipv4Addr>().unwrap(), 7481);
    listen.listen(at, 4).unwrap();
    let pd = cli.alloc_pd().unwrap();
    let cq = cli.create_cq(16, None).unwrap();
    let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();

    // (b) flush during MPA startup.
    let qp = pd.create_qp(&cq, &cq).build().unwrap();
    qp.post_recv(&RecvWr::new(1, &[mr.sge(0, 64).unwrap()]))
        .unwrap();
    qp.post_send(&SendWr::send(2, &[mr.sge(64, 64).unwrap()]))
        .unwrap();
    let id = cli.create_cm_id().unwrap();
    id.connect(&qp, at, &ConnParam::new()).unwrap();
    let req = listen.get_request(t).expect("the MPA request reached A");
    assert!(completions(&cq, 1, Duration::from_millis(300)).is_empty());
    qp.modify_to_error().unwrap();
    let ev = id.get_event(Some(t)).unwrap().expect("a CM event");
    assert!(matches!(ev, CmEvent::ConnectFailed { .. }), "{ev:?}");
    assert_eq!(
        completions(&cq, 2, t),
        vec![(1, WcStatus::Flushed), (2, WcStatus::Flushed)]
    );
    qp.post_recv(&RecvWr::new(3, &[mr.sge(0, 64).unwrap()]))
        .unwrap();
    assert_eq!(completions(&cq, 1, t), vec![(3, WcStatus::Flushed)]);
    drop(req);
    drop((id, qp));

    // (a) posted after the connection is gone.
    let qp = pd.create_qp(&cq, &cq).build().unwrap();
    qp.post_recv(&RecvWr::new(10, &[mr.sge(0, 64).unwrap()]))
        .unwrap();
    let id = cli.create_cm_id().unwrap();
    id.connect(&qp, at, &ConnParam::new()).unwrap();
    let req = listen.get_request(t).expect("second request");
    let spd = srv.alloc_pd().unwrap();
    let scq = srv.create_cq(16, None).unwrap();
    let sqp = spd.create_qp(&scq, &scq).build().unwrap();
    req.id.accept(&sqp, &ConnParam::new()).unwrap();
    id.wait_established(t).expect("established");
    req.id.disconnect().unwrap();
    let ev = id.get_event(Some(t)).unwrap().expect("a CM event");
    assert!(matches!(ev, CmEvent::Disconnected { .. }), "{ev:?}");
    // The receive posted before: flushed at the end.
    assert_eq!(completions(&cq, 1, t), vec![(10, WcStatus::Flushed)]);
    qp.post_send(&SendWr::send(11, &[mr.sge(64, 64).unwrap()]))
        .unwrap();
    qp.post_recv(&RecvWr::new(12, &[mr.sge(0, 64).unwrap()]))
        .unwrap();
    assert_eq!(
        completions(&cq, 2, t),
        vec![(11, WcStatus::Flushed), (12, WcStatus::Flushed)]
    );
    drop((req, id, qp, sqp, scq, spd, listen, mr, cq, pd));
    drop((srv, cli));
    all_freed(&a);
    all_freed(&b);
    a.stop();
    b.stop();
}
