//! A shared counter driven by RFC 7306 atomics: the server exposes 8 bytes; each client adds
//! 1 with FetchAdd `-n` times (every returned value must be new), then the last CompareSwap
//! sets it to 0 if it holds what the client expects. The server serves `--clients` clients
//! one after the other and checks the final count.
//!
//! ```text
//! atomic_counter -s -d unix:/run/iwarpd-a.sock --clients 2
//! atomic_counter -c 10.77.0.1 -d unix:/run/iwarpd-b.sock -n 1000   # twice
//! ```
mod common;

use clap::Parser;
use std::time::Duration;
use verbs::{Access, ConnParam, SendWr};

#[derive(Debug, Parser)]
#[command(version, about = "A remote counter driven by RDMA atomics over iwarpd")]
struct Cli {
    #[command(flatten)]
    net: common::Net,
    /// FetchAdds per client (the server expects this many from each).
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u64,
    /// Clients the server serves before it exits.
    #[arg(long, default_value_t = 1)]
    clients: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let dev = cli.net.open()?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(64, None)?;
    let counter = pd.alloc_mr(
        64,
        Access::LOCAL_WRITE | Access::REMOTE_ATOMIC | Access::REMOTE_READ,
    )?;
    if cli.net.server {
        return serve(&cli, &dev, &pd, &cq, &counter);
    }
    let qp = pd.create_qp(&cq, &cq).sq_depth(16).rq_depth(1).build()?;
    let (id, peer) = cli.net.establish(&dev, &qp, counter.remote())?;
    let mut last = None;
    for i in 0..cli.iters {
        qp.post_send(&SendWr::fetch_add(
            i,
            counter.sge(0, 8)?,
            peer.addr,
            peer.rkey,
            1,
        ))?;
        let wc = cq
            .wait_one(cli.net.timeout())?
            .ok_or("FetchAdd did not complete")?;
        if !wc.is_ok() {
            return Err(format!("FetchAdd failed: {wc}").into());
        }
        let v = counter.load_u64(0)?;
        if last.is_some_and(|l| v <= l) {
            return Err(format!("FetchAdd returned {v} after {last:?}: not atomic").into());
        }
        last = Some(v);
    }
    println!(
        "atomic_counter client: {} FetchAdds, last value before mine {last:?}",
        cli.iters
    );
    id.disconnect()?;
    Ok(())
}

fn serve(
    cli: &Cli,
    dev: &verbs::Device,
    pd: &verbs::Pd,
    cq: &verbs::Cq,
    counter: &verbs::Mr,
) -> Result<(), Box<dyn std::error::Error>> {
    let lis = dev.create_cm_id()?;
    lis.listen(format!("0.0.0.0:{}", cli.net.port).parse()?, 4)?;
    eprintln!("listening on port {}", cli.net.port);
    for _ in 0..cli.clients {
        let qp = pd.create_qp(cq, cq).sq_depth(4).rq_depth(1).build()?;
        let req = lis.get_request(Duration::from_secs(3600))?;
        let p = ConnParam::new()
            .crc(cli.net.crc)
            .private_data(&counter.remote().to_bytes());
        req.id.accept(&qp, &p)?;
        req.id.wait_established(cli.net.timeout())?;
        loop {
            match req.id.get_event(None)? {
                Some(verbs::CmEvent::Disconnected { .. }) => break,
                Some(e) => eprintln!("event {}", e.name()),
                None => {}
            }
        }
    }
    let v = counter.load_u64(0)?;
    let want = u64::from(cli.clients) * cli.iters;
    println!("atomic_counter server: counter = {v} (expected {want})");
    if v != want {
        return Err(format!(
            "counter is {v}, {} clients x {} adds make {want}",
            cli.clients, cli.iters
        )
        .into());
    }
    Ok(())
}
