//! Packet-buffer pools.
#![allow(unsafe_code)]

use crate::DpdkError;
use crate::mbuf::Mbuf;
use std::ffi::CString;
use std::ptr::NonNull;

/// An `rte_mempool` of packet buffers. Freed on drop; every mbuf from it must be gone by then.
#[derive(Debug)]
pub struct Mempool {
    raw: NonNull<dpdk_sys::rte_mempool>,
}

// SAFETY: rte_mempool is designed for concurrent use from several lcores (lock-free ring with
// per-lcore caches); the handle is only a pointer to that shared object.
unsafe impl Send for Mempool {}
// SAFETY: see Send; alloc/free through a shared reference are thread-safe in DPDK.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// `rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket)`.
    pub fn new(
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self, DpdkError> {
        let cname = CString::new(name).map_err(|_| DpdkError::new("mempool name", libc::EINVAL))?;
        // SAFETY: cname is a valid C string for the duration of the call; DPDK copies it.
        let p = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(cname.as_ptr(), n, cache, 0, data_room, socket)
        };
        NonNull::new(p)
            .map(|raw| Mempool { raw })
            .ok_or_else(|| DpdkError::from_errno(format!("rte_pktmbuf_pool_create({name}, n={n})")))
    }

    /// Allocate one mbuf (None when the pool is empty).
    #[inline]
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool pointer is valid while self lives.
        let m = unsafe { dpdk_sys::shim_pktmbuf_alloc(self.raw.as_ptr()) };
        // SAFETY: a freshly allocated mbuf is owned by nobody else.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// Allocate an mbuf holding a copy of `frame` (None when the pool is empty or the frame
    /// does not fit one buffer).
    pub fn alloc_copy(&self, frame: &[u8]) -> Option<Mbuf> {
        let mut m = self.alloc()?;
        m.append(frame.len())?.copy_from_slice(frame);
        Some(m)
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

    /// The raw pointer, for queue setup.
    pub fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.raw.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: we own the pool; the owner guarantees ports using it were closed first.
        unsafe { dpdk_sys::rte_mempool_free(self.raw.as_ptr()) }
    }
}
