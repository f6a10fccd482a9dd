//! `l2bench`: traffic generator and latency probe for the poll-loop micro-benchmark.
//!
//! It is one end of a DPDK virtual wire (usually the memif client); the device under test on the
//! other end echoes every frame back. Two phases:
//! 1. throughput: keep the TX queue full of `size`-byte frames for `secs` seconds and count the
//!    frames that come back (frames/s and Gb/s of echoed frames);
//! 2. latency: one frame in flight at a time, `pings` round trips timed with the TSC into an
//!    HDR histogram (p50/p99/p99.9).
//!
//! Usage: l2bench --vdev DEVARGS [--size 64] [--secs 5] [--pings 100000] [--core 0]
//!                [--eal "extra args"] [--label NAME]   (`l2bench --help`)
//! Prints one line of `key=value` pairs per phase, for scripts/bench-l2.sh.

use anyhow::{Context, Result, bail};
use clap::Parser;
use dataplane::clock::TscClock;
use dataplane::eal::Eal;
use dataplane::mbuf::Mbuf;
use dataplane::mempool::Mempool;
use dataplane::port::{MAX_BURST, Port, PortConfig, Queue};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Traffic generator and latency probe of the poll-loop micro-benchmark (scripts/bench-l2.sh):
/// one end of a DPDK virtual wire whose other end echoes every frame back.
#[derive(Debug, Parser)]
#[command(name = "l2bench", version)]
struct Args {
    /// This end's DPDK virtual device, e.g.
    /// `net_memif0,role=client,socket=/tmp/x.sock,socket-abstract=no`.
    #[arg(long)]
    vdev: String,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(60..=1514))]
    size: u16,
    /// Seconds of the throughput phase.
    #[arg(long, default_value_t = 5.0, value_parser = positive_secs)]
    secs: f64,
    /// Round trips of the latency phase.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pings: u64,
    /// The core this process runs on (EAL `-l`).
    #[arg(long, default_value_t = 0)]
    core: usize,
    /// More EAL arguments, one string split at whitespace [default: --in-memory].
    #[arg(long, allow_hyphen_values = true)]
    eal: Option<String>,
    /// The name printed with the results.
    #[arg(long, default_value = "dut")]
    label: String,
}

/// A duration of the throughput phase: seconds, finite and above zero.
fn positive_secs(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds above 0")),
    }
}

fn fill(pool: &Mempool, size: usize, seq: u64, tsc: u64) -> Option<Mbuf> {
    let mut m = pool.alloc()?;
    let d = m.append(size)?;
    d[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    d[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    // A local experimental EtherType (IEEE 802 "local experimental 1"), then seq and TSC.
    d[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    d[14..22].copy_from_slice(&seq.to_le_bytes());
    d[22..30].copy_from_slice(&tsc.to_le_bytes());
    Some(m)
}

fn main() -> Result<()> {
    let a = Args::parse();
    let eal = Eal::init(&eal_args(&a)).context("EAL")?;
    let name = a.vdev.split(',').next().unwrap_or(&a.vdev).to_owned();
    let pool = Mempool::new(&eal, "l2bench", 16383, 256, 2048 + 128, -1).context("pool")?;
    let cfg = PortConfig {
        rx_queues: 1,
        tx_queues: 1,
        rx_desc: 1024,
        tx_desc: 1024,
        mtu: 1500,
        promiscuous: false,
    };
    let port = Port::start(&name, &cfg, &pool).context("port")?;
    let mut b = Bench {
        q: port.queue(0).context("queue")?,
        pool: &pool,
        size: usize::from(a.size),
        rx: Vec::with_capacity(MAX_BURST),
        tx: Vec::with_capacity(MAX_BURST),
    };
    let t0 = Instant::now();
    while !b.q.link_up() {
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("link did not come up in 20 s (is the device under test running?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    b.warm_up()?;
    b.throughput(&a);
    b.latency(&a, TscClock::new(&eal))?;
    drop(b);
    drop(port);
    drop(pool);
    drop(eal);
    Ok(())
}

/// EAL's arguments: one core, the device under test's vdev, `--eal` or `--in-memory`.
fn eal_args(a: &Args) -> Vec<String> {
    let mut args = vec![
        "--no-telemetry".into(),
        "-l".into(),
        a.core.to_string(),
        "--no-pci".into(),
        format!("--vdev={}", a.vdev),
    ];
    match a.eal.as_deref() {
        Some(extra) if !extra.trim().is_empty() => {
            args.extend(extra.split_whitespace().map(str::to_owned))
        }
        _ => args.push("--in-memory".into()),
    }
    args
}

/// The queue and buffers the phases share.
struct Bench<'a> {
    q: Queue,
    pool: &'a Mempool,
    size: usize,
    rx: Vec<Mbuf>,
    tx: Vec<Mbuf>,
}

impl Bench<'_> {
    /// Make sure the device under test echoes before measuring, then drain.
    fn warm_up(&mut self) -> Result<()> {
        let warm = Instant::now();
        let mut echoed = 0u64;
        while echoed < 1000 && warm.elapsed() < Duration::from_secs(10) {
            if let Some(m) = fill(self.pool, self.size, 0, 0) {
                self.tx.push(m);
            }
            self.q.tx_burst(&mut self.tx);
            self.tx.clear();
            echoed += self.q.rx_burst(&mut self.rx) as u64;
            self.rx.clear();
        }
        if echoed == 0 {
            bail!("no frame came back during warm-up: is the device under test echoing?");
        }
        self.drain();
        Ok(())
    }

    /// Receive and drop for 200 ms (frames still in flight are not counted).
    fn drain(&mut self) {
        let d = Instant::now();
        while d.elapsed() < Duration::from_millis(200) {
            self.q.rx_burst(&mut self.rx);
            self.rx.clear();
        }
    }

    /// Phase 1: throughput. Keep at most `window` frames in flight so the DUT, not a queue
    /// overflow, sets the rate (memif has back-pressure; others may drop).
    fn throughput(&mut self, a: &Args) {
        let window: u64 = 4096;
        let (mut sent, mut got, mut seq) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        let dur = Duration::from_secs_f64(a.secs);
        while start.elapsed() < dur {
            let room = window.saturating_sub(sent - got).min(MAX_BURST as u64);
            for _ in 0..room {
                match fill(self.pool, self.size, seq, 0) {
                    Some(m) => self.tx.push(m),
                    None => break,
                }
                seq += 1;
            }
            sent += self.q.tx_burst(&mut self.tx) as u64;
            self.tx.clear();
            got += self.q.rx_burst(&mut self.rx) as u64;
            self.rx.clear();
        }
        let secs = start.elapsed().as_secs_f64();
        self.drain();
        let fps = got as f64 / secs;
        println!(
            "l2bench phase=throughput label={} size={} secs={:.2} sent={} echoed={} mfps={:.3} gbps={:.2}",
            a.label,
            a.size,
            secs,
            sent,
            got,
            fps / 1e6,
            fps * (f64::from(a.size) + 24.0) * 8.0 / 1e9
        );
    }

    /// Phase 2: latency, one frame in flight.
    fn latency(&mut self, a: &Args, clock: TscClock) -> Result<()> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).context("histogram")?;
        let mut lost = 0u64;
        for i in 0..a.pings {
            let t = TscClock::cycles();
            if let Some(m) = fill(self.pool, self.size, i, t) {
                self.tx.push(m);
            }
            if self.q.tx_burst(&mut self.tx) == 0 {
                self.tx.clear();
                lost += 1;
                continue;
            }
            let t_send = clock.now();
            loop {
                if self.q.rx_burst(&mut self.rx) > 0 {
                    let t_recv = clock.now();
                    self.rx.clear();
                    let ns = (t_recv - t_send).as_nanos() as u64;
                    h.record(ns.max(1)).ok();
                    break;
                }
                if (clock.now() - t_send) > netcore_timeout() {
                    lost += 1;
                    break;
                }
            }
        }
        println!(
            "l2bench phase=latency label={} size={} pings={} lost={} p50_us={:.2} p99_us={:.2} p999_us={:.2} max_us={:.2}",
            a.label,
            a.size,
            a.pings,
            lost,
            h.value_at_quantile(0.5) as f64 / 1e3,
            h.value_at_quantile(0.99) as f64 / 1e3,
            h.value_at_quantile(0.999) as f64 / 1e3,
            h.max() as f64 / 1e3
        );
        Ok(())
    }
}

fn netcore_timeout() -> Duration {
    Duration::from_millis(100)
}
