//! STags and the memory-table seam (RFC 5040 §5, RFC 5041 §3, RFC 5042 §5).
//!
//! Heads up: read RFC 5042 §5.1 (STag guessing, key) and RFC 5041 §3.1 before editing.
//!
//! An STag is a 24-bit index (chosen at random among free indices) shifted left by 8 and an
//! 8-bit key that changes every time the index is reused, so a stale or guessed STag fails the
//! lookup (RFC 5042 §5.1.2). The crate decides *where* bytes go and *whether* an access is
//! allowed; it never touches application memory: it calls [`Placer`], which the dataplane
//! implements with the real copy (and `testing::VecMemory` over `Vec<u8>`).

use std::collections::HashMap;

use netcore::Rng;
use netcore::crc::Crc32c;

use crate::error::AccessError;

/// A steering tag: `index << 8 | key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stag(pub u32);

impl Stag {
    /// The 24-bit index part.
    pub fn index(self) -> u32 {
        self.0 >> 8
    }
    /// The 8-bit key part (consumer owned, RFC 5040 §5).
    pub fn key(self) -> u8 {
        (self.0 & 0xff) as u8
    }
    /// Compose an STag from index and key.
    pub fn new(index: u32, key: u8) -> Stag {
        Stag((index & 0x00ff_ffff) << 8 | u32::from(key))
    }
}

/// Opaque handle of a registered region, chosen by the memory table's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MrHandle(pub u32);

/// Protection domain identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PdId(pub u32);

/// Access rights of a region (bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u8);

impl Access {
    /// Local read (source of Send/Write payloads).
    pub const LOCAL_READ: Access = Access(0x01);
    /// Local write (receive buffers, Read sinks).
    pub const LOCAL_WRITE: Access = Access(0x02);
    /// Remote read (Read Request source).
    pub const REMOTE_READ: Access = Access(0x04);
    /// Remote write (RDMA Write sink).
    pub const REMOTE_WRITE: Access = Access(0x08);
    /// Remote atomic (RFC 7306).
    pub const REMOTE_ATOMIC: Access = Access(0x10);
    /// Every right.
    pub const ALL: Access = Access(0x1f);

    /// True when every right of `other` is in `self`.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// What the memory table knows about one STag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrInfo {
    /// The STag (index and current key).
    pub stag: Stag,
    /// Region handle for the [`Placer`].
    pub handle: MrHandle,
    /// Protection domain.
    pub pd: PdId,
    /// Rights.
    pub access: Access,
    /// Tagged offset of the first byte (the virtual address for zero-based-off regions).
    pub base_to: u64,
    /// Length in bytes.
    pub len: u64,
    /// False once invalidated (RFC 5040 §6.2: Send with Invalidate, local invalidate).
    pub valid: bool,
    /// May the peer invalidate it (RFC 5040 §6.4: only if so registered)?
    pub remote_invalidate: bool,
}

/// Lookup and invalidation of STags; implemented by the dataplane over its registry.
pub trait MemoryTable {
    /// The region an STag names (the key must match), `None` if unknown.
    fn lookup(&self, stag: Stag) -> Option<MrInfo>;
    /// The region behind a local handle (used for SGEs and Read sinks).
    fn by_handle(&self, mr: MrHandle) -> Option<MrInfo>;
    /// Mark the STag invalid; further accesses fail with [`AccessError::InvalidStag`].
    fn invalidate(&mut self, stag: Stag) -> Result<(), AccessError>;
}

/// RFC 7306 atomic operations, executed on 8 aligned bytes of a region, with the masks of
/// the Atomic Request header (RFC 7306 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// `*p += add`. Each set bit of `add_mask` ends a field: the carry out of that bit is
    /// dropped, so one request adds several independent fields; 0 is a plain 64-bit add.
    FetchAdd {
        /// Addend.
        add: u64,
        /// Field boundaries (0 = one 64-bit field).
        add_mask: u64,
    },
    /// `if *p & compare_mask == compare & compare_mask { *p = (*p & !swap_mask) |
    /// (swap & swap_mask) }`.
    CmpSwap {
        /// Compared value.
        compare: u64,
        /// Bits that take part in the compare.
        compare_mask: u64,
        /// New value.
        swap: u64,
        /// Bits that are replaced.
        swap_mask: u64,
    },
    /// `*p = (*p & !swap_mask) | (swap & swap_mask)`.
    Swap {
        /// New value.
        swap: u64,
        /// Bits that are replaced.
        swap_mask: u64,
    },
}

impl AtomicOp {
    /// Unmasked FetchAdd.
    pub fn fetch_add(add: u64) -> AtomicOp {
        AtomicOp::FetchAdd { add, add_mask: 0 }
    }

    /// Unmasked CompareSwap.
    pub fn cmp_swap(compare: u64, swap: u64) -> AtomicOp {
        AtomicOp::CmpSwap {
            compare,
            compare_mask: u64::MAX,
            swap,
            swap_mask: u64::MAX,
        }
    }

    /// The new value for an original value `orig`.
    pub fn apply(self, orig: u64) -> u64 {
        let merge = |orig: u64, v: u64, m: u64| (orig & !m) | (v & m);
        match self {
            AtomicOp::FetchAdd { add, add_mask: 0 } => orig.wrapping_add(add),
            AtomicOp::FetchAdd { add, add_mask } => {
                let (mut out, mut carry) = (0u64, 0u64);
                for bit in 0..64 {
                    let s = (orig >> bit & 1) + (add >> bit & 1) + carry;
                    out |= (s & 1) << bit;
                    carry = if add_mask >> bit & 1 == 1 { 0 } else { s >> 1 };
                }
                out
            }
            AtomicOp::CmpSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                if orig & compare_mask == compare & compare_mask {
                    merge(orig, swap, swap_mask)
                } else {
                    orig
                }
            }
            AtomicOp::Swap { swap, swap_mask } => merge(orig, swap, swap_mask),
        }
    }
}

/// The data mover the dataplane implements: the only code that touches region bytes.
pub trait Placer {
    /// Copy `data` to region `mr` at byte `offset` (already bounds-checked by the QP).
    ///
    /// With `crc` (a QP whose [`QpConfig::crc_by_placer`](crate::rdmap::QpConfig) is set and
    /// CRC negotiated), the implementation also feeds exactly the bytes of `data`, in order, to
    /// `crc`: the CRC32c of the FPDU is then computed in the same pass as the copy into the
    /// registered region (DESIGN.md §2.4).
    fn place(&mut self, mr: MrHandle, offset: u64, data: &[u8], crc: Option<&mut Crc32c>);
    /// Copy region bytes `[offset, offset + dst.len())` into `dst` (TX copy mode).
    fn read(&self, mr: MrHandle, offset: u64, dst: &mut [u8]);
    /// Execute an atomic on the 8 bytes at `offset` (big-endian on the wire, native in memory:
    /// the implementation decides; the test one uses little-endian) and return the original.
    fn atomic(&mut self, mr: MrHandle, offset: u64, op: AtomicOp) -> u64;
}

/// Check an access of `len` bytes at tagged offset `to` through `stag` (RFC 5042 §5, RFC 5041
/// §7.2 order: STag, PD, rights, bounds). Returns the region and the byte offset inside it.
pub fn check_access(
    table: &dyn MemoryTable,
    stag: Stag,
    pd: PdId,
    need: Access,
    to: u64,
    len: u64,
) -> Result<(MrInfo, u64), AccessError> {
    let info = table.lookup(stag).ok_or(AccessError::InvalidStag)?;
    if !info.valid || info.stag != stag {
        return Err(AccessError::InvalidStag);
    }
    if info.pd != pd {
        return Err(AccessError::PdMismatch);
    }
    if !info.access.contains(need) {
        return Err(AccessError::AccessRights);
    }
    let end = to.checked_add(len).ok_or(AccessError::ToWrap)?;
    let region_end = info
        .base_to
        .checked_add(info.len)
        .ok_or(AccessError::BaseBounds)?;
    if to < info.base_to || end > region_end {
        return Err(AccessError::BaseBounds);
    }
    Ok((info, to - info.base_to))
}

/// Allocates STags: random free index, fresh random key on every reuse (RFC 5042 §5.1.2).
#[derive(Debug, Clone)]
pub struct StagAllocator {
    free: Vec<u32>,
    last_key: HashMap<u32, u8>,
}

impl StagAllocator {
    /// An allocator over indices `1..=capacity` (index 0 is never handed out, so STag 0 —
    /// often used as "none" by peers — never names a region). `capacity` is capped at 2^24-1.
    pub fn new(capacity: u32) -> Self {
        let cap = capacity.min(0x00ff_ffff);
        StagAllocator {
            free: (1..=cap).collect(),
            last_key: HashMap::new(),
        }
    }

    /// A new STag, `None` when every index is in use.
    pub fn alloc(&mut self, rng: &mut dyn Rng) -> Option<Stag> {
        if self.free.is_empty() {
            return None;
        }
        let pick = (rng.next_u64() % self.free.len() as u64) as usize;
        let index = self.free.swap_remove(pick);
        let mut key = (rng.next_u32() & 0xff) as u8;
        if let Some(&prev) = self.last_key.get(&index)
            && key == prev
        {
            key = key.wrapping_add(1 + (rng.next_u32() % 255) as u8);
        }
        self.last_key.insert(index, key);
        Some(Stag::new(index, key))
    }

    /// Return an STag's index to the pool (its key is remembered so the next one differs).
    pub fn free(&mut self, stag: Stag) {
        let index = stag.index();
        if index != 0 && !self.free.contains(&index) && self.last_key.contains_key(&index) {
            self.free.push(index);
        }
    }

    /// Number of free indices.
    pub fn available(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netcore::rng::Xoshiro256;

    #[test]
    fn reused_index_gets_new_key() {
        let mut rng = Xoshiro256::seed_from_u64(1);
        let mut a = StagAllocator::new(1);
        for _ in 0..200 {
            let s1 = a.alloc(&mut rng).unwrap();
            assert!(a.alloc(&mut rng).is_none());
            a.free(s1);
            let s2 = a.alloc(&mut rng).unwrap();
            assert_eq!(s1.index(), s2.index());
            assert_ne!(s1.key(), s2.key());
            a.free(s2);
        }
    }

    #[test]
    fn indices_are_random_and_nonzero() {
        let mut rng = Xoshiro256::seed_from_u64(2);
        let mut a = StagAllocator::new(1000);
        let v: Vec<Stag> = (0..10).map(|_| a.alloc(&mut rng).unwrap()).collect();
        assert!(v.iter().all(|s| s.index() != 0));
        let sequential = v.windows(2).all(|w| w[1].index() == w[0].index() + 1);
        assert!(!sequential);
    }

    #[test]
    fn atomic_ops() {
        assert_eq!(AtomicOp::fetch_add(5).apply(u64::MAX), 4);
        assert_eq!(AtomicOp::cmp_swap(3, 9).apply(3), 9);
        assert_eq!(AtomicOp::cmp_swap(3, 9).apply(4), 4);
        assert_eq!(
            AtomicOp::Swap {
                swap: 7,
                swap_mask: !0
            }
            .apply(4),
            7
        );
        // Two 32-bit fields: the low field's carry does not reach the high one.
        let op = AtomicOp::FetchAdd {
            add: 0x0000_0001_0000_0001,
            add_mask: 0x8000_0000_8000_0000,
        };
        assert_eq!(op.apply(0x0000_0005_ffff_ffff), 0x0000_0006_0000_0000);
        // Compare and swap only the low byte.
        let op = AtomicOp::CmpSwap {
            compare: 0x11,
            compare_mask: 0xff,
            swap: 0x22,
            swap_mask: 0xff,
        };
        assert_eq!(op.apply(0xab11), 0xab22);
        assert_eq!(op.apply(0xab12), 0xab12);
    }
}
