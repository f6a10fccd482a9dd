//! Ethernet ports: configuration (queues, RSS, MTU), bursts, link state and counters.
#![allow(unsafe_code)]

use crate::DpdkError;
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use std::ffi::{CStr, CString};
use std::ptr::NonNull;

/// Largest burst the poll loop asks for.
pub const MAX_BURST: usize = 32;

// RTE_ETH_RSS_* are RTE_BIT64() macros, which bindgen cannot evaluate (rte_ethdev.h).
const RSS_IPV4: u64 = 1 << 2;
const RSS_FRAG_IPV4: u64 = 1 << 3;
const RSS_NONFRAG_IPV4_TCP: u64 = 1 << 4;
const RSS_NONFRAG_IPV4_OTHER: u64 = 1 << 7;

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
}

/// A started port. Stopped and closed on drop.
#[derive(Debug)]
pub struct Port {
    info: PortInfo,
}

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
        if cfg.rx_queues > dev_info.max_rx_queues || cfg.tx_queues > dev_info.max_tx_queues {
            return Err(DpdkError::new(
                format!(
                    "port {name}: {} RX / {} TX queues requested, device has at most {} / {}",
                    cfg.rx_queues, cfg.tx_queues, dev_info.max_rx_queues, dev_info.max_tx_queues
                ),
                libc::EINVAL,
            ));
        }
        let rss_hf = dev_info.flow_type_rss_offloads
            & (RSS_IPV4 | RSS_FRAG_IPV4 | RSS_NONFRAG_IPV4_TCP | RSS_NONFRAG_IPV4_OTHER);
        let rss = cfg.rx_queues > 1 && rss_hf != 0;
        let mut key = RSS_KEY;
        let mut conf = dpdk_sys::rte_eth_conf::default();
        if rss {
            conf.rxmode.mq_mode = dpdk_sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_key = key.as_mut_ptr();
            conf.rx_adv_conf.rss_conf.rss_key_len = 40;
            conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
        }
        // SAFETY: valid port id; conf is fully initialised and the key outlives the call
        // (DPDK copies it).
        check("rte_eth_dev_configure", unsafe {
            dpdk_sys::rte_eth_dev_configure(id, cfg.rx_queues, cfg.tx_queues, &conf)
        })?;
        // Some virtual PMDs do not support setting the MTU; that is not fatal at the default.
        // SAFETY: valid port id.
        let rc = unsafe { dpdk_sys::rte_eth_dev_set_mtu(id, cfg.mtu) };
        if rc == -libc::ENOTSUP {
            tracing::info!(
                port = name,
                mtu = cfg.mtu,
                "the driver cannot set the MTU; using its default"
            );
        } else if rc < 0 {
            tracing::warn!(
                port = name,
                mtu = cfg.mtu,
                "rte_eth_dev_set_mtu: {}",
                crate::error::strerror(rc)
            );
        }
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
        // SAFETY: valid, configured port.
        check("rte_eth_dev_start", unsafe {
            dpdk_sys::rte_eth_dev_start(id)
        })?;
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
            rss,
            queues: cfg.rx_queues,
            reta_size: dev_info.reta_size,
        };
        tracing::info!(port = name, id, driver = %info.driver, rss, mac = %fmt_mac(&info.mac), "port started");
        Ok(Port { info })
    }

    /// What the driver reported.
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// A handle for one queue pair, to move into the thread that polls it.
    pub fn queue(&self, q: u16) -> QueueHandle {
        QueueHandle {
            port: self.info.id,
            queue: q,
        }
    }

    /// Link up? (and speed in Mb/s)
    pub fn link(&self) -> (bool, u32) {
        let mut speed = 0u32;
        // SAFETY: valid port id and out pointer.
        let up = unsafe { dpdk_sys::shim_link_up(self.info.id, &mut speed) };
        (up == 1, speed)
    }

    /// Basic counters.
    pub fn stats(&self) -> PortStats {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port id and out pointer.
        let _ = unsafe { dpdk_sys::rte_eth_stats_get(self.info.id, &mut s) };
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
        let id = self.info.id;
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

impl Drop for Port {
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

/// One RX/TX queue pair of a port, polled by exactly one thread.
#[derive(Debug, Clone, Copy)]
pub struct QueueHandle {
    /// Port id.
    pub port: u16,
    /// Queue index.
    pub queue: u16,
}

impl QueueHandle {
    /// Whether the port's link is up (non-blocking query).
    pub fn link_up(&self) -> bool {
        // SAFETY: valid port id; a NULL speed pointer is allowed by the shim.
        unsafe { dpdk_sys::shim_link_up(self.port, std::ptr::null_mut()) == 1 }
    }

    /// Receive up to `MAX_BURST` packets, appended to `out`.
    #[inline]
    pub fn rx_burst(&self, out: &mut Vec<Mbuf>) -> usize {
        let mut raw = [std::ptr::null_mut::<dpdk_sys::rte_mbuf>(); MAX_BURST];
        // SAFETY: raw has room for MAX_BURST pointers; the port/queue were set up and the queue
        // is polled by this thread only.
        let n = unsafe {
            dpdk_sys::shim_rx_burst(self.port, self.queue, raw.as_mut_ptr(), MAX_BURST as u16)
        };
        for &p in &raw[..usize::from(n)] {
            if let Some(p) = NonNull::new(p) {
                // SAFETY: rx_burst hands us ownership of each returned mbuf.
                out.push(unsafe { Mbuf::from_raw(p) });
            }
        }
        usize::from(n)
    }

    /// Send the packets in `pkts` (drained from the front as they are accepted). Returns how many
    /// were sent; the rest stay in `pkts` for the caller to retry or drop.
    #[inline]
    pub fn tx_burst(&self, pkts: &mut Vec<Mbuf>) -> usize {
        let mut sent_total = 0;
        while !pkts.is_empty() {
            let k = pkts.len().min(MAX_BURST);
            let mut raw = [std::ptr::null_mut::<dpdk_sys::rte_mbuf>(); MAX_BURST];
            for (r, m) in raw.iter_mut().zip(pkts.iter()) {
                *r = m.as_raw_unowned();
            }
            // SAFETY: raw holds k valid mbufs that we own; tx_burst takes ownership of the first
            // `sent` of them, which we then forget below.
            let sent = usize::from(unsafe {
                dpdk_sys::shim_tx_burst(self.port, self.queue, raw.as_mut_ptr(), k as u16)
            });
            for m in pkts.drain(..sent) {
                let _ = m.into_raw();
            }
            sent_total += sent;
            if sent < k {
                break;
            }
        }
        sent_total
    }
}

impl Mbuf {
    /// The raw pointer without giving up ownership (for building burst arrays).
    #[inline]
    pub(crate) fn as_raw_unowned(&self) -> *mut dpdk_sys::rte_mbuf {
        // Reading the pointer value is safe; using it is the caller's business.
        self.raw_ptr()
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}
