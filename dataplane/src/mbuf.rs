//! The one owning mbuf type: single segments and chains.
//!
//! # Chains
//! An [`Mbuf`] is a single segment or the head of a chain (`nb_segs > 1`, `next` links).
//! - **Receive**: a PMD may hand up a chain when a frame does not fit one buffer (jumbo frames
//!   with a small data room, scatter RX). The poll loop sizes its pool from the MTU
//!   ([`crate::mempool::data_room_for_mtu`]) so that does not happen on the normal path, and
//!   [`Mbuf::linearize`]s any chain that still arrives (one copy, counted), so the TCP layer
//!   always sees a frame in one segment.
//! - **Transmit**: [`Mbuf::chain`] appends a segment (for example a header mbuf followed by
//!   payload mbufs); [`Mbuf::chain_ext`] appends a segment that points into memory we do not
//!   own (see [`crate::extbuf`]). Devices without multi-segment TX get the chain copied into one
//!   buffer by [`crate::port::Queue::tx_burst`].
//!
//! # When bytes may be written
//! `&mut Mbuf` means we own the mbuf, not necessarily its bytes. A segment's bytes are writable
//! ([`Mbuf::data_mut`], [`Mbuf::append`]) only when the segment is *direct* (its own pool
//! buffer, not attached to another mbuf's buffer nor to external memory) and its reference count
//! is 1 (no indirect mbuf shares the buffer). Otherwise those calls return `None`: a shared
//! buffer is read-only, and external memory (an application's registered region) is never
//! written by the dataplane. Metadata calls ([`Mbuf::adj`], [`Mbuf::trim`]) only move offsets and
//! are always allowed.
//!
//! The head segment of an `Mbuf` is always pool memory: external segments exist only as
//! [`crate::extbuf::ExtMbuf`] until chained behind a head, so [`Mbuf::data`] never hands out a
//! reference to memory another process may be writing.
#![allow(unsafe_code)]

use crate::mempool::Mempool;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

// The fields read directly below sit where DPDK 22.11's rte_mbuf_core.h puts them; a layout
// change in another DPDK release fails the build here instead of corrupting packets.
const _: () = {
    use core::mem::{offset_of, size_of};
    use dpdk_sys::rte_mbuf as M;
    assert!(size_of::<M>() == 128);
    assert!(offset_of!(M, buf_addr) == 0);
    assert!(offset_of!(M, data_off) == 16);
    assert!(offset_of!(M, refcnt) == 18);
    assert!(offset_of!(M, nb_segs) == 20);
    assert!(offset_of!(M, ol_flags) == 24);
    assert!(offset_of!(M, pkt_len) == 36);
    assert!(offset_of!(M, data_len) == 40);
    assert!(offset_of!(M, buf_len) == 54);
    assert!(offset_of!(M, next) == 64);
};

/// `ol_flags` bits of a segment whose buffer is not its own.
const NOT_DIRECT: u64 = dpdk_sys::RTE_MBUF_F_INDIRECT | dpdk_sys::RTE_MBUF_F_EXTERNAL;

/// An owned `rte_mbuf` (a single segment or the head of a chain). Freed on drop (the whole
/// chain); [`Mbuf::into_raw`] hands ownership to DPDK (e.g. `rte_eth_tx_burst`).
///
/// `Send`: an mbuf owned by exactly one `Mbuf` can move between threads; the pool it returns to
/// is thread-safe. Not `Sync`/`Clone`: two owners would race on data and refcount.
#[derive(Debug)]
pub struct Mbuf {
    raw: NonNull<dpdk_sys::rte_mbuf>,
}

// SAFETY: see the type docs: unique ownership, thread-safe pool.
unsafe impl Send for Mbuf {}

/// One segment of a chain, read-only.
#[derive(Debug, Clone, Copy)]
pub struct Seg<'a> {
    raw: NonNull<dpdk_sys::rte_mbuf>,
    _chain: std::marker::PhantomData<&'a Mbuf>,
}

impl Mbuf {
    /// Take ownership of a raw mbuf.
    ///
    /// # Safety
    /// `raw` must point to a valid mbuf (chain) that nobody else owns or frees (a reference is
    /// donated), whose head segment is not attached to external memory.
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
        // Only `refcnt` may change under us (when shared), and it is read atomically instead.
        unsafe { self.raw.as_ref() }
    }

    /// The first segment's data.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let h = self.hdr();
        // SAFETY: buf_addr + data_off points at data_len initialised bytes inside the head's
        // buffer (rte_pktmbuf_mtod), pool memory (the head is never external), which we own
        // for the lifetime of &self.
        unsafe {
            let p = (h.buf_addr as *const u8).add(usize::from(h.data_off));
            std::slice::from_raw_parts(p, usize::from(h.data_len))
        }
    }

    /// The first segment's data, writable; `None` when the segment's buffer is shared or not
    /// its own (see the module docs).
    #[inline]
    pub fn data_mut(&mut self) -> Option<&mut [u8]> {
        if !seg_writable(self.raw) {
            return None;
        }
        let (p, len) = {
            let h = self.hdr();
            // SAFETY: as in `data`; the pointer stays inside the mbuf's buffer.
            (
                unsafe { (h.buf_addr as *mut u8).add(usize::from(h.data_off)) },
                usize::from(h.data_len),
            )
        };
        // SAFETY: &mut self gives exclusive access to the mbuf, and the check above makes the
        // buffer exclusively this segment's (direct, refcount 1).
        Some(unsafe { std::slice::from_raw_parts_mut(p, len) })
    }

    /// Whether the first segment's bytes may be written (direct buffer, refcount 1).
    #[inline]
    pub fn is_writable(&self) -> bool {
        seg_writable(self.raw)
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

    /// Free room after the data of the last segment (0 when that segment is not writable).
    #[inline]
    pub fn tailroom(&self) -> usize {
        let last = self.last_seg();
        if !seg_writable(last) {
            return 0;
        }
        // SAFETY: valid segment of our chain.
        usize::from(unsafe { dpdk_sys::shim_pktmbuf_tailroom(last.as_ptr()) })
    }

    fn last_seg(&self) -> NonNull<dpdk_sys::rte_mbuf> {
        let mut s = self.raw;
        if self.hdr().nb_segs > 1 {
            // SAFETY: `next` links valid segments of our chain, NULL-terminated.
            while let Some(n) = NonNull::new(unsafe { (*s.as_ptr()).next }) {
                s = n;
            }
        }
        s
    }

    /// Grow the packet by `len` bytes at the end of its last segment and return them; `None`
    /// if there is no room or that segment is not writable.
    #[inline]
    pub fn append(&mut self, len: usize) -> Option<&mut [u8]> {
        let l = u16::try_from(len).ok()?;
        if !seg_writable(self.last_seg()) {
            return None;
        }
        // SAFETY: rte_pktmbuf_append returns NULL or a pointer to `len` bytes in the last
        // segment's buffer, which is exclusively ours (checked above; &mut self).
        unsafe {
            let p = dpdk_sys::shim_pktmbuf_append(self.raw.as_ptr(), l) as *mut u8;
            if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts_mut(p, len))
            }
        }
    }

    /// Shrink the packet by `len` bytes at the end (within its last segment).
    #[inline]
    pub fn trim(&mut self, len: usize) -> bool {
        let Ok(l) = u16::try_from(len) else {
            return false;
        };
        // SAFETY: valid mbuf; DPDK checks the length; only offsets change.
        unsafe { dpdk_sys::shim_pktmbuf_trim(self.raw.as_ptr(), l) == 0 }
    }

    /// Drop `len` bytes at the front (within the first segment).
    #[inline]
    pub fn adj(&mut self, len: usize) -> bool {
        let Ok(l) = u16::try_from(len) else {
            return false;
        };
        // SAFETY: valid mbuf; DPDK checks the length and returns NULL if too long.
        unsafe { !dpdk_sys::shim_pktmbuf_adj(self.raw.as_ptr(), l).is_null() }
    }

    /// Set a single-segment mbuf's data length to exactly `len` (within the buffer), growing
    /// or shrinking. False for a chain, when there is no room, or when growing a read-only
    /// buffer. The lengths are set here, as `rte_pktmbuf_append`/`_trim` set them, without a
    /// call into DPDK (the sender sizes every frame's mbuf this way).
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        let h = self.hdr();
        let cur = usize::from(h.data_len);
        let room = usize::from(h.buf_len).saturating_sub(usize::from(h.data_off));
        if h.nb_segs != 1 || len > room || (len > cur && !seg_writable(self.raw)) {
            return false;
        }
        let Ok(l) = u16::try_from(len) else {
            return false;
        };
        let p = self.raw.as_ptr();
        // SAFETY: a valid single-segment mbuf we own (&mut self); only its length fields
        // change, to a length inside its buffer (checked above), as rte_pktmbuf_append and
        // rte_pktmbuf_trim change them for a single segment.
        unsafe {
            (*p).data_len = l;
            (*p).pkt_len = u32::from(l);
        }
        true
    }

    /// [`Mbuf::set_len`], then the data writable (`None` when either refuses: a chain, no
    /// room, a shared buffer).
    #[inline]
    pub fn resize(&mut self, len: usize) -> Option<&mut [u8]> {
        if !self.set_len(len) {
            return None;
        }
        self.data_mut()
    }

    /// RSS hash the NIC computed (0 when it computes none).
    #[inline]
    pub fn rss_hash(&self) -> u32 {
        // SAFETY: valid mbuf; reads a plain field.
        unsafe { dpdk_sys::shim_mbuf_rss_hash(self.raw.as_ptr()) }
    }

    /// Append `tail` (a segment or a chain) to this packet. Gives `tail` back when the chain
    /// would exceed DPDK's segment limit.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: both are valid chains we own; on success the head owns the tail (it is
        // freed with the head), so we forget our handle to it.
        let rc = unsafe { dpdk_sys::shim_pktmbuf_chain(self.raw.as_ptr(), tail.raw.as_ptr()) };
        if rc == 0 {
            std::mem::forget(tail);
            Ok(())
        } else {
            Err(tail)
        }
    }

    /// The segments of the packet, in order.
    pub fn segments(&self) -> impl Iterator<Item = Seg<'_>> + '_ {
        let mut cur = Some(self.raw);
        std::iter::from_fn(move || {
            let s = cur?;
            // SAFETY: `next` links valid segments of our chain, NULL-terminated.
            cur = NonNull::new(unsafe { (*s.as_ptr()).next });
            Some(Seg {
                raw: s,
                _chain: std::marker::PhantomData,
            })
        })
    }

    /// Copy packet bytes `[off, off + dst.len())` (across segments, external ones included)
    /// into `dst`; returns how many bytes were copied (fewer at the end of the packet).
    pub fn copy_to(&self, mut off: usize, dst: &mut [u8]) -> usize {
        let mut w = 0;
        for s in self.segments() {
            if w == dst.len() {
                break;
            }
            let (p, len) = s.raw_data();
            if off >= len {
                off -= len;
                continue;
            }
            let n = (len - off).min(dst.len() - w);
            // SAFETY: [p + off, p + off + n) lies inside the segment's data, which stays valid
            // while we hold &self; dst is a distinct Rust buffer. A raw copy, so external
            // memory is never turned into a reference.
            unsafe { std::ptr::copy_nonoverlapping(p.add(off), dst[w..].as_mut_ptr(), n) };
            w += n;
            off = 0;
        }
        w
    }

    /// A single-segment copy of this packet from `pool` (None when the pool is empty or the
    /// packet does not fit one of its buffers).
    pub fn linearize(&self, pool: &Mempool) -> Option<Mbuf> {
        let len = self.pkt_len();
        let mut m = pool.alloc()?;
        let dst = m.append(len)?;
        (self.copy_to(0, dst) == len).then_some(m)
    }
}

impl<'a> Seg<'a> {
    fn hdr(&self) -> &'a dpdk_sys::rte_mbuf {
        // SAFETY: a segment of a chain borrowed for 'a.
        unsafe { &*self.raw.as_ptr() }
    }

    fn raw_data(&self) -> (*const u8, usize) {
        let h = self.hdr();
        // SAFETY: buf_addr + data_off is the segment's data (rte_pktmbuf_mtod).
        let p = unsafe { (h.buf_addr as *const u8).add(usize::from(h.data_off)) };
        (p, usize::from(h.data_len))
    }

    /// Bytes in this segment.
    pub fn len(&self) -> usize {
        usize::from(self.hdr().data_len)
    }

    /// Whether the segment is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the segment points into external memory (an application's region).
    pub fn is_external(&self) -> bool {
        self.hdr().ol_flags & dpdk_sys::RTE_MBUF_F_EXTERNAL != 0
    }

    /// The segment's bytes; `None` for an external segment, whose memory another process may
    /// be writing (read those with [`Mbuf::copy_to`]).
    pub fn bytes(&self) -> Option<&'a [u8]> {
        if self.is_external() {
            return None;
        }
        let (p, len) = self.raw_data();
        // SAFETY: pool memory of a segment borrowed for 'a.
        Some(unsafe { std::slice::from_raw_parts(p, len) })
    }
}

/// Direct buffer with a reference count of 1.
#[inline]
fn seg_writable(s: NonNull<dpdk_sys::rte_mbuf>) -> bool {
    let p = s.as_ptr();
    // SAFETY: a valid segment we (or our chain) own; refcnt is updated atomically by DPDK, so
    // it is read atomically; ol_flags changes only with ownership (attach/detach).
    unsafe {
        let flags = (*p).ol_flags;
        let refcnt =
            AtomicU16::from_ptr(std::ptr::addr_of_mut!((*p).refcnt)).load(Ordering::Acquire);
        flags & NOT_DIRECT == 0 && refcnt == 1
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
