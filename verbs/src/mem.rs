//! Shared segments and memory regions.
//!
//! Every byte the daemon places or sends lives in a shared segment (a sealed memfd mapped by
//! this process and by `iwarpd`): that is what lets the dataplane copy received payload
//! straight into application memory and send from it without a copy. A memory region is a
//! range of a segment registered in a protection domain.
//!
//! The memory is shared with another process (or, in embedded mode, with the dataplane
//! thread) that writes it while a receive, a Read or a remote Write is outstanding, so this
//! module hands out copies ([`Mr::read`], [`Mr::write`]) and raw pointers, and slices only
//! through the `unsafe` [`Mr::as_slice`]/[`Mr::as_mut_slice`] whose contract is the usual
//! RDMA rule: do not touch memory the device may be accessing.

use crate::device::{Device, unexpected};
use crate::error::{Error, Result};
use crate::pd::Pd;
use abi::Sge;
use abi::ctl::{Request, Response, SegmentId, access};
use std::sync::Arc;

/// Access rights of a memory region (bits of `abi::ctl::access`); combine with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// Local read only (send sources).
    pub const LOCAL_READ: Access = Access(access::LOCAL_READ);
    /// The device may write it locally (receive buffers, Read and atomic sinks).
    pub const LOCAL_WRITE: Access = Access(access::LOCAL_WRITE);
    /// The peer may read it (RDMA Read source).
    pub const REMOTE_READ: Access = Access(access::REMOTE_READ);
    /// The peer may write it (RDMA Write sink).
    pub const REMOTE_WRITE: Access = Access(access::REMOTE_WRITE);
    /// The peer may run atomics on it (RFC 7306).
    pub const REMOTE_ATOMIC: Access = Access(access::REMOTE_ATOMIC);
    /// The peer may invalidate its STag with Send with Invalidate (RFC 5040 §6.4).
    pub const REMOTE_INVALIDATE: Access = Access(access::REMOTE_INVALIDATE);
    /// Every right.
    pub const ALL: Access = Access(access::ALL);

    /// True when every bit of `other` is set.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// A segment and its registration with the daemon; detached when the last user drops it.
#[derive(Debug)]
pub(crate) struct SegmentInner {
    pub(crate) shm: Arc<shm::Segment>,
    pub(crate) id: SegmentId,
    pub(crate) dev: Device,
}

impl Drop for SegmentInner {
    fn drop(&mut self) {
        if let Err(e) = self.dev.call(&Request::DetachSegment { segment: self.id }) {
            tracing::debug!(segment = %self.id, "detach: {e}");
        }
    }
}

/// A shared segment: memory mapped by this process and by the daemon.
///
/// Memory regions ([`Pd::reg_mr`]), and the rings of CQs and QPs, live in segments. The
/// segment stays mapped while any region on it lives.
#[derive(Debug, Clone)]
pub struct Segment {
    pub(crate) inner: Arc<SegmentInner>,
}

impl Segment {
    pub(crate) fn alloc(dev: &Device, len: usize, policy: shm::HugepagePolicy) -> Result<Segment> {
        if len == 0 {
            return Err(Error::InvalidArgument(
                "segment length 0: must be at least 1 byte".into(),
            ));
        }
        let seg = shm::Segment::create("iwarp-verbs", len as u64, policy)?;
        let r = dev.call_fd(
            &Request::AttachSegment {
                len: seg.len() as u64,
            },
            seg.fd(),
        )?;
        let Response::Segment { segment } = r else {
            return Err(unexpected("AttachSegment", &r));
        };
        let inner = Arc::new(SegmentInner {
            shm: Arc::new(seg),
            id: segment,
            dev: dev.clone(),
        });
        let mut segs = dev.inner.segments.lock().unwrap_or_else(|e| e.into_inner());
        segs.retain(|w| w.strong_count() > 0);
        segs.push(Arc::downgrade(&inner));
        Ok(Segment { inner })
    }

    /// Length in bytes (rounded up to the page size).
    pub fn len(&self) -> usize {
        self.inner.shm.len()
    }

    /// Never true (segments are at least one page).
    pub fn is_empty(&self) -> bool {
        self.inner.shm.is_empty()
    }

    /// First byte of this process's mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.shm.as_ptr()
    }

    /// True when backed by hugepages.
    pub fn is_huge(&self) -> bool {
        self.inner.shm.backing() == shm::Backing::Hugepages
    }

    /// Copy `src` into the segment at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        if self.inner.shm.write_at(offset as u64, src) {
            Ok(())
        } else {
            Err(self.range_err(offset, src.len()))
        }
    }

    /// Copy bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        if self.inner.shm.read_at(offset as u64, dst) {
            Ok(())
        } else {
            Err(self.range_err(offset, dst.len()))
        }
    }

    fn range_err(&self, offset: usize, len: usize) -> Error {
        Error::OutOfRange {
            what: "segment",
            offset: offset as u64,
            len: len as u64,
            size: self.len() as u64,
        }
    }

    /// The segment holding `addr..addr+len` among `dev`'s live segments, with the offset.
    pub(crate) fn find(dev: &Device, addr: usize, len: usize) -> Option<(Segment, usize)> {
        let segs = dev.inner.segments.lock().unwrap_or_else(|e| e.into_inner());
        segs.iter().filter_map(|w| w.upgrade()).find_map(|s| {
            let base = s.shm.as_ptr() as usize;
            let end = base + s.shm.len();
            (addr >= base && addr.checked_add(len).is_some_and(|e| e <= end))
                .then(|| (Segment { inner: s }, addr - base))
        })
    }
}

/// A memory region: `len` bytes of a shared segment registered in a protection domain.
///
/// Deregistered when dropped (its STag is invalid from then on). Build local SGEs with
/// [`Mr::sge`]; give the peer [`Mr::remote`] (tagged offset and STag) for RDMA Read, Write
/// and atomics.
///
/// ```no_run
/// use verbs::{Access, Device};
/// let dev = Device::open_default()?;
/// let pd = dev.alloc_pd()?;
/// let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
/// mr.write(0, b"hello")?;
/// let sge = mr.sge(0, 5)?;
/// let remote = mr.remote();
/// # let _ = (sge, remote);
/// # Ok::<(), verbs::Error>(())
/// ```
#[derive(Debug)]
pub struct Mr {
    seg: Segment,
    offset: usize,
    len: usize,
    lkey: u32,
    rkey: u32,
    access: Access,
    pd: Pd,
}

impl Mr {
    pub(crate) fn register(
        pd: &Pd,
        seg: &Segment,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<Mr> {
        if access.0 & !Access::ALL.0 != 0 {
            return Err(Error::InvalidArgument(format!(
                "access bits {:#x}: allowed bits are {:#x}",
                access.0,
                Access::ALL.0
            )));
        }
        if offset.checked_add(len).is_none_or(|e| e > seg.len()) {
            return Err(Error::OutOfRange {
                what: "segment",
                offset: offset as u64,
                len: len as u64,
                size: seg.len() as u64,
            });
        }
        let r = pd.dev().call(&Request::RegMr {
            pd: pd.id(),
            segment: seg.inner.id,
            offset: offset as u64,
            len: len as u64,
            // Tagged offsets are this process's virtual addresses, as with ibverbs, so an
            // application can advertise a pointer (rping does).
            iova: seg.as_ptr() as u64 + offset as u64,
            access: access.0 | access::LOCAL_READ,
        })?;
        let Response::Mr { lkey, rkey } = r else {
            return Err(unexpected("RegMr", &r));
        };
        Ok(Mr {
            seg: seg.clone(),
            offset,
            len,
            lkey,
            rkey,
            access,
            pd: pd.clone(),
        })
    }

    /// Local key (for SGEs).
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Remote key: the STag the peer uses for Read, Write and atomics.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access rights it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The protection domain.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The segment it lives in.
    pub fn segment(&self) -> &Segment {
        &self.seg
    }

    /// Tagged offset of the first byte as the peer must address it: this process's virtual
    /// address of it (as with ibverbs' `mr->addr`).
    pub fn remote_addr(&self) -> u64 {
        self.as_ptr() as u64
    }

    /// What the peer needs to address this region remotely.
    pub fn remote(&self) -> RemoteMr {
        RemoteMr {
            addr: self.remote_addr(),
            rkey: self.rkey,
            len: self.len as u64,
        }
    }

    /// A local SGE for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: usize) -> Result<Sge> {
        self.check(offset, len)?;
        let len32 = u32::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!("SGE of {len} bytes: at most {} allowed", u32::MAX))
        })?;
        Ok(Sge {
            lkey: self.lkey,
            len: len32,
            offset: offset as u64,
        })
    }

    /// An SGE over the whole region (at most 4 GiB - 1).
    pub fn sge_all(&self) -> Result<Sge> {
        self.sge(0, self.len)
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Error::OutOfRange {
                what: "memory region",
                offset: offset as u64,
                len: len as u64,
                size: self.len as u64,
            });
        }
        Ok(())
    }

    /// Copy `src` into the region at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        self.seg.write(self.offset + offset, src)
    }

    /// Copy bytes at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        self.seg.read(self.offset + offset, dst)
    }

    /// A copy of `len` bytes at `offset`.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Set every byte to `b`.
    pub fn fill(&self, b: u8) -> Result<()> {
        let chunk = [b; 4096];
        let mut off = 0;
        while off < self.len {
            let n = chunk.len().min(self.len - off);
            self.write(off, &chunk[..n])?;
            off += n;
        }
        Ok(())
    }

    /// Load the byte at `offset` with an atomic (`Acquire`) load: the way to poll memory the
    /// peer writes with RDMA Write (a plain read could be hoisted out of a polling loop).
    pub fn load_u8(&self, offset: usize) -> Result<u8> {
        self.check(offset, 1)?;
        // SAFETY: offset is inside the region (checked), so the pointer is inside the mapping,
        // which lives as long as `self`; AtomicU8 has alignment 1 and may alias memory that
        // other threads or processes write (the dataplane's writes make the value unspecified,
        // never undefined, as for any shared mapping).
        let a = unsafe { std::sync::atomic::AtomicU8::from_ptr(self.as_ptr().add(offset)) };
        Ok(a.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Load the native-endian `u64` at `offset` (8-byte aligned in the segment) atomically,
    /// e.g. a counter updated by remote atomics.
    pub fn load_u64(&self, offset: usize) -> Result<u64> {
        self.check(offset, 8)?;
        let p = self.as_ptr().wrapping_add(offset);
        if !(p as usize).is_multiple_of(8) {
            return Err(Error::InvalidArgument(format!(
                "load_u64 at offset {offset}: not 8-byte aligned"
            )));
        }
        // SAFETY: in bounds (checked) and 8-aligned (checked), inside a mapping that outlives
        // the borrow; AtomicU64 may alias memory written concurrently by the dataplane.
        let a = unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast::<u64>()) };
        Ok(a.load(std::sync::atomic::Ordering::Acquire))
    }

    /// First byte in this process.
    pub fn as_ptr(&self) -> *mut u8 {
        // offset <= segment length (checked at registration), so this stays in the mapping.
        self.seg.as_ptr().wrapping_add(self.offset)
    }

    /// The region as a slice.
    ///
    /// # Safety
    ///
    /// While the slice lives, the device must not write the region: no receive, Read or
    /// atomic with a sink in it may be outstanding, and the peer must not be writing it
    /// (remote Write or atomic) — the rule every RDMA application follows for memory the
    /// device owns.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as `self` (it holds the segment), offset+len is
        // inside it (checked at registration), and the caller promises no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The region as a mutable slice.
    ///
    /// # Safety
    ///
    /// As for [`Mr::as_slice`], and in addition the device must not read it meanwhile (no
    /// Send or Write from it outstanding, no remote Read of it), and no other slice of the
    /// same bytes may exist.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        // SAFETY: as in as_slice; exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len) }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if let Err(e) = self.pd.dev().call(&Request::DeregMr { lkey: self.lkey }) {
            tracing::debug!(lkey = self.lkey, "dereg: {e}");
        }
    }
}

/// A peer's region as it advertised it: tagged offset, STag and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoteMr {
    /// Tagged offset of its first byte.
    pub addr: u64,
    /// Its STag.
    pub rkey: u32,
    /// Its length.
    pub len: u64,
}

impl RemoteMr {
    /// The tagged offset `offset` bytes in.
    pub fn at(&self, offset: u64) -> u64 {
        self.addr.wrapping_add(offset)
    }

    /// 16 bytes, big-endian: addr (8), rkey (4), len (4, saturated) — the layout rping uses.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&u32::try_from(self.len).unwrap_or(u32::MAX).to_be_bytes());
        b
    }

    /// Parse [`RemoteMr::to_bytes`]'s layout.
    pub fn from_bytes(b: &[u8; 16]) -> RemoteMr {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        let mut k = [0u8; 4];
        k.copy_from_slice(&b[8..12]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&b[12..]);
        RemoteMr {
            addr: u64::from_be_bytes(a),
            rkey: u32::from_be_bytes(k),
            len: u64::from(u32::from_be_bytes(l)),
        }
    }
}
