//! Shared parts of the end-to-end tests of issue 7: real `iwarpd` daemons (memif wire, or
//! af_packet on a veth pair between two network namespaces) or embedded engines, with client
//! processes (`iwarp-opcheck`, `iwarp-rping`) in front of them.
//!
//! Every daemon and client is a `Proc` (stopped by PID on drop); every file lives in a
//! `TempDir`. Tests of one binary run one at a time (`serial`): each daemon busy-polls a core.
#![allow(dead_code, unreachable_pub)]

use crate::common::{Proc, TempDir};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One end-to-end test at a time in this process.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn opcheck() -> &'static str {
    env!("CARGO_BIN_EXE_iwarp-opcheck")
}

pub fn rping() -> &'static str {
    env!("CARGO_BIN_EXE_iwarp-rping")
}

/// Where a host's wire is.
#[derive(Clone)]
pub enum Wire {
    /// One end of a memif wire (`role` server or client) through `socket`.
    Memif { role: &'static str, socket: PathBuf },
    /// An af_packet port on interface `iface` (inside the caller's namespace).
    AfPacket { iface: String },
    /// An af_xdp port on queue 0 of interface `iface` (inside the caller's namespace): no
    /// multi-segment TX, so the engine copies payload into each frame.
    AfXdp { iface: String },
}

/// An iwarpd config for one host: `ip`/24 on `wire`, dataplane on `core`, control socket and
/// stats file in `dir` (named after `side`), `extra` appended (more sections or keys).
pub fn host_config(
    dir: &TempDir,
    side: &str,
    wire: &Wire,
    ip: &str,
    core: u32,
    extra: &str,
) -> PathBuf {
    let device = match wire {
        Wire::Memif { role, socket } => format!(
            "net_memif0,role={role},id=0,socket={},socket-abstract=no",
            socket.display()
        ),
        Wire::AfPacket { iface } => format!("net_af_packet0,iface={iface},framecnt=8192"),
        Wire::AfXdp { iface } => {
            format!("net_af_xdp0,iface={iface},start_queue=0,queue_count=1")
        }
    };
    let text = format!(
        "[eal]\nhugepages = \"off\"\nmemory_mb = 768\nfile_prefix = \"iwt-e2e-{side}-{pid}\"\n\
         [port]\ndevice = \"{device}\"\nip = \"{ip}/24\"\n\
         [dataplane]\ncores = [{core}]\nmbufs = 16384\n\
         [stats]\nfile = \"{stats}\"\ninterval_ms = 200\n\
         [diag]\nrun_seconds = 900\n\
         [control]\nsocket = \"{sock}\"\n{extra}",
        pid = std::process::id(),
        stats = dir.path(&format!("{side}.stats")).display(),
        sock = dir.path(&format!("{side}.ctl.sock")).display(),
    );
    dir.write(&format!("{side}.toml"), &text)
}

/// A running `iwarpd`.
pub struct Daemon {
    pub proc: Proc,
    /// Device spec of its control socket (`unix:PATH`).
    pub spec: String,
    pub stats: PathBuf,
}

impl Daemon {
    /// Start `iwarpd --config cfg`, behind `wrap` (e.g. `ip netns exec NS`), and wait until
    /// its control socket listens.
    pub fn start(dir: &TempDir, side: &str, cfg: &std::path::Path, wrap: &[&str]) -> Daemon {
        let mut argv: Vec<&str> = wrap.to_vec();
        let c = cfg.display().to_string();
        argv.extend([crate::common::iwarpd(), "--config", &c]);
        let proc = Proc::spawn(&argv, &dir.path(&format!("{side}.log")));
        assert!(
            proc.wait_for("control socket listening", Duration::from_secs(60)),
            "iwarpd {side} did not start:\n{}",
            proc.output()
        );
        Daemon {
            proc,
            spec: format!("unix:{}", dir.path(&format!("{side}.ctl.sock")).display()),
            stats: dir.path(&format!("{side}.stats")),
        }
    }

    /// The latest stats report.
    pub fn stats(&self) -> String {
        std::fs::read_to_string(&self.stats).unwrap_or_default()
    }

    /// SIGTERM; expect a clean exit.
    pub fn stop(mut self) -> String {
        self.proc.signal("TERM");
        let code = self.proc.wait(Duration::from_secs(30));
        let out = self.proc.output();
        assert_eq!(code, Some(0), "iwarpd did not stop cleanly:\n{out}");
        out
    }
}

/// Start a process and wait until its output says `ready`.
pub fn start_ready(dir: &TempDir, log: &str, argv: &[&str], ready: &str) -> Proc {
    let p = Proc::spawn(argv, &dir.path(log));
    assert!(
        p.wait_for(ready, Duration::from_secs(90)),
        "{argv:?} never said {ready:?}:\n{}",
        p.output()
    );
    p
}

/// Run a process to its end (killed after `timeout`); its exit code and output.
pub fn run(dir: &TempDir, log: &str, argv: &[&str], timeout: Duration) -> (Option<i32>, String) {
    let mut p = Proc::spawn(argv, &dir.path(log));
    let code = p.wait(timeout);
    (code, p.output())
}

/// An `iwarp-opcheck` server on `spec`, port `port`, exiting after `conns` connections. It
/// does not ask for CRC itself (`--crc off`), so what the client asks for is negotiated.
pub fn opcheck_server(
    dir: &TempDir,
    log: &str,
    spec: &str,
    port: u16,
    conns: u32,
    max: &str,
) -> Proc {
    let (p, c) = (port.to_string(), conns.to_string());
    start_ready(
        dir,
        log,
        &[
            opcheck(),
            "-s",
            "-d",
            spec,
            "-p",
            &p,
            "--conns",
            &c,
            "--max-size",
            max,
            "--timeout",
            "120",
            "--crc",
            "off",
        ],
        "listening on",
    )
}

/// Run an `iwarp-opcheck` client on `spec` against `(server, port)` with `args`; asserts that
/// it exits 0 and reports `(checks, conns)`: that many checks on that many connections; on
/// failure the tails of `others`' logs are shown. Returns its output.
pub fn opcheck_client(
    dir: &TempDir,
    log: &str,
    spec: &str,
    (server, port): (&str, u16),
    args: &[&str],
    (checks, conns): (u32, u32),
    others: &[&Proc],
) -> String {
    let p = port.to_string();
    let mut argv = vec![
        opcheck(),
        "-c",
        server,
        "-p",
        &p,
        "-d",
        spec,
        "--timeout",
        "120",
    ];
    argv.extend_from_slice(args);
    let (code, out) = run(dir, log, &argv, Duration::from_secs(600));
    let context = || {
        others
            .iter()
            .map(|o| format!("--- {}:\n{}", o.log.display(), tail(&o.output(), 60)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        code,
        Some(0),
        "opcheck {args:?} failed:\n{out}\n{}",
        context()
    );
    let want = format!("opcheck: {checks} checks passed on {conns} connection(s)");
    assert!(
        out.contains(&want),
        "{want:?} missing:\n{out}\n{}",
        context()
    );
    out
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Checks of one opcheck round: 6 sized operations at every size, plus the 2 atomics.
pub fn checks_for(sizes: usize) -> u32 {
    (6 * sizes + 2) as u32
}

/// Every operation at 0 B, 1 B, 4 KiB, 1 MiB and 8 MiB.
pub const ALL_SIZES: &str = "0,1,4k,1m,8m";

/// Asserts that each of `ops` appears at each of `sizes` in a verbose client output with a
/// digest, and that the server checked every connection (`said bye` lines with `crc`/`markers`).
pub fn assert_every_op(out: &str, sizes: &[usize]) {
    for op in ["send", "send_se", "send_inv", "write", "write_imm", "read"] {
        for s in sizes {
            let l = format!("op={op} size={s} sha256=");
            assert!(out.contains(&l), "{l:?} missing:\n{out}");
        }
    }
    for op in ["fetch_add", "cmp_swap"] {
        assert!(out.contains(&format!("op={op} size=8 ")), "{op}:\n{out}");
    }
}

/// Wait for the server to exit 0 after its connections; its output must show one connection
/// served per entry of `expect`, none failed, and for each entry (e.g. "(CRC true, markers
/// false)", the negotiated values) a connection with it.
pub fn finish_server(mut server: Proc, expect: &[&str]) -> String {
    let code = server.wait(Duration::from_secs(120));
    let out = server.output();
    assert_eq!(code, Some(0), "opcheck server:\n{out}");
    assert!(!out.contains("FAILED"), "{out}");
    let byes: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("client said bye"))
        .collect();
    assert_eq!(byes.len(), expect.len(), "{out}");
    for want in expect {
        assert!(
            byes.iter().any(|l| l.contains(want)),
            "no connection with {want:?}:\n{out}"
        );
    }
    out
}
