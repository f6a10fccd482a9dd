//! The one owning mbuf type.
#![allow(unsafe_code)]

use std::ptr::NonNull;

// The fields read directly below sit where DPDK 22.11's rte_mbuf_core.h puts them; a layout
// change in another DPDK release fails the build here instead of corrupting packets.
const _: () = {
    use core::mem::{offset_of, size_of};
    use dpdk_sys::rte_mbuf as M;
    assert!(size_of::<M>() == 128);
    assert!(offset_of!(M, buf_addr) == 0);
    assert!(offset_of!(M, data_off) == 16);
    assert!(offset_of!(M, nb_segs) == 20);
    assert!(offset_of!(M, pkt_len) == 36);
    assert!(offset_of!(M, data_len) == 40);
    assert!(offset_of!(M, buf_len) == 54);
};

/// An owned `rte_mbuf` (a single segment or the head of a chain). Freed on drop;
/// [`Mbuf::into_raw`] hands ownership to DPDK (e.g. `rte_eth_tx_burst`).
///
/// `Send`: an mbuf owned by exactly one `Mbuf` can move between threads; the pool it returns to
/// is thread-safe. Not `Sync`/`Clone`: two owners would race on data and refcount.
#[derive(Debug)]
pub struct Mbuf {
    raw: NonNull<dpdk_sys::rte_mbuf>,
}

// SAFETY: see the type docs: unique ownership, thread-safe pool.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Take ownership of a raw mbuf.
    ///
    /// # Safety
    /// `raw` must point to a valid mbuf that nobody else owns or frees (a reference is donated).
    #[inline]
    pub unsafe fn from_raw(raw: NonNull<dpdk_sys::rte_mbuf>) -> Self {
        Mbuf { raw }
    }

    /// The raw pointer, ownership kept.
    #[inline]
    pub(crate) fn raw_ptr(&self) -> *mut dpdk_sys::rte_mbuf {
        self.raw.as_ptr()
    }

    /// Give up ownership without freeing.
    #[inline]
    pub fn into_raw(self) -> *mut dpdk_sys::rte_mbuf {
        let p = self.raw.as_ptr();
        std::mem::forget(self);
        p
    }

    #[inline]
    fn hdr(&self) -> &dpdk_sys::rte_mbuf {
        // SAFETY: we own a valid mbuf for the lifetime of &self; its header is initialised.
        unsafe { self.raw.as_ref() }
    }

    /// The first segment's data.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let h = self.hdr();
        // SAFETY: buf_addr + data_off points at data_len initialised bytes inside the mbuf's
        // buffer (rte_pktmbuf_mtod), which we own for the lifetime of &self.
        unsafe {
            let p = (h.buf_addr as *const u8).add(usize::from(h.data_off));
            std::slice::from_raw_parts(p, usize::from(h.data_len))
        }
    }

    /// The first segment's data, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (p, len) = {
            let h = self.hdr();
            // SAFETY: as in `data`; the pointer stays inside the mbuf's buffer.
            (
                unsafe { (h.buf_addr as *mut u8).add(usize::from(h.data_off)) },
                usize::from(h.data_len),
            )
        };
        // SAFETY: &mut self gives exclusive access to the bytes (our mbufs have refcount 1).
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    /// Bytes in the first segment.
    #[inline]
    pub fn data_len(&self) -> usize {
        usize::from(self.hdr().data_len)
    }

    /// Bytes in the whole packet (all segments).
    #[inline]
    pub fn pkt_len(&self) -> usize {
        self.hdr().pkt_len as usize
    }

    /// Number of segments.
    #[inline]
    pub fn nb_segs(&self) -> u16 {
        self.hdr().nb_segs
    }

    /// Free room after the data.
    #[inline]
    pub fn tailroom(&self) -> usize {
        // SAFETY: valid mbuf.
        usize::from(unsafe { dpdk_sys::shim_pktmbuf_tailroom(self.raw.as_ptr()) })
    }

    /// Grow the data by `len` bytes at the end and return them (None if no room).
    #[inline]
    pub fn append(&mut self, len: usize) -> Option<&mut [u8]> {
        let l = u16::try_from(len).ok()?;
        // SAFETY: rte_pktmbuf_append returns NULL or a pointer to `len` writable bytes in our mbuf.
        unsafe {
            let p = dpdk_sys::shim_pktmbuf_append(self.raw.as_ptr(), l) as *mut u8;
            if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts_mut(p, len))
            }
        }
    }

    /// Shrink the data by `len` bytes at the end.
    #[inline]
    pub fn trim(&mut self, len: usize) -> bool {
        let Ok(l) = u16::try_from(len) else {
            return false;
        };
        // SAFETY: valid mbuf; DPDK checks the length.
        unsafe { dpdk_sys::shim_pktmbuf_trim(self.raw.as_ptr(), l) == 0 }
    }

    /// Drop `len` bytes at the front.
    #[inline]
    pub fn adj(&mut self, len: usize) -> bool {
        let Ok(l) = u16::try_from(len) else {
            return false;
        };
        // SAFETY: valid mbuf; DPDK checks the length and returns NULL if too long.
        unsafe { !dpdk_sys::shim_pktmbuf_adj(self.raw.as_ptr(), l).is_null() }
    }

    /// Set the data length to exactly `len` (within the buffer), growing or shrinking.
    pub fn set_len(&mut self, len: usize) -> bool {
        let cur = self.data_len();
        if len >= cur {
            self.append(len - cur).is_some()
        } else {
            self.trim(cur - len)
        }
    }

    /// RSS hash the NIC computed (0 when it computes none).
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        // SAFETY: valid mbuf; reads a plain field.
        unsafe { dpdk_sys::shim_mbuf_rss_hash(self.raw.as_ptr()) }
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf (chain) and free it exactly once.
        unsafe { dpdk_sys::shim_pktmbuf_free(self.raw.as_ptr()) }
    }
}

/// The first segment's bytes: lets the TCP layer hold received mbufs as its segment buffers
/// (zero-copy receive: payload is handed up as ranges of the mbuf).
impl AsRef<[u8]> for Mbuf {
    fn as_ref(&self) -> &[u8] {
        self.data()
    }
}
