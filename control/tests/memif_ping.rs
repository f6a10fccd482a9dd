//! Two iwarpd instances on a memif wire resolve each other with ARP and exchange ICMP echoes;
//! both stop cleanly and leave no memif socket or DPDK runtime files.
mod common;

use common::memif::MemifPair;
use common::{counter, root_or_skip};

#[test]
fn two_iwarpd_ping_over_memif() {
    if !root_or_skip("two_iwarpd_ping_over_memif") {
        return;
    }
    let pair = MemifPair::new("memif");
    let (a, code, out_b) = pair.run(
        "[0]",
        "",
        "[1]",
        "ping = \"10.77.0.1\"\nping_count = 20\nping_interval_ms = 20\nexit_after_ping = true\n",
    );
    assert_eq!(
        code,
        Some(0),
        "B's ping failed:\n{out_b}\nA:\n{}",
        a.output()
    );
    assert_eq!(
        counter(&out_b, "lcore.0.ping", "received"),
        Some(20),
        "{out_b}"
    );
    assert_eq!(
        counter(&out_b, "lcore.0.iface", "arp_request_tx"),
        Some(1),
        "{out_b}"
    );

    let out_a = pair.stop(a);
    assert_eq!(
        counter(&out_a, "lcore.0.iface", "icmp_echo_reply_tx"),
        Some(20),
        "{out_a}"
    );
    assert_eq!(
        counter(&out_a, "lcore.0.iface", "arp_reply_tx"),
        Some(1),
        "{out_a}"
    );
    // Port counters survive the peer's disconnect (memif resets its own): the report keeps the
    // last snapshot (taken every 100 ms), so frames in the final tick may be missing from it.
    let rx = counter(&out_a, "lcore.0", "rx_packets").unwrap_or(0);
    let port_rx = counter(&out_a, "port.net_memif0", "ipackets").unwrap_or(0);
    assert!(
        port_rx > 0 && port_rx <= rx,
        "port ipackets {port_rx}, thread rx {rx}:\n{out_a}"
    );
    assert!(
        counter(&out_a, "port.net_memif0", "opackets").unwrap_or(0) > 0,
        "{out_a}"
    );
}

/// Two dataplane threads per instance: two memif queue pairs, a ping and a TCP transfer
/// (sender -> discard) checked by SHA-256 on both ends.
#[test]
fn two_queue_pairs_over_memif() {
    if !root_or_skip("two_queue_pairs_over_memif") {
        return;
    }
    let pair = MemifPair::new("memifq");
    let (a, code, out_b) = pair.run(
        "[0, 1]",
        "discard_port = 9\n",
        "[1, 0]",
        "ping = \"10.77.0.1\"\nping_count = 5\nsend_to = \"10.77.0.1:9\"\nsend_bytes = 16777216\nexit_after_send = true\n",
    );
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{}", a.output());
    assert!(out_b.contains("queues 2"), "{out_b}");
    assert!(
        counter(&out_b, "lcore.1", "loops").unwrap_or(0) > 0,
        "second thread did not run:\n{out_b}"
    );
    let out_a = pair.stop(a);
    let sent = common::field(&out_b, "iwarpd: sender", "sha256").expect("sender digest");
    let got = common::field(&out_a, "iwarpd: discard", "body_sha256").expect("discard digest");
    assert_eq!(sent, got, "SHA-256 differs\nA:\n{out_a}\nB:\n{out_b}");
    assert_eq!(
        common::field(&out_a, "iwarpd: discard", "trailer_ok"),
        Some("true")
    );
}
