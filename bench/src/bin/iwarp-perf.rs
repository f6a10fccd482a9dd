//! `iwarp-perf`: perftest's benchmarks over iwarpd's verbs library (`iwarp-perf write_bw -d
//! DEVICE [options] [SERVER]`), speaking perftest's `-R` protocol, plus `tcp_bw`/`tcp_lat`
//! kernel-socket baselines. Exit status: 0 success, 1 failure, 2 bad command line.

use anyhow::{Context, Result};
use bench::perf::cli::{AtomicType, Cli, Cmd, Idle, OnOff, PerfArgs, Pump, TcpArgs, json_path};
use bench::perf::params::{self, DEF_CACHE_LINE_SIZE, DEF_PAGE_SIZE, Test};
use bench::perf::rdma::{CommQp, Opts, Side};
use bench::perf::report::{self, TestInfo};
use bench::perf::session::{DriveCfg, Row, drive};
use bench::perf::{json, plot, tcp, wire};
use clap::Parser;
use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let r = match &cli.cmd {
        Cmd::TcpBw(a) => run_tcp(a, true),
        Cmd::TcpLat(a) => run_tcp(a, false),
        cmd => {
            let (test, a) = cmd.rdma().expect("an RDMA test");
            if let Err(e) = a.validate(test) {
                eprintln!("iwarp-perf: {e}");
                return ExitCode::from(2);
            }
            run_rdma(test, a)
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp-perf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    // The embedded engine logs with `tracing`; keep stdout for perftest's tables.
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}

/// Open the device (`-d`), lock the memory (`--mlock`), and set how this thread polls:
/// `--pump` (pinned to the engine's core) and `--idle`.
fn open_device(a: &PerfArgs) -> Result<verbs::Device> {
    // Run-to-completion: one thread per side does all the work (halves the latency; the
    // bandwidth tests are as fast or faster since the pumping thread has mempool caches,
    // BENCHMARKS.md §4).
    // Sleeping on CQ events, the application leaves the engine to its dataplane thread.
    let pump_mode = a
        .pump
        .unwrap_or(if a.events { Pump::Off } else { Pump::On });
    let dev =
        verbs::Device::open_or_default(a.device.as_deref()).context("open the device (-d)")?;
    if a.mlock {
        dataplane::pump::lock_memory().context("--mlock")?;
    }
    // Only an embedded engine can be driven (a daemon's runs on its own threads).
    let pump = pump_mode == Pump::On && dev.is_pumped();
    if pump {
        // None when the engine's core is not ours to pin to.
        let _ = dev.pin_to_engine();
    }
    // Driving the engine, this thread has its dataplane thread's core alone (that thread is
    // parked meanwhile): nothing to yield to.
    let idle = match a.idle {
        None if pump => Idle::Spin,
        v => Idle::resolve(v),
    };
    bench::perf::rdma::set_idle_yield(idle == Idle::Yield);
    bench::perf::rdma::set_pump(pump_mode);
    Ok(dev)
}

/// `VmLck` (the size of the locked mappings, reserved address space included) and `VmRSS`
/// of this process (`/proc/self/status`), for `--mlock`.
fn locked_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("VmLck:") || l.starts_with("VmRSS:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Choose (and calibrate, ~20 ms) the measurement clock before anything is measured.
fn init_clock() {
    let clock = bench::perf::clock::source();
    tracing::info!(%clock, "measurement clock");
}

fn run_rdma(test: Test, a: &PerfArgs) -> Result<()> {
    init_logging();
    init_clock();
    let client = a.server.is_some();
    let dev = open_device(a)?;
    let pd = dev.alloc_pd()?;
    let attrs = dev.attrs().clone();
    let device_name = a.device.clone().unwrap_or_else(|| dev.spec().to_string());
    let (info, opts) = plan(test, a, &attrs, &device_name);
    let mut side = Side::new(opts, dev.clone(), pd.clone())?;
    if !client {
        print!("{}", report::SERVER_BANNER);
    }
    let mut comm = match a.server {
        Some(ip) => CommQp::connect(
            &dev,
            &pd,
            SocketAddrV4::new(ip, a.port),
            crc_mode(a),
            Duration::from_secs(30),
        )?,
        None => CommQp::accept(
            &dev,
            &pd,
            SocketAddrV4::new(*attrs.ip.ip(), a.port),
            crc_mode(a),
        )?,
    };
    // perftest sleeps a second once the comm connection is up (and siw as the responder may
    // miss an FPDU that follows its MPA Reply too closely: siw-peer README §1).
    std::thread::sleep(Duration::from_secs(1));
    let cfg = DriveCfg {
        info: info.clone(),
        page_size: DEF_PAGE_SIZE,
        cache_line: DEF_CACHE_LINE_SIZE,
        gbits: a.report_gbits,
        duration: a.duration.is_some(),
    };
    let mut steps = wire::script(test, client, a.qps as usize, info_sizes(test, a).len());
    // The banner is already out (before the comm connection, as perftest prints it).
    let o = drive(&steps, client, &cfg, &mut comm, &mut side);
    steps.clear();
    side.disconnect();
    comm.disconnect();
    let o = o?;
    if a.mlock {
        eprintln!("iwarp-perf: --mlock: {}", locked_memory());
    }
    let mut rows: Vec<(Row, Option<f64>)> =
        o.rows.iter().copied().zip(o.cpu.iter().copied()).collect();
    if rows.is_empty()
        && let Some(r) = o.peer_report
    {
        rows.push((Row::Bw(r), None));
    }
    if let Some(p) = a.json_path() {
        let extra = json_extra(a, &dev, client, o.peer_version);
        let v = json::report(
            json::test_info(&info, &test.json_name(info.atomic_fetch_add)),
            &rows,
            extra,
        );
        std::fs::write(&p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("{}", p.display()))?;
    }
    if let Some(p) = &a.plot {
        let only: Vec<Row> = rows.iter().map(|r| r.0).collect();
        plot::draw(
            p,
            &format!("iwarp-perf {} ({device_name})", test.name()),
            &only,
            a.report_gbits,
        )?;
    }
    Ok(())
}

/// What `--crc` asks for in MPA.
fn crc_mode(a: &PerfArgs) -> verbs::CrcMode {
    match a.crc {
        None => verbs::CrcMode::Default,
        Some(OnOff::On) => verbs::CrcMode::On,
        Some(OnOff::Off) => verbs::CrcMode::Off,
    }
}

/// The message sizes: `-a`'s sweep, or `-s` (the test's default).
fn info_sizes(test: Test, a: &PerfArgs) -> Vec<u64> {
    if a.all {
        params::sweep_sizes(test)
    } else {
        vec![a.size.unwrap_or(test.default_size())]
    }
}

/// The run's parameters, for the banner (`TestInfo`) and for the measuring side (`Opts`),
/// with the depths bounded by what the device allows.
fn plan(
    test: Test,
    a: &PerfArgs,
    attrs: &verbs::DeviceAttrs,
    device_name: &str,
) -> (TestInfo, Opts) {
    let sizes = info_sizes(test, a);
    let tx_depth = a
        .tx_depth
        .unwrap_or(test.default_tx_depth())
        .min(attrs.max_qp_wr.max(1));
    let out_reads = a
        .outs
        .unwrap_or(128)
        .min(attrs.max_ord.max(1))
        .min(attrs.max_ird.max(1));
    let info = TestInfo {
        test,
        client: a.server.is_some(),
        device: device_name.to_string(),
        num_qps: a.qps,
        pcie_relax_order: None,
        tx_depth,
        rx_depth: a.rx_depth,
        cq_mod: params::cq_moderation(a.cq_mod, sizes[0], a.all, tx_depth),
        mtu: params::ib_mtu_for(1500),
        gid_index: Some(0),
        inline_size: 0,
        out_reads,
        rdma_cm: true,
        atomic_fetch_add: a.atomic_type == AtomicType::FETCH_AND_ADD,
    };
    let opts = Opts {
        test,
        server: a.server,
        port: a.port,
        sizes,
        iters: a.iters.unwrap_or(test.default_iters()),
        duration: a.duration.map(Duration::from_secs),
        tx_depth,
        rx_depth: a.rx_depth.min(attrs.max_qp_wr.max(1)),
        qps: a.qps,
        cq_mod: a.cq_mod,
        out_reads,
        fetch_add: info.atomic_fetch_add,
        crc: crc_mode(a),
        gbits: a.report_gbits,
        cpu_util: a.cpu_util,
        daemon_pid: a.daemon_pid,
        events: a.events,
        page: DEF_PAGE_SIZE,
        cache_line: DEF_CACHE_LINE_SIZE,
        outliers: a
            .outliers
            .clone()
            .map(|p| (p, (a.outlier_us.max(0.0) * 1000.0) as u64)),
        pace: a.rate_limit.map(|rate| {
            let burst = a.burst_size.unwrap_or(tx_depth);
            if a.burst_size.is_none() {
                // perftest says so too.
                eprintln!(" Setting burst size to tx depth = {tx_depth}");
            }
            (rate, a.rate_units, u64::from(burst))
        }),
    };
    (info, opts)
}

/// Our keys in `--out_json` beside perftest's.
fn json_extra(
    a: &PerfArgs,
    dev: &verbs::Device,
    client: bool,
    peer_version: f64,
) -> serde_json::Map<String, serde_json::Value> {
    let mut extra = serde_json::Map::new();
    extra.insert(
        "tool".into(),
        serde_json::json!(format!("iwarp-perf {}", env!("CARGO_PKG_VERSION"))),
    );
    extra.insert(
        "role".into(),
        serde_json::json!(if client { "client" } else { "server" }),
    );
    extra.insert(
        "device_mode".into(),
        serde_json::json!(match dev.spec() {
            verbs::DeviceSpec::Daemon(_) => "daemon",
            verbs::DeviceSpec::Embedded(_) => "embedded",
        }),
    );
    extra.insert(
        "mpa_crc_requested".into(),
        serde_json::json!(format!("{:?}", crc_mode(a)).to_lowercase()),
    );
    extra.insert("peer_version".into(), serde_json::json!(peer_version));
    extra.insert(
        "bw_unit".into(),
        serde_json::json!(if a.report_gbits { "Gb/s" } else { "MiB/s" }),
    );
    extra
}

fn run_tcp(a: &TcpArgs, bw: bool) -> Result<()> {
    init_logging();
    init_clock();
    let Some(ip) = a.server else {
        println!("{}", report::SERVER_BANNER.trim_end());
        return tcp::serve(a.port, a.connections);
    };
    let sizes = if a.all {
        params::sweep_sizes(Test::WriteBw)
    } else {
        vec![a.size.unwrap_or(if bw { 65536 } else { 2 })]
    };
    let iters = a.iters.unwrap_or(if bw { 5000 } else { 1000 });
    let mut s = tcp::connect(SocketAddrV4::new(ip, a.port))?;
    print!(
        "{}",
        if bw {
            report::bw_header(a.report_gbits, a.cpu_util)
        } else {
            report::lat_header(false, a.cpu_util)
        }
    );
    let mut rows = Vec::new();
    for &size in &sizes {
        let meter = bench::perf::cpu::CpuMeter::start(None);
        let row = if bw {
            Row::Bw(tcp::bw(&mut s, size as usize, iters, a.report_gbits)?)
        } else {
            Row::Lat(tcp::lat(&mut s, size as usize, iters)?)
        };
        let cpu = a.cpu_util.then(|| meter.percent());
        match row {
            Row::Bw(b) => print!("{}", b.render(a.report_gbits, cpu)),
            Row::Lat(l) => print!("{}", l.render(cpu)),
            Row::LatDuration(..) => {}
        }
        rows.push((row, cpu));
    }
    print!("{}", report::RESULT_LINE);
    if let Some(p) = json_path(a.out_json, &a.out_json_file) {
        let name = if bw {
            "TCP_BW_Test"
        } else {
            "TCP_Latency_Test"
        };
        let info = serde_json::json!({ "test": name, "Transport_type": "kernel TCP", "Device": format!("{ip}:{}", a.port) });
        let mut extra = serde_json::Map::new();
        extra.insert(
            "bw_unit".into(),
            serde_json::json!(if a.report_gbits { "Gb/s" } else { "MiB/s" }),
        );
        let v = json::report(info, &rows, extra);
        std::fs::write(&p, serde_json::to_string_pretty(&v)? + "\n")?;
    }
    if let Some(p) = &a.plot {
        let only: Vec<Row> = rows.iter().map(|r| r.0).collect();
        plot::draw(
            p,
            if bw {
                "tcp_bw (kernel)"
            } else {
                "tcp_lat (kernel)"
            },
            &only,
            a.report_gbits,
        )?;
    }
    Ok(())
}
