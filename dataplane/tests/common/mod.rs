//! Helpers of the netstack tests: two stacks' addresses, a forged ARP reply, one poll-loop
//! iteration without a port, frame delivery and classification.
#![allow(dead_code, unreachable_pub)]

use dataplane::eal::Eal;
use dataplane::mbuf::Mbuf;
use dataplane::mempool::Mempool;
use dataplane::netstack::Netstack;
use netcore::Instant;

pub const A_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
pub const B_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
pub const A_IP: [u8; 4] = [10, 0, 0, 1];
pub const B_IP: [u8; 4] = [10, 0, 0, 2];

pub fn is_root() -> bool {
    let out = std::process::Command::new("id").arg("-u").output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Whether `test` can run (DPDK needs root); says loudly that it is skipped otherwise.
pub fn root_or_skip(test: &str) -> bool {
    let root = is_root();
    if !root {
        eprintln!("\n*** SKIPPED {test}: needs root (DPDK). CI runs as root. ***\n");
    }
    root
}

/// What a DPDK test of `tag` leaves on disk: its directory under the temp dir (the memif
/// socket) and the EAL's runtime directory of [`eal_args`]' file prefix (the EAL leaves it
/// behind even after a cleanup). Both are removed when this is dropped, also when the test
/// fails: declare it before the EAL, so that it is dropped after it.
pub struct TestDirs {
    pub dir: std::path::PathBuf,
    runtime: std::path::PathBuf,
}

impl Drop for TestDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

/// A fresh directory for `tag` under the temp dir and the memif socket path in it (a stale
/// socket removed), removed with the EAL's runtime directory when the guard is dropped.
pub fn memif_socket_dir(tag: &str) -> (TestDirs, std::path::PathBuf) {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("iwt-{tag}-{pid}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let sock = dir.join("memif.sock");
    let _ = std::fs::remove_file(&sock);
    let runtime = std::path::PathBuf::from(format!("/var/run/dpdk/iwt-{tag}-{pid}"));
    (TestDirs { dir, runtime }, sock)
}

pub fn arp_reply(from_mac: [u8; 6], from_ip: [u8; 4], to_mac: [u8; 6], to_ip: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&from_mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    f.extend_from_slice(&from_mac);
    f.extend_from_slice(&from_ip);
    f.extend_from_slice(&to_mac);
    f.extend_from_slice(&to_ip);
    f.resize(60, 0);
    f
}

pub fn is_arp(m: &Mbuf) -> bool {
    m.data().get(12..14) == Some(&[0x08, 0x06][..])
}

/// One poll-loop iteration without the port: the iface's own frames, then the stack's.
pub fn pump(
    ns: &mut Netstack,
    now: Instant,
    pool: &Mempool,
    scratch: &mut [u8],
    out: &mut Vec<Mbuf>,
) {
    if ns.iface.poll_timeout().is_some_and(|t| t <= now) {
        while let Some(len) = ns.iface.poll_transmit(now, scratch) {
            out.push(pool.alloc_copy(&scratch[..len]).expect("mbuf"));
        }
    }
    ns.poll(now, pool, out);
}

pub fn deliver(
    ns: &mut Netstack,
    now: Instant,
    frames: &mut Vec<Mbuf>,
    pool: &Mempool,
    scratch: &mut [u8],
    out: &mut Vec<Mbuf>,
) {
    for m in frames.drain(..) {
        ns.handle_frame(now, m, scratch, pool, out);
    }
}

/// EAL arguments of a test: `--no-huge`, 256 MiB, no PCI, the file prefix `iwt-<tag>-<pid>`
/// (see [`remove_runtime_dir`]), then `vdevs` as `--vdev=` arguments.
pub fn eal_args(tag: &str, vdevs: &[String]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        "--no-pci".into(),
        "--no-telemetry".into(),
        format!("--file-prefix=iwt-{tag}-{}", std::process::id()),
    ];
    args.extend(vdevs.iter().map(|v| format!("--vdev={v}")));
    args
}

/// A memif pair in one process over the socket file `sock`: `net_memif0` (server) and
/// `net_memif1` (client).
pub fn memif_pair_vdevs(sock: &std::path::Path) -> Vec<String> {
    ["net_memif0,role=server", "net_memif1,role=client"]
        .iter()
        .map(|d| format!("{d},id=0,socket={},socket-abstract=no", sock.display()))
        .collect()
}

/// EAL for a test without a port ([`eal_args`] with no device).
pub fn eal_no_huge(tag: &str) -> Eal {
    Eal::init(&eal_args(tag, &[])).expect("EAL")
}

/// Remove EAL's runtime directory of [`eal_no_huge`]`(tag)`.
pub fn remove_runtime_dir(tag: &str) {
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/iwt-{tag}-{}", std::process::id()));
}
