//! Two iwarpd instances on a memif wire resolve each other with ARP and exchange ICMP echoes;
//! both stop cleanly and leave no memif socket or DPDK runtime files.
mod common;

use common::{Proc, TempDir, counter, root_or_skip};
use std::path::Path;
use std::time::Duration;

#[test]
fn two_iwarpd_ping_over_memif() {
    if !root_or_skip("two_iwarpd_ping_over_memif") {
        return;
    }
    let dir = TempDir::new("memif");
    let sock = dir.path("memif.sock");
    let pid = std::process::id();
    let conf = |side: &str, role: &str, ip: &str, core: u32, diag: &str| {
        format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 256\nfile_prefix = \"iwt-m{side}-{pid}\"\n\
             [port]\ndevice = \"net_memif0,role={role},id=0,socket={},socket-abstract=no\"\nip = \"{ip}/24\"\n\
             [dataplane]\ncores = [{core}]\nmbufs = 4096\n{diag}",
            sock.display()
        )
    };
    let a_cfg = dir.write(
        "a.toml",
        &conf("a", "server", "10.77.0.1", 0, "[diag]\nrun_seconds = 60\n"),
    );
    let b_cfg = dir.write(
        "b.toml",
        &conf(
            "b",
            "client",
            "10.77.0.2",
            1,
            "[diag]\nping = \"10.77.0.1\"\nping_count = 20\nping_interval_ms = 20\nexit_after_ping = true\nrun_seconds = 60\n",
        ),
    );
    let mut a = Proc::spawn(
        &[common::iwarpd(), "--config", a_cfg.to_str().unwrap()],
        &dir.path("a.log"),
    );
    assert!(
        a.wait_for("iwarpd: port", Duration::from_secs(20)),
        "A did not start:\n{}",
        a.output()
    );
    let mut b = Proc::spawn(
        &[common::iwarpd(), "--config", b_cfg.to_str().unwrap()],
        &dir.path("b.log"),
    );
    let code = b.wait(Duration::from_secs(45));
    let out_b = b.output();
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

    a.signal("TERM");
    let code = a.wait(Duration::from_secs(15));
    let out_a = a.output();
    assert_eq!(code, Some(0), "A did not stop cleanly:\n{out_a}");
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
    assert!(!sock.exists(), "memif socket left behind");
    for side in ["a", "b"] {
        assert!(
            !Path::new(&format!("/var/run/dpdk/iwt-m{side}-{pid}")).exists(),
            "runtime dir of {side} left"
        );
    }
}

/// Two dataplane threads per instance: two memif queue pairs, a ping and a TCP transfer
/// (sender -> discard) checked by SHA-256 on both ends.
#[test]
fn two_queue_pairs_over_memif() {
    if !root_or_skip("two_queue_pairs_over_memif") {
        return;
    }
    let dir = TempDir::new("memifq");
    let sock = dir.path("memif.sock");
    let pid = std::process::id();
    let conf = |side: &str, role: &str, ip: &str, cores: &str, diag: &str| {
        format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 512\nfile_prefix = \"iwt-q{side}-{pid}\"\n\
             [port]\ndevice = \"net_memif0,role={role},id=0,socket={},socket-abstract=no\"\nip = \"{ip}/24\"\n\
             [dataplane]\ncores = {cores}\nmbufs = 16384\n[diag]\nrun_seconds = 60\n{diag}",
            sock.display()
        )
    };
    let a_cfg = dir.write(
        "a.toml",
        &conf("a", "server", "10.77.0.1", "[0, 1]", "discard_port = 9\n"),
    );
    let b_cfg = dir.write(
        "b.toml",
        &conf(
            "b",
            "client",
            "10.77.0.2",
            "[1, 0]",
            "ping = \"10.77.0.1\"\nping_count = 5\nsend_to = \"10.77.0.1:9\"\nsend_bytes = 16777216\nexit_after_send = true\n",
        ),
    );
    let mut a = Proc::spawn(
        &[common::iwarpd(), "--config", a_cfg.to_str().unwrap()],
        &dir.path("a.log"),
    );
    assert!(
        a.wait_for("iwarpd: port", Duration::from_secs(20)),
        "A did not start:\n{}",
        a.output()
    );
    let mut b = Proc::spawn(
        &[common::iwarpd(), "--config", b_cfg.to_str().unwrap()],
        &dir.path("b.log"),
    );
    let code = b.wait(Duration::from_secs(60));
    let out_b = b.output();
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{}", a.output());
    assert!(out_b.contains("queues 2"), "{out_b}");
    assert!(
        counter(&out_b, "lcore.1", "loops").unwrap_or(0) > 0,
        "second thread did not run:\n{out_b}"
    );
    a.signal("TERM");
    assert_eq!(
        a.wait(Duration::from_secs(15)),
        Some(0),
        "A did not stop cleanly:\n{}",
        a.output()
    );
    let out_a = a.output();
    let sent = common::field(&out_b, "iwarpd: sender", "sha256").expect("sender digest");
    let got = common::field(&out_a, "iwarpd: discard", "body_sha256").expect("discard digest");
    assert_eq!(sent, got, "SHA-256 differs\nA:\n{out_a}\nB:\n{out_b}");
    assert_eq!(
        common::field(&out_a, "iwarpd: discard", "trailer_ok"),
        Some("true")
    );
    assert!(!sock.exists(), "memif socket left behind");
}
