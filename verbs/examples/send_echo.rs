//! Send/Recv echo: the client sends `-n` messages of `-S` bytes, the server sends each one
//! back, the client checks every byte and prints the round-trip time.
//!
//! ```text
//! send_echo -s -d unix:/run/iwarpd-a.sock
//! send_echo -c 10.77.0.1 -d unix:/run/iwarpd-b.sock -S 4096 -n 100
//! ```
mod common;

use clap::Parser;
use std::time::{Duration, Instant};
use verbs::{Access, RecvWr, SendWr, Wc, WcOpcode};

#[derive(Debug, Parser)]
#[command(version, about = "Send/Recv echo over iwarpd")]
struct Cli {
    #[command(flatten)]
    net: common::Net,
    /// Bytes per message.
    #[arg(short = 'S', long, default_value_t = 1024)]
    size: usize,
    /// Messages (the server echoes until the client disconnects).
    #[arg(short = 'n', long, default_value_t = 100)]
    iters: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let dev = cli.net.open()?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(64, None)?;
    let qp = pd.create_qp(&cq, &cq).sq_depth(16).rq_depth(16).build()?;
    let rx = pd.alloc_mr(cli.size.max(1), Access::LOCAL_WRITE)?;
    let tx = pd.alloc_mr(cli.size.max(1), Access::LOCAL_READ)?;
    qp.post_recv(&RecvWr::new(0, &[rx.sge(0, cli.size)?]))?;
    let (id, _) = cli.net.establish(&dev, &qp, rx.remote())?;
    let t = cli.net.timeout();
    if cli.net.server {
        let mut echoed = 0u64;
        loop {
            let wc = match cq.wait_one(Duration::from_millis(200))? {
                // The client went: our pending receive is flushed.
                Some(wc) if wc.status() == verbs::WcStatus::Flushed => break,
                Some(wc) if !wc.is_ok() => return Err(format!("completion failed: {wc}").into()),
                Some(wc) => wc,
                None if matches!(
                    id.get_event(Some(Duration::ZERO))?,
                    Some(verbs::CmEvent::Disconnected { .. })
                ) =>
                {
                    break;
                }
                None => continue,
            };
            if wc.opcode() != Some(WcOpcode::Recv) {
                continue;
            }
            let n = wc.byte_len() as usize;
            let msg = rx.to_vec(0, n)?;
            qp.post_recv(&RecvWr::new(0, &[rx.sge(0, cli.size)?]))?;
            tx.write(0, &msg)?;
            qp.post_send(&SendWr::send(1, &[tx.sge(0, n)?]))?;
            echoed += 1;
        }
        println!("send_echo server: echoed {echoed} messages");
        return Ok(());
    }
    let mut msg = vec![0u8; cli.size];
    let mut rtts = Vec::new();
    for i in 0..cli.iters {
        common::pattern(&mut msg, u64::from(i));
        tx.write(0, &msg)?;
        let t0 = Instant::now();
        qp.post_send(&SendWr::send(u64::from(i), &[tx.sge(0, cli.size)?]))?;
        let back = loop {
            match next(&cq, t)? {
                Some(wc) if wc.opcode() == Some(WcOpcode::Recv) => break wc,
                Some(_) => continue,
                None => return Err(format!("echo {i} did not come back within {t:?}").into()),
            }
        };
        rtts.push(t0.elapsed());
        if back.byte_len() as usize != cli.size || rx.to_vec(0, cli.size)? != msg {
            return Err(format!(
                "echo {i}: {} bytes came back, not the {} sent",
                back.byte_len(),
                cli.size
            )
            .into());
        }
        qp.post_recv(&RecvWr::new(0, &[rx.sge(0, cli.size)?]))?;
    }
    rtts.sort();
    println!(
        "send_echo size={} iters={} verified=yes median_rtt_us={:.2}",
        cli.size,
        cli.iters,
        rtts.get(rtts.len() / 2)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    );
    id.disconnect()?;
    Ok(())
}

fn next(cq: &verbs::Cq, t: Duration) -> Result<Option<Wc>, Box<dyn std::error::Error>> {
    match cq.wait_one(t)? {
        Some(wc) if !wc.is_ok() => Err(format!("completion failed: {wc}").into()),
        other => Ok(other),
    }
}
