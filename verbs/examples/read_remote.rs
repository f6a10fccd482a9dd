//! RDMA Read of a remote buffer: the server fills `-S` bytes with a pattern and advertises
//! the region in its MPA private data; the client reads it in `-c`hunks and checks the
//! SHA-256 the server put in the private data too.
//!
//! ```text
//! read_remote -s -d unix:/run/iwarpd-a.sock -S 1048576
//! read_remote -c 10.77.0.1 -d unix:/run/iwarpd-b.sock
//! ```
mod common;

use clap::Parser;
use sha2::{Digest, Sha256};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};
use verbs::{Access, ConnParam, RecvWr, RemoteMr, SendWr};

#[derive(Debug, Parser)]
#[command(version, about = "RDMA Read of a remote buffer over iwarpd")]
struct Cli {
    #[command(flatten)]
    net: common::Net,
    /// Buffer size (server).
    #[arg(short = 'S', long, default_value_t = 1 << 20)]
    size: usize,
    /// Bytes per Read request (client).
    #[arg(long, default_value_t = 65536)]
    chunk: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let dev = cli.net.open()?;
    let pd = dev.alloc_pd()?;
    let cq = dev.create_cq(64, None)?;
    let qp = pd.create_qp(&cq, &cq).sq_depth(32).rq_depth(4).build()?;
    let param = ConnParam::new().crc(cli.net.crc).ird(16).ord(16);
    if cli.net.server {
        let buf = pd.alloc_mr(cli.size.max(8), Access::LOCAL_WRITE | Access::REMOTE_READ)?;
        let mut data = vec![0u8; cli.size];
        common::pattern(&mut data, 7);
        buf.write(0, &data)?;
        let mut pd_bytes = buf.remote().to_bytes().to_vec();
        pd_bytes[12..16].copy_from_slice(&(cli.size as u32).to_be_bytes());
        pd_bytes.extend_from_slice(&Sha256::digest(&data));
        qp.post_recv(&RecvWr::new(0, &[buf.sge(0, 0)?]))?;
        let lis = dev.create_cm_id()?;
        lis.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, cli.net.port), 1)?;
        eprintln!("listening on port {}", cli.net.port);
        let req = lis.get_request(Duration::from_secs(3600))?;
        req.id.accept(&qp, &param.private_data(&pd_bytes))?;
        req.id.wait_established(cli.net.timeout())?;
        // The client's zero-length Send says it is done.
        let wc = cq
            .wait_one(Duration::from_secs(3600))?
            .ok_or("no done message")?;
        println!(
            "read_remote server: {} bytes served, client done ({wc})",
            cli.size
        );
        return Ok(());
    }
    let ip = cli.net.connect.ok_or("-c ADDR")?;
    let id = dev.create_cm_id()?;
    id.connect(&qp, SocketAddrV4::new(ip, cli.net.port), &param)?;
    let est = id.wait_established(cli.net.timeout())?;
    if est.private_data.len() < 48 {
        return Err("the server sent no region and digest".into());
    }
    let peer = RemoteMr::from_bytes(est.private_data[..16].try_into()?);
    let want = &est.private_data[16..48];
    let size = peer.len as usize;
    let sink = pd.alloc_mr(size.max(1), Access::LOCAL_WRITE)?;
    let t0 = Instant::now();
    let mut off = 0;
    while off < size {
        let n = cli.chunk.min(size - off);
        qp.post_send(&SendWr::read(
            off as u64,
            &[sink.sge(off, n)?],
            peer.at(off as u64),
            peer.rkey,
        ))?;
        let wc = cq
            .wait_one(cli.net.timeout())?
            .ok_or("Read did not complete")?;
        if !wc.is_ok() {
            return Err(format!("Read failed: {wc}").into());
        }
        off += n;
    }
    let secs = t0.elapsed().as_secs_f64();
    let got = Sha256::digest(sink.to_vec(0, size)?);
    if got.as_slice() != want {
        return Err("SHA-256 of the bytes read differs from the server's".into());
    }
    println!("read_remote size={size} sha256=ok secs={secs:.4}");
    qp.post_send(&SendWr::send(0, &[]))?;
    cq.wait_one(cli.net.timeout())?;
    Ok(())
}
