//! memfd segments mapped `MAP_SHARED` by the client and the daemon.
//!
//! The creator seals the memfd against shrinking (`F_SEAL_SHRINK`) before passing it on, and
//! [`Segment::from_fd`] refuses an fd without that seal: otherwise a client could truncate the
//! file under the daemon's mapping and every later access by a dataplane thread would raise
//! `SIGBUS`.

use crate::{cvt, last_err};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Size of a 2 MiB hugepage.
pub const HUGEPAGE: usize = 2 << 20;

/// What backs a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB hugepages (`MFD_HUGETLB`).
    Hugepages,
    /// Ordinary 4 KiB pages.
    Plain,
}

/// Whether to try hugepages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugepagePolicy {
    /// Hugepages if enough 2 MiB pages are free, else plain pages.
    #[default]
    Auto,
    /// Plain pages only.
    Off,
}

/// Why a segment could not be created or attached.
#[derive(Debug)]
pub enum SegmentError {
    /// A system call failed.
    Os {
        /// Which call.
        call: &'static str,
        /// The OS error.
        err: std::io::Error,
    },
    /// The fd's size is not the size announced.
    SizeMismatch {
        /// Announced.
        expected: u64,
        /// `fstat` size.
        actual: u64,
    },
    /// The fd is not sealed against shrinking.
    NotSealed,
    /// Zero or too large a size.
    BadSize(u64),
}

impl core::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SegmentError::Os { call, err } => write!(f, "{call}: {err}"),
            SegmentError::SizeMismatch { expected, actual } => write!(
                f,
                "segment fd is {actual} bytes, the request says {expected}"
            ),
            SegmentError::NotSealed => write!(
                f,
                "segment fd is not a memfd sealed with F_SEAL_SHRINK (create it with shm::Segment::create)"
            ),
            SegmentError::BadSize(n) => write!(f, "segment size {n} is not allowed"),
        }
    }
}

impl std::error::Error for SegmentError {}

fn os(call: &'static str) -> impl FnOnce(std::io::Error) -> SegmentError {
    move |err| SegmentError::Os { call, err }
}

/// Largest segment (1 TiB).
pub const MAX_SEGMENT: u64 = 1 << 40;

/// Bytes of free 2 MiB hugepages now (0 if none or unknown).
pub fn free_hugepage_bytes() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(0, |n| n * HUGEPAGE as u64)
}

/// A memfd mapped read/write `MAP_SHARED` into this process; unmapped and closed on drop.
///
/// # Send and Sync
///
/// A `Segment` is a pointer to memory that other processes (and other mappings of the same
/// file in this process) read and write concurrently; the type hands out only raw pointers
/// (`base`) and copying accessors, never references into the memory, so moving it to or
/// sharing it with another thread adds nothing the other process does not already do. Rings
/// in it are accessed with atomics only (`abi::ring`); payload bytes are copied with raw
/// copies whose result is unspecified (not undefined) while a peer writes the same bytes,
/// exactly as for RDMA memory a NIC writes.
#[derive(Debug)]
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
    backing: Backing,
}

// SAFETY: see the type docs: the mapping is process-wide, not tied to a thread, and all access
// goes through raw pointers or atomics.
unsafe impl Send for Segment {}
// SAFETY: &Segment only offers base/len/fd and raw copies, which are as safe from several
// threads as from the peer process.
unsafe impl Sync for Segment {}

impl Segment {
    /// Create a sealed memfd of at least `len` bytes and map it. With
    /// [`HugepagePolicy::Auto`] the size is rounded up to 2 MiB and hugepages are used when
    /// enough are free (falling back to plain pages if the kernel refuses); [`Segment::backing`]
    /// tells which.
    pub fn create(name: &str, len: u64, policy: HugepagePolicy) -> Result<Segment, SegmentError> {
        if len == 0 || len > MAX_SEGMENT {
            return Err(SegmentError::BadSize(len));
        }
        let huge_len = len.div_ceil(HUGEPAGE as u64) * HUGEPAGE as u64;
        if policy == HugepagePolicy::Auto
            && free_hugepage_bytes() >= huge_len
            && let Ok(s) = Self::create_with(name, huge_len, Backing::Hugepages)
        {
            return Ok(s);
        }
        let page = 4096u64;
        Self::create_with(name, len.div_ceil(page) * page, Backing::Plain)
    }

    fn create_with(name: &str, len: u64, backing: Backing) -> Result<Segment, SegmentError> {
        let cname = CString::new(name.replace('\0', "")).unwrap_or_default();
        let mut flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        if backing == Backing::Hugepages {
            flags |= libc::MFD_HUGETLB | libc::MFD_HUGE_2MB;
        }
        // SAFETY: cname is a valid NUL-terminated string for the duration of the call.
        let raw = cvt(unsafe { libc::memfd_create(cname.as_ptr(), flags) })
            .map_err(os("memfd_create"))?;
        // SAFETY: memfd_create returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let off = libc::off_t::try_from(len).map_err(|_| SegmentError::BadSize(len))?;
        // SAFETY: fd is a valid memfd we own.
        cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), off) }).map_err(os("ftruncate"))?;
        // SAFETY: fd is valid; F_ADD_SEALS takes an int of seal bits.
        cvt(unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL,
            )
        })
        .map_err(os("fcntl(F_ADD_SEALS)"))?;
        Self::map(fd, len, backing)
    }

    /// Map a segment received from a client: the fd must be sealed against shrinking and its
    /// size must be exactly `expected_len`.
    pub fn from_fd(fd: OwnedFd, expected_len: u64) -> Result<Segment, SegmentError> {
        if expected_len == 0 || expected_len > MAX_SEGMENT {
            return Err(SegmentError::BadSize(expected_len));
        }
        // SAFETY: fd is a valid fd we own; F_GET_SEALS takes no argument.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals == -1 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(SegmentError::NotSealed);
        }
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: st points to writable storage for a stat struct; fd is valid.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) }).map_err(os("fstat"))?;
        // SAFETY: fstat succeeded, so it filled the struct.
        let st = unsafe { st.assume_init() };
        let actual = u64::try_from(st.st_size).unwrap_or(0);
        if actual != expected_len {
            return Err(SegmentError::SizeMismatch {
                expected: expected_len,
                actual,
            });
        }
        let backing = if st.st_blksize as usize >= HUGEPAGE {
            Backing::Hugepages
        } else {
            Backing::Plain
        };
        Self::map(fd, expected_len, backing)
    }

    fn map(fd: OwnedFd, len: u64, backing: Backing) -> Result<Segment, SegmentError> {
        let len = usize::try_from(len).map_err(|_| SegmentError::BadSize(len))?;
        // SAFETY: a fresh shared mapping of a valid fd at an address the kernel chooses; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SegmentError::Os {
                call: "mmap",
                err: last_err(),
            });
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(SegmentError::Os {
            call: "mmap",
            err: std::io::Error::other("null mapping"),
        })?;
        Ok(Segment {
            ptr,
            len,
            fd,
            backing,
        })
    }

    /// Length in bytes (page-rounded).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty segment (never: creation refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hugepages or plain pages.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// The memfd (to pass with `SCM_RIGHTS`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// First byte of the mapping. Dereferencing it is the caller's business (`unsafe`).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// First byte of the mapping, never null.
    pub fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
    }

    /// True when `offset..offset+len` lies inside the segment.
    pub fn contains(&self, offset: u64, len: u64) -> bool {
        offset
            .checked_add(len)
            .is_some_and(|end| end <= self.len as u64)
    }

    /// Copy `src` into the segment at `offset`; `false` (nothing copied) if out of range.
    pub fn write_at(&self, offset: u64, src: &[u8]) -> bool {
        if !self.contains(offset, src.len() as u64) {
            return false;
        }
        // SAFETY: the range is inside the mapping (checked), which stays mapped while &self
        // lives; src cannot overlap it (src is a Rust slice, the mapping is never exposed as
        // one). Concurrent writers make the bytes unspecified, not the program undefined: the
        // mapping is only accessed through raw pointers and atomics.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.ptr.as_ptr().add(offset as usize),
                src.len(),
            );
        }
        true
    }

    /// Copy bytes at `offset` into `dst`; `false` (nothing copied) if out of range.
    pub fn read_at(&self, offset: u64, dst: &mut [u8]) -> bool {
        if !self.contains(offset, dst.len() as u64) {
            return false;
        }
        // SAFETY: as in write_at, with the roles of source and destination swapped.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset as usize),
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
        true
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the mapping made in `map`, unmapped once here; no
        // reference into it can outlive self (none is ever handed out).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: base() is the start of a page-aligned (so 64-byte aligned) MAP_SHARED mapping of len
// bytes that stays mapped until the Segment is dropped; the file is sealed against shrinking,
// so the pages cannot disappear under it.
unsafe impl abi::ring::SharedMemory for Segment {
    fn base(&self) -> *mut u8 {
        self.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}
