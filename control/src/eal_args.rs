//! EAL arguments from the config (see ../shared/DPDK.md for what works on virtual machines).

use crate::config::{Config, Hugepages, is_pci_address};

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
        args.push(format!("--vdev={dev}"));
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
}
