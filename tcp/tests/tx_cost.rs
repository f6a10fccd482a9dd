//! Instruction cost of TCP's per-segment transmit path, for callgrind (deterministic, unlike
//! a timed run on a shared machine). One connection sends segment-sized records (as the RDMA
//! engine queues one FPDU per segment) in header-only mode (`poll_transmit_header`, as its
//! zero-copy and copy-at-emit paths do), its payload checksum left to the caller as theirs
//! is (`SendSource::checksum` gives 0: the payload is zeros, whose sum is 0, so the checksum
//! is right); the peer, another endpoint, gets each header followed by the zeros and ACKs as
//! it does. Ignored by
//! default; run
//!
//! ```text
//! cargo test --release -p tcp --test tx_cost --no-run   # prints the binary
//! valgrind --tool=callgrind --callgrind-out-file=cg.out BINARY --ignored
//! callgrind_annotate --inclusive=yes cg.out | grep -E 'poll_transmit_header|handle_segment'
//! ```
//!
//! and divide by the segments it prints.

use netcore::{Duration, Instant};

mod common;
use common::{SumLater, connecting_pair, deliver};

#[test]
#[ignore = "instruction-count harness: run under callgrind with --ignored"]
fn header_only_sender() {
    let mut now = Instant::from_millis(1);
    let (mut a, mut b, ca, (a_ip, b_ip)) = connecting_pair(now);
    let total: u64 = 64 << 20;
    let (mut queued, mut got, mut segs) = (0u64, 0u64, 0u64);
    let mut hdr = [0u8; 60];
    for step in 0u64.. {
        if got >= total {
            break;
        }
        if step == 10_000_000 {
            let c = a.conn(ca).unwrap();
            panic!(
                "stuck: {:?} got {got} queued {queued} segs {segs} flight {} cwnd {}",
                c.state(),
                c.bytes_in_flight(),
                c.cwnd()
            );
        }
        now += Duration::from_micros(5);
        if let Some(c) = a.conn_mut(ca)
            && c.state().is_synchronized()
        {
            let emss = u64::from(c.emss());
            while queued < total && c.send_capacity() >= emss {
                let n = emss.min(total - queued);
                if c.send_record(n).is_err() {
                    break;
                }
                queued += n;
            }
            while let Some(t) = c.poll_transmit_header(now, &mut hdr, &mut SumLater) {
                segs += 1;
                got += deliver(now, &hdr, &t, &mut b, (a_ip, b_ip));
            }
        } else {
            let mut buf = [0u8; 128];
            while let Some((_, t)) = a.poll_transmit_all(now, &mut buf, &mut SumLater) {
                let seg = buf[..t.len].to_vec();
                b.handle_segment(now, a_ip, b_ip, seg, 0..t.len);
            }
        }
        let mut buf = [0u8; 128];
        while let Some((_, t)) = b.poll_transmit_all(now, &mut buf, &mut tcp::NoData) {
            let seg = buf[..t.len].to_vec();
            a.handle_segment(now, b_ip, a_ip, seg, 0..t.len);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    eprintln!("{segs} segments sent for {} MiB", total >> 20);
    assert_eq!(got, total);
}
