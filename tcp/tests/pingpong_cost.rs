//! Cost of TCP's work for a small-message ping-pong (issue #8, bar (b): a 2 B RDMA Write is one
//! ~30-byte record each way, the reply carrying the ACK), for callgrind (deterministic, unlike
//! a timed run on a shared machine) or `perf record`. Two endpoints take turns: queue one
//! record, take its header (`poll_transmit_header`, as the RDMA engine's emit does), hand the
//! segment to the peer (`handle_segment`) and read its payload. Ignored by default; run
//!
//! ```text
//! cargo test --release -p tcp --test pingpong_cost --no-run   # prints the binary
//! valgrind --tool=callgrind --callgrind-out-file=cg.out BINARY --ignored
//! callgrind_annotate --inclusive=yes cg.out | grep -E 'poll_transmit_header|handle_segment'
//! ```
//!
//! and divide by the rounds it prints (each round: two segments sent, two received);
//! `ROUNDS` sets their number (200,000). It also prints the wall time per round (the
//! simulated clock drives TCP; the wall clock only reports).
#![allow(
    clippy::disallowed_methods,
    reason = "wall clock only to report the time per round"
)]

use netcore::{Duration, Instant};
use smoltcp::wire::Ipv4Address;
use tcp::{ConnHandle, Dispatch, Endpoint};

mod common;
use common::{SumLater, connecting_pair, deliver};

/// The FPDU of a 2 B Write with CRC: MPA length, DDP/RDMAP tagged header, payload, pad, CRC.
const RECORD: u64 = 2 + 14 + 2 + 2 + 4;

/// Send one record from `tx` (connection `h`) to `rx` at `now`; returns the payload bytes
/// `rx` read.
fn hop(
    now: Instant,
    (tx, h, tx_ip): (&mut Endpoint<Vec<u8>>, ConnHandle, Ipv4Address),
    (rx, rx_ip): (&mut Endpoint<Vec<u8>>, Ipv4Address),
    hdr: &mut [u8; 60],
) -> u64 {
    let c = tx.conn_mut(h).expect("conn");
    c.send_record(RECORD).expect("room");
    let mut got = 0;
    while let Some(t) = c.poll_transmit_header(now, hdr, &mut SumLater) {
        got += deliver(now, &hdr[..], &t, rx, (tx_ip, rx_ip));
        if t.last {
            break;
        }
    }
    got
}

#[test]
#[ignore = "instruction-count harness: run under callgrind with --ignored"]
fn small_record_ping_pong() {
    let mut now = Instant::from_millis(1);
    let (mut a, mut b, ca, (a_ip, b_ip)) = connecting_pair(now);
    // The handshake.
    let mut cb = None;
    let mut buf = [0u8; 128];
    for _ in 0..10 {
        while let Some((_, t)) = a.poll_transmit_all(now, &mut buf, &mut SumLater) {
            if let Dispatch::NewConn(h) | Dispatch::Conn(h) =
                b.handle_segment(now, a_ip, b_ip, buf[..t.len].to_vec(), 0..t.len)
            {
                cb = Some(h);
            }
        }
        while let Some((_, t)) = b.poll_transmit_all(now, &mut buf, &mut tcp::NoData) {
            a.handle_segment(now, b_ip, a_ip, buf[..t.len].to_vec(), 0..t.len);
        }
        now += Duration::from_micros(20);
    }
    let cb = cb.expect("accepted");
    assert!(a.conn(ca).unwrap().state().is_synchronized());
    let rounds: u64 = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let mut hdr = [0u8; 60];
    let (mut got_a, mut got_b) = (0, 0);
    let t0 = std::time::Instant::now();
    for _ in 0..rounds {
        now += Duration::from_nanos(1100);
        got_b += hop(now, (&mut a, ca, a_ip), (&mut b, b_ip), &mut hdr);
        now += Duration::from_nanos(1100);
        got_a += hop(now, (&mut b, cb, b_ip), (&mut a, a_ip), &mut hdr);
    }
    let el = t0.elapsed();
    eprintln!(
        "{rounds} rounds, {:.1} ns per round",
        el.as_nanos() as f64 / rounds as f64
    );
    assert_eq!(got_a, rounds * RECORD);
    assert_eq!(got_b, rounds * RECORD);
}
