//! A client killed with SIGKILL mid-transfer (issue 7): two `iwarpd` on a memif wire (root;
//! run under `flock /tmp/iwarp-e2e.lock`). A client of daemon B connects to a listener of a
//! client of daemon A, keeps its send queue full of 64 KiB RDMA Writes into A's MR, and is
//! killed. Daemon B must free every resource of it
//! (QPs released by the dataplane, MRs gone from the memory table), A's client must see its
//! connection end (TERMINATE, disconnect or QP error) within a bounded time, and both daemons
//! keep serving.
mod common;
#[path = "common/ctl_client.rs"]
mod ctl_client;

use abi::ctl::{Event, MpaOverride, Request, Response};
use abi::ring::{CqConsumer, CqLayout, Producer};
use abi::{Cqe, CqeStatus, Sge, Wqe, WqeOpcode};
use common::{Proc, TempDir, counter, root_or_skip};
use ctl_client::{Raw, set_up};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PORT: u16 = 7300;

struct Daemon {
    proc: Proc,
    sock: PathBuf,
    stats: PathBuf,
}

fn start(dir: &TempDir, side: &str, role: &str, ip: &str, core: u32) -> Daemon {
    let sock = dir.path(&format!("{side}.ctl.sock"));
    let stats = dir.path(&format!("{side}.stats"));
    let cfg = dir.write(
        &format!("{side}.toml"),
        &format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 256\nfile_prefix = \"iwt-kill-{side}-{}\"\n\
             [port]\ndevice = \"net_memif0,role={role},id=0,socket={},socket-abstract=no\"\n\
             ip = \"{ip}/24\"\n[dataplane]\ncores = [{core}]\nmbufs = 8192\n\
             [stats]\nfile = \"{}\"\ninterval_ms = 50\n[diag]\nrun_seconds = 120\n\
             [mpa]\ntimeout_ms = 3000\n[control]\nsocket = \"{}\"\n",
            std::process::id(),
            dir.path("memif.sock").display(),
            stats.display(),
            sock.display()
        ),
    );
    let proc = Proc::spawn(
        &[common::iwarpd(), "--config", cfg.to_str().unwrap()],
        &dir.path(&format!("{side}.log")),
    );
    assert!(
        proc.wait_for("control socket listening", Duration::from_secs(30)),
        "{side} did not start:\n{}",
        proc.output()
    );
    Daemon { proc, sock, stats }
}

fn stats_until(d: &Daemon, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let s = std::fs::read_to_string(&d.stats).unwrap_or_default();
        if ok(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "stats never showed {what}:\n{s}\nlog:\n{}",
            d.proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Helper process: on the socket `IWARP_KILL_SOCK`, set up and connect to `IWARP_KILL_PEER`;
/// print "child established" and wait to be killed.
#[test]
#[ignore = "helper process, started by client_killed_mid_connection"]
fn connecting_child() {
    let (Ok(sock), Ok(peer)) = (
        std::env::var("IWARP_KILL_SOCK"),
        std::env::var("IWARP_KILL_PEER"),
    ) else {
        return;
    };
    let peer: SocketAddrV4 = peer.parse().unwrap();
    let mut c = Raw::connect(Path::new(&sock));
    c.hello();
    let held = set_up(&mut c, 1, PORT + 1);
    let Response::CmId { id } = c.call(&Request::CreateCmId {}) else {
        panic!()
    };
    let r = c.call(&Request::Connect {
        id,
        qp: held.qp,
        remote: peer,
        private_data: b"child".to_vec(),
        ird: 4,
        ord: 4,
        mpa: MpaOverride::default(),
    });
    assert_eq!(r, Response::Done {});
    // The listener's private data is its MR's STag.
    let rkey = match c.event(Duration::from_secs(20)) {
        Some(Event::Established { private_data, .. }) => {
            u32::from_le_bytes(private_data[..4].try_into().unwrap())
        }
        other => panic!("expected Established, got {other:?}"),
    };
    println!("child established");
    // RDMA Writes of 64 KiB into the peer's MR, the SQ kept full, until killed.
    let mut sq = Producer::<Wqe, _>::attach(&held.seg, 65536, 64).unwrap();
    let layout = CqLayout {
        offset: 0,
        subs: 1,
        entries: 64,
    };
    let mut cq = CqConsumer::attach(&held.seg, &layout).unwrap();
    let sge = Sge {
        lkey: held.lkey,
        len: 65536,
        offset: 0,
    };
    let (mut posted, mut done) = (0u64, 0u64);
    let mut cqes = [Cqe::default(); 16];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        while posted - done < 32 {
            let mut w = Wqe::new(posted, WqeOpcode::Write, &[sge]);
            w.rkey = rkey;
            w.remote_addr = 0;
            sq.push(w).unwrap();
            posted += 1;
        }
        let n = cq.poll(&mut cqes).unwrap();
        for c in &cqes[..n] {
            assert_eq!(c.status(), Some(CqeStatus::Success), "{c:?}");
        }
        done += n as u64;
        if done >= 64 && done - (n as u64) < 64 {
            println!("child writing");
        }
        if n == 0 {
            std::thread::yield_now();
        }
    }
}

#[test]
fn client_killed_mid_connection() {
    if !root_or_skip("client_killed_mid_connection") {
        return;
    }
    let dir = TempDir::new("kill2");
    let a = start(&dir, "a", "server", "10.77.0.1", 0);
    let b = start(&dir, "b", "client", "10.77.0.2", 1);
    // A's client listens.
    let mut server = Raw::connect(&a.sock);
    server.hello();
    let held = set_up(&mut server, 1, PORT);
    // B's client (another process) connects.
    let exe = std::env::current_exe().unwrap();
    let cmd = format!(
        "exec env IWARP_KILL_SOCK={} IWARP_KILL_PEER=10.77.0.1:{PORT} {} --ignored --exact connecting_child --nocapture",
        b.sock.display(),
        exe.display()
    );
    let child = Proc::spawn(&["sh", "-c", &cmd], &dir.path("child.log"));
    let req = server.event(Duration::from_secs(20));
    let Some(Event::ConnectRequest {
        id, private_data, ..
    }) = req
    else {
        panic!(
            "expected a connect request, got {req:?}\nchild:\n{}\nA:\n{}\nB:\n{}",
            child.output(),
            a.proc.output(),
            b.proc.output()
        )
    };
    assert_eq!(private_data, b"child");
    let r = server.call(&Request::Accept {
        id,
        qp: held.qp,
        private_data: held.rkey.to_le_bytes().to_vec(),
        ird: 4,
        ord: 4,
        mpa: Default::default(),
    });
    assert_eq!(r, Response::Done {});
    let ev = server.event(Duration::from_secs(20));
    assert!(matches!(ev, Some(Event::Established { .. })), "{ev:?}");
    assert!(
        child.wait_for("child established", Duration::from_secs(20)),
        "{}",
        child.output()
    );
    stats_until(&b, "the child's QP", Duration::from_secs(5), |s| {
        counter(s, "control", "clients") == Some(1)
            && counter(s, "control", "registered_mrs") == Some(1)
    });
    // Kill it: B frees everything once its dataplane released the QP; A's client learns
    // that the connection is over, within a bound.
    let killed = Instant::now();
    child.signal("KILL");
    let mut ended: Option<Event> = None;
    while killed.elapsed() < Duration::from_secs(15) {
        match server.event(Duration::from_millis(200)) {
            Some(
                e @ (Event::TerminateReceived { .. }
                | Event::Disconnected { .. }
                | Event::QpError { .. }),
            ) => {
                ended = Some(e);
                break;
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
    }
    let ended = ended
        .unwrap_or_else(|| panic!("A's client never heard of the end\nA:\n{}", a.proc.output()));
    eprintln!("peer saw {ended:?} after {:?}", killed.elapsed());
    let s = stats_until(
        &b,
        "the killed client freed",
        Duration::from_secs(15),
        |s| {
            counter(s, "control", "clients") == Some(0)
                && counter(s, "control", "clients_releasing") == Some(0)
                && counter(s, "control", "clients_freed") == Some(1)
                && counter(s, "control", "registered_mrs") == Some(0)
        },
    );
    assert!(!s.contains("[client."), "{s}");
    // Both daemons keep serving: A's client is intact, a new client of B sets up.
    let r = server.call(&Request::QueryDevice {});
    assert!(matches!(r, Response::Device { .. }), "{r:?}");
    let mut again = Raw::connect(&b.sock);
    again.hello();
    let _ = set_up(&mut again, 1, PORT + 2);
    for d in [a, b] {
        let mut p = d.proc;
        p.signal("TERM");
        assert_eq!(p.wait(Duration::from_secs(20)), Some(0), "{}", p.output());
    }
}
