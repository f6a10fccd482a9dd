//! Two iwarpd instances on a memif wire resolve each other with ARP and exchange ICMP echoes;
//! both stop cleanly and leave no memif socket or DPDK runtime files.
mod common;

use common::{Proc, TempDir, counter, root_or_skip};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Instance A (memif server, 10.77.0.1) runs in the background while B (memif client,
/// 10.77.0.2) runs to completion; returns A (still running), B's exit code and output.
struct MemifPair {
    dir: TempDir,
    sock: PathBuf,
    prefix: String,
}

impl MemifPair {
    fn new(name: &str) -> Self {
        let dir = TempDir::new(name);
        let sock = dir.path("memif.sock");
        MemifPair {
            dir,
            sock,
            prefix: format!("iwt-{name}-{}", std::process::id()),
        }
    }

    fn conf(&self, side: &str, role: &str, ip: &str, cores: &str, rest: &str) -> PathBuf {
        let text = format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 512\nfile_prefix = \"{}-{side}\"\n\
             [port]\ndevice = \"net_memif0,role={role},id=0,socket={},socket-abstract=no\"\nip = \"{ip}/24\"\n\
             [dataplane]\ncores = {cores}\nmbufs = 16384\n[diag]\nrun_seconds = 60\n{rest}",
            self.prefix,
            self.sock.display()
        );
        self.dir.write(&format!("{side}.toml"), &text)
    }

    fn run(
        &self,
        a_cores: &str,
        a_diag: &str,
        b_cores: &str,
        b_diag: &str,
    ) -> (Proc, Option<i32>, String) {
        let a_cfg = self.conf("a", "server", "10.77.0.1", a_cores, a_diag);
        let b_cfg = self.conf("b", "client", "10.77.0.2", b_cores, b_diag);
        let a = Proc::spawn(
            &[common::iwarpd(), "--config", a_cfg.to_str().unwrap()],
            &self.dir.path("a.log"),
        );
        assert!(
            a.wait_for("iwarpd: port", Duration::from_secs(20)),
            "A did not start:\n{}",
            a.output()
        );
        let mut b = Proc::spawn(
            &[common::iwarpd(), "--config", b_cfg.to_str().unwrap()],
            &self.dir.path("b.log"),
        );
        let code = b.wait(Duration::from_secs(60));
        let out_b = b.output();
        (a, code, out_b)
    }

    /// Stop A with SIGTERM; expect a clean exit and nothing left behind. Returns A's output.
    fn stop(&self, mut a: Proc) -> String {
        a.signal("TERM");
        let code = a.wait(Duration::from_secs(15));
        let out_a = a.output();
        assert_eq!(code, Some(0), "A did not stop cleanly:\n{out_a}");
        assert!(
            out_a.contains("iwarpd: EAL shutdown: cleaned up"),
            "pools or EAL not released:\n{out_a}"
        );
        assert!(!self.sock.exists(), "memif socket left behind");
        for side in ["a", "b"] {
            let dir = format!("/var/run/dpdk/{}-{side}", self.prefix);
            assert!(!Path::new(&dir).exists(), "runtime dir of {side} left");
        }
        out_a
    }
}

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
