//! A stateless reply (here an RST to a SYN for a closed port, RFC 9293 §3.10.7.1; SYN-cookie
//! SYN-ACKs take the same path) to a peer whose MAC is not known yet is held while ARP
//! resolves it (RFC 1122 §2.3.2.2) and sent once the reply arrives, instead of being dropped
//! (`tx_no_neighbor`), which cost the peer a SYN retransmission (1 s). Real mbufs from a DPDK
//! pool, no port (root: EAL with `--no-huge`), simulated time.

mod common;

use common::*;
use dataplane::mbuf::Mbuf;
use dataplane::mempool::{Mempool, data_room_for_mtu};
use dataplane::netstack::{Netstack, SendJob, Services};
use netcore::{Duration, Instant};
use tcp::TcpConfig;
use tcp::iface::{Iface, IfaceConfig};

fn is_tcp_rst(m: &Mbuf) -> bool {
    let d = m.data();
    d.get(12..14) == Some(&[0x08, 0x00][..])
        && d.get(23) == Some(&6)
        && d.get(47).is_some_and(|f| f & 0x04 != 0)
}

#[test]
fn stateless_reply_held_until_the_neighbour_is_resolved() {
    if !root_or_skip("stateless_reply_held_until_the_neighbour_is_resolved") {
        return;
    }
    let eal = eal_no_huge("nsst");
    let pool = Mempool::new(&eal, "nsst", 1023, 0, data_room_for_mtu(1500), -1).expect("pool");
    let tcp = TcpConfig::default();
    // A listens on nothing: B's SYN to port 10 draws an endpoint-level RST.
    let mut a = Netstack::new(
        Iface::new(IfaceConfig::new(A_MAC, A_IP, 24)),
        tcp.clone(),
        Services::default(),
        [1; 16],
    );
    let mut b = Netstack::new(
        Iface::new(IfaceConfig::new(B_MAC, B_IP, 24)),
        tcp,
        Services {
            send: Some(SendJob {
                dst: A_IP,
                port: 10,
                bytes: 1000,
                connections: 1,
                sha256: false,
            }),
            ..Services::default()
        },
        [2; 16],
    );
    let mut scratch = vec![0u8; 16 * 1024];
    let (mut a_out, mut b_out) = (Vec::new(), Vec::new());
    let mut now = Instant::ZERO;
    let step = Duration::from_micros(20);

    // B learns A's MAC from a forged reply (A never sees B's request) and sends its SYN.
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    b_out.clear();
    let reply = pool
        .alloc_copy(&arp_reply(A_MAC, A_IP, B_MAC, B_IP))
        .expect("mbuf");
    b.handle_frame(now, reply, &mut scratch, &pool, &mut b_out);
    now += step;
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    assert_eq!(b_out.len(), 1, "B's SYN");

    // A answers with an RST it cannot address yet: only an ARP request leaves, nothing lost.
    deliver(&mut a, now, &mut b_out, &pool, &mut scratch, &mut a_out);
    for _ in 0..5 {
        now += step;
        pump(&mut a, now, &pool, &mut scratch, &mut a_out);
    }
    assert!(
        !a_out.is_empty() && a_out.iter().all(is_arp),
        "A asks for B's MAC"
    );
    assert_eq!(a.stats.tx_no_neighbor, 0, "{:?}", a.stats);
    a_out.clear();

    // B's ARP reply: the held RST goes out at A's next poll.
    let reply = pool
        .alloc_copy(&arp_reply(B_MAC, B_IP, A_MAC, A_IP))
        .expect("mbuf");
    a.handle_frame(now, reply, &mut scratch, &pool, &mut a_out);
    now += step;
    pump(&mut a, now, &pool, &mut scratch, &mut a_out);
    assert_eq!(
        a_out.iter().filter(|m| is_tcp_rst(m)).count(),
        1,
        "the held RST"
    );
    assert_eq!(
        (a.stats.tx_held_neighbor, a.stats.tx_no_neighbor),
        (1, 0),
        "{:?}",
        a.stats
    );

    // B's connection is refused at once (no SYN retransmission needed).
    deliver(&mut b, now, &mut a_out, &pool, &mut scratch, &mut b_out);
    pump(&mut b, now, &pool, &mut scratch, &mut b_out);
    assert!(
        b.send_done() && b.send_report.failed == 1,
        "{:?}",
        b.send_report
    );
    assert_eq!(b.tcp_stats().retransmissions, 0);

    drop((a, b, a_out, b_out));
    drop(pool);
    drop(eal);
    remove_runtime_dir("nsst");
}
