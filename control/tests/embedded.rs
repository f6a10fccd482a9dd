//! Embedded mode: the daemon's bring-up and service inside this test process (root: DPDK on a
//! memif port; run under `flock /tmp/iwarp-e2e.lock`). A client connects through
//! `Embedded::connect`, sets up resources, leaves; the engine stops cleanly.
mod common;

use abi::ctl::{self, Body, Request, Response};
use common::{TempDir, root_or_skip};
use control::config::Config;
use std::time::Duration;

fn call(sock: &shm::SeqPacket, id: u32, req: &Request) -> Response {
    sock.send(&req.encode(id), &[]).unwrap();
    let mut buf = vec![0u8; ctl::MAX_MESSAGE];
    assert!(sock.wait_readable(Duration::from_secs(10)).unwrap());
    let m = sock.recv(&mut buf).unwrap();
    let msg = ctl::decode(&buf[..m.len]).unwrap();
    assert_eq!(msg.id, id);
    match msg.body {
        Body::Response(r) => r,
        other => panic!("{other:?}"),
    }
}

/// Whether a thread name is one of the engine's: its first thread, the control threads, a
/// dataplane thread (`dpN`).
fn is_engine_thread(name: &str) -> bool {
    let dataplane = name
        .strip_prefix("dp")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    name == "iwarpd-embedded" || name.starts_with("ctl-") || dataplane
}

/// `(name, timer slack in ns)` of this process's threads named like the engine's.
fn engine_threads_slack() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let name = comm.trim();
        if !is_engine_thread(name) {
            continue;
        }
        // `/proc/PID/timerslack_ns` serves any thread id.
        let slack = std::fs::read_to_string(
            std::path::Path::new("/proc")
                .join(t.file_name())
                .join("timerslack_ns"),
        )
        .unwrap();
        out.push((name.to_owned(), slack.trim().parse().unwrap()));
    }
    out
}

#[test]
fn embedded_engine_serves_a_client_and_stops() {
    if !root_or_skip("embedded_engine_serves_a_client_and_stops") {
        return;
    }
    let dir = TempDir::new("embedded");
    let text = format!(
        "[eal]\nhugepages = \"off\"\nmemory_mb = 256\nfile_prefix = \"iwt-emb-{}\"\n\
         [port]\ndevice = \"net_memif0,role=server,id=0,socket={},socket-abstract=no\"\n\
         ip = \"10.77.0.1/24\"\n[dataplane]\ncores = [1]\nmbufs = 8192\n\
         [control]\nsocket = \"{}\"\n",
        std::process::id(),
        dir.path("memif.sock").display(),
        dir.path("never-bound.sock").display()
    );
    let cfg = Config::parse(&text, "embedded.toml").unwrap();
    let engine = control::embedded::start(cfg).expect("embedded bring-up");
    let sock = engine.connect().unwrap();
    let r = call(
        &sock,
        1,
        &Request::Hello {
            abi_version: abi::ABI_VERSION,
            pid: std::process::id(),
            name: "embedded-test".into(),
        },
    );
    let Response::Hello { device, .. } = r else {
        panic!("{r:?}")
    };
    assert_eq!(device.cq_subs, 1);
    assert_eq!(device.ip.ip().octets(), [10, 77, 0, 1]);
    let Response::Pd { .. } = call(&sock, 2, &Request::AllocPd {}) else {
        panic!()
    };
    assert!(engine.stats().contains("clients = 1"), "{}", engine.stats());
    // The engine's threads (its control loop, the client's thread, the dataplane thread) wake
    // from their timeouts at a scheduler tick: 4 ms of timer slack; the application's own
    // thread keeps its default.
    let slack = engine_threads_slack();
    for name in ["iwarpd-embedded", "ctl-events", "ctl-client", "dp0"] {
        assert!(
            slack.iter().any(|(n, ns)| n == name && *ns == 4_000_000),
            "{name}: {slack:?}"
        );
    }
    assert!(slack.iter().all(|(_, ns)| *ns == 4_000_000), "{slack:?}");
    // Embedded mode binds no control socket: the application's process is the daemon.
    assert!(!dir.path("never-bound.sock").exists());
    drop(sock);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !engine.stats().contains("clients_freed = 1") {
        assert!(std::time::Instant::now() < deadline, "{}", engine.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(engine.stop().unwrap(), 0);
    assert!(!dir.path("memif.sock").exists(), "memif socket removed");
}
