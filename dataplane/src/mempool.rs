//! Packet-buffer pools.
//!
//! A [`Mempool`] is a cheap, cloneable handle. When the last handle goes the pool is not freed
//! at once but retired into the [`Eal`], which frees it at shutdown only if every mbuf came back
//! (see [`crate::eal`]): an [`Mbuf`] never outlives the memory it lives in, and no mbuf carries a
//! reference count of its pool.
#![allow(unsafe_code)]

use crate::DpdkError;
use crate::eal::{Eal, RetiredPool};
use crate::mbuf::Mbuf;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes every mbuf keeps in front of the data (`RTE_PKTMBUF_HEADROOM`).
pub const HEADROOM: u16 = dpdk_sys::RTE_PKTMBUF_HEADROOM as u16;

/// Ethernet header + one VLAN tag + FCS room, added to the IP MTU to get a frame.
const FRAME_OVERHEAD: usize = 14 + 4 + 4;

/// The data room (headroom included) a pool needs so that one mbuf holds a whole frame at
/// `mtu`, plus the 40 bytes of TCP header room the TX path reserves beyond the MSS and 32
/// bytes of slack (an af_packet ring frame, header included, must fit one mbuf): DPDK's
/// default 2 KiB, else rounded up to whole KiB (jumbo frames).
pub fn data_room_for_mtu(mtu: u16) -> u16 {
    let frame = usize::from(mtu) + FRAME_OVERHEAD + 40 + 32;
    let buf = if frame <= 2048 {
        2048
    } else {
        frame.div_ceil(1024) * 1024
    };
    u16::try_from(buf + usize::from(HEADROOM)).unwrap_or(u16::MAX)
}

/// An `rte_mempool` of packet buffers (a cheap, cloneable handle; `Send` and `Sync`:
/// allocation and free are thread-safe in DPDK).
#[derive(Debug, Clone)]
pub struct Mempool {
    /// Cached copy of `inner.raw`, so the hot path does not chase the Arc.
    raw: NonNull<dpdk_sys::rte_mempool>,
    inner: Arc<PoolInner>,
}

#[derive(Debug)]
struct PoolInner {
    raw: NonNull<dpdk_sys::rte_mempool>,
    name: String,
    data_room: u16,
    size: u32,
    eal: Eal,
}

// SAFETY: rte_mempool is designed for concurrent use from several threads (lock-free ring with
// per-lcore caches); the handle is only a pointer to that shared object plus immutable data.
unsafe impl Send for Mempool {}
// SAFETY: see Send; alloc/free through a shared reference are thread-safe in DPDK.
unsafe impl Sync for Mempool {}
// SAFETY: as for Mempool.
unsafe impl Send for PoolInner {}
// SAFETY: as for Mempool.
unsafe impl Sync for PoolInner {}

/// Most mbufs one [`Mempool::alloc_bulk`] allocates.
pub const ALLOC_BULK_MAX: usize = 64;

impl Mempool {
    /// `rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket)`. `data_room` includes
    /// the headroom ([`HEADROOM`]); see [`data_room_for_mtu`].
    pub fn new(
        eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self, DpdkError> {
        let cname = CString::new(name).map_err(|_| DpdkError::new("mempool name", libc::EINVAL))?;
        // SAFETY: EAL is initialised (we hold `eal`); cname is a valid C string for the
        // duration of the call; DPDK copies it.
        let p = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(cname.as_ptr(), n, cache, 0, data_room, socket)
        };
        let raw = NonNull::new(p).ok_or_else(|| {
            DpdkError::from_errno(format!(
                "rte_pktmbuf_pool_create({name}, {n} mbufs of {data_room} bytes = {} MiB)",
                (u64::from(n) * (u64::from(data_room) + 192)) >> 20
            ))
        })?;
        Ok(Mempool {
            raw,
            inner: Arc::new(PoolInner {
                raw,
                name: name.to_owned(),
                data_room,
                size: n,
                eal: eal.clone(),
            }),
        })
    }

    /// Allocate one mbuf (None when the pool is empty).
    #[inline]
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool pointer is valid while self lives.
        let m = unsafe { dpdk_sys::shim_pktmbuf_alloc(self.raw.as_ptr()) };
        // SAFETY: a freshly allocated mbuf is owned by nobody else.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// Allocate `n` mbufs at once onto `out` (`rte_pktmbuf_alloc_bulk`: one call and one
    /// take from the pool's per-core cache for all of them); false, with nothing added, when
    /// the pool has fewer than `n` (or `n` is 0 or above [`ALLOC_BULK_MAX`]).
    pub fn alloc_bulk(&self, out: &mut Vec<Mbuf>, n: usize) -> bool {
        let mut raw = [std::ptr::null_mut::<dpdk_sys::rte_mbuf>(); ALLOC_BULK_MAX];
        let Some(slots) = raw.get_mut(..n).filter(|s| !s.is_empty()) else {
            return false;
        };
        // SAFETY: the pool pointer is valid while self lives; `slots` has room for the `n`
        // pointers DPDK writes (all or none).
        let rc = unsafe {
            dpdk_sys::shim_pktmbuf_alloc_bulk(self.raw.as_ptr(), slots.as_mut_ptr(), n as u32)
        };
        if rc != 0 {
            return false;
        }
        out.reserve(n);
        for m in slots.iter().filter_map(|&m| NonNull::new(m)) {
            // SAFETY: a freshly allocated mbuf, owned by nobody else, taken once.
            out.push(unsafe { Mbuf::from_raw(m) });
        }
        true
    }

    /// Allocate an mbuf holding a copy of `frame` (None when the pool is empty or the frame
    /// does not fit one buffer).
    pub fn alloc_copy(&self, frame: &[u8]) -> Option<Mbuf> {
        let mut m = self.alloc()?;
        m.append(frame.len())?.copy_from_slice(frame);
        Some(m)
    }

    /// Bytes of packet data one mbuf holds (data room minus headroom).
    pub fn buf_capacity(&self) -> usize {
        usize::from(self.inner.data_room.saturating_sub(HEADROOM))
    }

    /// Mbufs in the pool.
    pub fn size(&self) -> u32 {
        self.inner.size
    }

    /// The EAL this pool belongs to.
    pub fn eal(&self) -> &Eal {
        &self.inner.eal
    }

    /// Free buffers in the pool.
    pub fn available(&self) -> u32 {
        // SAFETY: valid pool pointer.
        unsafe { dpdk_sys::shim_mempool_avail_count(self.raw.as_ptr()) }
    }

    /// Buffers currently handed out.
    pub fn in_use(&self) -> u32 {
        // SAFETY: valid pool pointer.
        unsafe { dpdk_sys::shim_mempool_in_use_count(self.raw.as_ptr()) }
    }

    /// The raw pointer, for queue setup. Valid while this handle (or a clone) lives.
    pub(crate) fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.raw.as_ptr()
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // Freed (or leaked) by the EAL's final check, never while an mbuf may be out.
        self.eal.retire_pool(RetiredPool {
            raw: self.raw,
            name: std::mem::take(&mut self.name),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_room_follows_the_mtu() {
        assert_eq!(data_room_for_mtu(1500), 2048 + 128);
        assert_eq!(data_room_for_mtu(576), 2048 + 128);
        let jumbo = data_room_for_mtu(9000);
        assert_eq!(jumbo % 64, 0);
        // A whole 9000-byte IP packet plus Ethernet header, VLAN tag and FCS fits, and so does
        // the TX path's MTU + 54 bytes.
        assert!(usize::from(jumbo - HEADROOM) >= 9000 + 14 + 4 + 4);
        assert!(usize::from(jumbo - HEADROOM) >= 9000 + 54);
        assert!(jumbo < 9000 + 256 + 128);
    }
}
