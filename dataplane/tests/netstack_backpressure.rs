//! Two dataplane network stacks wired back to back in one process (real mbufs from a DPDK pool,
//! no port; root: EAL with `--no-huge`), in simulated time: a connection whose next hop is not
//! resolved yet is held back until the ARP reply arrives, instead of TCP sending a SYN-ACK the
//! glue then drops (which cost a retransmission timeout, 1 s, before).
//!
//! B (10.0.0.2, sender) learns A's MAC from a forged ARP reply, so A (10.0.0.1, discard) never
//! sees B's ARP request and does not know B when B's SYN arrives.

mod common;

use common::*;
use dataplane::mempool::{Mempool, data_room_for_mtu};
use dataplane::netstack::{Netstack, SendJob, Services};
use netcore::{Duration, Instant};
use tcp::TcpConfig;
use tcp::iface::{Iface, IfaceConfig};

const BYTES: u64 = 1 << 20;

#[test]
fn unresolved_next_hop_holds_the_connection_back() {
    if !root_or_skip("unresolved_next_hop_holds_the_connection_back") {
        return;
    }
    let eal = eal_no_huge("nsbp");
    let pool = Mempool::new(&eal, "nsbp", 8191, 0, data_room_for_mtu(1500), -1).expect("pool");
    let tcp = TcpConfig::default();
    let mut a = Netstack::new(
        Iface::new(IfaceConfig::new(A_MAC, A_IP, 24)),
        tcp.clone(),
        Services {
            discard_port: Some(9),
            discard_sha256: true,
            ..Services::default()
        },
        [1; 16],
    );
    let mut b = Netstack::new(
        Iface::new(IfaceConfig::new(B_MAC, B_IP, 24)),
        tcp,
        Services {
            send: Some(SendJob {
                dst: A_IP,
                port: 9,
                bytes: BYTES,
                connections: 1,
                sha256: true,
            }),
            ..Services::default()
        },
        [2; 16],
    );
    let mut scratch = vec![0u8; 16 * 1024];
    let (mut a_out, mut b_out) = (Vec::new(), Vec::new());
    let mut now = Instant::ZERO;
    let step = Duration::from_micros(20);

    // B asks for A's MAC; the request is lost, a (forged) reply from A answers it.
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    assert!(b_out.iter().all(is_arp) && !b_out.is_empty());
    b_out.clear();
    let reply = pool
        .alloc_copy(&arp_reply(A_MAC, A_IP, B_MAC, B_IP))
        .expect("mbuf");
    b.handle_frame(now, reply, &mut scratch, &pool, &mut b_out);
    now += step;
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    assert_eq!(b_out.len(), 1, "B's SYN");

    // A gets the SYN without knowing B: no SYN-ACK yet, only an ARP request, and TCP has
    // not counted a segment as sent.
    deliver(&mut a, now, &mut b_out, &pool, &mut scratch, &mut a_out);
    for _ in 0..5 {
        now += step;
        pump(&mut a, now, &pool, &mut scratch, &mut a_out);
    }
    assert!(a.stats.tx_wait_neighbor >= 1, "{:?}", a.stats);
    assert_eq!(a.tcp_stats().segs_out, 0, "a SYN-ACK went out unresolved");
    assert_eq!(a.stats.tx_no_neighbor, 0);
    assert!(
        !a_out.is_empty() && a_out.iter().all(is_arp),
        "A should only ask for B's MAC"
    );

    // From here the wire delivers everything; the transfer must complete without A ever
    // retransmitting (its SYN-ACK was held, not lost).
    let t0 = now;
    while !b.send_done() && now - t0 < Duration::from_secs(30) {
        deliver(&mut b, now, &mut a_out, &pool, &mut scratch, &mut b_out);
        pump(&mut b, now, &pool, &mut scratch, &mut b_out);
        deliver(&mut a, now, &mut b_out, &pool, &mut scratch, &mut a_out);
        pump(&mut a, now, &pool, &mut scratch, &mut a_out);
        now += step;
    }
    assert_eq!(
        (b.send_report.completed, b.send_report.failed),
        (1, 0),
        "{:?}",
        b.send_report
    );
    let (sa, sb) = (a.tcp_stats(), b.tcp_stats());
    assert_eq!(sa.bytes_in, BYTES + 32, "{sa:?}");
    assert_eq!(sa.retransmissions + sb.retransmissions, 0, "{sa:?}\n{sb:?}");
    assert!(
        now - t0 < Duration::from_millis(900),
        "took {:?}: an RTO was needed",
        now - t0
    );
    drop((a, b, a_out, b_out));
    drop(pool);
    drop(eal);
    // EAL leaves its runtime directory behind even after a cleanup (as in dpdk_mbuf.rs).
    remove_runtime_dir("nsbp");
}
