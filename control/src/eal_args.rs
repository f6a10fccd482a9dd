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
    pub file_prefix: Option<String>,
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
    let mut file_prefix = None;
    if use_huge {
        // No hugetlbfs is mounted on these machines: --in-memory makes EAL use anonymous
        // hugepage memory and leave no files behind.
        args.push("--in-memory".into());
    } else {
        args.push("--no-huge".into());
        args.push("-m".into());
        args.push(cfg.eal.memory_mb.to_string());
        let prefix = cfg
            .eal
            .file_prefix
            .clone()
            .unwrap_or_else(|| format!("iwarpd-{pid}"));
        args.push(format!("--file-prefix={prefix}"));
        file_prefix = Some(prefix);
    }
    args.extend(cfg.eal.extra_args.iter().cloned());
    Ok(EalPlan { args, file_prefix })
}
