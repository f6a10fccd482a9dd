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
