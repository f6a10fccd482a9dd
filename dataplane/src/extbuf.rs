//! Zero-copy transmit from memory DPDK does not own: external-buffer mbufs.
//!
//! The RDMA data path sends payload straight out of an application's registered region (a
//! memfd-backed shared segment the daemon has mapped): TCP/IP/MPA/DDP headers go in a small mbuf
//! from the pool, the payload follows as mbufs whose buffers point into the region
//! (`rte_pktmbuf_attach_extbuf`). Three types:
//!
//! - [`ExternalMemory`]: what owns the mapping (for example `shm::Segment`). Implementing it is
//!   a promise that `base()..base() + len()` stays mapped at that address while the value lives.
//! - [`ExtRegion`]: that memory registered with DPDK (`rte_extmem_register`) and DMA-mapped
//!   (`rte_dev_dma_map`) for the ports that need it. One per segment, shared by all threads
//!   (`Arc`). It keeps the memory value (and so the mapping), the EAL and those ports alive.
//! - [`ExtPin`]: a completion handle. Payload mbufs are attached *through a pin*
//!   ([`ExtPin::attach`]); the pin counts them (in DPDK's `rte_mbuf_ext_shared_info`, whose
//!   `free_cb` we provide). When the pin has been dropped **and** every mbuf attached through it
//!   has been freed (sent and released by the NIC, dropped, or freed at port close), the pin's
//!   `on_release` closure runs once: the NIC is done with those bytes.
//!
//! # How the RDMA engine uses it
//! ```text
//! // control thread, when a client attaches a segment:
//! let region = ExtRegion::register(&eal, Arc::new(segment), &[&port])?;   // -> Arc<ExtRegion>
//! // dataplane thread, one pin per FPDU-log entry (or per work request):
//! let pin = ExtPin::new(&region, move || done.store(true, Release));
//! let mut pkt = pool.alloc()?;                         // headers, written by the TCP/MPA code
//! pkt.chain_ext(pin.attach(&pool, offset, len)?)?;     // payload: region[offset..offset+len]
//! tx.push(pkt);
//! // a retransmission attaches again through the same pin; when TCP has acknowledged the
//! // bytes, drop the pin; `done` flips once the NIC has let go of the last copy.
//! ```
//!
//! # How long the memory must stay mapped
//! Until the `on_release` of every pin attached to it has run, which also means: until the
//! last `Arc<ExtRegion>` is gone. The types enforce this: a pin holds the region, the region
//! holds the memory value, and the region unregisters the memory (DMA unmap, then
//! `rte_extmem_unregister`) only when dropped. So the control thread may drop its handle of a
//! deregistered segment at any time; the mapping goes away after the NIC's last use. The
//! application must not *modify* the bytes until the work request completes (RDMA semantics):
//! a modification races with the NIC and changes what goes on the wire (never memory safety in
//! the daemon, which reads external bytes only through raw copies).
//!
//! # Where `on_release` runs
//! On whatever thread frees the last reference: usually the dataplane thread inside
//! `tx_burst` (virtual devices copy and free at once; real NICs free when they reclaim TX
//! descriptors, possibly many bursts later), the thread dropping the pin, or the thread closing
//! the port. Keep it short and non-blocking (an atomic store, a push to a lock-free queue).
//! It must not panic (it runs inside a DPDK callback: a panic aborts the process).
//!
//! # What devices need
//! - **Virtual devices** (`net_memif`, `net_af_packet`, `net_af_xdp`, `net_tap`, `net_ring`,
//!   `net_null`) copy with the CPU from the mbuf's virtual address: no DMA mapping, and the
//!   IO address is never read, so any IOVA mode works (`rte_dev_dma_map` is not called).
//! - **PCI NICs** DMA from the IO address: EAL must run with IOVA as VA (vfio with an IOMMU, or
//!   `--iova-mode=va`), where the IO address of the region is its virtual address, and the
//!   region is mapped into the device's IOMMU domain with `rte_dev_dma_map`. With IOVA as PA
//!   (igb_uio, vfio no-IOMMU) registration fails with `ENOTSUP`: the memfd pages have no
//!   stable physical address we could hand the NIC; use copy TX there.
//!
//! An external segment is never written by the dataplane and never read through a Rust
//! reference (see [`crate::mbuf`]): another process maps the same memory.
#![allow(unsafe_code)]

use crate::DpdkError;
use crate::eal::{Eal, IovaMode};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::port::Port;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering, fence};

/// Memory external-buffer mbufs may point into.
///
/// # Safety
/// `base()..base() + len()` must be mapped (readable), at that address, from when the value is
/// made until it is dropped, and `base()` must be aligned to `page_size()`, a power of two that
/// is the page size of the mapping (4 KiB, or 2 MiB for hugepage memory). The bytes may be
/// written by others (another process) at any time: the dataplane only copies them with raw
/// pointers.
pub unsafe trait ExternalMemory: Send + Sync + 'static {
    /// Start of the mapping.
    fn base(&self) -> *const u8;
    /// Bytes mapped.
    fn len(&self) -> usize;
    /// Whether the mapping is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Page size of the mapping.
    fn page_size(&self) -> usize {
        4096
    }
}

/// Page-aligned heap memory holding a copy of some bytes: an [`ExternalMemory`] for tests and
/// for callers whose payload is not in a shared segment.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: an owned allocation, immutable after construction.
unsafe impl Send for AlignedBuf {}
// SAFETY: see Send.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A 4 KiB-aligned copy of `bytes` (at least one page is allocated).
    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let layout =
            std::alloc::Layout::from_size_align(bytes.len().max(1).div_ceil(4096) * 4096, 4096)
                .expect("size fits a layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds layout.size() >= bytes.len() bytes; bytes is a distinct
        // buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len()) };
        AlignedBuf { ptr, layout }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in from_bytes with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the allocation is page-aligned, lives until drop and is never moved.
unsafe impl ExternalMemory for AlignedBuf {
    fn base(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

/// Largest piece one external mbuf may carry (`buf_len` is 16 bits).
pub const MAX_ATTACH: usize = u16::MAX as usize;

/// References one pin may hold (its own plus attached mbufs): DPDK's counter is 16 bits.
const PIN_REF_LIMIT: u16 = u16::MAX - 1;

/// Memory registered with DPDK for zero-copy TX. See the module docs.
pub struct ExtRegion {
    mem: Arc<dyn ExternalMemory>,
    base: *mut u8,
    len: usize,
    /// `len` rounded up to whole pages (what was registered).
    reg_len: usize,
    /// IO address of `base` (regions are IOVA-contiguous in VA mode), or `RTE_BAD_IOVA` when
    /// only virtual devices use the region.
    iova: u64,
    /// Ports (and their devices) the region was DMA-mapped for.
    mapped: Vec<(Port, *mut dpdk_sys::rte_device)>,
    /// Ports using the region without DMA mapping (virtual devices), kept for symmetry.
    _ports: Vec<Port>,
    _eal: Eal,
}

// SAFETY: the raw pointers are the registered region (immutable facts about a mapping that the
// `mem` value keeps alive) and device handles used only for the final unmap; DPDK's extmem and
// DMA-map calls are thread-safe.
unsafe impl Send for ExtRegion {}
// SAFETY: see Send; no interior mutability.
unsafe impl Sync for ExtRegion {}

impl std::fmt::Debug for ExtRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtRegion")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("iova", &self.iova)
            .field("dma_mapped_ports", &self.mapped.len())
            .finish()
    }
}

const BAD_IOVA: u64 = u64::MAX;

impl ExtRegion {
    /// Register `mem` with DPDK and DMA-map it for each of `ports` that needs it. Fails with
    /// `EINVAL` for an empty or misaligned region, `ENOTSUP` when a port DMAs and EAL runs
    /// with IOVA as PA, or DPDK's error from `rte_extmem_register` / `rte_dev_dma_map`.
    pub fn register(
        eal: &Eal,
        mem: Arc<dyn ExternalMemory>,
        ports: &[&Port],
    ) -> Result<Arc<ExtRegion>, DpdkError> {
        let base = mem.base() as *mut u8;
        let len = mem.len();
        let page = mem.page_size();
        if len == 0 || !page.is_power_of_two() || !(base as usize).is_multiple_of(page) {
            return Err(DpdkError::new(
                format!(
                    "external memory at {base:?} ({len} bytes, page {page}): must be non-empty and page-aligned"
                ),
                libc::EINVAL,
            ));
        }
        let reg_len = len.div_ceil(page) * page;
        let dma_ports: Vec<&Port> = ports
            .iter()
            .copied()
            .filter(|p| !p.info().is_virtual)
            .collect();
        let va = eal.iova_mode() == IovaMode::Va;
        if !dma_ports.is_empty() && !va {
            return Err(DpdkError::new(
                format!(
                    "zero-copy TX on {} needs EAL IOVA mode VA (vfio with IOMMU or --iova-mode=va); this EAL runs IOVA as PA",
                    dma_ports[0].info().name
                ),
                libc::ENOTSUP,
            ));
        }
        let n_pages = reg_len / page;
        // IOVA=VA: each page's IO address is its virtual address.
        let mut iovas: Vec<u64> = if va {
            (0..n_pages)
                .map(|i| base as u64 + (i * page) as u64)
                .collect()
        } else {
            Vec::new()
        };
        let iova_ptr = if va {
            iovas.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        let n = u32::try_from(if va { n_pages } else { 0 })
            .map_err(|_| DpdkError::new("external memory: too many pages", libc::EINVAL))?;
        // SAFETY: EAL is initialised (we hold `eal`); [base, base + reg_len) is mapped for as
        // long as `mem` lives (ExternalMemory contract; the mapping is page-granular, so the
        // rounded-up tail is mapped too); iovas holds n entries or is NULL with n = 0.
        let rc = unsafe { dpdk_sys::rte_extmem_register(base.cast(), reg_len, iova_ptr, n, page) };
        if rc < 0 {
            return Err(DpdkError::from_errno(format!(
                "rte_extmem_register({base:?}, {reg_len})"
            )));
        }
        let mut region = ExtRegion {
            mem,
            base,
            len,
            reg_len,
            iova: if va { base as u64 } else { BAD_IOVA },
            mapped: Vec::new(),
            _ports: ports
                .iter()
                .filter(|p| p.info().is_virtual)
                .map(|p| (*p).clone())
                .collect(),
            _eal: eal.clone(),
        };
        for p in dma_ports {
            let dev = p.device_ptr();
            // SAFETY: the memory was registered above; dev is the probed device of a port we
            // hold open; iova == va in this mode.
            let rc = unsafe { dpdk_sys::rte_dev_dma_map(dev, base.cast(), base as u64, reg_len) };
            if rc < 0 {
                // Dropping `region` unmaps what was mapped and unregisters.
                return Err(DpdkError::from_errno(format!(
                    "rte_dev_dma_map({}, {reg_len} bytes)",
                    p.info().name
                )));
            }
            region.mapped.push((p.clone(), dev));
        }
        Ok(Arc::new(region))
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never, once registered).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory value the region keeps alive.
    pub fn memory(&self) -> &Arc<dyn ExternalMemory> {
        &self.mem
    }

    /// Whether the region was DMA-mapped for at least one device.
    pub fn is_dma_mapped(&self) -> bool {
        !self.mapped.is_empty()
    }
}

impl Drop for ExtRegion {
    fn drop(&mut self) {
        for (p, dev) in self.mapped.drain(..) {
            // SAFETY: mapped in `register` for this device, which is still open (we hold p).
            let rc = unsafe {
                dpdk_sys::rte_dev_dma_unmap(dev, self.base.cast(), self.base as u64, self.reg_len)
            };
            if rc < 0 {
                tracing::warn!(port = %p.info().name, "rte_dev_dma_unmap: {}", crate::error::strerror(crate::eal::errno()));
            }
        }
        // SAFETY: registered in `register`; no pin (hence no mbuf) refers to it any more,
        // since each pin holds an Arc of this region.
        let rc = unsafe { dpdk_sys::rte_extmem_unregister(self.base.cast(), self.reg_len) };
        if rc < 0 {
            tracing::warn!(
                "rte_extmem_unregister: {}",
                crate::error::strerror(crate::eal::errno())
            );
        }
    }
}

/// What DPDK's free callback finds through `fcb_opaque`: the shared info DPDK counts in, the
/// region to keep alive, and the owner's completion.
#[repr(C)]
struct PinShared {
    shinfo: dpdk_sys::rte_mbuf_ext_shared_info,
    region: Arc<ExtRegion>,
    on_release: Option<Box<dyn FnOnce() + Send>>,
}

/// A completion handle for payload mbufs attached to an [`ExtRegion`]. See the module docs.
///
/// `Send` (move it with the FPDU log entry), not `Sync`, not `Clone`.
pub struct ExtPin {
    shared: NonNull<PinShared>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

// SAFETY: the shared block is only touched through atomic refcount operations and, once, by
// whoever drops the last reference; the closure and region it holds are Send.
unsafe impl Send for ExtPin {}

impl std::fmt::Debug for ExtPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtPin")
            .field("attached", &self.attached())
            .finish()
    }
}

/// Why [`ExtPin::attach`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The range is empty, longer than [`MAX_ATTACH`], or outside the region.
    #[error("range outside the region or longer than 65535 bytes")]
    BadRange,
    /// The pool is empty.
    #[error("mbuf pool empty")]
    NoMbuf,
    /// The pin already holds 65533 attached mbufs.
    #[error("too many mbufs attached through one pin")]
    TooMany,
}

impl ExtPin {
    /// A pin on `region`; `on_release` runs once when the pin is dropped and every mbuf
    /// attached through it is freed.
    pub fn new(region: &Arc<ExtRegion>, on_release: impl FnOnce() + Send + 'static) -> ExtPin {
        let shared = Box::new(PinShared {
            shinfo: dpdk_sys::rte_mbuf_ext_shared_info {
                free_cb: Some(pin_free_cb),
                fcb_opaque: std::ptr::null_mut(),
                refcnt: 1, // the pin itself
            },
            region: region.clone(),
            on_release: Some(Box::new(on_release)),
        });
        let p = Box::into_raw(shared);
        // SAFETY: p is the live box just leaked; the callback finds it through fcb_opaque.
        unsafe { (*p).shinfo.fcb_opaque = p.cast() };
        ExtPin {
            // SAFETY: Box::into_raw never returns NULL.
            shared: unsafe { NonNull::new_unchecked(p) },
            _not_sync: std::marker::PhantomData,
        }
    }

    fn refcnt(&self) -> &AtomicU16 {
        // SAFETY: the block lives while we hold a reference (we are one); DPDK updates the
        // counter atomically (rte_mbuf_ext_refcnt_update), so we do too; u16 alignment holds.
        unsafe {
            AtomicU16::from_ptr(std::ptr::addr_of_mut!(
                (*self.shared.as_ptr()).shinfo.refcnt
            ))
        }
    }

    /// Mbufs attached through this pin and not yet freed.
    pub fn attached(&self) -> u16 {
        self.refcnt().load(Ordering::Acquire).saturating_sub(1)
    }

    /// The region this pin holds.
    pub fn region(&self) -> &Arc<ExtRegion> {
        // SAFETY: the block lives while we hold a reference; `region` is never written after
        // creation.
        unsafe { &(*self.shared.as_ptr()).region }
    }

    /// An mbuf from `pool` whose data is `region[offset .. offset + len]` (no copy).
    pub fn attach(
        &self,
        pool: &Mempool,
        offset: usize,
        len: usize,
    ) -> Result<ExtMbuf, AttachError> {
        let region = self.region();
        let end = offset.checked_add(len).ok_or(AttachError::BadRange)?;
        if len == 0 || len > MAX_ATTACH || end > region.len {
            return Err(AttachError::BadRange);
        }
        // Only this thread adds references (the pin is not Sync) and others only remove them,
        // so the limit check and the increment need not be one atomic step.
        let rc = self.refcnt();
        if rc.load(Ordering::Relaxed) >= PIN_REF_LIMIT {
            return Err(AttachError::TooMany);
        }
        let m = pool.alloc().ok_or(AttachError::NoMbuf)?;
        // Count the mbuf before DPDK can see it.
        rc.fetch_add(1, Ordering::Relaxed);
        let iova = if region.iova == BAD_IOVA {
            BAD_IOVA
        } else {
            region.iova + offset as u64
        };
        let raw = m.into_raw();
        // SAFETY: raw is a fresh direct mbuf we own (refcount 1); [base + offset, + len) lies in
        // the registered region (checked), which the pin keeps alive until the mbuf is freed
        // (its reference was counted above); shinfo lives in the pin's block, freed only by
        // the last reference.
        unsafe {
            dpdk_sys::shim_attach_extbuf(
                raw,
                region.base.add(offset).cast(),
                iova,
                len as u16,
                std::ptr::addr_of_mut!((*self.shared.as_ptr()).shinfo),
            );
        }
        // SAFETY: still uniquely ours; its head is now external, which is why it is wrapped
        // in ExtMbuf (only ever chained behind a pool-memory head).
        Ok(ExtMbuf(unsafe {
            Mbuf::from_raw(NonNull::new_unchecked(raw))
        }))
    }
}

impl Drop for ExtPin {
    fn drop(&mut self) {
        // Same protocol as DPDK's rte_mbuf_ext_refcnt_update(shinfo, -1): whoever takes the
        // count to zero runs the release.
        if self.refcnt().fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: we dropped the last reference: nobody else can reach the block.
            unsafe { release(self.shared.as_ptr()) }
        }
    }
}

/// DPDK's `free_cb`, called by the free of the last attached mbuf once the pin is gone.
unsafe extern "C" fn pin_free_cb(_addr: *mut c_void, opaque: *mut c_void) {
    // DPDK may have read the count with a relaxed load (its refcount-1 fast path): pair with
    // the other holders' release decrements before touching the block.
    fence(Ordering::Acquire);
    // SAFETY: opaque is the PinShared whose last reference DPDK just dropped.
    unsafe { release(opaque.cast()) }
}

/// Free the block and run the owner's completion.
///
/// # Safety
/// `p` is a `PinShared` from `ExtPin::new` with no reference left; called once.
unsafe fn release(p: *mut PinShared) {
    // SAFETY: see the function contract.
    let shared = unsafe { Box::from_raw(p) };
    let PinShared {
        region, on_release, ..
    } = *shared;
    if let Some(f) = on_release {
        f();
    }
    drop(region);
}

/// An mbuf attached to external memory (see [`ExtPin::attach`]). It can only become part of a
/// packet behind a pool-memory head: [`Mbuf::chain_ext`]. Dropping it frees the mbuf and
/// releases its reference on the pin.
#[derive(Debug)]
pub struct ExtMbuf(Mbuf);

impl ExtMbuf {
    /// Bytes it carries.
    pub fn len(&self) -> usize {
        self.0.data_len()
    }

    /// Whether it carries no bytes (never: attach refuses empty ranges).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Mbuf {
    /// Append an external-memory segment to this packet. Gives it back when the chain would
    /// exceed DPDK's segment limit.
    pub fn chain_ext(&mut self, seg: ExtMbuf) -> Result<(), ExtMbuf> {
        self.chain(seg.0).map_err(ExtMbuf)
    }
}
