//! The control socket under bad input and a killed client:
//! - in process (any user): the same server code over the engine seam without DPDK;
//! - against a running `iwarpd` (root: DPDK on a memif port; run under
//!   `flock /tmp/iwarp-e2e.lock`).
//!
//! Each bad request must get a clear error while the daemon keeps serving; a client killed
//! with SIGKILL must leave nothing behind in the daemon's stats.
mod common;
#[path = "common/ctl_client.rs"]
mod ctl_client;

use abi::ctl::{self, CmId, ErrorCode, MpaOverride, Request, Response};
use common::{Proc, TempDir, counter, root_or_skip};
use control::server::ControlServer;
use control::service::{Service, ServiceConfig};
use ctl_client::{Raw, expect_err, set_up};
use dataplane::rdma::{EngineConfig, MemTable, engine_channels};
use shm::{HugepagePolicy, Segment};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bad input of every kind; the daemon answers each with a clear error and keeps serving.
fn exercise_bad_input(path: &Path, subs: u32) {
    let mut a = Raw::connect(path);
    expect_err(
        a.call(&Request::AllocPd {}),
        ErrorCode::NotHello,
        "before Hello",
    );
    let hello = Request::Hello {
        abi_version: abi::ABI_VERSION,
        pid: 1,
        name: "x".into(),
    }
    .encode(50);
    expect_err(
        a.raw(&hello[..hello.len() - 3], 50),
        ErrorCode::BadMessage,
        "truncated",
    );
    expect_err(a.raw(&hello[..7], 0), ErrorCode::BadMessage, "truncated");
    let mut unknown = Request::AllocPd {}.encode(51);
    unknown[8..10].copy_from_slice(&0x0077u16.to_le_bytes());
    expect_err(
        a.raw(&unknown, 51),
        ErrorCode::BadMessage,
        "unknown message kind 0x0077",
    );
    // An event sent to the daemon: not a request.
    let event = ctl::Event::Disconnected { id: CmId(1) }.encode();
    expect_err(
        a.raw(&event, 0),
        ErrorCode::BadMessage,
        "unknown message kind",
    );
    let mut event = event;
    event[12..16].copy_from_slice(&52u32.to_le_bytes());
    expect_err(a.raw(&event, 52), ErrorCode::BadMessage, "event id");
    let mut version = Request::AllocPd {}.encode(53);
    version[4..8].copy_from_slice(&99u32.to_le_bytes());
    expect_err(a.raw(&version, 53), ErrorCode::AbiVersion, "ABI version 99");
    expect_err(
        a.raw(b"hello daemon", 0),
        ErrorCode::BadMessage,
        "bad magic",
    );
    expect_err(
        a.raw(&vec![0u8; ctl::MAX_MESSAGE + 500], 0),
        ErrorCode::BadMessage,
        "longer than",
    );
    let old = Request::Hello {
        abi_version: abi::ABI_VERSION + 1,
        pid: 1,
        name: "future".into(),
    };
    expect_err(a.call(&old), ErrorCode::AbiVersion, "client ABI version");
    a.hello();
    expect_err(
        a.call(&Request::AttachSegment { len: 1 << 20 }),
        ErrorCode::MissingFd,
        "memfd",
    );
    let small = Segment::create("ctl-small", 8192, HugepagePolicy::Off).unwrap();
    expect_err(
        a.call_fds(&Request::AttachSegment { len: 1 << 20 }, &[small.fd()]),
        ErrorCode::BadFd,
        "8192 bytes",
    );
    let exe = std::fs::File::open("/proc/self/exe").unwrap();
    expect_err(
        a.call_fds(&Request::AttachSegment { len: 8192 }, &[exe.as_fd()]),
        ErrorCode::BadFd,
        "sealed",
    );
    expect_err(
        a.call_fds(&Request::AllocPd {}, &[small.fd()]),
        ErrorCode::InvalidArgument,
        "takes no file descriptor",
    );
    let held = set_up(&mut a, subs, 7100);
    // Another client: A's handles, lkey and STag are unknown to it.
    let mut b = Raw::connect(path);
    b.hello();
    let unknown = ErrorCode::UnknownHandle;
    expect_err(
        b.call(&Request::DeallocPd { pd: held.pd }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DetachSegment {
            segment: held.segment,
        }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DeregMr { lkey: held.lkey }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DeregMr { lkey: held.rkey }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DestroyCq { cq: held.cq }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DestroyQp { qp: held.qp }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::QueryQp { qp: held.qp }),
        unknown,
        "not yours",
    );
    expect_err(
        b.call(&Request::DestroyCmId { id: held.cm }),
        unknown,
        "not yours",
    );
    let Response::Pd { pd: bpd } = b.call(&Request::AllocPd {}) else {
        panic!()
    };
    expect_err(
        b.call(&Request::RegMr {
            pd: bpd,
            segment: held.segment,
            offset: 0,
            len: 1,
            iova: 0,
            access: 0,
        }),
        unknown,
        "not yours",
    );
    let Response::CmId { id: bcm } = b.call(&Request::CreateCmId {}) else {
        panic!()
    };
    expect_err(
        b.call(&Request::Connect {
            id: bcm,
            qp: held.qp,
            remote: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7174),
            private_data: vec![],
            ird: 1,
            ord: 1,
            mpa: MpaOverride::default(),
        }),
        unknown,
        "not yours",
    );
    // B cannot listen on A's port either.
    expect_err(
        b.call(&Request::Listen {
            id: bcm,
            addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7100),
            backlog: 1,
        }),
        ErrorCode::AddressInUse,
        "7100",
    );
    // A's objects are intact and A is still served.
    let r = a.call(&Request::QueryQp { qp: held.qp });
    assert!(matches!(r, Response::QpAttrs { .. }), "{r:?}");
    assert_eq!(
        a.call(&Request::DeregMr { lkey: held.lkey }),
        Response::Done {}
    );
    expect_err(
        a.call(&Request::DeregMr { lkey: held.lkey }),
        unknown,
        "lkey",
    );
    let r = a.call(&Request::QueryDevice {});
    let Response::Device { device } = r else {
        panic!("{r:?}")
    };
    assert_eq!(device.cq_subs, subs);
    drop(held.seg);
    // A fresh client is served normally.
    let mut c = Raw::connect(path);
    c.hello();
}

fn in_process_server(dir: &TempDir, threads: usize) -> (ControlServer, PathBuf) {
    let (engine, _setups) =
        engine_channels(threads, MemTable::new(4096, 1), EngineConfig::default());
    let cfg = ServiceConfig {
        mac: [2, 0, 0, 0, 0, 1],
        ip: Ipv4Addr::new(10, 77, 0, 1),
        mpa: Default::default(),
        max_clients: 16,
        limits: Default::default(),
        allow_faults: false,
    };
    let svc = Arc::new(Mutex::new(Service::new(Arc::new(engine), cfg)));
    let path = dir.path("ctl.sock");
    let srv = ControlServer::start(svc, Some((&path, 0o600))).unwrap();
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    (srv, path)
}

/// The ids of this process's threads named `name`.
fn threads_named(name: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .map(|t| t.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn server_start_returns_with_its_event_thread_running() {
    // A new thread names itself when it first runs: `start` returns only after that, so the
    // thread is there by name at once (embedded mode's callers see the engine's threads).
    // Other tests of this binary may run servers meanwhile (`cargo test` runs them in
    // threads): look for a thread that was not there before.
    let dir = TempDir::new("ctl-up");
    for _ in 0..20 {
        let before = threads_named("ctl-events");
        let (srv, path) = in_process_server(&dir, 1);
        let after = threads_named("ctl-events");
        assert!(after.difference(&before).next().is_some(), "{after:?}");
        srv.stop();
        assert!(!path.exists());
    }
}

#[test]
fn bad_input_gets_clear_errors_in_process() {
    let dir = TempDir::new("ctl-inproc");
    let (srv, path) = in_process_server(&dir, 2);
    exercise_bad_input(&path, 2);
    // Every client above closed its socket: all freed.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (clients, freed, mrs) = {
            let s = srv.service().lock().unwrap();
            (s.clients(), s.totals().clients_freed, s.engine().mem.len())
        };
        if clients == 0 && mrs == 0 {
            assert_eq!(freed, 3);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "clients {clients}, MRs {mrs} left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    srv.stop();
    assert!(!path.exists(), "socket removed at stop");
}

/// Helper process for the killed-client tests: sets up resources on the socket named by
/// `IWARP_CTL_CHILD`, says "child ready", then waits to be killed.
#[test]
#[ignore = "helper process, started by killed_client_* tests"]
fn child_client() {
    let Ok(path) = std::env::var("IWARP_CTL_CHILD") else {
        return;
    };
    let subs: u32 = std::env::var("IWARP_CTL_SUBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut c = Raw::connect(Path::new(&path));
    c.hello();
    let _held = set_up(&mut c, subs, 7200);
    println!("child ready");
    std::thread::sleep(Duration::from_secs(120));
}

fn spawn_child(dir: &TempDir, path: &Path, subs: u32) -> Proc {
    let exe = std::env::current_exe().unwrap();
    let log = dir.path("child.log");
    let cmd = format!(
        "env IWARP_CTL_CHILD={} IWARP_CTL_SUBS={subs} {} --ignored --exact child_client --nocapture",
        path.display(),
        exe.display()
    );
    let child = Proc::spawn(&["sh", "-c", &format!("exec {cmd}")], &log);
    assert!(
        child.wait_for("child ready", Duration::from_secs(30)),
        "child did not set up:\n{}",
        child.output()
    );
    child
}

#[test]
fn killed_client_is_freed_in_process() {
    let dir = TempDir::new("ctl-kill");
    let (srv, path) = in_process_server(&dir, 1);
    let child = spawn_child(&dir, &path, 1);
    {
        let s = srv.service().lock().unwrap();
        assert_eq!(s.clients(), 1);
        assert_eq!(s.engine().mem.len(), 1);
        let st = &s.client_stats()[0];
        assert_eq!((st.held.mrs, st.held.qps, st.held.cqs), (1, 1, 1));
        assert_eq!(st.pid, child.pid(), "pid from SO_PEERCRED");
    }
    child.signal("KILL");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (clients, freed, mrs) = {
            let s = srv.service().lock().unwrap();
            (s.clients(), s.totals().clients_freed, s.engine().mem.len())
        };
        if clients == 0 && freed == 1 && mrs == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "clients {clients}, freed {freed}, MRs {mrs}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The listener of the dead client is gone: its port is free for the next client.
    let mut c = Raw::connect(&path);
    c.hello();
    let _ = set_up(&mut c, 1, 7200);
    srv.stop();
}

/// A running iwarpd on a memif port (no peer needed), with a stats file.
fn start_daemon(dir: &TempDir, name: &str) -> (Proc, PathBuf, PathBuf) {
    let sock = dir.path("ctl.sock");
    let stats = dir.path("stats");
    let prefix = format!("iwt-{name}-{}", std::process::id());
    let cfg = dir.write(
        "iwarpd.toml",
        &format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 256\nfile_prefix = \"{prefix}\"\n\
             [port]\ndevice = \"net_memif0,role=server,id=0,socket={},socket-abstract=no\"\n\
             ip = \"10.77.0.1/24\"\n[dataplane]\ncores = [1]\nmbufs = 8192\n\
             [stats]\nfile = \"{}\"\ninterval_ms = 50\n[diag]\nrun_seconds = 120\n\
             [control]\nsocket = \"{}\"\n",
            dir.path("memif.sock").display(),
            stats.display(),
            sock.display()
        ),
    );
    let d = Proc::spawn(
        &[common::iwarpd(), "--config", cfg.to_str().unwrap()],
        &dir.path("iwarpd.log"),
    );
    assert!(
        d.wait_for("control socket listening", Duration::from_secs(30)),
        "iwarpd did not start:\n{}",
        d.output()
    );
    (d, sock, stats)
}

/// Wait until the stats file satisfies `ok`; returns it.
fn stats_until(path: &Path, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = std::fs::read_to_string(path).unwrap_or_default();
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "stats never showed {what}:\n{s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn daemon_answers_bad_input_and_frees_a_killed_client() {
    if !root_or_skip("daemon_answers_bad_input_and_frees_a_killed_client") {
        return;
    }
    let dir = TempDir::new("ctl-daemon");
    let (mut d, sock, stats) = start_daemon(&dir, "ctl");
    exercise_bad_input(&sock, 1);
    stats_until(&stats, "the test clients freed", |s| {
        counter(s, "control", "clients") == Some(0)
            && counter(s, "control", "clients_freed") == Some(3)
    });
    let child = spawn_child(&dir, &sock, 1);
    // A snapshot of the stats file can predate the child's last setup step (it is rewritten
    // every interval): wait for one taken after it, its CM ID (the last one) included.
    let s = stats_until(&stats, "the child's resources", |s| {
        let client = s
            .lines()
            .find(|l| l.starts_with("[client."))
            .map(|l| l.trim_matches(|c| c == '[' || c == ']').to_owned());
        counter(s, "control", "clients") == Some(1)
            && client.is_some_and(|c| counter(s, &c, "cm_ids") == Some(1))
    });
    assert_eq!(counter(&s, "control", "registered_mrs"), Some(1), "{s}");
    let section = s
        .lines()
        .find(|l| l.starts_with("[client."))
        .unwrap()
        .trim_matches(|c| c == '[' || c == ']')
        .to_owned();
    assert_eq!(
        counter(&s, &section, "pid"),
        Some(u64::from(child.pid())),
        "{s}"
    );
    for (k, v) in [
        ("segments", 1),
        ("pds", 1),
        ("mrs", 1),
        ("cqs", 1),
        ("qps", 1),
        ("cm_ids", 1),
    ] {
        assert_eq!(counter(&s, &section, k), Some(v), "{k}: {s}");
    }
    child.signal("KILL");
    let s = stats_until(&stats, "the killed client freed", |s| {
        counter(s, "control", "clients") == Some(0)
            && counter(s, "control", "clients_freed") == Some(4)
            && counter(s, "control", "registered_mrs") == Some(0)
    });
    assert!(!s.contains(&format!("[{section}]")), "{s}");
    // Still serving.
    let mut c = Raw::connect(&sock);
    c.hello();
    let _ = set_up(&mut c, 1, 7200);
    drop(c);
    d.signal("TERM");
    assert_eq!(d.wait(Duration::from_secs(20)), Some(0), "{}", d.output());
    assert!(!sock.exists(), "control socket removed at exit");
}
