//! The dataplane side of issue 10, end to end: jumbo frames (MTU 9000) over memif between two
//! iwarpd (TCP and the diagnostic RDMA service) and over a veth with a Linux peer (af_packet);
//! a flood of 5,000 spoofed SYNs followed at once by a normal connection (SYN cookies); many
//! connections pinning tiny out-of-order segments while another moves 64 MiB (mbuf bounds);
//! two queues on a device that spreads flows (net_tap), connections on both threads.
//!
//! Every transfer is checked byte for byte (SHA-256 or the echo compared), counters show the
//! mechanism at work (frame sizes on the port, cookies, bounds hit, accepts per thread).
mod common;

use common::memif::MemifPair;
use common::{
    Proc, TempDir, VethPair, counter, field, have_tool, root_or_skip, sh, sh_lossy, start_iwarpd,
    tcp_peer,
};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One test at a time: each runs busy-polling daemons.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// iwarpd on af_packet in the veth's namespace, 10.78.0.2/24.
fn af_packet_config(prefix: &str, dif: &str, port: &str, rest: &str) -> String {
    format!(
        "[eal]\nfile_prefix = \"{prefix}-{}\"\n[port]\ndevice = \"net_af_packet0,iface={dif},framecnt=2048\"\n\
         ip = \"10.78.0.2/24\"\n{port}\n[dataplane]\ncores = [1]\n[diag]\nrun_seconds = 600\n{rest}",
        std::process::id()
    )
}

/// Stop iwarpd with SIGINT, expect exit status 0, return its output (with the counters).
fn stop(mut d: Proc) -> String {
    d.signal("INT");
    let code = d.wait(Duration::from_secs(20));
    let out = d.output();
    assert_eq!(code, Some(0), "iwarpd did not stop cleanly:\n{out}");
    out
}

/// Average frame size a port counted in one direction (`o` or `i`).
fn avg_frame(report: &str, port: &str, dir: &str) -> u64 {
    let bytes = counter(report, port, &format!("{dir}bytes")).unwrap_or(0);
    let pkts = counter(report, port, &format!("{dir}packets")).unwrap_or(0);
    bytes / pkts.max(1)
}

fn tcp_counter(report: &str, key: &str) -> u64 {
    common::counter_sum(report, "lcore.", key)
}

#[test]
fn jumbo_frames_over_memif_tcp_and_rdma() {
    let _g = serial();
    if !root_or_skip("jumbo_frames_over_memif_tcp_and_rdma") {
        return;
    }
    // TCP: B's sender -> A's discard, 32 MiB with SHA-256.
    let mut pair = MemifPair::new("jumbo");
    pair.port_extra = "mtu = 9000".into();
    let (a, code, out_b) = pair.run(
        "[0]",
        "discard_port = 9\n",
        "[1]",
        "send_to = \"10.77.0.1:9\"\nsend_bytes = 33554432\nexit_after_send = true\n",
    );
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{}", a.output());
    let out_a = pair.stop(a);
    let sent = field(&out_b, "iwarpd: sender", "sha256").expect("sender digest");
    let got = field(&out_a, "iwarpd: discard", "body_sha256").expect("discard digest");
    assert_eq!(sent, got, "SHA-256 differs\nA:\n{out_a}\nB:\n{out_b}");
    assert_eq!(field(&out_a, "iwarpd: discard", "trailer_ok"), Some("true"));
    // Jumbo frames on the wire, and no segment lost for want of a big enough mbuf.
    let (tx, rx) = (
        avg_frame(&out_b, "port.net_memif0", "o"),
        avg_frame(&out_a, "port.net_memif0", "i"),
    );
    assert!(
        tx > 6000 && rx > 6000,
        "average frames {tx}/{rx} B:\n{out_b}"
    );
    assert_eq!(tcp_counter(&out_b, "tx_no_mbuf"), 0, "{out_b}");
    assert_eq!(tcp_counter(&out_a, "drop_rx_chain"), 0, "{out_a}");
    eprintln!("memif MTU 9000 TCP: 32 MiB OK, average frame {tx} B out, {rx} B in");

    // RDMA: Write, Send and Read of 1 MiB and 4 MiB, SHA-256 on both ends.
    let mut pair = MemifPair::new("jumbordma");
    pair.port_extra = "mtu = 9000".into();
    pair.b_timeout = Duration::from_secs(120);
    let (a, code, out_b) = pair.run(
        "[0]",
        "rdma_port = 7174\nrdma_buffer = 4194304\n",
        "[1]",
        "rdma_connect = \"10.77.0.1:7174\"\nrdma_ops = [\"write\", \"send\", \"read\"]\n\
         rdma_sizes = [1048576, 4194304]\nrdma_buffer = 4194304\nexit_after_rdma = true\n",
    );
    let out_a = pair.stop(a);
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    assert!(
        out_b.contains("rdma-diag done ok=6 failed=0"),
        "{out_b}\nA:\n{out_a}"
    );
    let digests = |out: &str, prefix: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| field(l, "", "sha256").map(str::to_owned))
            .collect()
    };
    let (g, s) = (
        digests(&out_b, "iwarpd: rdma op="),
        digests(&out_a, "iwarpd: rdma-sink op="),
    );
    assert_eq!(g.len(), 6, "{out_b}");
    assert_eq!(g, s, "RDMA digests differ\nB:\n{out_b}\nA:\n{out_a}");
    let (tx, rx) = (
        avg_frame(&out_b, "port.net_memif0", "o"),
        avg_frame(&out_b, "port.net_memif0", "i"),
    );
    assert!(
        tx.max(rx) > 6000,
        "RDMA frames not jumbo ({tx}/{rx} B):\n{out_b}"
    );
    eprintln!("memif MTU 9000 RDMA: 6 operations OK, average frame {tx} B out, {rx} B in");
}

#[test]
fn jumbo_frames_with_linux_over_veth() {
    let _g = serial();
    if !root_or_skip("jumbo_frames_with_linux_over_veth") {
        return;
    }
    let veth = VethPair::new("j", "10.78.0.1/24");
    veth.set_mtu(9000);
    let dir = TempDir::new("jumboveth");
    let peer = tcp_peer();
    let bytes: u64 = 32 << 20;
    let srv_cmd = format!("ip netns exec {} python3 {peer} server 5001", veth.kns);
    let mut srv = Proc::spawn_ready(
        &srv_cmd,
        &dir.path("server.log"),
        "server listening",
        Duration::from_secs(10),
    );
    let diag = format!("echo_port = 7\nsend_to = \"10.78.0.1:5001\"\nsend_bytes = {bytes}\n");
    let d = start_iwarpd(
        &veth,
        &dir,
        "iwarpd",
        &af_packet_config("iwt-jumbo", &veth.dif, "mtu = 9000", &diag),
    );
    // Linux client -> our echo and back, while our sender streams to the Linux server.
    let (ok, echo) = veth.kexec(&format!("python3 {peer} echo 10.78.0.2 7 {bytes}"));
    assert!(
        ok && echo.contains("echo ok=True"),
        "echo at MTU 9000 failed:\n{echo}\niwarpd:\n{}",
        d.output()
    );
    let code = srv.wait(Duration::from_secs(300));
    let srv_out = srv.output();
    assert_eq!(code, Some(0), "{srv_out}\niwarpd:\n{}", d.output());
    assert!(
        d.wait_for("iwarpd: sender", Duration::from_secs(30)),
        "{}",
        d.output()
    );
    let out = stop(d);
    assert!(
        !out.contains("rte_eth_dev_set_mtu"),
        "the MTU was refused:\n{out}"
    );
    let ours = field(&out, "iwarpd: sender", "sha256").expect("sender sha256");
    let theirs = field(&srv_out, "server ok=", "sha256").expect("server sha256");
    assert_eq!(ours, theirs, "SHA-256 differs");
    assert_eq!(field(&out, "iwarpd: sender", "ok"), Some("true"), "{out}");
    let (tx, rx) = (
        avg_frame(&out, "port.net_af_packet0", "o"),
        avg_frame(&out, "port.net_af_packet0", "i"),
    );
    assert!(tx > 4000 && rx > 4000, "average frames {tx}/{rx} B:\n{out}");
    assert_eq!(tcp_counter(&out, "tx_no_mbuf"), 0, "{out}");
    eprintln!(
        "veth MTU 9000 with Linux: {} MiB each way OK, average frame {tx} B out, {rx} B in",
        bytes >> 20
    );
}

#[test]
fn syn_flood_then_a_normal_connection() {
    let _g = serial();
    if !root_or_skip("syn_flood_then_a_normal_connection") {
        return;
    }
    let veth = VethPair::new("s", "10.78.0.1/24");
    let dir = TempDir::new("synflood");
    // The spoofed sources are off-link (198.18.0.0/16, RFC 2544's benchmark range): our
    // SYN-ACKs go to the gateway, the kernel namespace, which does not forward them.
    let d = start_iwarpd(
        &veth,
        &dir,
        "iwarpd",
        &af_packet_config(
            "iwt-syn",
            &veth.dif,
            "gateway = \"10.78.0.1\"",
            "echo_port = 7\n",
        ),
    );
    let peer = tcp_peer();
    let (ok, flood) = veth.kexec(&format!(
        "python3 {peer} synflood 10.78.0.2 7 5000 198.18.0.0"
    ));
    assert!(ok && flood.contains("synflood sent=5000"), "{flood}");
    let t0 = Instant::now();
    let (ok, echo) = veth.kexec(&format!(
        "env TIMEOUT=20 python3 {peer} echo 10.78.0.2 7 4194304"
    ));
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        ok && echo.contains("echo ok=True"),
        "a normal connection failed after the flood:\n{echo}\niwarpd:\n{}",
        d.output()
    );
    let report = stop(d);
    let c = |k| tcp_counter(&report, k);
    // Beyond the 256 half-open connections every SYN draws a cookie, less what af_packet
    // drops when the flood outruns the poll loop (4,200-4,750 of 5,000 seen).
    assert!(
        c("syn_cookies_sent") >= 2500,
        "SYN cookies not used:\n{report}"
    );
    assert!(
        c("syn_cookies_accepted") >= 1,
        "the normal connection did not come through a cookie:\n{report}"
    );
    eprintln!(
        "SYN flood: {} cookies sent, {} accepted; 4 MiB echo {secs:.2} s after the flood",
        c("syn_cookies_sent"),
        c("syn_cookies_accepted")
    );
}

#[test]
fn tiny_out_of_order_segments_are_bounded() {
    let _g = serial();
    if !root_or_skip("tiny_out_of_order_segments_are_bounded")
        || !have_tool("nft", "tiny_out_of_order_segments_are_bounded")
    {
        return;
    }
    let veth = VethPair::new("o", "10.78.0.1/24");
    let dir = TempDir::new("ooo");
    // 50 connections x 64 tiny segments (the per-connection bound) are 3,200, over three
    // times the thread's budget of 1,000 held mbufs: the budget is hit even when af_packet
    // loses a third of the burst on a loaded machine (CI once held only 1,774 with a budget
    // of 2,000).
    let d = start_iwarpd(
        &veth,
        &dir,
        "iwarpd",
        &af_packet_config(
            "iwt-ooo",
            &veth.dif,
            "",
            "echo_port = 7\n[tcp]\nmax_ooo_mbufs = 1000\nmax_ooo_small_segments = 64\n",
        ),
    );
    // The hand-made connections have no kernel socket: drop the kernel's RSTs for them.
    let rules = "table ip iwooo {\n chain out { type filter hook output priority 0; tcp sport 40000-40099 tcp flags & rst == rst drop; }\n}\n";
    let f = dir.write("ooo.nft", rules);
    sh(&format!(
        "ip netns exec {} nft -f {}",
        veth.kns,
        f.display()
    ));
    let peer = tcp_peer();
    let bytes: u64 = 64 << 20;
    let cmd = format!(
        "ip netns exec {} python3 {peer} echo 10.78.0.2 7 {bytes}",
        veth.kns
    );
    let mut client = Proc::spawn_ready(
        &cmd,
        &dir.path("client.log"),
        "local_port=",
        Duration::from_secs(10),
    );
    let (ok, ooo) = veth.kexec(&format!(
        "python3 {peer} ooo 10.78.0.1 10.78.0.2 7 40000 50 200"
    ));
    assert!(ok && ooo.contains("ooo conns=50"), "{ooo}\n{}", d.output());
    let code = client.wait(Duration::from_secs(300));
    let out = client.output();
    assert_eq!(
        code,
        Some(0),
        "the 64 MiB transfer failed:\n{out}\niwarpd:\n{}",
        d.output()
    );
    assert!(out.contains("echo ok=True"), "{out}");
    let report = stop(d);
    let c = |k| tcp_counter(&report, k);
    assert!(
        c("ooo_dropped_small") > 0,
        "per-connection bound not hit:\n{report}"
    );
    assert!(
        c("ooo_dropped_budget") > 0,
        "per-thread bound not hit:\n{report}"
    );
    assert_eq!(
        counter(&report, "port.net_af_packet0", "rx_nombuf").unwrap_or(0),
        0,
        "{report}"
    );
    assert_eq!(c("tx_no_mbuf"), 0, "{report}");
    eprintln!(
        "tiny out-of-order: held {}, dropped {} (per connection) + {} (per thread); 64 MiB echo OK",
        c("ooo_held"),
        c("ooo_dropped_small"),
        c("ooo_dropped_budget")
    );
    let _ = sh_lossy(&format!(
        "ip netns exec {} nft delete table ip iwooo",
        veth.kns
    ));
}

/// TX back-pressure: eight connections from B to A's discard over memif (lossless) keep B's
/// TX queue full; connections must wait (`tx_backpressure`) instead of having frames dropped
/// after TCP counted them as sent (`drop_tx_full`), and every stream arrives intact. The
/// memif rings hold 64 frames (`rsize=6`), fewer than the eight initial windows together:
/// congestion window validation stops a window from growing past what the sender can put
/// on the wire, so the queue must be small enough for the windows to fill it.
#[test]
fn full_tx_queue_holds_connections_back() {
    let _g = serial();
    if !root_or_skip("full_tx_queue_holds_connections_back") {
        return;
    }
    let mut pair = MemifPair::new("txbp");
    pair.b_timeout = Duration::from_secs(120);
    pair.device_extra = ",rsize=6".into();
    let (a, code, out_b) = pair.run(
        "[0]",
        "discard_port = 9\n",
        "[1]",
        "send_to = \"10.77.0.1:9\"\nsend_bytes = 16777216\nsend_connections = 8\nexit_after_send = true\n",
    );
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{}", a.output());
    let out_a = pair.stop(a);
    let mut sent: Vec<&str> = out_b
        .lines()
        .filter(|l| l.starts_with("iwarpd: sender"))
        .filter_map(|l| field(l, "", "sha256"))
        .collect();
    let mut got: Vec<&str> = out_a
        .lines()
        .filter(|l| l.starts_with("iwarpd: discard"))
        .filter_map(|l| field(l, "", "body_sha256"))
        .collect();
    sent.sort_unstable();
    got.sort_unstable();
    assert_eq!(sent.len(), 8, "{out_b}");
    assert_eq!(sent, got, "SHA-256 differs\nA:\n{out_a}\nB:\n{out_b}");
    let c = |k| tcp_counter(&out_b, k);
    assert_eq!(
        c("drop_tx_full"),
        0,
        "frames dropped after TCP sent them:\n{out_b}"
    );
    assert!(
        c("tx_backpressure") > 0,
        "the TX queue never filled:\n{out_b}"
    );
    eprintln!(
        "TX back-pressure: 8 x 16 MiB intact; held back {} times, dropped {}, retransmissions {}",
        c("tx_backpressure"),
        c("drop_tx_full"),
        c("retransmissions")
    );
}
