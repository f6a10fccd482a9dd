//! RDMA Write ping-pong (the latency test of `ib_write_lat`): each side writes `-S` bytes into
//! the other's region and waits for the peer's write to land in its own; the last byte carries
//! the iteration number, polled with an atomic load. Prints the one-way latency (RTT / 2).
//!
//! ```text
//! write_pingpong -s -d unix:/run/iwarpd-a.sock
//! write_pingpong -c 10.77.0.1 -d unix:/run/iwarpd-b.sock -S 64 -n 10000
//! ```
mod common;

use clap::Parser;
use std::time::{Duration, Instant};
use verbs::{Access, SendWr, Wc};

#[derive(Debug, Parser)]
#[command(version, about = "RDMA Write ping-pong latency over iwarpd")]
struct Cli {
    #[command(flatten)]
    net: common::Net,
    /// Bytes per write (at least 1: the last byte carries the iteration).
    #[arg(short = 'S', long, default_value_t = 64)]
    size: usize,
    /// Timed iterations.
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u32,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 100)]
    warmup: u32,
}

/// Posts between two signaled writes (the rest complete silently).
const SIGNAL_EVERY: u32 = 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    if cli.size == 0 {
        return Err("-S must be at least 1 (the last byte carries the iteration)".into());
    }
    let dev = cli.net.open()?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(256, None)?;
    let qp = pd.create_qp(&cq, &cq).sq_depth(128).rq_depth(1).build()?;
    let inbox = pd.alloc_mr(cli.size, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let src = pd.alloc_mr(cli.size, Access::LOCAL_READ)?;
    let (_id, peer) = cli.net.establish(&dev, &qp, inbox.remote())?;
    if peer.len < cli.size as u64 {
        return Err(format!(
            "the peer's region has {} bytes, -S is {}",
            peer.len, cli.size
        )
        .into());
    }
    let last = cli.size - 1;
    let server = cli.net.server;
    let total = cli.warmup + cli.iters;
    let mut rtts = Vec::with_capacity(cli.iters as usize);
    let mut wcs = [Wc::default(); 16];
    let deadline = cli.net.timeout();
    for i in 0..total {
        let mark = (i % 255 + 1) as u8;
        let t0 = Instant::now();
        if server {
            wait_mark(&inbox, last, mark, deadline)?;
        }
        src.write(last, &[mark])?;
        let mut wr = SendWr::write(u64::from(i), &[src.sge(0, cli.size)?], peer.addr, peer.rkey);
        if i % SIGNAL_EVERY != SIGNAL_EVERY - 1 {
            wr = wr.unsignaled();
        }
        qp.post_send(&wr)?;
        if !server {
            wait_mark(&inbox, last, mark, deadline)?;
            if i >= cli.warmup {
                rtts.push(t0.elapsed());
            }
        }
        let n = cq.poll(&mut wcs)?;
        if let Some(bad) = wcs[..n].iter().find(|w| !w.is_ok()) {
            return Err(format!("write failed: {bad}").into());
        }
    }
    if !server {
        report(&mut rtts, cli.size);
    }
    // Let the last writes complete before the connection goes.
    let _ = cq.wait_one(Duration::from_millis(200));
    Ok(())
}

fn wait_mark(mr: &verbs::Mr, at: usize, mark: u8, timeout: Duration) -> verbs::Result<()> {
    let start = Instant::now();
    let mut spins = 0u32;
    while mr.load_u8(at)? != mark {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1 << 16) && start.elapsed() > timeout {
            return Err(verbs::Error::Protocol(format!(
                "the peer's write {mark} did not arrive within {timeout:?}"
            )));
        }
        common::idle();
    }
    Ok(())
}

fn report(rtts: &mut [Duration], size: usize) {
    rtts.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6 / 2.0;
    let n = rtts.len();
    if n == 0 {
        return;
    }
    let avg = rtts.iter().map(|d| us(*d)).sum::<f64>() / n as f64;
    println!(
        "write_lat size={size} iters={n} min_us={:.2} median_us={:.2} p99_us={:.2} max_us={:.2} avg_us={avg:.2}",
        us(rtts[0]),
        us(rtts[n / 2]),
        us(rtts[(n * 99 / 100).min(n - 1)]),
        us(rtts[n - 1]),
    );
}
