//! RDMA Write throughput (the bandwidth test of `ib_write_bw`): the client keeps `-t` Writes
//! of `-S` bytes outstanding into the server's region until `-n` have completed (a Write
//! completes once TCP has the data acknowledged, so it was placed at the server), then tells
//! the server with a Send. Prints Gb/s of payload.
//!
//! ```text
//! write_bw -s -d unix:/run/iwarpd-a.sock -S 65536
//! write_bw -c 10.77.0.1 -d unix:/run/iwarpd-b.sock -S 65536 -n 20000
//! ```
mod common;

use clap::Parser;
use std::time::{Duration, Instant};
use verbs::{Access, RecvWr, SendWr, Wc};

#[derive(Debug, Parser)]
#[command(version, about = "RDMA Write throughput over iwarpd")]
struct Cli {
    #[command(flatten)]
    net: common::Net,
    /// Bytes per Write.
    #[arg(short = 'S', long, default_value_t = 65536)]
    size: usize,
    /// Writes.
    #[arg(short = 'n', long, default_value_t = 5000)]
    iters: u64,
    /// Writes outstanding at once.
    #[arg(short = 't', long, default_value_t = 128)]
    tx_depth: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let dev = cli.net.open()?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(cli.tx_depth.max(16) * 2, None)?;
    let qp = pd
        .create_qp(&cq, &cq)
        .sq_depth(cli.tx_depth.max(16))
        .rq_depth(4)
        .build()?;
    let buf = pd.alloc_mr_huge(cli.size.max(8), Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    if cli.net.server {
        qp.post_recv(&RecvWr::new(0, &[buf.sge(0, 8)?]))?;
    }
    let (id, peer) = cli.net.establish(&dev, &qp, buf.remote())?;
    if cli.net.server {
        let wc = wait(&cq, Duration::from_secs(3600))?;
        let mut b = [0u8; 8];
        buf.read(0, &mut b)?;
        println!(
            "write_bw server: {} bytes written by the client (last message {wc})",
            u64::from_le_bytes(b)
        );
        // Stay until the client has its Send acknowledged and disconnects: an embedded engine
        // stops with this process, and an unacknowledged Send would leave the client waiting.
        let _ = id.get_event(Some(cli.net.timeout()));
        return Ok(());
    }
    if peer.len < cli.size as u64 {
        return Err(format!(
            "the server's region has {} bytes, -S is {}",
            peer.len, cli.size
        )
        .into());
    }
    let (secs, done) = blast(&cli, &qp, &cq, &buf, peer)?;
    let bytes = done * cli.size as u64;
    println!(
        "write_bw size={} iters={done} secs={secs:.3} gbps={:.3} mpps={:.4}",
        cli.size,
        bytes as f64 * 8.0 / secs / 1e9,
        done as f64 / secs / 1e6
    );
    buf.write(0, &bytes.to_le_bytes())?;
    qp.post_send(&SendWr::send(u64::MAX, &[buf.sge(0, 8)?]))?;
    wait(&cq, cli.net.timeout())?;
    id.disconnect()?;
    Ok(())
}

/// Keep `tx_depth` Writes in flight until `iters` completed; returns (seconds, completed).
fn blast(
    cli: &Cli,
    qp: &verbs::Qp,
    cq: &verbs::Cq,
    buf: &verbs::Mr,
    peer: verbs::RemoteMr,
) -> Result<(f64, u64), Box<dyn std::error::Error>> {
    let sge = buf.sge(0, cli.size)?;
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wcs = [Wc::default(); 64];
    let start = Instant::now();
    let mut last_progress = Instant::now();
    while done < cli.iters {
        while posted < cli.iters && posted - done < u64::from(cli.tx_depth) {
            let wr = SendWr::write(posted, &[sge], peer.addr, peer.rkey);
            match qp.post_send(&wr) {
                Ok(()) => posted += 1,
                Err(verbs::Error::QueueFull(_)) => break,
                Err(e) => return Err(e.into()),
            }
        }
        let n = cq.poll(&mut wcs)?;
        for wc in &wcs[..n] {
            if !wc.is_ok() {
                return Err(format!("write {} failed: {wc}", wc.wr_id()).into());
            }
        }
        done += n as u64;
        if n > 0 {
            last_progress = Instant::now();
        } else {
            common::idle();
        }
        if n == 0 && last_progress.elapsed() > cli.net.timeout() {
            return Err(format!(
                "no completion for {:?} ({done} of {})",
                cli.net.timeout(),
                cli.iters
            )
            .into());
        }
    }
    Ok((start.elapsed().as_secs_f64(), done))
}

/// The next completion, polling (spinning or yielding between polls, `--idle`).
fn wait(cq: &verbs::Cq, t: Duration) -> Result<Wc, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut wc = [Wc::default(); 1];
    loop {
        if cq.poll(&mut wc)? == 1 {
            return match wc[0] {
                w if w.is_ok() => Ok(w),
                w => Err(format!("completion failed: {w}").into()),
            };
        }
        if start.elapsed() > t {
            return Err(format!("no completion within {t:?}").into());
        }
        common::idle();
    }
}
