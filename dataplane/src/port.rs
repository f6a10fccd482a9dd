//! Ethernet ports: configuration (queues, RSS, MTU), bursts, link state and counters.
//!
//! Ownership: a [`Port`] is a cheap, cloneable handle; the port is stopped and closed when the
//! last handle *and* the last [`Queue`] are gone. Each queue pair is handed out once
//! ([`Port::queue`]) as an owned [`Queue`]: `Send` (move it into the thread that polls it) but
//! not `Sync` and not `Clone`, and polled through `&mut self`, so no two threads can ever poll
//! one queue. The port holds its RX pool, so the pool outlives every mbuf the NIC receives into
//! it (see [`crate::eal`] for the rest of the chain).
#![allow(unsafe_code)]

use crate::DpdkError;
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Largest burst the poll loop asks for.
pub const MAX_BURST: usize = 32;

// RTE_ETH_RSS_* are RTE_BIT64() macros, which bindgen cannot evaluate (rte_ethdev.h).
const RSS_IPV4: u64 = 1 << 2;
const RSS_FRAG_IPV4: u64 = 1 << 3;
const RSS_NONFRAG_IPV4_TCP: u64 = 1 << 4;
const RSS_NONFRAG_IPV4_OTHER: u64 = 1 << 7;
// RTE_ETH_TX_OFFLOAD_MULTI_SEGS and RTE_ETH_RX_OFFLOAD_SCATTER (RTE_BIT64 in rte_ethdev.h).
const TX_OFFLOAD_MULTI_SEGS: u64 = 1 << 15;
const RX_OFFLOAD_SCATTER: u64 = 1 << 13;

/// The Toeplitz key we program, so software can predict the queue of a 4-tuple (for choosing
/// source ports of active opens). It is the well-known Microsoft RSS verification key.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// How to set a port up.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// RX queues (one per dataplane thread).
    pub rx_queues: u16,
    /// TX queues (one per dataplane thread).
    pub tx_queues: u16,
    /// RX descriptors per queue.
    pub rx_desc: u16,
    /// TX descriptors per queue.
    pub tx_desc: u16,
    /// IP MTU.
    pub mtu: u16,
    /// Put the port in promiscuous mode.
    pub promiscuous: bool,
}

/// What the driver told us about the port.
#[derive(Debug, Clone)]
pub struct PortInfo {
    /// DPDK port id.
    pub id: u16,
    /// Device name as DPDK knows it (e.g. `net_memif0`).
    pub name: String,
    /// PMD name (e.g. `net_memif`).
    pub driver: String,
    /// Our MAC address.
    pub mac: [u8; 6],
    /// Whether RSS is enabled on the port.
    pub rss: bool,
    /// Queues in use.
    pub queues: u16,
    /// Entries of the RSS redirection table.
    pub reta_size: u16,
    /// The device is on the virtual-device bus (memif, af_packet, af_xdp, tap...): it copies
    /// with the CPU and never DMAs.
    pub is_virtual: bool,
    /// The device accepts chained mbufs on TX (otherwise [`Queue::tx_burst`] copies chains
    /// into one buffer first).
    pub tx_multi_seg: bool,
    /// Scatter RX is on (the driver may hand up chains).
    pub rx_scatter: bool,
    /// Largest MTU the driver reports.
    pub max_mtu: u16,
    /// Whether the driver accepted our MTU (`rte_eth_dev_set_mtu`).
    pub mtu_set: bool,
    /// Whether the RSS redirection table was programmed to entry i -> queue i mod queues
    /// (what [`crate::rss::RssSteering`] predicts); otherwise the driver's default is assumed.
    pub reta_programmed: bool,
}

/// A started port (a cheap, cloneable handle). Stopped and closed when the last handle and the
/// last [`Queue`] are gone.
#[derive(Debug, Clone)]
pub struct Port {
    inner: Arc<PortInner>,
}

#[derive(Debug)]
struct PortInner {
    info: PortInfo,
    device: *mut dpdk_sys::rte_device,
    /// The RX pool (and for copying chains on devices without multi-segment TX).
    pool: Mempool,
    /// Queue pairs already handed out.
    taken: Vec<AtomicBool>,
    /// net_memif only: the lock its teardown takes, held around every burst
    /// ([`BurstLock`]).
    burst_lock: Option<BurstLock>,
}

/// DPDK 22.11's net_memif tears a connection down (the peer went away, or reconnects) on the
/// EAL interrupt thread: it clears its connected flag, takes its control-channel spinlock,
/// releases it, closes the queues' eventfds and unmaps the shared rings and buffers, while a
/// burst on a dataplane thread that already passed the connected check goes on reading them:
/// SIGSEGV on unmapped memory, or a read/write on a closed (possibly reused) fd. Each burst
/// holds that spinlock ([`Queue::rx_burst`], [`Queue::tx_burst`]): a burst that holds it
/// finishes before the teardown gets past the lock; one that takes it afterwards sees the flag
/// cleared and returns before touching anything (acquiring the lock orders it after the
/// teardown's flag store). Found and checked by `shim_memif_disconnect_lock`; a port where the
/// check fails runs without it (with a warning).
#[derive(Debug)]
struct BurstLock(NonNull<i32>);

// SAFETY: a pointer to an int inside the PMD's private data, which lives until the port is
// closed (PortInner's drop, after every Queue is gone); it is only accessed atomically.
unsafe impl Send for BurstLock {}
// SAFETY: see Send.
unsafe impl Sync for BurstLock {}

/// Holds the [`BurstLock`] until dropped.
struct BurstGuard<'a>(&'a AtomicI32);

impl BurstLock {
    #[inline]
    fn lock(&self) -> BurstGuard<'_> {
        // SAFETY: the int lives while the port is open (see Send) and is 4-aligned (checked in
        // `memif_burst_lock`); DPDK's rte_spinlock uses atomic exchanges and stores on it too.
        let a = unsafe { AtomicI32::from_ptr(self.0.as_ptr()) };
        // rte_spinlock_lock's protocol: exchange 1 in; spin reading while it is held.
        while a.swap(1, Ordering::Acquire) != 0 {
            while a.load(Ordering::Relaxed) != 0 {
                std::hint::spin_loop();
            }
        }
        BurstGuard(a)
    }
}

impl Drop for BurstGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// What a net_memif device was created with: `id`, `role` (0 server, 1 client), `socket`
/// (DPDK's defaults when absent: 0, server, `/run/memif.sock`). `None` for an unknown role.
pub(crate) fn memif_identity(args: &str) -> Option<(u32, i32, String)> {
    let (mut id, mut role, mut socket) = (0u32, 0i32, "/run/memif.sock".to_owned());
    for kv in args.split(',') {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        match k.trim() {
            "id" => id = v.trim().parse().ok()?,
            "role" => {
                role = match v.trim() {
                    "server" | "master" => 0,
                    "client" | "slave" => 1,
                    _ => return None,
                }
            }
            "socket" => socket = v.trim().to_owned(),
            _ => {}
        }
    }
    Some((id, role, socket))
}

/// The net_memif teardown lock of started port `id` (see [`BurstLock`]), if it can be found
/// and checked.
fn memif_burst_lock(id: u16, name: &str, device: *mut dpdk_sys::rte_device) -> Option<BurstLock> {
    // SAFETY: device is the probed device of a port we hold open (or NULL, which the shim
    // checks); the args string is DPDK's, valid while the device exists; we copy it at once.
    let args = unsafe {
        let p = dpdk_sys::shim_dev_args(device);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
    .unwrap_or_default();
    let (mid, role, socket) = memif_identity(&args)?;
    let cname = CString::new(name).ok()?;
    let csock = CString::new(socket).ok()?;
    // SAFETY: a started port; both strings are valid for the call; the shim only reads
    // public ethdev data and the PMD's private data it validates before returning a pointer.
    let p = unsafe {
        dpdk_sys::shim_memif_disconnect_lock(id, cname.as_ptr(), mid, role, csock.as_ptr())
    };
    let p = NonNull::new(p)?;
    (p.as_ptr() as usize)
        .is_multiple_of(std::mem::align_of::<AtomicI32>())
        .then_some(BurstLock(p))
}

/// The teardown lock a port's bursts hold: net_memif's (see [`BurstLock`]) unless
/// `IWARP_MEMIF_UNGUARDED=1`; `None` for other drivers or when it cannot be found.
fn burst_lock_for(
    driver: &str,
    id: u16,
    name: &str,
    device: *mut dpdk_sys::rte_device,
) -> Option<BurstLock> {
    if driver != "net_memif" {
        return None;
    }
    if std::env::var_os("IWARP_MEMIF_UNGUARDED").is_some_and(|v| v == "1") {
        tracing::warn!(
            port = name,
            "IWARP_MEMIF_UNGUARDED=1: bursts do not hold net_memif's teardown lock (diagnostics only)"
        );
        return None;
    }
    let l = memif_burst_lock(id, name, device);
    if l.is_some() {
        tracing::info!(
            port = name,
            "net_memif: bursts hold its teardown lock (a peer going away cannot unmap rings under a burst)"
        );
    } else {
        tracing::warn!(
            port = name,
            "net_memif: its teardown lock was not found (not DPDK 22.11's layout?): a peer that disconnects while a burst runs may crash this process"
        );
    }
    l
}

// SAFETY: `device` is DPDK's device object, used only for DMA mapping calls, which are
// thread-safe; everything else is plain data, atomics or thread-safe handles. Ethdev control
// calls (stats, link, xstats) may be made from any thread while queues are polled.
unsafe impl Send for PortInner {}
// SAFETY: see Send.
unsafe impl Sync for PortInner {}

/// Port-level counters from `rte_eth_stats_get`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// RX drops by the NIC (no descriptor).
    pub imissed: u64,
    /// RX errors.
    pub ierrors: u64,
    /// TX errors.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

fn check(what: &str, rc: i32) -> Result<(), DpdkError> {
    if rc < 0 {
        Err(DpdkError::new(what, rc))
    } else {
        Ok(())
    }
}

impl Port {
    /// Find the port named `name` (a vdev name such as `net_memif0`, or a PCI address) and
    /// configure and start it with `cfg`, using `pool` for RX buffers.
    pub fn start(name: &str, cfg: &PortConfig, pool: &Mempool) -> Result<Port, DpdkError> {
        let (id, dev_info, driver) = find_port(name)?;
        if cfg.rx_queues > dev_info.max_rx_queues || cfg.tx_queues > dev_info.max_tx_queues {
            return Err(DpdkError::new(
                format!(
                    "port {name}: {} RX / {} TX queues requested, device has at most {} / {}",
                    cfg.rx_queues, cfg.tx_queues, dev_info.max_rx_queues, dev_info.max_tx_queues
                ),
                libc::EINVAL,
            ));
        }
        let mut key = RSS_KEY;
        let (conf, offloads) = eth_conf(name, cfg, &dev_info, pool, &mut key);
        // SAFETY: valid port id; conf is fully initialised and the key it points to outlives
        // the call (DPDK copies it).
        check("rte_eth_dev_configure", unsafe {
            dpdk_sys::rte_eth_dev_configure(id, cfg.rx_queues, cfg.tx_queues, &conf)
        })?;
        let mtu_set = set_mtu(id, name, cfg.mtu, &dev_info);
        setup_queues(id, cfg, pool)?;
        // SAFETY: valid, configured port.
        check("rte_eth_dev_start", unsafe {
            dpdk_sys::rte_eth_dev_start(id)
        })?;
        let reta_programmed =
            offloads.rss && program_reta(id, name, dev_info.reta_size, cfg.rx_queues);
        if cfg.promiscuous {
            // SAFETY: valid started port.
            let rc = unsafe { dpdk_sys::rte_eth_promiscuous_enable(id) };
            if rc < 0 {
                tracing::warn!(
                    port = name,
                    "promiscuous mode: {}",
                    crate::error::strerror(rc)
                );
            }
        }
        let mut mac = dpdk_sys::rte_ether_addr::default();
        // SAFETY: valid port id and out pointer.
        check("rte_eth_macaddr_get", unsafe {
            dpdk_sys::rte_eth_macaddr_get(id, &mut mac)
        })?;
        let info = PortInfo {
            id,
            name: name.to_owned(),
            driver,
            mac: mac.addr_bytes,
            rss: offloads.rss,
            queues: cfg.rx_queues,
            reta_size: dev_info.reta_size,
            // SAFETY: dev_info.device is the probed device of this port (or NULL).
            is_virtual: unsafe { dpdk_sys::shim_dev_is_vdev(dev_info.device) } == 1,
            tx_multi_seg: offloads.tx_multi_seg,
            rx_scatter: offloads.rx_scatter,
            max_mtu: dev_info.max_mtu,
            mtu_set,
            reta_programmed,
        };
        tracing::info!(port = name, id, driver = %info.driver, rss = info.rss, reta_programmed,
            tx_multi_seg = info.tx_multi_seg, rx_scatter = info.rx_scatter,
            max_mtu = info.max_mtu, mac = %fmt_mac(&info.mac),
            sum_kernel = %netcore::csum::current(), "port started");
        let burst_lock = burst_lock_for(&info.driver, id, name, dev_info.device);
        Ok(Port {
            inner: Arc::new(PortInner {
                info,
                device: dev_info.device,
                pool: pool.clone(),
                taken: (0..cfg.rx_queues.max(cfg.tx_queues))
                    .map(|_| AtomicBool::new(false))
                    .collect(),
                burst_lock,
            }),
        })
    }

    /// What the driver reported.
    pub fn info(&self) -> &PortInfo {
        &self.inner.info
    }

    /// Whether bursts hold the driver's teardown lock (net_memif, see `BurstLock`).
    pub fn burst_guarded(&self) -> bool {
        self.inner.burst_lock.is_some()
    }

    /// The DPDK device behind the port (for DMA mapping).
    pub(crate) fn device_ptr(&self) -> *mut dpdk_sys::rte_device {
        self.inner.device
    }

    /// Queue pair `q`, to move into the thread that polls it. Each pair is handed out once;
    /// asking again (or for a queue the port does not have) is an error.
    pub fn queue(&self, q: u16) -> Result<Queue, DpdkError> {
        let slot = self.inner.taken.get(usize::from(q)).ok_or_else(|| {
            DpdkError::new(
                format!("port {}: no queue {q}", self.info().name),
                libc::EINVAL,
            )
        })?;
        if slot.swap(true, Ordering::AcqRel) {
            return Err(DpdkError::new(
                format!(
                    "port {}: queue {q} is already polled by another owner",
                    self.info().name
                ),
                libc::EBUSY,
            ));
        }
        Ok(Queue {
            port: self.inner.clone(),
            id: self.inner.info.id,
            queue: q,
            stats: QueueStats::default(),
            _not_sync: PhantomData,
        })
    }

    /// Link up? (and speed in Mb/s)
    pub fn link(&self) -> (bool, u32) {
        let mut speed = 0u32;
        // SAFETY: valid port id and out pointer.
        let up = unsafe { dpdk_sys::shim_link_up(self.info().id, &mut speed) };
        (up == 1, speed)
    }

    /// Basic counters.
    pub fn stats(&self) -> PortStats {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port id and out pointer.
        let _ = unsafe { dpdk_sys::rte_eth_stats_get(self.info().id, &mut s) };
        PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        }
    }

    /// Extended counters (name, value), non-zero ones only.
    pub fn xstats(&self) -> Vec<(String, u64)> {
        let id = self.info().id;
        // SAFETY: a NULL array with size 0 asks for the count.
        let n = unsafe { dpdk_sys::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0) };
        let Ok(n) = u32::try_from(n) else {
            return Vec::new();
        };
        let mut names = vec![dpdk_sys::rte_eth_xstat_name::default(); n as usize];
        let mut vals = vec![dpdk_sys::rte_eth_xstat::default(); n as usize];
        // SAFETY: arrays of n elements.
        let got_names = unsafe { dpdk_sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n) };
        // SAFETY: arrays of n elements.
        let got_vals = unsafe { dpdk_sys::rte_eth_xstats_get(id, vals.as_mut_ptr(), n) };
        if got_names < 0 || got_vals < 0 {
            return Vec::new();
        }
        let k = (got_names.min(got_vals) as usize).min(vals.len());
        vals[..k]
            .iter()
            .filter(|v| v.value != 0)
            .filter_map(|v| {
                let nm = names.get(v.id as usize)?;
                // SAFETY: xstat names are NUL-terminated within their fixed array.
                let s = unsafe { CStr::from_ptr(nm.name.as_ptr()) }
                    .to_string_lossy()
                    .into_owned();
                Some((s, v.value))
            })
            .collect()
    }
}

/// The port named `name`: its id, what the driver reports, the driver's name.
fn find_port(name: &str) -> Result<(u16, dpdk_sys::rte_eth_dev_info, String), DpdkError> {
    let cname = CString::new(name).map_err(|_| DpdkError::new("port name", libc::EINVAL))?;
    let mut id: u16 = 0;
    // SAFETY: valid C string and out pointer.
    check(&format!("no DPDK port named {name:?}"), unsafe {
        dpdk_sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut id)
    })?;
    let mut dev_info = dpdk_sys::rte_eth_dev_info::default();
    // SAFETY: valid port id and out pointer.
    check("rte_eth_dev_info_get", unsafe {
        dpdk_sys::rte_eth_dev_info_get(id, &mut dev_info)
    })?;
    let driver = if dev_info.driver_name.is_null() {
        String::new()
    } else {
        // SAFETY: the driver name is a static C string owned by the PMD.
        unsafe { CStr::from_ptr(dev_info.driver_name) }
            .to_string_lossy()
            .into_owned()
    };
    Ok((id, dev_info, driver))
}

/// The offloads [`eth_conf`] turned on.
struct Offloads {
    rss: bool,
    tx_multi_seg: bool,
    rx_scatter: bool,
}

/// The port's configuration: multi-segment TX and scatter RX where the driver has them, RSS
/// over IPv4 and TCP with `key` (which the returned configuration points to) for several
/// queues.
fn eth_conf(
    name: &str,
    cfg: &PortConfig,
    dev_info: &dpdk_sys::rte_eth_dev_info,
    pool: &Mempool,
    key: &mut [u8; 40],
) -> (dpdk_sys::rte_eth_conf, Offloads) {
    let rss_hf = dev_info.flow_type_rss_offloads
        & (RSS_IPV4 | RSS_FRAG_IPV4 | RSS_NONFRAG_IPV4_TCP | RSS_NONFRAG_IPV4_OTHER);
    let rss = cfg.rx_queues > 1 && rss_hf != 0;
    let mut conf = dpdk_sys::rte_eth_conf::default();
    let tx_multi_seg = dev_info.tx_offload_capa & TX_OFFLOAD_MULTI_SEGS != 0;
    if tx_multi_seg {
        conf.txmode.offloads |= TX_OFFLOAD_MULTI_SEGS;
    }
    // A frame that does not fit one RX buffer needs scatter (chains), where the driver has it.
    let frame = usize::from(cfg.mtu) + 14 + 4;
    let rx_scatter =
        frame > pool.buf_capacity() && dev_info.rx_offload_capa & RX_OFFLOAD_SCATTER != 0;
    if rx_scatter {
        conf.rxmode.offloads |= RX_OFFLOAD_SCATTER;
    } else if frame > pool.buf_capacity() {
        tracing::warn!(
            port = name,
            mtu = cfg.mtu,
            buffer = pool.buf_capacity(),
            "frames at this MTU do not fit one RX buffer and the driver has no scatter RX: size the pool from the MTU"
        );
    }
    if rss {
        conf.rxmode.mq_mode = dpdk_sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
        conf.rx_adv_conf.rss_conf.rss_key_len = 40;
        conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
    }
    let offloads = Offloads {
        rss,
        tx_multi_seg,
        rx_scatter,
    };
    (conf, offloads)
}

/// Set the MTU; whether the driver took it. Some virtual PMDs cannot set it, which is not
/// fatal: the device's own MTU decides.
fn set_mtu(id: u16, name: &str, mtu: u16, dev_info: &dpdk_sys::rte_eth_dev_info) -> bool {
    let frame = usize::from(mtu) + 14 + 4;
    // SAFETY: valid, configured port id.
    let rc = unsafe { dpdk_sys::rte_eth_dev_set_mtu(id, mtu) };
    if rc == -libc::ENOTSUP {
        tracing::info!(
            port = name,
            mtu,
            "the driver cannot set the MTU; using its default"
        );
    } else if rc == -libc::EINVAL && frame > dev_info.max_rx_pktlen as usize {
        // ethdev refuses an MTU whose frame exceeds the driver's max_rx_pktlen before the
        // driver sees it; DPDK 22.11's af_packet reports 1518 whatever its ring frames
        // hold. Our buffers are sized from the MTU regardless: the device's own MTU (the
        // kernel interface, for af_packet and af_xdp) decides.
        tracing::info!(
            port = name,
            mtu,
            max_rx_pktlen = dev_info.max_rx_pktlen,
            "the driver reports a smaller largest frame, so DPDK does not set the MTU; buffers are sized for it anyway, the device's own MTU must allow it"
        );
    } else if rc < 0 {
        tracing::warn!(
            port = name,
            mtu,
            "rte_eth_dev_set_mtu: {}",
            crate::error::strerror(rc)
        );
    }
    rc == 0
}

/// Set up `cfg`'s RX queues (buffers from `pool`) and TX queues with the driver's defaults.
fn setup_queues(id: u16, cfg: &PortConfig, pool: &Mempool) -> Result<(), DpdkError> {
    // SAFETY: valid port id.
    let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(id) }.max(0) as u32;
    for q in 0..cfg.rx_queues {
        // SAFETY: valid port and pool; a NULL rxconf means the driver's defaults.
        check("rte_eth_rx_queue_setup", unsafe {
            dpdk_sys::rte_eth_rx_queue_setup(
                id,
                q,
                cfg.rx_desc,
                socket,
                std::ptr::null(),
                pool.as_ptr(),
            )
        })?;
    }
    for q in 0..cfg.tx_queues {
        // SAFETY: valid port; a NULL txconf means the driver's defaults.
        check("rte_eth_tx_queue_setup", unsafe {
            dpdk_sys::rte_eth_tx_queue_setup(id, q, cfg.tx_desc, socket, std::ptr::null())
        })?;
    }
    Ok(())
}

impl Drop for PortInner {
    fn drop(&mut self) {
        // SAFETY: valid port id; stop then close is the documented teardown order.
        unsafe {
            let rc = dpdk_sys::rte_eth_dev_stop(self.info.id);
            if rc < 0 {
                tracing::warn!(port = %self.info.name, "rte_eth_dev_stop: {}", crate::error::strerror(rc));
            }
            let _ = dpdk_sys::rte_eth_dev_close(self.info.id);
        }
        tracing::info!(port = %self.info.name, "port stopped and closed");
    }
}

/// Counters a queue keeps about chains it had to copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Chained packets copied into one buffer for a device without multi-segment TX.
    pub tx_linearized: u64,
    /// Chained packets dropped because that copy found no mbuf (or the packet exceeds a buffer).
    pub tx_linearize_failed: u64,
}

/// One RX/TX queue pair of a port, owned by the thread that polls it (see the module docs).
#[derive(Debug)]
pub struct Queue {
    port: Arc<PortInner>,
    id: u16,
    queue: u16,
    stats: QueueStats,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl Queue {
    /// Queue index.
    pub fn index(&self) -> u16 {
        self.queue
    }

    /// The port's facts.
    pub fn info(&self) -> &PortInfo {
        &self.port.info
    }

    /// Counters of this queue.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// Whether the port's link is up (non-blocking query).
    pub fn link_up(&self) -> bool {
        // SAFETY: valid port id; a NULL speed pointer is allowed by the shim.
        unsafe { dpdk_sys::shim_link_up(self.id, std::ptr::null_mut()) == 1 }
    }

    /// Receive up to `MAX_BURST` packets, appended to `out`.
    #[inline]
    pub fn rx_burst(&mut self, out: &mut Vec<Mbuf>) -> usize {
        let mut raw = [std::ptr::null_mut::<dpdk_sys::rte_mbuf>(); MAX_BURST];
        let guard = self.port.burst_lock.as_ref().map(BurstLock::lock);
        // SAFETY: raw has room for MAX_BURST pointers; the port/queue were set up and the queue
        // is polled only through this &mut Queue, which exists once; a net_memif port's
        // teardown waits for the guard (BurstLock).
        let n = unsafe {
            dpdk_sys::shim_rx_burst(self.id, self.queue, raw.as_mut_ptr(), MAX_BURST as u16)
        };
        drop(guard);
        for &p in &raw[..usize::from(n)] {
            if let Some(p) = NonNull::new(p) {
                // SAFETY: rx_burst hands us ownership of each returned mbuf; receive buffers
                // come from our pool (direct).
                out.push(unsafe { Mbuf::from_raw(p) });
            }
        }
        usize::from(n)
    }

    /// Send the packets in `pkts` (drained from the front as they are accepted). Returns how many
    /// were sent; the rest stay in `pkts` for the caller to retry or drop. On a device without
    /// multi-segment TX, chains are first copied into one buffer (counted in [`QueueStats`]).
    #[inline]
    pub fn tx_burst(&mut self, pkts: &mut Vec<Mbuf>) -> usize {
        self.tx_burst_counted(pkts).0
    }

    /// [`Queue::tx_burst`], also returning the bytes sent (`pkt_len` of the accepted frames,
    /// read before each burst: only the frames offered to the device are touched, not a
    /// backlog of thousands waiting behind a full ring).
    #[inline]
    pub fn tx_burst_counted(&mut self, pkts: &mut Vec<Mbuf>) -> (usize, u64) {
        if !self.port.info.tx_multi_seg {
            self.linearize_chains(pkts);
        }
        let mut sent_total = 0;
        let mut bytes = 0u64;
        while !pkts.is_empty() {
            let k = pkts.len().min(MAX_BURST);
            let mut raw = [std::ptr::null_mut::<dpdk_sys::rte_mbuf>(); MAX_BURST];
            let mut lens = [0u32; MAX_BURST];
            for ((r, l), m) in raw.iter_mut().zip(lens.iter_mut()).zip(pkts.iter()) {
                *r = m.raw_ptr();
                *l = m.pkt_len() as u32;
            }
            let guard = self.port.burst_lock.as_ref().map(BurstLock::lock);
            // SAFETY: raw holds k valid mbufs that we own; tx_burst takes ownership of the first
            // `sent` of them, which we then forget below; a net_memif port's teardown waits for
            // the guard (BurstLock).
            let sent = usize::from(unsafe {
                dpdk_sys::shim_tx_burst(self.id, self.queue, raw.as_mut_ptr(), k as u16)
            });
            drop(guard);
            for m in pkts.drain(..sent) {
                let _ = m.into_raw();
            }
            bytes += lens[..sent].iter().map(|&l| u64::from(l)).sum::<u64>();
            sent_total += sent;
            if sent < k {
                break;
            }
        }
        (sent_total, bytes)
    }

    #[cold]
    fn linearize_chains(&mut self, pkts: &mut Vec<Mbuf>) {
        if pkts.iter().all(|m| m.nb_segs() == 1) {
            return;
        }
        let pool = &self.port.pool;
        let stats = &mut self.stats;
        pkts.retain_mut(|m| {
            if m.nb_segs() == 1 {
                return true;
            }
            match m.linearize(pool) {
                Some(flat) => {
                    // The chain (and any external segment's pin reference) is released here:
                    // its bytes are copied.
                    *m = flat;
                    stats.tx_linearized += 1;
                    true
                }
                None => {
                    stats.tx_linearize_failed += 1;
                    false
                }
            }
        });
    }
}

/// Program the RSS redirection table: entry i -> queue i mod `queues`, the layout
/// [`crate::rss::RssSteering::queue_of`] predicts for choosing source ports of active opens,
/// instead of trusting each driver's default. Returns whether the driver took it.
fn program_reta(id: u16, name: &str, reta_size: u16, queues: u16) -> bool {
    const GROUP: usize = dpdk_sys::RTE_ETH_RETA_GROUP_SIZE as usize;
    let size = usize::from(reta_size);
    if size == 0 || queues == 0 {
        tracing::info!(
            port = name,
            "the driver reports no RSS redirection table; assuming entry i -> queue i mod n"
        );
        return false;
    }
    let mut groups = vec![dpdk_sys::rte_eth_rss_reta_entry64::default(); size.div_ceil(GROUP)];
    for (g, grp) in groups.iter_mut().enumerate() {
        for (j, slot) in grp.reta.iter_mut().enumerate() {
            let i = g * GROUP + j;
            if i < size {
                grp.mask |= 1u64 << j;
                *slot = (i % usize::from(queues)) as u16;
            }
        }
    }
    // SAFETY: valid port id; `groups` holds reta_size / 64 (rounded up) entries, the layout
    // rte_eth_dev_rss_reta_update reads.
    let rc = unsafe { dpdk_sys::rte_eth_dev_rss_reta_update(id, groups.as_mut_ptr(), reta_size) };
    if rc < 0 {
        tracing::warn!(
            port = name,
            reta_size,
            "cannot program the RSS redirection table ({}); assuming the driver's default is entry i -> queue i mod n",
            crate::error::strerror(rc)
        );
        return false;
    }
    tracing::info!(
        port = name,
        reta_size,
        queues,
        "RSS redirection table programmed"
    );
    true
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

#[cfg(test)]
mod tests {
    use super::memif_identity;

    #[test]
    fn memif_identity_reads_the_device_args_with_dpdks_defaults() {
        assert_eq!(
            memif_identity("role=client,id=3,socket=/tmp/m.sock,socket-abstract=no"),
            Some((3, 1, "/tmp/m.sock".to_owned()))
        );
        assert_eq!(
            memif_identity(""),
            Some((0, 0, "/run/memif.sock".to_owned()))
        );
        assert_eq!(
            memif_identity("role=master"),
            Some((0, 0, "/run/memif.sock".to_owned()))
        );
        assert_eq!(memif_identity("role=peer"), None);
        assert_eq!(memif_identity("id=x"), None);
    }
}
