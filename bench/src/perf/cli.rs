//! The command line: one binary, perftest's tests as sub-commands, perftest's option
//! spellings (`ib_write_bw -d DEV -s SIZE -a -n ITERS -D SECS -t DEPTH -q QPS -p PORT -R
//! --report_gbits --out_json --out_json_file F`), plus ours (`--crc`, `--plot`,
//! `--daemon_pid`). The server runs without an address; the client gets it last.

use super::pace::{RateLimitType, RateUnits};
use super::params::{DEF_PORT, Test};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// `iwarp-perf`: perftest's benchmarks over the iwarpd verbs library, and TCP baselines.
#[derive(Debug, Parser)]
#[command(name = "iwarp-perf", version, about, long_about = None)]
pub struct Cli {
    /// The test.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Sub-commands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// RDMA Write bandwidth (ib_write_bw).
    #[command(name = "write_bw")]
    WriteBw(PerfArgs),
    /// RDMA Write latency, half the round trip (ib_write_lat).
    #[command(name = "write_lat")]
    WriteLat(PerfArgs),
    /// RDMA Read bandwidth (ib_read_bw).
    #[command(name = "read_bw")]
    ReadBw(PerfArgs),
    /// RDMA Read latency (ib_read_lat).
    #[command(name = "read_lat")]
    ReadLat(PerfArgs),
    /// Send bandwidth (ib_send_bw).
    #[command(name = "send_bw")]
    SendBw(PerfArgs),
    /// Send latency, half the round trip (ib_send_lat).
    #[command(name = "send_lat")]
    SendLat(PerfArgs),
    /// Atomic bandwidth (ib_atomic_bw).
    #[command(name = "atomic_bw")]
    AtomicBw(PerfArgs),
    /// Atomic latency (ib_atomic_lat).
    #[command(name = "atomic_lat")]
    AtomicLat(PerfArgs),
    /// Baseline: TCP bandwidth over kernel sockets, against `tcp_bw` or any echo server
    /// (e.g. iwarpd's `diag.echo_port`, our userspace TCP).
    #[command(name = "tcp_bw")]
    TcpBw(TcpArgs),
    /// Baseline: TCP ping-pong latency over kernel sockets (half the round trip), against
    /// `tcp_lat` or any echo server.
    #[command(name = "tcp_lat")]
    TcpLat(TcpArgs),
}

impl Cmd {
    /// The RDMA test and its arguments, or `None` for a TCP baseline.
    pub fn rdma(&self) -> Option<(Test, &PerfArgs)> {
        Some(match self {
            Cmd::WriteBw(a) => (Test::WriteBw, a),
            Cmd::WriteLat(a) => (Test::WriteLat, a),
            Cmd::ReadBw(a) => (Test::ReadBw, a),
            Cmd::ReadLat(a) => (Test::ReadLat, a),
            Cmd::SendBw(a) => (Test::SendBw, a),
            Cmd::SendLat(a) => (Test::SendLat, a),
            Cmd::AtomicBw(a) => (Test::AtomicBw, a),
            Cmd::AtomicLat(a) => (Test::AtomicLat, a),
            Cmd::TcpBw(_) | Cmd::TcpLat(_) => return None,
        })
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// `--pump`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pump {
    /// The polling loops step the engine themselves (on its dataplane core).
    On,
    /// The engine's dataplane thread steps it.
    Off,
    /// For tests: alternate, every few hundred empty polls, between the two (the loop handed
    /// back and forth between the application and the dataplane thread mid-traffic).
    Toggle,
}

/// `--idle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Idle {
    /// Busy-poll.
    Spin,
    /// `sched_yield` between empty polls.
    Yield,
}

impl Idle {
    /// `yield` below 4 CPUs (the dataplane threads and ours cannot each have a core).
    pub fn resolve(v: Option<Idle>) -> Idle {
        v.unwrap_or_else(
            || match std::thread::available_parallelism().map_or(1, |n| n.get()) {
                n if n < 4 => Idle::Yield,
                _ => Idle::Spin,
            },
        )
    }
}

/// perftest's `-A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum AtomicType {
    /// Compare and swap.
    #[value(name = "CMP_AND_SWAP")]
    CMP_AND_SWAP,
    /// Fetch and add.
    #[value(name = "FETCH_AND_ADD")]
    FETCH_AND_ADD,
}

/// Options shared by the RDMA tests (perftest's spellings).
#[derive(Debug, Clone, Args)]
pub struct PerfArgs {
    /// The device: a daemon's control socket (`unix:PATH` or a socket path) or an iwarpd
    /// config file (`embedded:PATH` or `*.toml`: the engine runs in this process); default
    /// `IWARP_DEVICE`, else /run/iwarpd.sock.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Message size in bytes (default 65536 for BW tests, 2 for latency, 8 for atomics).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Run every size from 2 bytes to 8 MiB (2^1..2^23).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations (default 5000 for write_bw, 1000 otherwise).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u64>,
    /// Send-queue depth (default 128 for BW tests, 1 for latency).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receive-queue depth for Send tests (default 512).
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512)]
    pub rx_depth: u32,
    /// Number of QPs (one rdma_cm connection each).
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    /// TCP port of the connections.
    #[arg(short = 'p', long = "port", default_value_t = DEF_PORT)]
    pub port: u16,
    /// Connect with rdma_cm semantics and exchange over rdma_cm Sends (perftest's -R). iWARP
    /// connects only through rdma_cm, so this is always on; accepted for compatibility.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Report bandwidth in Gb/s instead of MiB/s.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Write the report as JSON (perftest's keys) to perftest_out.json or --out_json_file.
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// JSON report file (implies --out_json).
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,
    /// Add the CPU_Util[%] column: user + system time of this process (dataplane and
    /// application threads) and of --daemon_pid, per cent of one core.
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
    /// CQ moderation: one signaled completion per this many work requests.
    #[arg(short = 'Q', long = "cq-mod")]
    pub cq_mod: Option<u32>,
    /// Outstanding RDMA Reads / atomics (default 128, at most the device's limit).
    #[arg(short = 'o', long = "outs")]
    pub outs: Option<u32>,
    /// Atomic operation.
    #[arg(short = 'A', long = "atomic_type", value_enum, default_value_t = AtomicType::FETCH_AND_ADD)]
    pub atomic_type: AtomicType,
    /// Rate limiter (perftest's software one): the highest rate of posted messages, in
    /// --rate_units, posted in bursts of --burst_size. BW tests, on the posting side.
    #[arg(long = "rate_limit", value_name = "RATE")]
    pub rate_limit: Option<f64>,
    /// Units of --rate_limit: M (MiB/s), g (Gb/s) or p (messages/s).
    #[arg(long = "rate_units", value_enum, default_value = "g")]
    pub rate_units: RateUnits,
    /// The rate limiter: SW (the default here). perftest's HW and PP program a NIC's
    /// limiter, which this software stack does not have.
    #[arg(long = "rate_limit_type", value_enum)]
    pub rate_limit_type: Option<RateLimitType>,
    /// Messages per burst of the rate limiter (default: the TX depth).
    #[arg(long = "burst_size")]
    pub burst_size: Option<u32>,
    /// Sleep on CQ events (a completion channel) instead of polling the CQ; not with
    /// write_lat, which polls memory. Leaves the core to the dataplane while waiting (with
    /// it `--pump` defaults to `off`).
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Ours: MPA CRC32c (what our side asks for in the MPA exchange; default: the daemon's
    /// `[mpa] crc`).
    #[arg(long = "crc", value_enum)]
    pub crc: Option<OnOff>,
    /// Ours: plot bandwidth or latency against message size into a PNG (for -a sweeps).
    #[arg(long = "plot", value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Ours: what the polling loops do when they found nothing: `spin` (perftest's way, for
    /// cores of our own) or `yield` (sched_yield: the dataplane threads share our cores).
    /// Default: `yield` on machines with fewer than 4 CPUs, else `spin`.
    #[arg(long = "idle", value_enum)]
    pub idle: Option<Idle>,
    /// Ours, embedded mode: `on` the polling loops step the engine's dataplane loop
    /// themselves (run-to-completion, `verbs::Device::poll_engine`) from the dataplane
    /// thread's core (this thread is pinned there, the dataplane thread is parked meanwhile,
    /// `--idle` defaults to `spin`); `off` they leave it to the engine's dataplane thread;
    /// `toggle` alternates (tests). Default: `on` (BENCHMARKS.md §4 compares them). No
    /// effect with a daemon.
    #[arg(long = "pump", value_enum)]
    pub pump: Option<Pump>,
    /// Ours: lock this process's memory into RAM before the test (`mlockall`, present and
    /// future mappings: no page faults during the test, e.g. on the first pass over a memif
    /// ring), and report the locked size (`VmLck`) on stderr at the end.
    #[arg(long = "mlock")]
    pub mlock: bool,
    /// Ours, latency tests: append the samples above `--outlier_us` to FILE, each with the
    /// TSC readings at its start and end (to lay beside a kernel trace on the `x86-tsc`
    /// clock). The report is unchanged.
    #[arg(long = "outliers", value_name = "FILE")]
    pub outliers: Option<PathBuf>,
    /// Ours: the threshold of `--outliers`, in the report's microseconds (half a round trip
    /// for write_lat and send_lat).
    #[arg(long = "outlier_us", default_value_t = 8.0)]
    pub outlier_us: f64,
    /// Ours: also count this process's CPU time (the daemon in daemon mode) in CPU_Util.
    #[arg(long = "daemon_pid", value_name = "PID")]
    pub daemon_pid: Option<u32>,
    /// The server's IPv4 address: given, this side is the client; absent, the server.
    pub server: Option<Ipv4Addr>,
}

/// Options of the TCP baselines.
#[derive(Debug, Clone, Args)]
pub struct TcpArgs {
    /// Message size in bytes (default 65536 for tcp_bw, 2 for tcp_lat).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Run every size from 2 bytes to 8 MiB.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations (default 5000 for tcp_bw, 1000 for tcp_lat).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// TCP port.
    #[arg(short = 'p', long = "port", default_value_t = DEF_PORT)]
    pub port: u16,
    /// Report bandwidth in Gb/s instead of MiB/s.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Write the report as JSON to perftest_out.json or --out_json_file.
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// JSON report file (implies --out_json).
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,
    /// Add the CPU_Util[%] column (this process).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
    /// Plot against message size into a PNG.
    #[arg(long = "plot", value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Server: serve this many connections, then exit (default 1; 0 = forever).
    #[arg(long = "connections", default_value_t = 1)]
    pub connections: u32,
    /// The server's IPv4 address: given, this side is the client.
    pub server: Option<Ipv4Addr>,
}

impl PerfArgs {
    /// Check what clap cannot.
    pub fn validate(&self, test: Test) -> Result<(), String> {
        if let Some(s) = self.size {
            if s == 0 || s > super::params::MAX_SIZE {
                return Err(format!(
                    "-s/--size {s}: allowed 1..={}",
                    super::params::MAX_SIZE
                ));
            }
            if test.verb() == super::params::Verb::Atomic && s != 8 {
                return Err(format!("-s/--size {s}: atomics move exactly 8 bytes"));
            }
        }
        if self.all && self.size.is_some() {
            return Err("-a/--all and -s/--size exclude each other".into());
        }
        if self.iters == Some(0) || self.iters.is_some_and(|n| n < 5) {
            return Err("-n/--iters: at least 5".into());
        }
        if self.duration.is_some() && self.iters.is_some() {
            return Err("-D/--duration and -n/--iters exclude each other".into());
        }
        if self.duration == Some(0) {
            return Err("-D/--duration: at least 1 second".into());
        }
        if self.tx_depth == Some(0) || self.qps == 0 || self.qps > 64 || self.rx_depth == 0 {
            return Err("-t/--tx-depth, -r/--rx-depth: at least 1; -q/--qp: 1..=64".into());
        }
        if self.events && test == Test::WriteLat {
            // perftest: write_lat polls the last byte of the buffer, not a CQ.
            return Err("-e/--events: not available in write_lat (it polls memory)".into());
        }
        if self.cq_mod == Some(0) || self.outs == Some(0) {
            return Err("-Q/--cq-mod, -o/--outs: at least 1".into());
        }
        self.check_rate_limit(test)
    }

    /// perftest's rules for its software rate limiter (perftest_parameters.c).
    fn check_rate_limit(&self, test: Test) -> Result<(), String> {
        if let Some(t @ (RateLimitType::Hw | RateLimitType::Pp)) = self.rate_limit_type {
            let t = if t == RateLimitType::Hw { "HW" } else { "PP" };
            return Err(format!(
                "--rate_limit_type {t}: a NIC's rate limiter, which this software stack does \
                 not have; allowed: SW"
            ));
        }
        let Some(rate) = self.rate_limit else {
            if self.rate_limit_type.is_some() {
                return Err("--rate_limit_type: only with --rate_limit".into());
            }
            if self.burst_size.is_some() {
                return Err(
                    "--burst_size: only with --rate_limit (burst mode needs the rate \
                            limiter)"
                        .into(),
                );
            }
            return Ok(());
        };
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("--rate_limit {rate}: a rate above 0"));
        }
        if self.burst_size == Some(0) {
            return Err("--burst_size: at least 1".into());
        }
        if !test.is_bw() || test == Test::AtomicBw {
            return Err(format!(
                "--rate_limit: the software rate limiter runs in write_bw, read_bw and send_bw, \
                 not in {}",
                test.name()
            ));
        }
        Ok(())
    }

    /// The JSON file when one is asked for.
    pub fn json_path(&self) -> Option<PathBuf> {
        json_path(self.out_json, &self.out_json_file)
    }
}

/// perftest's `DEFAULT_JSON_FILE_NAME` unless a file is named.
pub fn json_path(out_json: bool, file: &Option<PathBuf>) -> Option<PathBuf> {
    match (out_json, file) {
        (_, Some(f)) => Some(f.clone()),
        (true, None) => Some(PathBuf::from("perftest_out.json")),
        (false, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("iwarp-perf").chain(args.iter().copied()))
    }

    #[test]
    fn perftest_spellings() {
        let c = parse(&[
            "write_bw",
            "-d",
            "configs/memif-b.toml",
            "-s",
            "65536",
            "-n",
            "100",
            "-t",
            "64",
            "-q",
            "2",
            "-p",
            "18516",
            "-R",
            "--report_gbits",
            "--out_json",
            "--out_json_file",
            "x.json",
            "--crc",
            "off",
            "--plot",
            "p.png",
            "10.77.0.1",
        ])
        .unwrap();
        let (t, a) = c.cmd.rdma().unwrap();
        assert_eq!(t, Test::WriteBw);
        assert_eq!(a.size, Some(65536));
        assert_eq!(a.iters, Some(100));
        assert_eq!(a.tx_depth, Some(64));
        assert_eq!(a.qps, 2);
        assert_eq!(a.port, 18516);
        assert!(a.rdma_cm && a.report_gbits);
        assert_eq!(a.crc, Some(OnOff::Off));
        assert_eq!(a.server, Some(Ipv4Addr::new(10, 77, 0, 1)));
        assert_eq!(a.json_path(), Some(PathBuf::from("x.json")));
        assert!(a.validate(t).is_ok());
        // Long forms and the server role.
        let c = parse(&[
            "read_lat",
            "--ib-dev=unix:/run/x.sock",
            "--size=4096",
            "--iters=50",
            "--rdma_cm",
        ])
        .unwrap();
        let (t, a) = c.cmd.rdma().unwrap();
        assert_eq!((t, a.size, a.server), (Test::ReadLat, Some(4096), None));
        let c = parse(&["atomic_bw", "-A", "CMP_AND_SWAP", "-D", "3", "10.0.0.1"]).unwrap();
        let (_, a) = c.cmd.rdma().unwrap();
        assert_eq!(
            (a.atomic_type, a.duration),
            (AtomicType::CMP_AND_SWAP, Some(3))
        );
        for ev in ["-e", "--events"] {
            let c = parse(&["send_lat", ev]).unwrap();
            let (t, a) = c.cmd.rdma().unwrap();
            assert!(a.events && a.validate(t).is_ok());
        }
    }

    #[test]
    fn bad_input_names_the_option() {
        let e = parse(&["write_bw", "--crc", "maybe"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--crc") && e.contains("on") && e.contains("off"),
            "{e}"
        );
        let c = parse(&["write_bw", "-a", "-s", "4"]).unwrap();
        let (t, a) = c.cmd.rdma().unwrap();
        assert!(a.validate(t).unwrap_err().contains("-a/--all"));
        let c = parse(&["atomic_lat", "-s", "4"]).unwrap();
        let (t, a) = c.cmd.rdma().unwrap();
        assert!(a.validate(t).unwrap_err().contains("8 bytes"));
        let c = parse(&["write_lat", "-e"]).unwrap();
        let (t, a) = c.cmd.rdma().unwrap();
        assert!(a.validate(t).unwrap_err().contains("-e/--events"));
        assert!(parse(&["bogus_bw"]).is_err());
        assert!(parse(&["write_bw", "not-an-ip"]).is_err());
    }

    #[test]
    fn rate_limiter_options_follow_perftest() {
        let args = |a: &[&str]| -> PerfArgs {
            let c = parse(a).expect("parses");
            c.cmd.rdma().expect("an RDMA test").1.clone()
        };
        let a = args(&["write_bw", "--rate_limit", "37", "--rate_units", "M"]);
        assert_eq!(a.rate_limit, Some(37.0));
        assert_eq!(a.rate_units, RateUnits::MebibytesPerSec);
        assert_eq!(a.validate(Test::WriteBw), Ok(()));
        let a = args(&["write_bw", "--rate_limit", "1"]);
        assert_eq!(
            a.rate_units,
            RateUnits::GigabitsPerSec,
            "perftest's default unit"
        );
        assert!(parse(&["write_bw", "--rate_units", "k"]).is_err());
        let refused = [
            (
                &["write_bw", "--rate_limit", "0"][..],
                Test::WriteBw,
                "above 0",
            ),
            (
                &["write_bw", "--rate_limit", "5", "--rate_limit_type", "HW"],
                Test::WriteBw,
                "allowed: SW",
            ),
            (
                &["write_bw", "--rate_limit", "5", "--rate_limit_type", "PP"],
                Test::WriteBw,
                "allowed: SW",
            ),
            (
                &["write_bw", "--burst_size", "8"],
                Test::WriteBw,
                "only with --rate_limit",
            ),
            (
                &["write_bw", "--rate_limit_type", "SW"],
                Test::WriteBw,
                "only with --rate_limit",
            ),
            (
                &["write_bw", "--rate_limit", "5", "--burst_size", "0"],
                Test::WriteBw,
                "at least 1",
            ),
            (
                &["write_lat", "--rate_limit", "5"],
                Test::WriteLat,
                "not in write_lat",
            ),
            (
                &["atomic_bw", "--rate_limit", "5"],
                Test::AtomicBw,
                "not in atomic_bw",
            ),
        ];
        for (argv, test, want) in refused {
            let e = args(argv).validate(test).expect_err("refused");
            assert!(e.contains(want), "{argv:?}: {e}");
        }
    }
}
