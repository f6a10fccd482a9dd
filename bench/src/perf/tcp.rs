//! TCP baselines over kernel sockets, printed in perftest's columns so they sit beside the RDMA
//! rows. Both use an echo: the server (`tcp_bw`/`tcp_lat` without an address) sends back
//! whatever it receives, so the clients also run against any echo service, such as iwarpd's
//! `diag.echo_port` (our userspace TCP).
//!
//! - `tcp_lat`: one message of `size` bytes in flight; each round trip timed; half of it
//!   reported (as `ib_write_lat`).
//! - `tcp_bw`: `iters` messages of `size` bytes written back to back while a second thread
//!   reads the echo; bandwidth = bytes sent / time from the first write to the last echoed
//!   byte (the data crosses the path twice, once each way, as the connection is full duplex).

use super::clock::now_ns;
use super::report::{BwRow, LatRow};
use super::stats;
use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Serve echo on `port` for `connections` connections (0: forever), one at a time.
pub fn serve(port: u16, connections: u32) -> Result<()> {
    let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
        .with_context(|| format!("listen on TCP port {port}"))?;
    let mut served = 0;
    while connections == 0 || served < connections {
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        served += 1;
    }
    Ok(())
}

/// Connect, retrying for up to 10 s while the server comes up.
pub fn connect(addr: SocketAddrV4) -> Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) if Instant::now() > deadline => {
                return Err(e).with_context(|| format!("connect to {addr}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Ping-pong `iters` messages of `size` bytes; half round trips.
pub fn lat(s: &mut TcpStream, size: usize, iters: u64) -> Result<LatRow> {
    let msg = vec![0x5au8; size];
    let mut back = vec![0u8; size];
    let mut samples = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let t0 = now_ns();
        s.write_all(&msg)?;
        s.read_exact(&mut back).context("echo closed")?;
        samples.push(now_ns().saturating_sub(t0));
    }
    if back != msg {
        bail!("echo returned different bytes");
    }
    Ok(stats::lat(size as u64, iters, &samples, 2.0))
}

/// Stream `iters` messages of `size` bytes and read the echo back concurrently.
pub fn bw(s: &mut TcpStream, size: usize, iters: u64, gbits: bool) -> Result<BwRow> {
    let total = size as u64 * iters;
    let mut reader = s.try_clone()?;
    let t0 = Instant::now();
    let rx = std::thread::spawn(move || -> Result<u64> {
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        while got < total {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                bail!("echo closed after {got} of {total} bytes");
            }
            got += n as u64;
        }
        Ok(t0.elapsed().as_nanos() as u64)
    });
    let msg = vec![0xa5u8; size];
    for _ in 0..iters {
        s.write_all(&msg)?;
    }
    let end = rx
        .join()
        .map_err(|_| anyhow::anyhow!("reader thread panicked"))??;
    let secs = end.max(1) as f64 / 1e9;
    let unit = if gbits { 125_000_000.0 } else { 1_048_576.0 };
    Ok(BwRow {
        size: size as u64,
        iters,
        bw_peak: 0.0,
        bw_avg: total as f64 / secs / unit,
        msg_rate: iters as f64 / secs / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn against_our_echo_server_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let srv = std::thread::spawn(move || serve(port, 2));
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
        let mut s = connect(addr).unwrap();
        let r = lat(&mut s, 64, 200).unwrap();
        assert!(
            r.t_min > 0.0 && r.t_typical >= r.t_min && r.p99_9 >= r.t_typical,
            "{r:?}"
        );
        drop(s);
        let mut s = connect(addr).unwrap();
        let b = bw(&mut s, 65536, 200, true).unwrap();
        assert_eq!((b.size, b.iters), (65536, 200));
        assert!(b.bw_avg > 0.0 && b.bw_peak == 0.0, "{b:?}");
        drop(s);
        srv.join().unwrap().unwrap();
    }
}
