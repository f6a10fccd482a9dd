//! EAL arguments from the config (see ../shared/DPDK.md for what works on virtual machines).

use crate::config::{Config, Hugepages, is_pci_address};
use dataplane::mempool::{HEADROOM, data_room_for_mtu};

/// Where DPDK keeps a process's runtime files when it is not `--in-memory`.
pub const RUNTIME_DIR: &str = "/var/run/dpdk";

/// The EAL argument list and the file prefix to clean up at exit (None with `--in-memory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EalPlan {
    /// Arguments for `rte_eal_init` (without the program name).
    pub args: Vec<String>,
    /// `--file-prefix` used, whose runtime directory we remove at exit.
    pub file_prefix: String,
}

/// Free 2 MiB hugepages on the machine.
pub fn free_hugepages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Build the EAL arguments. `free_huge` is the number of free 2 MiB hugepages; `pid` names the
/// default file prefix.
pub fn plan(cfg: &Config, free_huge: u64, pid: u32) -> Result<EalPlan, String> {
    let mut args = vec!["--no-telemetry".to_owned()];
    // The main (control) thread shares the first dataplane core; dataplane threads register
    // themselves as non-EAL lcores.
    args.push("-l".into());
    args.push(cfg.dataplane.cores[0].to_string());
    let dev = cfg.port.device.trim();
    if is_pci_address(dev) {
        args.push("-a".into());
        args.push(dev.to_owned());
    } else {
        // Never probe the machine's own PCI NIC when running on a virtual device.
        args.push("--no-pci".into());
        args.push(format!("--vdev={}", sized_vdev(dev, cfg.port.mtu)));
    }
    // Need about memory_mb/2 pages; leave the decision to `hugepages`.
    let want_pages = u64::from(cfg.eal.memory_mb / 2).max(64);
    let use_huge = match cfg.eal.hugepages {
        Hugepages::On => {
            if free_huge == 0 {
                return Err("eal.hugepages = \"on\" but no 2 MiB hugepages are free (reserve some in /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)".into());
            }
            true
        }
        Hugepages::Off => false,
        Hugepages::Auto => free_huge >= want_pages,
    };
    // A prefix of our own in every mode: EAL creates /var/run/dpdk/<prefix> even with
    // --in-memory, and we remove it at exit.
    let prefix = cfg
        .eal
        .file_prefix
        .clone()
        .unwrap_or_else(|| format!("iwarpd-{pid}"));
    if use_huge {
        // No hugetlbfs is mounted on these machines: --in-memory makes EAL use anonymous
        // hugepage memory and leave no hugepage files behind.
        args.push("--in-memory".into());
    } else {
        args.push("--no-huge".into());
        args.push("-m".into());
        args.push(cfg.eal.memory_mb.to_string());
    }
    args.push(format!("--file-prefix={prefix}"));
    args.extend(cfg.eal.extra_args.iter().cloned());
    Ok(EalPlan {
        args,
        file_prefix: prefix,
    })
}

/// `net_af_packet`'s ring frames are 2 KiB unless `framesz` says otherwise: a frame at a
/// larger MTU is then truncated on receive and dropped on transmit. When the device string
/// names neither `framesz` nor `blocksz`, size them from the MTU: a ring frame as large as
/// one mbuf's data room (the PMD refuses frames larger than the mbufs it copies into, and
/// the kernel puts 66 bytes of header in front of the Ethernet frame: the data room's slack
/// covers it), blocks the smallest multiple of the frame and the 4 KiB page, and `framecnt`
/// rounded up to whole blocks. Other devices are returned unchanged.
pub fn sized_vdev(dev: &str, mtu: u16) -> String {
    let mut parts = dev.split(',');
    let driver = parts.next().unwrap_or("");
    if driver.starts_with("net_memif") {
        return sized_memif(dev, mtu);
    }
    if driver.starts_with("net_af_xdp") {
        return af_xdp_without_busy_poll(dev);
    }
    let is_af_packet = driver.starts_with("net_af_packet");
    let framesz = usize::from(data_room_for_mtu(mtu) - HEADROOM);
    let has = |k: &str| dev.split(',').skip(1).any(|kv| kv.trim().starts_with(k));
    if !is_af_packet || framesz <= 2048 || has("framesz=") || has("blocksz=") {
        return dev.to_owned();
    }
    let page = 4096;
    let blocksz = framesz / gcd(framesz, page) * page;
    let per_block = blocksz / framesz;
    let mut out: Vec<String> = vec![dev.split(',').next().unwrap_or(dev).to_owned()];
    let mut framecnt = 512; // the PMD's default
    for kv in dev.split(',').skip(1) {
        match kv.trim().strip_prefix("framecnt=").map(str::parse::<usize>) {
            Some(Ok(n)) => framecnt = n,
            _ => out.push(kv.to_owned()),
        }
    }
    let framecnt = framecnt.div_ceil(per_block) * per_block;
    out.push(format!(
        "framecnt={framecnt},framesz={framesz},blocksz={blocksz}"
    ));
    out.join(",")
}

/// memif's shared-memory buffers are 2 KiB unless `bsize` says otherwise, and a larger frame
/// spans several ring slots. DPDK 22.11's memif mishandles such frames under load (seen with
/// chained jumbo frames: the receiver got frames glued together and stale slots replayed), so
/// when the device string does not name `bsize`, make one buffer hold a whole frame at the
/// MTU (a power of two, as memif requires).
fn sized_memif(dev: &str, mtu: u16) -> String {
    let frame = usize::from(mtu) + 14 + 4;
    let has_bsize = dev
        .split(',')
        .skip(1)
        .any(|kv| kv.trim().starts_with("bsize="));
    if frame <= 2048 || has_bsize {
        return dev.to_owned();
    }
    format!("{dev},bsize={}", frame.next_power_of_two())
}

/// DPDK 22.11's net_af_xdp busy-polls by default (`busy_budget=64`): SO_PREFER_BUSY_POLL on
/// the socket and a `recvfrom` on every RX poll that finds the ring empty, i.e. one syscall per
/// idle iteration of our loop, which polls anyway (2.7 million of them in a 2.4 s write_bw on
/// a veth, as many as its `sched_yield`s). In copy mode (a veth, any driver without zero-copy)
/// the kernel fills the RX ring from the sender's softirq with no syscall from the receiver,
/// and with `busy_budget=0` the PMD still wakes the kernel with `poll` whenever the fill ring
/// asks for it (XDP_USE_NEED_WAKEUP, zero-copy drivers). So unless the device string names
/// `busy_budget`, set it to 0.
fn af_xdp_without_busy_poll(dev: &str) -> String {
    let named = dev
        .split(',')
        .skip(1)
        .any(|kv| kv.trim().starts_with("busy_budget="));
    if named {
        dev.to_owned()
    } else {
        format!("{dev},busy_budget=0")
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Config {
        Config::parse(
            &format!("[port]\ndevice = \"net_memif0,role=server\"\nip = \"10.0.0.1/24\"\n{extra}"),
            "t",
        )
        .unwrap()
    }

    #[test]
    fn hugepages_when_free_else_no_huge_always_our_prefix() {
        let p = plan(&cfg(""), 1024, 42).unwrap();
        assert!(p.args.contains(&"--in-memory".to_owned()), "{:?}", p.args);
        assert!(
            p.args.contains(&"--file-prefix=iwarpd-42".to_owned()),
            "{:?}",
            p.args
        );
        assert!(p.args.contains(&"--no-pci".to_owned()));
        assert!(p.args.contains(&"--vdev=net_memif0,role=server".to_owned()));
        assert_eq!(p.file_prefix, "iwarpd-42");
        let p = plan(&cfg(""), 10, 42).unwrap();
        assert!(
            p.args.contains(&"--no-huge".to_owned()) && !p.args.contains(&"--in-memory".to_owned())
        );
        assert!(
            p.args.contains(&"512".to_owned()),
            "-m memory_mb: {:?}",
            p.args
        );
        assert!(plan(&cfg("[eal]\nhugepages = \"on\"\n"), 0, 1).is_err());
        let p = plan(
            &cfg("[eal]\nhugepages = \"off\"\nfile_prefix = \"x\"\n"),
            1024,
            1,
        )
        .unwrap();
        assert!(p.args.contains(&"--no-huge".to_owned()));
        assert_eq!(p.file_prefix, "x");
    }

    #[test]
    fn pci_device_is_allowed_not_vdev() {
        let c = Config::parse(
            "[port]\ndevice = \"0000:3b:00.0\"\nip = \"10.0.0.1/24\"\n",
            "t",
        )
        .unwrap();
        let p = plan(&c, 0, 1).unwrap();
        assert!(
            p.args
                .windows(2)
                .any(|w| w[0] == "-a" && w[1] == "0000:3b:00.0"),
            "{:?}",
            p.args
        );
        assert!(!p.args.contains(&"--no-pci".to_owned()));
    }

    #[test]
    fn af_packet_frames_sized_from_the_mtu() {
        // The default 2 KiB frames hold a 1500-byte MTU: unchanged.
        assert_eq!(
            sized_vdev("net_af_packet0,iface=v", 1500),
            "net_af_packet0,iface=v"
        );
        let j = sized_vdev("net_af_packet0,iface=v,framecnt=2048", 9000);
        assert_eq!(
            j,
            "net_af_packet0,iface=v,framecnt=2048,framesz=9216,blocksz=36864"
        );
        // Ring frames hold the MTU plus the kernel's 66 header bytes and fit one mbuf (the
        // PMD checks framesz - 32 <= data room); blocks are whole pages and whole frames.
        for mtu in [1960u16, 4000, 8938, 9000, 9216] {
            let s = sized_vdev("net_af_packet0,iface=v,framecnt=1000", mtu);
            let num = |k: &str| -> usize {
                s.split(',')
                    .find_map(|kv| kv.strip_prefix(k))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let (f, b, n) = (num("framesz="), num("blocksz="), num("framecnt="));
            assert!(f >= usize::from(mtu) + 14 + 66, "{s}");
            assert!(
                f - 32 <= usize::from(data_room_for_mtu(mtu) - HEADROOM),
                "{s}"
            );
            assert_eq!((b % 4096, b % f, n % (b / f)), (0, 0, 0), "{s}");
            assert!(n >= 1000, "{s}");
        }
        // The user's own sizes and other devices are left alone.
        let own = "net_af_packet0,iface=v,framesz=16384,blocksz=16384";
        assert_eq!(sized_vdev(own, 9000), own);
        // memif: one shared buffer per frame.
        let memif = "net_memif0,role=server";
        assert_eq!(sized_vdev(memif, 1500), memif);
        assert_eq!(
            sized_vdev(memif, 9000),
            "net_memif0,role=server,bsize=16384"
        );
        let own = "net_memif0,role=server,bsize=65536";
        assert_eq!(sized_vdev(own, 9000), own);
    }

    #[test]
    fn af_xdp_polls_without_busy_poll_syscalls_unless_told() {
        assert_eq!(
            sized_vdev("net_af_xdp0,iface=v,start_queue=0,queue_count=1", 1500),
            "net_af_xdp0,iface=v,start_queue=0,queue_count=1,busy_budget=0"
        );
        let own = "net_af_xdp0,iface=v,busy_budget=64";
        assert_eq!(sized_vdev(own, 1500), own);
        assert_eq!(sized_vdev(own, 9000), own);
    }
}
