//! Two dataplane threads on one port whose device spreads flows over its queues: `net_tap`
//! with two queues. The kernel's tun driver picks a queue per flow (a symmetric flow hash, then
//! the queue the flow was last written from), as RSS on a real NIC would. Linux opens many
//! connections to our echo service: connections must land on both threads and every one of
//! them must complete byte for byte, which needs both threads to know Linux's MAC although
//! ARP lands on one queue (the ARP frames are shared between the threads).
//!
//! Other devices here: memif pairs queue i with the peer's queue i (no spreading: see
//! `memif_ping.rs`); af_packet has one queue per socket; af_xdp on a veth needs one XDP socket
//! per queue and generic XDP: possible but slower than tap.
mod common;

use common::{TempDir, counter, root_or_skip, sh, sh_lossy, start_iwarpd_in, tag, tcp_peer};
use std::time::Duration;

/// A namespace deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = sh_lossy(&format!("ip netns del {}", self.0));
    }
}

#[test]
fn two_queues_on_tap_spread_connections_over_both_threads() {
    if !root_or_skip("two_queues_on_tap_spread_connections_over_both_threads") {
        return;
    }
    let t = tag();
    let ns = Netns(format!("iwq{t}"));
    let _ = sh_lossy(&format!("ip netns del {}", ns.0));
    sh(&format!("ip netns add {}", ns.0));
    let tap = format!("tq{t}");
    let dir = TempDir::new("multiqueue");
    let mut d = start_iwarpd_in(
        &ns.0,
        &dir,
        "iwarpd",
        &format!(
            "[eal]\nfile_prefix = \"iwt-mq-{}\"\n[port]\ndevice = \"net_tap0,iface={tap}\"\n\
             ip = \"10.79.0.2/24\"\n[dataplane]\ncores = [0, 1]\n[diag]\nrun_seconds = 300\necho_port = 7\n",
            std::process::id()
        ),
    );
    assert!(d.output().contains("queues 2"), "{}", d.output());
    // The PMD gives the kernel's tap device the port's own MAC: give it another one, then
    // Linux's address.
    sh(&format!(
        "ip -n {0} link set {tap} address 02:00:00:79:00:01 && ip -n {0} addr add 10.79.0.1/24 dev {tap} && ip -n {0} link set {tap} up && ip -n {0} link set lo up",
        ns.0
    ));
    let (_, queues) = sh_lossy(&format!(
        "ls /sys/class/net/{tap}/queues 2>/dev/null; ip netns exec {} ls /sys/class/net/{tap}/queues",
        ns.0
    ));
    let conns = 200;
    let (ok, out) = sh_lossy(&format!(
        "ip netns exec {} env TIMEOUT=120 python3 {} many 10.79.0.2 7 {conns} 65536",
        ns.0,
        tcp_peer()
    ));
    d.signal("INT");
    let code = d.wait(Duration::from_secs(20));
    let report = d.output();
    assert!(
        ok && out.contains(&format!("many ok=True done={conns}")),
        "{out}\ntap queues: {queues}\niwarpd:\n{report}"
    );
    assert_eq!(code, Some(0), "iwarpd did not stop cleanly:\n{report}");
    let acc = |i: usize| counter(&report, &format!("lcore.{i}.netstack"), "accepted").unwrap_or(0);
    let (a0, a1) = (acc(0), acc(1));
    assert_eq!(a0 + a1, conns, "{report}");
    assert!(
        a0 > 0 && a1 > 0,
        "connections did not land on both threads ({a0}/{a1}):\n{report}"
    );
    // ARP reached one queue; the other thread learned Linux's MAC from the shared frame.
    let observed = counter(&report, "lcore.0", "arp_observed").unwrap_or(0)
        + counter(&report, "lcore.1", "arp_observed").unwrap_or(0);
    assert!(observed > 0, "no ARP frame shared:\n{report}");
    eprintln!(
        "tap, 2 queues: {conns} connections echoed, {a0} on thread 0, {a1} on thread 1; {observed} ARP frames shared"
    );
}
