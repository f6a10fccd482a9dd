//! RDMA end to end between two hosts on a veth pair (issue 7): two network namespaces joined by
//! a veth, an `iwarpd` on af_packet (resp. af_xdp) in each (10.79.0.1 and 10.79.0.2), client
//! processes (`iwarp-opcheck`) in front of them over their control sockets: every operation at
//! 0 B, 1 B, 4 KiB, 1 MiB and 8 MiB with SHA-256 on both sides, CRC off, CRC on, CRC + markers;
//! then an embedded client (the engine inside `iwarp-opcheck`, in B's namespace) against daemon A.
//!
//! Root (namespaces, DPDK); skipped loudly otherwise. Run by hand under
//! `flock /tmp/iwarp-e2e.lock cargo test -p iwarp-tools --test e2e_veth`.
#[path = "../../control/tests/common/mod.rs"]
mod common;
mod e2e;

use common::{TempDir, root_or_skip, sh, sh_lossy, tag};
use e2e::{
    ALL_SIZES, Daemon, Wire, assert_every_op, checks_for, finish_server, host_config,
    opcheck_client, opcheck_server, serial,
};
use std::time::Instant;

const A_IP: &str = "10.79.0.1";
const SIZES: [usize; 5] = [0, 1, 4096, 1 << 20, 8 << 20];

/// Two namespaces and a veth between them; deleted on drop.
struct Link {
    ns: [String; 2],
    ifs: [String; 2],
}

impl Link {
    fn new() -> Link {
        let t = tag();
        let l = Link {
            ns: [format!("iwea{t}"), format!("iweb{t}")],
            ifs: [format!("ea{t}"), format!("eb{t}")],
        };
        for ns in &l.ns {
            let _ = sh_lossy(&format!("ip netns del {ns} 2>/dev/null"));
            sh(&format!("ip netns add {ns}"));
        }
        sh(&format!(
            "ip link add {} type veth peer name {}",
            l.ifs[0], l.ifs[1]
        ));
        for i in 0..2 {
            sh(&format!("ip link set {} netns {}", l.ifs[i], l.ns[i]));
            sh(&format!("ip -n {} link set {} up", l.ns[i], l.ifs[i]));
            // No kernel stack on these interfaces: the address is iwarpd's alone, and
            // frames leave as DPDK built them.
            let _ = sh_lossy(&format!(
                "ip netns exec {} ethtool -K {} tx off rx off gro off gso off tso off",
                l.ns[i], l.ifs[i]
            ));
        }
        l
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = sh_lossy(&format!("ip netns del {ns}"));
        }
    }
}

#[test]
fn every_operation_over_af_packet_on_a_veth_pair() {
    let _g = serial();
    if !root_or_skip("every_operation_over_af_packet_on_a_veth_pair") {
        return;
    }
    every_operation_on_a_veth_pair(|iface| Wire::AfPacket { iface });
}

/// The same over af_xdp (XDP on the veth, copy mode): no multi-segment TX, so every payload
/// is copied into its frame and the TCP checksum is the sum of the copied bytes.
#[test]
fn every_operation_over_af_xdp_on_a_veth_pair() {
    let _g = serial();
    if !root_or_skip("every_operation_over_af_xdp_on_a_veth_pair") {
        return;
    }
    every_operation_on_a_veth_pair(|iface| Wire::AfXdp { iface });
}

fn every_operation_on_a_veth_pair(port: fn(String) -> Wire) {
    let link = Link::new();
    let dir = TempDir::new("e2e-veth");
    let wire = |i: usize| port(link.ifs[i].clone());
    let ca = host_config(&dir, "a", &wire(0), A_IP, 0, "");
    let cb = host_config(&dir, "b", &wire(1), "10.79.0.2", 1, "");
    let a = Daemon::start(&dir, "a", &ca, &["ip", "netns", "exec", &link.ns[0]]);
    let b = Daemon::start(&dir, "b", &cb, &["ip", "netns", "exec", &link.ns[1]]);
    let server = opcheck_server(&dir, "opcheck-server.log", &a.spec, 7471, 4, "8m");
    let variants: [(&str, &[&str]); 3] = [
        ("crc-off", &["--crc", "off"]),
        ("crc-on", &["--crc", "on"]),
        ("markers", &["--crc", "on", "--markers"]),
    ];
    for (name, v) in variants {
        let mut args = vec!["-v", "--sizes", ALL_SIZES];
        args.extend_from_slice(v);
        let t = Instant::now();
        let out = opcheck_client(
            &dir,
            &format!("opcheck-{name}.log"),
            &b.spec,
            (A_IP, 7471),
            &args,
            (checks_for(SIZES.len()), 1),
            &[&a.proc, &b.proc, &server],
        );
        assert_every_op(&out, &SIZES);
        eprintln!(
            "veth {name}: every operation at every size in {:?}",
            t.elapsed()
        );
    }
    // Embedded: B's daemon leaves the wire to an engine inside the client process.
    b.stop();
    let ns_b = &link.ns[1];
    let spec = format!("embedded:{}", cb.display());
    let mut argv = vec!["ip", "netns", "exec", ns_b];
    argv.extend([
        e2e::opcheck(),
        "-c",
        A_IP,
        "-p",
        "7471",
        "-d",
        &spec,
        "-v",
        "--sizes",
        ALL_SIZES,
        "--crc",
        "on",
        "--timeout",
        "120",
    ]);
    let (code, out) = e2e::run(
        &dir,
        "opcheck-embedded.log",
        &argv,
        std::time::Duration::from_secs(600),
    );
    assert_eq!(
        code,
        Some(0),
        "embedded client:\n{out}\nA:\n{}\nserver:\n{}",
        e2e::tail(&a.proc.output(), 60),
        server.output()
    );
    assert!(
        out.contains(&format!(
            "opcheck: {} checks passed on 1 connection(s)",
            checks_for(SIZES.len())
        )),
        "{out}"
    );
    assert_every_op(&out, &SIZES);
    finish_server(
        server,
        &[
            "(CRC false, markers false)",
            "(CRC true, markers false)",
            "(CRC true, markers true)",
            "(CRC true, markers false)",
        ],
    );
    a.stop();
}
