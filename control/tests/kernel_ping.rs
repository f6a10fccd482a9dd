//! iwarpd on one end of a veth (af_packet, af_xdp), the Linux kernel on the other: the kernel
//! pings us, learns our MAC, and tshark finds well-formed ARP and ICMP on the wire.
mod common;

use common::{Proc, TempDir, VethPair, have_tool, root_or_skip, sh_lossy, start_iwarpd_in};
use std::sync::Mutex;
use std::time::Duration;

/// One iwarpd at a time: each busy-polls a core.
static SERIAL: Mutex<()> = Mutex::new(());

fn kernel_pings_iwarpd(driver: &str) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = format!("kernel_ping_{driver}");
    if !root_or_skip(&test) || !have_tool("tshark", &test) || !have_tool("tcpdump", &test) {
        return;
    }
    let short = if driver == "af_packet" { "p" } else { "x" };
    let veth = VethPair::new(short, "10.78.0.1/24");
    let dir = TempDir::new(&test);
    let device = match driver {
        "af_packet" => format!("net_af_packet0,iface={}", veth.dif),
        _ => format!("net_af_xdp0,iface={},start_queue=0,queue_count=1", veth.dif),
    };
    let prefix = format!("iwt-{short}-{}", std::process::id());
    let mut d = start_iwarpd_in(
        &veth.dns,
        &dir,
        "iwarpd",
        &format!(
            "[eal]\nfile_prefix = \"{prefix}\"\n[port]\ndevice = \"{device}\"\nip = \"10.78.0.2/24\"\n\
             [dataplane]\ncores = [1]\n[diag]\nrun_seconds = 60\n"
        ),
    );
    let mac = d
        .output()
        .lines()
        .find_map(|l| {
            l.split(" mac ")
                .nth(1)
                .map(|r| r.split(' ').next().unwrap_or("").to_owned())
        })
        .expect("mac in iwarpd output");

    // Capture on the kernel side while the kernel pings us.
    let pcap = dir.path("wire.pcap");
    let cap_cmd = format!(
        "ip netns exec {} tcpdump -i {} -U --immediate-mode -w {} arp or icmp",
        veth.kns,
        veth.kif,
        pcap.display()
    );
    let cap = Proc::spawn_ready(
        &cap_cmd,
        &dir.path("tcpdump.log"),
        "listening on",
        Duration::from_secs(10),
    );

    let (_, ping) = veth.kexec("ping -c 20 -i 0.05 -W 1 10.78.0.2");
    let received: u32 = ping
        .lines()
        .find_map(|l| {
            l.split(" received")
                .next()
                .filter(|_| l.contains(" received"))
        })
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        received >= 19,
        "kernel ping got {received}/20 replies:\n{ping}\niwarpd:\n{}",
        d.output()
    );

    let (_, neigh) = veth.kexec(&format!("ip neigh show 10.78.0.2 dev {}", veth.kif));
    assert!(
        neigh.contains(&mac),
        "kernel neighbour table lacks our MAC {mac}: {neigh}"
    );

    std::thread::sleep(Duration::from_millis(300));
    cap.signal("INT");
    let mut cap = cap;
    let _ = cap.wait(Duration::from_secs(5));

    // tshark decodes every frame without complaint, with good checksums.
    let p = pcap.display();
    let (ok, full) = sh_lossy(&format!(
        "tshark -r {p} -V -o ip.check_checksum:TRUE 2>/dev/null"
    ));
    assert!(ok, "tshark failed: {full}");
    assert!(
        !full.contains("Malformed"),
        "tshark found a malformed frame:\n{full}"
    );
    assert!(
        !full.contains("[Expert Info (Error"),
        "tshark reports an error:\n{full}"
    );
    let count = |filter: &str| -> usize {
        let (_, out) = sh_lossy(&format!(
            "tshark -r {p} -o ip.check_checksum:TRUE -Y '{filter}' 2>/dev/null"
        ));
        out.lines().filter(|l| !l.trim().is_empty()).count()
    };
    assert!(
        count(&format!(
            "arp.opcode == 2 && arp.src.proto_ipv4 == 10.78.0.2 && arp.src.hw_mac == {mac}"
        )) >= 1,
        "no ARP reply from us"
    );
    let replies = count(
        "icmp.type == 0 && ip.src == 10.78.0.2 && icmp.checksum.status == 1 && ip.checksum.status == 1",
    );
    assert!(
        replies >= 19,
        "only {replies} well-formed echo replies from us on the wire"
    );
    // Frames we sent (the kernel's own may carry offloaded, not yet filled checksums).
    let bad_filter = "ip.src == 10.78.0.2 && (icmp.checksum.status == 0 || ip.checksum.status == 0 || _ws.malformed)";
    let (_, bad) = sh_lossy(&format!(
        "tshark -r {p} -o ip.check_checksum:TRUE -V -Y '{bad_filter}' 2>/dev/null"
    ));
    assert!(
        bad.trim().is_empty(),
        "frames from us with bad checksums on the wire:\n{bad}"
    );

    // Clean stop on SIGINT: exit 0, counters printed, no runtime files left.
    d.signal("INT");
    let code = d.wait(Duration::from_secs(15));
    let out = d.output();
    assert_eq!(code, Some(0), "iwarpd did not stop cleanly:\n{out}");
    assert!(
        common::counter(&out, "lcore.0.iface", "icmp_echo_reply_tx").unwrap_or(0) >= 19,
        "{out}"
    );
    assert!(out.contains("port stopped and closed"), "{out}");
    assert!(
        !std::path::Path::new(&format!("/var/run/dpdk/{prefix}")).exists(),
        "DPDK runtime dir left behind"
    );
}

#[test]
fn kernel_pings_iwarpd_af_packet() {
    kernel_pings_iwarpd("af_packet");
}

#[test]
fn kernel_pings_iwarpd_af_xdp() {
    kernel_pings_iwarpd("af_xdp");
}
