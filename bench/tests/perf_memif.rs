//! `iwarp-perf` against the real engine: two processes, each running the engine embedded
//! (`-d CONFIG.toml`), joined by a DPDK memif wire. `write_bw` and `write_lat` with a small
//! `-n`: the tables parse, the rows carry the asked size and iteration count, and the server's
//! engine placed exactly the bytes the client wrote (its per-QP `bytes_placed` counter).
//! Needs root (DPDK); skips loudly otherwise. Speed is not asserted (BENCHMARKS.md §4).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tests of this file run one at a time: each pair of engines takes cores 0/1, port
/// 18700 and EAL file prefixes named after this process.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What every test here starts with: root (else a loud skip), the serial lock, and a fresh
/// directory `iwperf-<name>-<pid>` removed at the end.
fn start(name: &str) -> Option<(std::sync::MutexGuard<'static, ()>, Dir)> {
    if !is_root() {
        eprintln!("SKIPPED perf_memif: needs root (DPDK memif between two embedded engines)");
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Dir(std::env::temp_dir().join(format!("iwperf-{name}-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    Some((serial, dir))
}

fn conf(dir: &Path, side: &str, role: &str, ip: &str, core: u32) -> PathBuf {
    let p = dir.join(format!("{side}.toml"));
    let text = format!(
        "[eal]\nhugepages = \"off\"\nmemory_mb = 512\nfile_prefix = \"iwperf-{side}-{pid}\"\n\
         [port]\ndevice = \"net_memif0,role={role},id=0,socket={sock},socket-abstract=no\"\n\
         ip = \"{ip}/24\"\n[dataplane]\ncores = [{core}]\nmbufs = 16384\nidle = \"yield\"\n\
         [mpa]\ncrc = \"on\"\n",
        pid = std::process::id(),
        sock = dir.join("memif.sock").display(),
    );
    std::fs::write(&p, text).unwrap();
    p
}

/// Run one test: server on A, client on B; returns (client stdout, server stdout+stderr).
fn pair(dir: &Path, test: &str, args: &[&str]) -> (String, String) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (ca, cb) = if cpus > 1 { (0, 1) } else { (0, 0) };
    let a = conf(dir, "a", "server", "10.77.0.1", ca);
    let b = conf(dir, "b", "client", "10.77.0.2", cb);
    let sout = dir.join(format!("{test}.server.out"));
    let serr = dir.join(format!("{test}.server.err"));
    let mut server = Command::new(env!("CARGO_BIN_EXE_iwarp-perf"))
        .args([test, "-d", a.to_str().unwrap(), "-p", "18700"])
        .args(args)
        .stdout(std::fs::File::create(&sout).unwrap())
        .stderr(std::fs::File::create(&serr).unwrap())
        .spawn()
        .unwrap();
    // The memif client attaches to the server's socket: wait for the server's banner.
    let t0 = Instant::now();
    while !std::fs::read_to_string(&sout)
        .unwrap_or_default()
        .contains("Waiting for client")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60) && server.try_wait().unwrap().is_none(),
            "server did not come up:\n{}",
            std::fs::read_to_string(&serr).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = Command::new(env!("CARGO_BIN_EXE_iwarp-perf"))
        .args([test, "-d", b.to_str().unwrap(), "-p", "18700"])
        .args(args)
        .arg("10.77.0.1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let st = server.wait().unwrap();
    let s = std::fs::read_to_string(&sout).unwrap() + &std::fs::read_to_string(&serr).unwrap();
    let cout = String::from_utf8_lossy(&c.stdout).to_string();
    assert!(
        c.status.success(),
        "{test} client failed:\n{cout}\n{}\nserver:\n{s}",
        String::from_utf8_lossy(&c.stderr)
    );
    assert!(st.success(), "{test} server failed:\n{s}");
    (cout + &String::from_utf8_lossy(&c.stderr), s)
}

/// Both embedded engines stopped cleanly: every mbuf back in its pool and EAL cleaned up on
/// the engine's thread (an application thread that stepped the loop holds a DPDK
/// registration, and with it the EAL, until the engine stops).
fn assert_clean_shutdown(c: &str, s: &str) {
    for (side, out) in [("client", c), ("server", s)] {
        assert!(
            out.contains("EAL shutdown: cleaned up"),
            "{side}'s engine did not clean up:\n{out}"
        );
    }
}

/// The numbers of the row after the table header that starts with `header`.
fn row(out: &str, header: &str) -> Vec<f64> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(header));
    assert!(
        lines.next().is_some(),
        "no table header {header:?} in:\n{out}"
    );
    let r = lines.next().unwrap_or_default();
    let v: Vec<f64> = r.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert!(!v.is_empty(), "empty row in:\n{out}");
    v
}

/// `(section, bytes_placed)` of every section of an engine report that has one: the live QPs'
/// `[rdma.qp.N]` and `[freed_clients]`, the sum over the QPs of clients already gone.
fn bytes_placed(report: &str) -> Vec<(String, u64)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for l in report.lines() {
        if let Some(name) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
        } else if let Some(v) = l.strip_prefix("bytes_placed = ") {
            out.push((section.clone(), v.trim().parse().unwrap()));
        }
    }
    out
}

/// Every `key = value` of an engine report.
fn counters(report: &str, key: &str) -> Vec<u64> {
    let prefix = format!("{key} = ");
    report
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .collect()
}

/// Whether the engine placed exactly `n` bytes on one QP. Once the data QP is destroyed its
/// section is gone and it is summed, with the client's other QPs, into `[client.N]` (or into
/// `[freed_clients]` once the client has left); the other QPs' share is the connection
/// exchange's few records (under 4 KiB), so such a sum must lie in `n..n + 4096`.
fn placed_exactly(report: &str, n: u64) -> bool {
    bytes_placed(report).iter().any(|(section, v)| {
        let sum = section == "freed_clients" || section.starts_with("client.");
        *v == n || (sum && (n..n + 4096).contains(v))
    })
}

#[test]
fn write_bw_and_write_lat_over_memif() {
    let Some((_serial, dir)) = start("memif") else {
        return;
    };

    let (c, s) = pair(
        &dir.0,
        "write_bw",
        // The application threads drive the engines (run-to-completion, `--pump on`);
        // write_lat below leaves it to the dataplane threads (`--pump off`).
        &["-s", "65536", "-n", "300", "--report_gbits", "--pump", "on"],
    );
    let r = row(&c, " #bytes     #iterations    BW peak[Gb/sec]");
    assert_eq!((r[0], r[1]), (65536.0, 300.0), "{c}");
    assert!(
        r[3] > 0.0 && r[2] >= r[3] * 0.99,
        "average {} peak {}: {c}",
        r[3],
        r[2]
    );
    // The server's engine placed every written byte (the data QP), plus the exchange's
    // 56-byte records on the comm QP.
    assert!(
        placed_exactly(&s, 300 * 65536),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );
    // Every frame the client built (payload copied, its CRCs and TCP checksum filled in
    // after each batch) arrived with a right checksum and right CRCs: the report lists only
    // the counters that are not zero.
    assert!(!counters(&s, "segs_in").is_empty(), "no TCP counters:\n{s}");
    for key in ["bad_checksum", "crc_errors"] {
        let v = counters(&s, key);
        assert!(v.iter().all(|&n| n == 0), "{key} {v:?}:\n{s}");
    }

    let (c, s) = pair(
        &dir.0,
        "write_lat",
        &["-s", "2", "-n", "500", "--pump", "off"],
    );
    let r = row(&c, " #bytes #iterations    t_min[usec]");
    assert_eq!((r[0], r[1]), (2.0, 500.0), "{c}");
    let (t_min, t_max, t_typ, p999) = (r[2], r[3], r[4], r[8]);
    assert!(
        t_min > 0.0 && t_min <= t_typ && t_typ <= p999 && p999 <= t_max,
        "latency row out of order: {r:?}\n{c}"
    );
    // Both sides wrote 500 two-byte messages; each side's data QP placed the peer's 500.
    assert!(
        placed_exactly(&s, 1000),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );
}

/// `--outliers FILE --outlier_us 0`: every sample is above the threshold, so each side
/// appends a header and one line per sample, in order, each bounded by TSC readings that
/// chain the samples end to start within the run's first and last readings. With `--mlock`,
/// which reports the locked memory.
#[test]
fn outliers_file_lists_the_slow_samples_with_their_tsc_bounds() {
    let Some((_serial, dir)) = start("outl") else {
        return;
    };
    let file = dir.0.join("outliers.txt");
    let (c, _s) = pair(
        &dir.0,
        "write_lat",
        &[
            "-s",
            "2",
            "-n",
            "2000",
            "--outliers",
            file.to_str().unwrap(),
            "--outlier_us",
            "0",
            "--mlock",
        ],
    );
    let r = row(&c, " #bytes #iterations    t_min[usec]");
    assert_eq!((r[0], r[1]), (2.0, 2000.0), "{c}");
    // `--mlock`: the kernel reports locked mappings.
    let locked = c
        .lines()
        .find_map(|l| l.split("VmLck: ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(locked.is_some_and(|kb| kb > 0), "no locked memory: {c}");
    let text = std::fs::read_to_string(&file).unwrap();
    let blocks: Vec<&str> = text.split('#').filter(|b| !b.is_empty()).collect();
    assert_eq!(blocks.len(), 2, "one block per side:\n{text}");
    for b in blocks {
        let mut lines = b.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let field = |k: &str| -> f64 {
            let i = head
                .iter()
                .position(|h| *h == k)
                .unwrap_or_else(|| panic!("{k}: {head:?}"));
            head[i + 1].parse().unwrap()
        };
        assert_eq!(
            (field("size"), field("samples"), field("threshold_ns")),
            (2.0, 1999.0, 0.0)
        );
        let hz = field("tsc_hz");
        assert!((1e8..1e11).contains(&hz), "TSC rate {hz}");
        let (first, last) = (field("tsc_first") as u64, field("tsc_last") as u64);
        let rows: Vec<[u64; 4]> = lines
            .map(|l| {
                let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
                [v[0], v[1], v[2], v[3]]
            })
            .collect();
        assert_eq!(rows.len(), 1999, "every sample is above 0 ns");
        for (i, w) in rows.iter().enumerate() {
            assert_eq!(w[0], i as u64, "index");
            assert!(first <= w[1] && w[1] < w[2] && w[2] <= last, "bounds {w:?}");
            assert!(w[3] > 0);
        }
        assert_eq!((rows[0][1], rows[1998][2]), (first, last));
        assert!(rows.windows(2).all(|p| p[0][2] == p[1][1]), "samples chain");
    }
}

/// The dataplane loop handed back and forth mid-traffic between the application thread
/// (`--pump on` phases: it steps the loop, the dataplane thread is parked) and the dataplane
/// thread (`Device::release_engine`), every few hundred empty polls (`--pump toggle`): no
/// Write is lost, duplicated or reordered. write_lat waits for each Write's own counter in
/// the last byte (one lost or out of order stalls the test until its 30 s timeout fails it);
/// both tests check the bytes each server placed.
#[test]
fn pump_hand_off_loses_nothing() {
    let Some((_serial, dir)) = start("pump") else {
        return;
    };

    let (c, s) = pair(
        &dir.0,
        "write_lat",
        &["-s", "2", "-n", "20000", "--pump", "toggle"],
    );
    let r = row(&c, " #bytes #iterations    t_min[usec]");
    assert_eq!((r[0], r[1]), (2.0, 20000.0), "{c}");
    assert_clean_shutdown(&c, &s);
    assert!(
        placed_exactly(&s, 40000),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );

    let (c, s) = pair(
        &dir.0,
        "write_bw",
        &["-s", "4096", "-n", "5000", "--pump", "toggle"],
    );
    let r = row(&c, " #bytes     #iterations    BW peak[MB/sec]");
    assert_eq!((r[0], r[1]), (4096.0, 5000.0), "{c}");
    assert_clean_shutdown(&c, &s);
    assert!(
        placed_exactly(&s, 5000 * 4096),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );

    // `-e`: sleeping on CQ events (a completion channel) instead of polling, the engine left
    // to its dataplane thread: every Send arrives, each waited for by its event.
    let (c, s) = pair(&dir.0, "send_lat", &["-s", "64", "-n", "1000", "-e"]);
    let r = row(&c, " #bytes #iterations    t_min[usec]");
    assert_eq!((r[0], r[1]), (64.0, 1000.0), "{c}");
    assert_clean_shutdown(&c, &s);
    assert!(
        placed_exactly(&s, 1000 * 64),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );
    let (c, s) = pair(&dir.0, "write_bw", &["-s", "8192", "-n", "3000", "-e"]);
    let r = row(&c, " #bytes     #iterations    BW peak[MB/sec]");
    assert_eq!((r[0], r[1]), (8192.0, 3000.0), "{c}");
    assert!(
        placed_exactly(&s, 3000 * 8192),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );

    // Pinned to the dataplane core, spinning, the dataplane thread parked throughout (the
    // latency tests' default, `--pump on`).
    let (c, s) = pair(&dir.0, "write_lat", &["-s", "2", "-n", "2000"]);
    let r = row(&c, " #bytes #iterations    t_min[usec]");
    assert_eq!((r[0], r[1]), (2.0, 2000.0), "{c}");
    assert_clean_shutdown(&c, &s);
    assert!(
        placed_exactly(&s, 4000),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );
}

/// `--rate_limit` (perftest's software limiter): write_bw limited to 0.25 Gb/s, well below
/// what even a debug build carries (~1 Gb/s), posts bursts of 4 spaced to the limit, so its
/// average lies at the limit: a little above it at most, since 100 bursts span 99 gaps and
/// the last burst's transfer; every byte is still placed. The upper bound is the limiter's
/// promise. The lower one only catches a limiter that throttles far too hard (a unit taken
/// for another is a factor of 8 or 1000): a debug build on a loaded 2-CPU machine fell to
/// 0.17-0.18 Gb/s here, its transfers slower, not its gaps longer.
#[test]
fn write_bw_with_the_rate_limiter() {
    let Some((_serial, dir)) = start("rate") else {
        return;
    };
    // 400 x 64 KiB at 0.25 Gb/s: ~0.84 s.
    let (c, s) = pair(
        &dir.0,
        "write_bw",
        &[
            "-s",
            "65536",
            "-n",
            "400",
            "--report_gbits",
            "--rate_limit",
            "0.25",
            "--burst_size",
            "4",
        ],
    );
    let r = row(&c, " #bytes     #iterations    BW peak[Gb/sec]");
    assert_eq!((r[0], r[1]), (65536.0, 400.0), "{c}");
    assert!(
        (0.1..=0.27).contains(&r[3]),
        "average {} Gb/s with --rate_limit 0.25: {c}",
        r[3]
    );
    assert!(
        placed_exactly(&s, 400 * 65536),
        "bytes_placed {:?}:\n{s}",
        bytes_placed(&s)
    );
}
