//! Rough CPU cost of the TCP state machine: 256 MiB through an in-memory pair of our
//! endpoints (no loss), both directions' processing on one thread. Ignored by default; run
//! `cargo test --release -p tcp --test throughput -- --ignored --nocapture`. The simulated
//! clock is used for TCP; the wall clock only to report the rate.
#![allow(
    clippy::disallowed_methods,
    reason = "wall clock only to report the measured rate"
)]

use netcore::{Duration, Instant};
use smoltcp::wire::Ipv4Address;
use tcp::{Dispatch, Endpoint, TcpConfig};

#[test]
#[ignore = "benchmark: run in release with --ignored"]
fn pair_throughput() {
    let a_ip = Ipv4Address::new(10, 0, 0, 1);
    let b_ip = Ipv4Address::new(10, 0, 0, 2);
    let cfg = TcpConfig {
        mss: 8960,
        // `TCP_RACK=0`: RFC 6675 recovery instead of RACK-TLP (cost comparison).
        rack_tlp: std::env::var("TCP_RACK").map_or(true, |v| v != "0"),
        ..TcpConfig::default()
    };
    let mut a: Endpoint<Vec<u8>> = Endpoint::new(cfg.clone(), a_ip, [1; 16]);
    let mut b: Endpoint<Vec<u8>> = Endpoint::new(cfg, b_ip, [2; 16]);
    b.listen(80);
    let mut now = Instant::from_millis(1);
    let ca = a.connect(now, 0, (b_ip, 80)).unwrap();
    let total: u64 = 256 << 20;
    let chunk = vec![0x5au8; 1 << 20];
    let mut src = |off: u64, dst: &mut [u8]| {
        let o = (off % (1 << 20)) as usize;
        let n = dst.len().min(chunk.len() - o);
        dst[..n].copy_from_slice(&chunk[o..o + n]);
        let rest = dst.len() - n;
        if rest > 0 {
            dst[n..].copy_from_slice(&chunk[..rest]);
        }
    };
    let mut buf = vec![0u8; 9100];
    let (mut queued, mut got, mut segs) = (0u64, 0u64, 0u64);
    let start = std::time::Instant::now();
    while got < total {
        now += Duration::from_micros(10);
        if let Some(c) = a.conn_mut(ca)
            && c.state().is_synchronized()
            && queued < total
        {
            queued += c.send(total - queued).unwrap_or(0);
        }
        while let Some((_, t)) = a.poll_transmit_all(now, &mut buf, &mut src) {
            segs += 1;
            let seg = buf[..t.len].to_vec();
            if let Dispatch::NewConn(h) | Dispatch::Conn(h) =
                b.handle_segment(now, a_ip, b_ip, seg, 0..t.len)
            {
                let c = b.conn_mut(h).unwrap();
                while let Some((_, r)) = c.poll_readable() {
                    got += r.len() as u64;
                }
            }
        }
        while let Some((_, t)) = b.poll_transmit_all(now, &mut buf, &mut tcp::NoData) {
            let seg = buf[..t.len].to_vec();
            a.handle_segment(now, b_ip, a_ip, seg, 0..t.len);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    let el = start.elapsed();
    eprintln!(
        "{} MiB in {el:?}: {:.2} Gbit/s of payload, {:.0} ns per data segment (both ends, incl. copies and checksums)",
        total >> 20,
        total as f64 * 8.0 / el.as_secs_f64() / 1e9,
        el.as_nanos() as f64 / segs as f64
    );
    assert_eq!(got, total);
}
