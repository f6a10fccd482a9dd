//! Single-producer single-consumer rings over shared memory (docs/rdma-seams.md, "Rings").
//!
//! Layout of one ring at a 64-byte aligned `offset` of a shared segment:
//!
//! ```text
//! offset +   0  head: u32 (free running, written by the producer only)   own cache line
//! offset +  64  tail: u32 (free running, written by the consumer only)   own cache line
//! offset + 128  entries[n]: T, n a power of two; entry i lives at slot i & (n - 1)
//! ```
//!
//! The producer writes the entry, then publishes it by storing `head + 1` with `Release`; the
//! consumer loads `head` with `Acquire`, reads the entry, then frees the slot by storing
//! `tail + 1` with `Release` (the producer loads `tail` with `Acquire`). Each side keeps its own
//! index privately and never trusts the copy in shared memory, which the other process could
//! overwrite: a side that sees `head - tail > n` reports [`RingError::Corrupt`] and the owner
//! puts the QP or CQ in ERROR. Nothing here panics or reads out of bounds on any content of
//! the shared memory.
//!
//! A CQ ([`CqProducer`], [`CqConsumer`]) is a 64-byte header holding the `armed` flag followed
//! by one sub-ring per dataplane thread (each thread is the single producer of its sub-ring).
//!
//! # Soundness
//!
//! Every access to shared memory is an atomic load or store (entries are copied word by word
//! with `Relaxed` 64-bit atomics, ordered by the `Acquire`/`Release` on the indices), so a
//! misbehaving peer, or two handles on one ring in the same process, can produce wrong values
//! but never a data race or an out-of-bounds access. The memory itself is described by
//! [`SharedMemory`], an `unsafe trait` whose implementors (the `shm` crate's `Segment`,
//! [`HeapMemory`]) promise the mapping stays valid while they live.
//!
//! Under the `loom` feature the same algorithm runs over loom's atomics ([`LoomMemory`]),
//! which is how `tests/loom.rs` model-checks it.
#![allow(unsafe_code)]

use crate::{Cqe, RecvWqe, Wqe};
use core::marker::PhantomData;
use core::mem::{MaybeUninit, align_of, size_of};

#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Cache-line size every ring part is aligned to.
pub const CACHE_LINE: usize = 64;
/// Bytes before the first entry of a ring (head line + tail line).
pub const RING_HEADER: usize = 2 * CACHE_LINE;
/// Bytes before the first sub-ring of a CQ (the line holding `armed`).
pub const CQ_HEADER: usize = CACHE_LINE;
/// Most entries of one ring.
pub const MAX_ENTRIES: u32 = 1 << 20;

/// A fixed-size ring entry: plain old data that is copied in and out of shared memory.
///
/// # Safety
///
/// Implementors are `#[repr(C)]`, have an alignment of exactly 8 and a size that is a multiple
/// of 8, contain no padding bytes (every field is an integer or an array of integers, laid out
/// back to back), and accept every bit pattern as a valid value.
pub unsafe trait Entry: Copy + Default + Send + 'static {}

const fn entry_ok<T>() -> bool {
    align_of::<T>() == 8 && size_of::<T>().is_multiple_of(8) && size_of::<T>() > 0
}
const _: () = assert!(entry_ok::<Wqe>() && entry_ok::<RecvWqe>() && entry_ok::<Cqe>());

// SAFETY: Wqe is repr(C), integers only, 128 bytes with every offset asserted in wqe.rs (no
// implicit padding), alignment 8 (asserted above); any bit pattern is a value (the daemon
// validates opcode, flags and SGE count when it decodes).
unsafe impl Entry for Wqe {}
// SAFETY: as for Wqe: repr(C), integers only, 128 bytes, offsets asserted in wqe.rs.
unsafe impl Entry for RecvWqe {}
// SAFETY: as for Wqe: repr(C), integers only, 64 bytes, offsets asserted in cqe.rs.
unsafe impl Entry for Cqe {}

/// Bytes one ring of `entries` entries of `T` takes (header included).
pub const fn ring_bytes<T: Entry>(entries: u32) -> usize {
    RING_HEADER + entries as usize * size_of::<T>()
}

/// Bytes a CQ of `subs` sub-rings of `entries` CQEs each takes.
pub const fn cq_bytes(subs: u32, entries: u32) -> usize {
    CQ_HEADER + subs as usize * ring_bytes::<Cqe>(entries)
}

/// What is wrong with a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RingError {
    /// Entries not a power of two in 1..=[`MAX_ENTRIES`].
    BadSize(u32),
    /// The ring does not fit the memory, or its offset is not 64-byte aligned.
    OutOfBounds {
        /// Requested offset.
        offset: usize,
        /// Bytes the ring needs.
        len: usize,
    },
    /// The indices in shared memory are impossible (`head - tail > entries`): the peer wrote
    /// garbage. The ring must not be used again.
    Corrupt {
        /// Head seen.
        head: u32,
        /// Tail seen.
        tail: u32,
    },
}

impl core::fmt::Display for RingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RingError::BadSize(n) => write!(
                f,
                "ring of {n} entries: must be a power of two in 1..={MAX_ENTRIES}"
            ),
            RingError::OutOfBounds { offset, len } => write!(
                f,
                "ring at offset {offset} ({len} bytes) is misaligned or outside the segment"
            ),
            RingError::Corrupt { head, tail } => {
                write!(f, "ring corrupt: head {head} tail {tail}")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// Why a push did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError {
    /// The ring is full (the consumer is behind); try again later.
    Full,
    /// The ring is corrupt.
    Ring(RingError),
}

impl From<RingError> for PushError {
    fn from(e: RingError) -> Self {
        PushError::Ring(e)
    }
}

/// Memory that holds rings: atomics at byte offsets.
///
/// Implemented for every [`SharedMemory`] (real shared mappings) and, under the `loom`
/// feature, for [`LoomMemory`]. A `None` answer (misaligned or out of bounds) is an error
/// the ring reports, never a panic.
pub trait RingMemory {
    /// The `u32` at `offset` (4-byte aligned, inside the memory).
    fn u32_at(&self, offset: usize) -> Option<&AtomicU32>;
    /// `n` consecutive `u64` words from `offset` (8-byte aligned, inside the memory).
    fn u64s_at(&self, offset: usize, n: usize) -> Option<&[AtomicU64]>;
}

/// A mapping that rings can live in.
///
/// # Safety
///
/// `base()` is 64-byte aligned, and `base()..base() + len()` stays mapped readable and
/// writable for as long as the value (or any clone of it) lives. Anything else that touches
/// those bytes concurrently (the peer process, another mapping of the same file) accesses the
/// ring parts only with atomic operations of the sizes this module uses.
pub unsafe trait SharedMemory {
    /// First byte.
    fn base(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// SAFETY: an Arc keeps its content alive, so base..base+len stays mapped as long as the Arc.
unsafe impl<S: SharedMemory + ?Sized> SharedMemory for std::sync::Arc<S> {
    fn base(&self) -> *mut u8 {
        (**self).base()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

// SAFETY: a shared reference keeps its referent (and so the mapping) alive for its lifetime.
unsafe impl<S: SharedMemory + ?Sized> SharedMemory for &S {
    fn base(&self) -> *mut u8 {
        (**self).base()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

#[cfg(not(feature = "loom"))]
fn in_bounds(len: usize, offset: usize, bytes: usize, align: usize) -> bool {
    offset.is_multiple_of(align) && offset.checked_add(bytes).is_some_and(|end| end <= len)
}

#[cfg(not(feature = "loom"))]
impl<S: SharedMemory + ?Sized> RingMemory for S {
    fn u32_at(&self, offset: usize) -> Option<&AtomicU32> {
        if !in_bounds(self.len(), offset, 4, 4) {
            return None;
        }
        // SAFETY: the trait guarantees base..base+len is mapped read/write and 64-byte aligned
        // while `self` lives (the returned borrow is tied to `&self`); offset is 4-aligned and
        // offset+4 <= len (checked above), so the pointer is valid and aligned for AtomicU32,
        // which has the size and alignment of u32 and may alias memory other threads or
        // processes access atomically.
        Some(unsafe { AtomicU32::from_ptr(self.base().add(offset).cast::<u32>()) })
    }

    fn u64s_at(&self, offset: usize, n: usize) -> Option<&[AtomicU64]> {
        if !in_bounds(self.len(), offset, n.checked_mul(8)?, 8) {
            return None;
        }
        // SAFETY: as in u32_at: offset is 8-aligned and offset + 8n <= len, inside a mapping
        // that lives as long as the borrow of `self`; AtomicU64 has the size and alignment of
        // u64 on the 64-bit targets we build for, and all concurrent accesses are atomic.
        Some(unsafe {
            std::slice::from_raw_parts(self.base().add(offset).cast::<AtomicU64>().cast_const(), n)
        })
    }
}

#[cfg(not(feature = "loom"))]
const _: () = assert!(align_of::<AtomicU64>() == 8);

/// Read entry `T` from its words.
fn load_entry<T: Entry>(words: &[AtomicU64]) -> T {
    let n = size_of::<T>() / 8;
    let mut out = MaybeUninit::<T>::uninit();
    let dst = out.as_mut_ptr().cast::<u64>();
    for (k, w) in words.iter().take(n).enumerate() {
        // SAFETY: T is 8-aligned with size 8n (Entry contract), so dst.add(k) for k < n is an
        // aligned u64 slot inside `out`.
        unsafe { dst.add(k).write(w.load(Ordering::Relaxed)) };
    }
    if words.len() < n {
        // Callers always pass exactly n words; fall back to a zero entry rather than
        // returning partly uninitialised memory.
        return T::default();
    }
    // SAFETY: all n words of `out` were written above, and every bit pattern is a valid T
    // (Entry contract).
    unsafe { out.assume_init() }
}

/// Write entry `v` into its words.
fn store_entry<T: Entry>(words: &[AtomicU64], v: &T) {
    let n = size_of::<T>() / 8;
    let src = (v as *const T).cast::<u64>();
    for (k, w) in words.iter().take(n).enumerate() {
        // SAFETY: T is 8-aligned, size 8n, without padding (Entry contract), so every u64 at
        // src.add(k), k < n, is initialised and aligned.
        w.store(unsafe { src.add(k).read() }, Ordering::Relaxed);
    }
}

/// Where a ring is: byte offset and entry count (validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loc {
    offset: usize,
    entries: u32,
}

impl Loc {
    fn new<T: Entry, M: RingMemory>(
        mem: &M,
        offset: usize,
        entries: u32,
    ) -> Result<Loc, RingError> {
        if entries == 0 || entries > MAX_ENTRIES || !entries.is_power_of_two() {
            return Err(RingError::BadSize(entries));
        }
        let len = ring_bytes::<T>(entries);
        let oob = RingError::OutOfBounds { offset, len };
        if !offset.is_multiple_of(CACHE_LINE) {
            return Err(oob);
        }
        let words = (len - RING_HEADER) / 8;
        let ok = mem.u32_at(offset).is_some()
            && mem.u32_at(offset + CACHE_LINE).is_some()
            && mem.u64s_at(offset + RING_HEADER, words).is_some();
        if ok {
            Ok(Loc { offset, entries })
        } else {
            Err(oob)
        }
    }

    fn head<'m, M: RingMemory>(&self, mem: &'m M) -> Option<&'m AtomicU32> {
        mem.u32_at(self.offset)
    }
    fn tail<'m, M: RingMemory>(&self, mem: &'m M) -> Option<&'m AtomicU32> {
        mem.u32_at(self.offset + CACHE_LINE)
    }
    fn slot<'m, T: Entry, M: RingMemory>(&self, mem: &'m M, idx: u32) -> Option<&'m [AtomicU64]> {
        let i = (idx & (self.entries - 1)) as usize;
        let n = size_of::<T>() / 8;
        mem.u64s_at(self.offset + RING_HEADER + i * size_of::<T>(), n)
    }
    fn oob<T: Entry>(&self) -> RingError {
        RingError::OutOfBounds {
            offset: self.offset,
            len: ring_bytes::<T>(self.entries),
        }
    }
}

/// Zero a ring's indices (the creator does this before handing the ring out).
pub fn init_ring<T: Entry, M: RingMemory>(
    mem: &M,
    offset: usize,
    entries: u32,
) -> Result<(), RingError> {
    let loc = Loc::new::<T, M>(mem, offset, entries)?;
    let oob = loc.oob::<T>();
    loc.head(mem).ok_or(oob)?.store(0, Ordering::Release);
    loc.tail(mem).ok_or(oob)?.store(0, Ordering::Release);
    Ok(())
}

/// The producing end of a ring.
///
/// Not `Clone`: one handle, one producer. Attaching a second producer to the same ring
/// (here or in another process) loses entries but stays memory safe (see the module docs).
#[derive(Debug)]
pub struct Producer<T: Entry, M: RingMemory> {
    mem: M,
    loc: Loc,
    head: u32,
    tail_seen: u32,
    _t: PhantomData<fn(T)>,
}

impl<T: Entry, M: RingMemory> Producer<T, M> {
    /// Attach to the ring at `offset` of `mem` (64-byte aligned, `entries` a power of two),
    /// continuing from the head in shared memory (a fresh ring has 0).
    pub fn attach(mem: M, offset: usize, entries: u32) -> Result<Self, RingError> {
        let loc = Loc::new::<T, M>(&mem, offset, entries)?;
        let oob = loc.oob::<T>();
        let head = loc.head(&mem).ok_or(oob)?.load(Ordering::Relaxed);
        let tail = loc.tail(&mem).ok_or(oob)?.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > entries {
            return Err(RingError::Corrupt { head, tail });
        }
        Ok(Producer {
            mem,
            loc,
            head,
            tail_seen: tail,
            _t: PhantomData,
        })
    }

    /// Entry count.
    pub fn entries(&self) -> u32 {
        self.loc.entries
    }

    /// The memory the ring lives in.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Free slots now (reads the consumer's tail).
    pub fn free(&mut self) -> Result<u32, RingError> {
        let tail = self
            .loc
            .tail(&self.mem)
            .ok_or(self.loc.oob::<T>())?
            .load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > self.loc.entries {
            return Err(RingError::Corrupt {
                head: self.head,
                tail,
            });
        }
        self.tail_seen = tail;
        Ok(self.loc.entries - used)
    }

    /// Append one entry and publish it.
    pub fn push(&mut self, v: T) -> Result<(), PushError> {
        if self.head.wrapping_sub(self.tail_seen) >= self.loc.entries && self.free()? == 0 {
            return Err(PushError::Full);
        }
        let oob = self.loc.oob::<T>();
        let slot = self.loc.slot::<T, M>(&self.mem, self.head).ok_or(oob)?;
        store_entry(slot, &v);
        self.head = self.head.wrapping_add(1);
        // Release: the entry's (Relaxed) word stores above are visible to whoever loads this
        // head with Acquire (`Consumer::available`, `CqProbe::ready`) before it reads them.
        self.loc
            .head(&self.mem)
            .ok_or(oob)?
            .store(self.head, Ordering::Release);
        Ok(())
    }
}

/// The consuming end of a ring. Not `Clone`: one handle, one consumer.
#[derive(Debug)]
pub struct Consumer<T: Entry, M: RingMemory> {
    mem: M,
    loc: Loc,
    tail: u32,
    _t: PhantomData<fn() -> T>,
}

impl<T: Entry, M: RingMemory> Consumer<T, M> {
    /// Attach to the ring at `offset` of `mem`, continuing from the tail in shared memory.
    pub fn attach(mem: M, offset: usize, entries: u32) -> Result<Self, RingError> {
        let loc = Loc::new::<T, M>(&mem, offset, entries)?;
        let oob = loc.oob::<T>();
        let tail = loc.tail(&mem).ok_or(oob)?.load(Ordering::Relaxed);
        let mut c = Consumer {
            mem,
            loc,
            tail,
            _t: PhantomData,
        };
        c.available()?;
        Ok(c)
    }

    /// Entry count.
    pub fn entries(&self) -> u32 {
        self.loc.entries
    }

    /// The memory the ring lives in.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Entries ready to pop.
    pub fn available(&mut self) -> Result<u32, RingError> {
        let head = self
            .loc
            .head(&self.mem)
            .ok_or(self.loc.oob::<T>())?
            .load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail);
        if n > self.loc.entries {
            return Err(RingError::Corrupt {
                head,
                tail: self.tail,
            });
        }
        Ok(n)
    }

    /// Take the oldest entry, `None` when empty.
    pub fn pop(&mut self) -> Result<Option<T>, RingError> {
        if self.available()? == 0 {
            return Ok(None);
        }
        let oob = self.loc.oob::<T>();
        let slot = self.loc.slot::<T, M>(&self.mem, self.tail).ok_or(oob)?;
        let v = load_entry::<T>(slot);
        self.tail = self.tail.wrapping_add(1);
        self.loc
            .tail(&self.mem)
            .ok_or(oob)?
            .store(self.tail, Ordering::Release);
        Ok(Some(v))
    }

    /// Pop up to `out.len()` entries; returns how many.
    pub fn pop_many(&mut self, out: &mut [T]) -> Result<usize, RingError> {
        let mut n = 0;
        while n < out.len() {
            match self.pop()? {
                Some(v) => out[n] = v,
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }
}

/// Where a CQ is: byte offset, sub-ring count (one per dataplane thread), entries per sub-ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqLayout {
    /// Byte offset of the CQ header (64-byte aligned).
    pub offset: usize,
    /// Sub-rings (the daemon's dataplane thread count).
    pub subs: u32,
    /// Entries of each sub-ring (power of two).
    pub entries: u32,
}

impl CqLayout {
    /// Offset of sub-ring `i`.
    pub fn sub_offset(&self, i: u32) -> usize {
        self.offset + CQ_HEADER + i as usize * ring_bytes::<Cqe>(self.entries)
    }
    /// Total bytes.
    pub fn bytes(&self) -> usize {
        cq_bytes(self.subs, self.entries)
    }
}

/// Most sub-rings of one CQ (dataplane threads).
pub const MAX_CQ_SUBS: u32 = 64;

fn armed_cell<'m, M: RingMemory>(
    mem: &'m M,
    layout: &CqLayout,
) -> Result<&'m AtomicU32, RingError> {
    mem.u32_at(layout.offset)
        .filter(|_| layout.offset.is_multiple_of(CACHE_LINE))
        .ok_or(RingError::OutOfBounds {
            offset: layout.offset,
            len: layout.bytes(),
        })
}

/// Zero a CQ (armed flag and every sub-ring's indices).
pub fn init_cq<M: RingMemory>(mem: &M, layout: &CqLayout) -> Result<(), RingError> {
    if layout.subs == 0 || layout.subs > MAX_CQ_SUBS {
        return Err(RingError::BadSize(layout.subs));
    }
    armed_cell(mem, layout)?.store(0, Ordering::Release);
    for i in 0..layout.subs {
        init_ring::<Cqe, M>(mem, layout.sub_offset(i), layout.entries)?;
    }
    Ok(())
}

/// One dataplane thread's producing end of a CQ: its sub-ring plus the shared armed flag.
#[derive(Debug)]
pub struct CqProducer<M: RingMemory> {
    ring: Producer<Cqe, M>,
    armed_offset: usize,
}

impl<M: RingMemory> CqProducer<M> {
    /// Attach to sub-ring `sub` of the CQ at `layout`.
    pub fn attach(mem: M, layout: &CqLayout, sub: u32) -> Result<Self, RingError> {
        if layout.subs == 0 || layout.subs > MAX_CQ_SUBS || sub >= layout.subs {
            return Err(RingError::BadSize(layout.subs));
        }
        armed_cell(&mem, layout)?;
        let ring = Producer::attach(mem, layout.sub_offset(sub), layout.entries)?;
        Ok(CqProducer {
            ring,
            armed_offset: layout.offset,
        })
    }

    /// Push a completion. Returns `true` when the CQ was armed: the caller must then signal
    /// the CQ's completion channel (write its eventfd); the flag is cleared (one event per
    /// `arm`, as `ibv_req_notify_cq`).
    pub fn push(&mut self, cqe: Cqe) -> Result<bool, PushError> {
        self.ring.push(cqe)?;
        // Pairs with the fence in CqConsumer::arm: either the consumer sees this entry when
        // it re-checks after arming, or we see its armed flag here (store-buffer pattern).
        fence(Ordering::SeqCst);
        let armed = self
            .ring
            .memory()
            .u32_at(self.armed_offset)
            .ok_or(self.ring.loc.oob::<Cqe>())?;
        Ok(armed.load(Ordering::Relaxed) != 0 && armed.swap(0, Ordering::AcqRel) != 0)
    }

    /// Free slots of this thread's sub-ring.
    pub fn free(&mut self) -> Result<u32, RingError> {
        self.ring.free()
    }
}

/// The client's consuming end of a CQ: every sub-ring, polled round-robin.
#[derive(Debug)]
pub struct CqConsumer<M: RingMemory> {
    subs: Vec<Consumer<Cqe, M>>,
    next: usize,
    armed_offset: usize,
    /// Its probe: holds each sub-ring's tail as this consumer last stored it.
    probe: CqProbe<M>,
}

/// Copies of a [`CqConsumer`]'s private tails in process memory, where a [`CqProbe`] reads
/// them without the consumer's lock (not the copies in shared memory, which the producer's
/// process could overwrite).
type Tails = std::sync::Arc<[AtomicU32]>;

/// A look at a CQ that needs no `&mut` [`CqConsumer`] (so no lock around one): whether any of
/// its sub-rings may hold a completion. An application that polls an empty CQ in a loop asks
/// it first and takes the consumer's lock only when it says yes (issue #8, bar (b): the lock
/// was ~15 ns of an ~80 ns idle turn of the embedded engine).
#[derive(Debug, Clone)]
pub struct CqProbe<M: RingMemory> {
    mem: M,
    /// Byte offset of each sub-ring's head.
    heads: Vec<usize>,
    tails: Tails,
}

impl<M: RingMemory> CqProbe<M> {
    /// `false` only when every sub-ring was empty when looked at: each completion published
    /// before this call (its head store happened before) and not taken by a poll of the
    /// consumer meanwhile makes it `true`. `true` may be stale (another thread polled it
    /// meanwhile) or mean a corrupt ring: the consumer's poll then says which.
    #[inline]
    pub fn ready(&self) -> bool {
        self.heads.iter().zip(self.tails.iter()).any(|(&at, tail)| {
            self.mem.u32_at(at).is_none_or(|head| {
                // Acquire pairs with the producer's Release store of the head (after its
                // entry's words, `Producer::push`): a head seen here comes with its entry.
                // The consumer's poll loads it again with Acquire before it reads an entry,
                // so the entry's visibility never rests on this load alone.
                let head = head.load(Ordering::Acquire);
                // Acquire pairs with the Release store in `CqConsumer::poll`: a tail seen
                // here follows the pops that advanced it.
                head != tail.load(Ordering::Acquire)
            })
        })
    }
}

impl<M: RingMemory + Clone> CqConsumer<M> {
    /// Attach to every sub-ring of the CQ at `layout`.
    pub fn attach(mem: M, layout: &CqLayout) -> Result<Self, RingError> {
        if layout.subs == 0 || layout.subs > MAX_CQ_SUBS {
            return Err(RingError::BadSize(layout.subs));
        }
        armed_cell(&mem, layout)?;
        let subs = (0..layout.subs)
            .map(|i| Consumer::attach(mem.clone(), layout.sub_offset(i), layout.entries))
            .collect::<Result<Vec<_>, _>>()?;
        let probe = CqProbe {
            mem,
            heads: subs.iter().map(|s| s.loc.offset).collect(),
            tails: subs.iter().map(|s| AtomicU32::new(s.tail)).collect(),
        };
        Ok(CqConsumer {
            subs,
            next: 0,
            armed_offset: layout.offset,
            probe,
        })
    }

    /// A lock-free look at whether this CQ may hold completions ([`CqProbe::ready`]).
    pub fn probe(&self) -> CqProbe<M> {
        self.probe.clone()
    }
}

impl<M: RingMemory> CqConsumer<M> {
    /// Poll up to `out.len()` completions, taking sub-rings in turn so no thread starves.
    pub fn poll(&mut self, out: &mut [Cqe]) -> Result<usize, RingError> {
        let mut n = 0;
        let mut idle = 0;
        while n < out.len() && idle < self.subs.len() {
            let i = self.next;
            self.next = (self.next + 1) % self.subs.len();
            match self.subs[i].pop()? {
                Some(c) => {
                    // Release pairs with the Acquire in `CqProbe::ready`.
                    if let Some(t) = self.probe.tails.get(i) {
                        t.store(self.subs[i].tail, Ordering::Release);
                    }
                    out[n] = c;
                    n += 1;
                    idle = 0;
                }
                None => idle += 1,
            }
        }
        Ok(n)
    }

    /// Arm the CQ (`req_notify_cq`): the next pushed completion signals the completion
    /// channel. Returns `true` if completions are already waiting (poll them now: their
    /// producers may have missed the flag).
    pub fn arm(&mut self) -> Result<bool, RingError> {
        let oob = RingError::OutOfBounds {
            offset: self.armed_offset,
            len: CQ_HEADER,
        };
        let mem = self.subs.first().map(|s| s.memory()).ok_or(oob)?;
        mem.u32_at(self.armed_offset)
            .ok_or(oob)?
            .store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        for s in &mut self.subs {
            if s.available()? > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Completions waiting over all sub-rings.
    pub fn available(&mut self) -> Result<u32, RingError> {
        let mut n = 0u32;
        for s in &mut self.subs {
            n = n.saturating_add(s.available()?);
        }
        Ok(n)
    }
}

/// Zeroed, 64-byte aligned heap memory usable for rings: tests, and a process that keeps both
/// ends (the shared-memory kind is `shm::Segment`).
#[cfg(not(feature = "loom"))]
#[derive(Debug)]
pub struct HeapMemory {
    lines: Box<[Line]>,
}

#[cfg(not(feature = "loom"))]
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Line([AtomicU64; 8]);

#[cfg(not(feature = "loom"))]
const _: () = assert!(size_of::<Line>() == CACHE_LINE);

#[cfg(not(feature = "loom"))]
impl HeapMemory {
    /// `len` bytes (rounded up to 64), zeroed.
    pub fn new(len: usize) -> HeapMemory {
        let lines = (0..len.div_ceil(CACHE_LINE))
            .map(|_| Line::default())
            .collect();
        HeapMemory { lines }
    }
}

// SAFETY: the boxed lines are 64-byte aligned (Line's repr), live as long as the value, and
// consist of atomics, i.e. UnsafeCell, so writing through `base()` from `&self` is allowed.
#[cfg(not(feature = "loom"))]
unsafe impl SharedMemory for HeapMemory {
    fn base(&self) -> *mut u8 {
        self.lines.as_ptr().cast::<u8>().cast_mut()
    }
    fn len(&self) -> usize {
        self.lines.len() * CACHE_LINE
    }
}

/// Memory made of loom atomics, so loom can model-check the ring algorithm. Every 4-byte and
/// every 8-byte position has its own atomic; the rings access each position with one size only.
#[cfg(feature = "loom")]
#[derive(Debug)]
pub struct LoomMemory {
    u32s: Vec<AtomicU32>,
    u64s: Vec<AtomicU64>,
}

#[cfg(feature = "loom")]
impl LoomMemory {
    /// `len` bytes, zeroed.
    pub fn new(len: usize) -> LoomMemory {
        LoomMemory {
            u32s: (0..len / 4).map(|_| AtomicU32::new(0)).collect(),
            u64s: (0..len / 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

#[cfg(feature = "loom")]
impl RingMemory for LoomMemory {
    fn u32_at(&self, offset: usize) -> Option<&AtomicU32> {
        offset
            .is_multiple_of(4)
            .then(|| self.u32s.get(offset / 4))
            .flatten()
    }
    fn u64s_at(&self, offset: usize, n: usize) -> Option<&[AtomicU64]> {
        if !offset.is_multiple_of(8) {
            return None;
        }
        self.u64s.get(offset / 8..offset / 8 + n)
    }
}

#[cfg(feature = "loom")]
impl<S: RingMemory + ?Sized> RingMemory for std::sync::Arc<S> {
    fn u32_at(&self, offset: usize) -> Option<&AtomicU32> {
        (**self).u32_at(offset)
    }
    fn u64s_at(&self, offset: usize, n: usize) -> Option<&[AtomicU64]> {
        (**self).u64s_at(offset, n)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests;
