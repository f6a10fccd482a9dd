//! CRC32c (Castagnoli; RFC 3720 Appendix B.4, the MPA FPDU CRC of RFC 5044 §4.3), computed
//! by 512-bit carry-less multiplication folding (x86-64 AVX-512 + VPCLMULQDQ), alone or fused
//! with a copy of the same bytes.
//!
//! The fused form is the point of this crate: the sender copies an FPDU's payload from the
//! registered region into a frame, the receiver's placer copies it from a frame into the
//! registered region, and both need the CRC of exactly those bytes. A CRC pass after a copy
//! reads every byte a second time (and right after the copy, it stalls on stores still in
//! flight); here each 64-byte block is loaded once, stored, and folded into the CRC from the
//! register. On the AMD EPYC of BENCHMARKS.md §4 the CRC then adds about 16 ns to the copy of a
//! 1448-byte FPDU, where a pass of its own over the copied bytes took 40-46 ns.
//!
//! On a CPU without those features every function still works. With SSE4.2 and PCLMULQDQ
//! (AMD Zen 2/3, many Intel parts) the copying forms fuse the copy with three interleaved
//! `crc32` streams (each word loaded once, stored and hashed from the register) and short
//! inputs take one `crc32` stream without set-up; longer CRCs without a copy go to the `crc32c`
//! crate. Without those either, a copy and then the `crc32c` crate's CRC. [`accelerated`] and
//! [`fuses_copy`] say which path runs. Callers that choose between implementations by
//! calibration (the `netcore::crc` facade) time this crate against the others.
//!
//! [`SumKernel`] holds the other kernel of the data path: the RFC 1071 ones-complement sum
//! of the TCP checksum (AVX-512 and AVX2; the `netcore::csum` facade chooses one and keeps a
//! portable loop).
//!
//! This is the only crate of CPU kernels with `unsafe`: intrinsics need `#[target_feature]`
//! functions, called only after the features were detected at run time, and raw loads and
//! stores. The safe functions are sound for any input; [`copy_crc32c_raw`] is for callers
//! whose destination or source is shared memory (no `&mut [u8]` may be formed over it).

#[cfg(target_arch = "x86_64")]
mod fold;
pub mod poly;
#[cfg(target_arch = "x86_64")]
mod sse42;
#[cfg(target_arch = "x86_64")]
mod sum;

/// A CPU probe's answer, cached in `flag` (0: not probed yet; 1: no; 2: yes): `probe` runs
/// at most once per flag, give or take a race between first callers, which agree. The
/// cached answer is read inline (every copy and CRC asks); the probe is out of line.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn probed(flag: &std::sync::atomic::AtomicU8, probe: impl FnOnce() -> bool) -> bool {
    use std::sync::atomic::Ordering;
    match flag.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => probe_now(flag, probe),
    }
}

/// [`probed`]'s first call: run `probe`, cache its answer.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn probe_now(flag: &std::sync::atomic::AtomicU8, probe: impl FnOnce() -> bool) -> bool {
    use std::sync::atomic::Ordering;
    let yes = probe();
    flag.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
    yes
}

/// Inputs shorter than this go to the short single-stream kernel where the folding kernels do
/// not run (the data path's MPA length fields, DDP headers and pads).
const SHORT: usize = 64;

/// Whether the folding kernels run on this CPU (AVX-512F/VL, VPCLMULQDQ, PCLMULQDQ, SSE4.2);
/// otherwise the functions of this crate take the `crc32` streams where [`fuses_copy`] says
/// so, and the `crc32c` crate for the rest. Detected once.
pub fn accelerated() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        fold::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this crate's copies compute the CRC in the copy's pass on this CPU: with the
/// folding kernels ([`accelerated`]), or with three interleaved `crc32` streams on a CPU with
/// SSE4.2 and PCLMULQDQ only. Otherwise a copy goes through a buffer and the `crc32c` crate.
pub fn fuses_copy() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        fold::available() || sse42::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// [`copy_crc32c`] by the three-stream `crc32` kernel of CPUs without the folding kernels,
/// whatever this CPU has (for the benchmarks and tests that compare kernels): `None` without
/// SSE4.2 and PCLMULQDQ.
///
/// # Panics
/// If `dst` is shorter than `src`.
pub fn copy_crc32c_streams(crc: u32, src: &[u8], dst: &mut [u8]) -> Option<u32> {
    check_room(src, dst);
    #[cfg(target_arch = "x86_64")]
    if sse42::available() {
        // SAFETY: the features were detected; src is valid for reads and dst for writes of
        // src.len() bytes (checked above), a `&[u8]` and a `&mut [u8]` cannot overlap.
        return Some(
            unsafe { sse42::copy_crc(!crc, src.as_ptr(), dst.as_mut_ptr(), src.len()) } ^ !0,
        );
    }
    None
}

/// The copying forms' precondition: `dst` holds at least `src` (panics otherwise, as
/// `copy_from_slice` does).
#[inline]
#[track_caller]
fn check_room(src: &[u8], dst: &[u8]) {
    assert!(
        dst.len() >= src.len(),
        "copy_crc32c: destination of {} bytes for {} bytes",
        dst.len(),
        src.len()
    );
}

/// Continue a CRC32c: `crc32c_append(crc32c_append(0, a), b)` is the CRC32c of `a ++ b`
/// (the same convention as the `crc32c` crate: `crc` is a finished CRC value).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if fold::available() {
        // SAFETY: the features `fold::crc` needs were detected (`available`); `data` is valid
        // for reads of its length, and nothing is written (no destination).
        return unsafe { fold::crc(!crc, data.as_ptr(), data.len()) } ^ !0;
    }
    #[cfg(target_arch = "x86_64")]
    if data.len() < SHORT && sse42::available() {
        // SAFETY: the features `sse42::crc` needs were detected; `data` is valid for reads of
        // its length.
        return unsafe { sse42::crc(!crc, data.as_ptr(), data.len()) } ^ !0;
    }
    ::crc32c::crc32c_append(crc, data)
}

/// Copy `src` into `dst[..src.len()]` and continue the CRC32c `crc` over the same bytes, in
/// one pass. Returns the new CRC.
///
/// # Panics
/// If `dst` is shorter than `src` (as `copy_from_slice` does).
#[inline]
pub fn copy_crc32c(crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
    check_room(src, dst);
    // SAFETY: src is valid for reads and dst for writes of src.len() bytes (checked above);
    // a `&[u8]` and a `&mut [u8]` cannot overlap.
    unsafe { copy_crc32c_raw(crc, src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// [`copy_crc32c`] over raw pointers, for memory shared with another process (a registered
/// region), over which no Rust reference may be formed. Each source byte is read once: the
/// CRC covers the values copied, even if another process changes the source meanwhile.
///
/// # Safety
/// `src` must be valid for reads of `len` bytes and `dst` valid for writes of `len` bytes,
/// and the two ranges must not overlap. No alignment is required.
#[inline]
pub unsafe fn copy_crc32c_raw(crc: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if fold::available() {
        // SAFETY: the features were detected; the caller guarantees the ranges.
        return unsafe { fold::copy_crc(!crc, src, dst, len) } ^ !0;
    }
    #[cfg(target_arch = "x86_64")]
    if sse42::available() {
        // SAFETY: the features were detected; the caller guarantees the ranges.
        return unsafe { sse42::copy_crc(!crc, src, dst, len) } ^ !0;
    }
    // SAFETY: forwarded contract.
    unsafe { copy_crc_portable(crc, src, dst, len) }
}

/// Whether [`copy_crc32c_sum_raw`] runs its fused kernel on this CPU (the folding kernels'
/// features and AVX-512BW): the copy, the CRC32c and the RFC 1071 sum in one pass. Otherwise
/// it returns `None` and callers keep a copy with the CRC and a sum pass of their own.
pub fn fuses_sum() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        fold::available() && sum::avx512_available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// [`copy_crc32c`] that also returns the RFC 1071 sum of the bytes copied (big-endian words
/// from `src`'s first byte, an odd last byte padded with zero, folded to 16 bits, not
/// complemented: [`SumKernel::sum`]'s value), all in one pass; `None` (nothing copied) where
/// [`fuses_sum`] is false.
///
/// # Panics
/// If `dst` is shorter than `src`.
#[inline]
pub fn copy_crc32c_sum(crc: u32, src: &[u8], dst: &mut [u8]) -> Option<(u32, u16)> {
    check_room(src, dst);
    // SAFETY: src is valid for reads and dst for writes of src.len() bytes (checked above);
    // a `&[u8]` and a `&mut [u8]` cannot overlap.
    unsafe { copy_crc32c_sum_raw(crc, src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// [`copy_crc32c_sum`] over raw pointers (memory shared with another process, as
/// [`copy_crc32c_raw`]). Each source byte is read once: the CRC and the sum cover the values
/// copied, even if another process changes the source meanwhile. `None`, nothing read or
/// written, where [`fuses_sum`] is false.
///
/// # Safety
/// As [`copy_crc32c_raw`].
#[inline]
pub unsafe fn copy_crc32c_sum_raw(
    crc: u32,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> Option<(u32, u16)> {
    // SAFETY: forwarded contract; an empty head.
    unsafe { copy_crc32c_sum_after_raw(crc, &[], src, dst, len) }
}

/// [`copy_crc32c_sum_raw`] after a short head (an FPDU's header on the sender): `head` copied
/// to `dst`'s first `head.len()` bytes, the `len` bytes at `src` copied after it, the CRC
/// continued from `crc` over the head and then those bytes, and the RFC 1071 sum of the `src`
/// bytes only (from `dst + head.len()`'s first byte), in one call. The head is taken 8 bytes
/// at a time by the `crc32` instruction: meant for a few bytes. `None`, nothing read or
/// written, where [`fuses_sum`] is false.
///
/// # Safety
/// `src` must be valid for reads of `len` bytes and `dst` valid for writes of
/// `head.len() + len` bytes; the destination range overlaps neither `src`'s nor `head`'s.
#[inline]
pub unsafe fn copy_crc32c_sum_after_raw(
    crc: u32,
    head: &[u8],
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> Option<(u32, u16)> {
    #[cfg(target_arch = "x86_64")]
    if fuses_sum() {
        let mut state = !crc;
        let mut acc = 0u64;
        let mut at = 0;
        let mut h = head;
        // Pieces of SUM_CHUNK bytes (even): each starts on a word boundary of the whole. The
        // head goes with the first.
        loop {
            let n = (len - at).min(fold::SUM_CHUNK);
            // SAFETY: the features were detected; `h` is a slice; the piece's destination
            // starts at `head.len() + at - h.len()` (0 for the first, with the head) and its
            // `h.len() + n` bytes lie inside the destination range, [at, at + n) inside the
            // source range (caller), n <= SUM_CHUNK.
            let (r, s) = unsafe {
                fold::copy_crc_sum_after(
                    state,
                    h.as_ptr(),
                    h.len(),
                    src.add(at),
                    dst.add(head.len() + at - h.len()),
                    n,
                )
            };
            h = &[];
            state = r;
            acc += s;
            at += n;
            if at == len {
                break;
            }
        }
        // Words paired little-endian: the byte-swapped sum (RFC 1071 §2(B)).
        return Some((state ^ !0, sum::fold(acc).swap_bytes()));
    }
    let _ = (crc, head, src, dst, len);
    None
}

/// Whether [`copy_sum_raw`] runs its fused kernel on this CPU (AVX-512F/BW): the copy and
/// the RFC 1071 sum in one pass, [`copy_crc32c_sum_raw`] without the CRC (a frame's payload
/// when MPA CRCs are off). Otherwise it returns `None` and callers keep a copy and a sum pass
/// of their own.
pub fn fuses_copy_sum() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        sum::avx512_available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Copy `src` into `dst[..src.len()]` and return the RFC 1071 sum of the bytes copied (as
/// [`copy_crc32c_sum`]'s, without a CRC), in one pass; `None` (nothing copied) where
/// [`fuses_copy_sum`] is false.
///
/// # Panics
/// If `dst` is shorter than `src`.
#[inline]
pub fn copy_sum(src: &[u8], dst: &mut [u8]) -> Option<u16> {
    check_room(src, dst);
    // SAFETY: src is valid for reads and dst for writes of src.len() bytes (checked above);
    // a `&[u8]` and a `&mut [u8]` cannot overlap.
    unsafe { copy_sum_raw(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// [`copy_sum`] over raw pointers (memory shared with another process, as
/// [`copy_crc32c_raw`]). Each source byte is read once: the sum covers the values copied,
/// even if another process changes the source meanwhile. `None`, nothing read or written,
/// where [`fuses_copy_sum`] is false.
///
/// # Safety
/// As [`copy_crc32c_raw`].
#[inline]
pub unsafe fn copy_sum_raw(src: *const u8, dst: *mut u8, len: usize) -> Option<u16> {
    #[cfg(target_arch = "x86_64")]
    if fuses_copy_sum() {
        let mut acc = 0u64;
        let mut at = 0;
        // Pieces of SUM_CHUNK bytes (even): each starts on a word boundary of the whole.
        while at < len {
            let n = (len - at).min(fold::SUM_CHUNK);
            // SAFETY: the features were detected; [at, at + n) lies inside both ranges
            // (caller), n <= SUM_CHUNK.
            acc += unsafe { sum::copy_avx512(src.add(at), dst.add(at), n) };
            at += n;
        }
        // Words paired little-endian: the byte-swapped sum (RFC 1071 §2(B)).
        return Some(sum::fold(acc).swap_bytes());
    }
    let _ = (src, dst, len);
    None
}

/// [`copy_crc32c_raw`] without the kernels: through a buffer of our own, so that each source
/// byte is read once and the CRC covers exactly the bytes written, and no reference is formed
/// over either range (either may be memory another process writes).
///
/// # Safety
/// As [`copy_crc32c_raw`].
unsafe fn copy_crc_portable(crc: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    let mut buf = [0u8; 1024];
    let mut crc = crc;
    let mut at = 0;
    while at < len {
        let n = (len - at).min(buf.len());
        // SAFETY: [at, at + n) lies inside both ranges (caller); `buf` is ours and n <= its
        // length, so neither copy overlaps its destination.
        unsafe { std::ptr::copy_nonoverlapping(src.add(at), buf.as_mut_ptr(), n) };
        crc = ::crc32c::crc32c_append(crc, &buf[..n]);
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), dst.add(at), n) };
        at += n;
    }
    crc
}

/// A kernel of the RFC 1071 ones-complement sum (the TCP checksum's, RFC 9293 §3.1) with
/// intrinsics. Callers choose among the ones [`SumKernel::available`] on this CPU, and keep a
/// portable loop for CPUs without any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SumKernel {
    /// AVX-512F/BW: three instructions per 64 bytes, aligned loads.
    Avx512,
    /// AVX2: three instructions per 32 bytes.
    Avx2,
}

impl SumKernel {
    /// Every kernel, the widest first.
    pub const ALL: [SumKernel; 2] = [SumKernel::Avx512, SumKernel::Avx2];

    /// The name used in logs and benchmark ids.
    pub const fn name(self) -> &'static str {
        match self {
            SumKernel::Avx512 => "avx512",
            SumKernel::Avx2 => "avx2",
        }
    }

    /// Whether this CPU runs the kernel (probed once).
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                SumKernel::Avx512 => sum::avx512_available(),
                SumKernel::Avx2 => sum::avx2_available(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The RFC 1071 sum of `data`: its 16-bit big-endian words (an odd last byte padded with
    /// zero on the right) added with end-around carry, folded to 16 bits, not complemented
    /// (0 only for all-zero data). `None` if this CPU does not run the kernel.
    #[inline]
    pub fn sum(self, data: &[u8]) -> Option<u16> {
        #[cfg(target_arch = "x86_64")]
        {
            let (p, n) = (data.as_ptr(), data.len());
            match self {
                // SAFETY: the features were detected; `data` is valid for reads of its length.
                SumKernel::Avx512 if sum::avx512_available() => Some(unsafe { sum::avx512(p, n) }),
                // SAFETY: as above.
                SumKernel::Avx2 if sum::avx2_available() => Some(unsafe { sum::avx2(p, n) }),
                _ => None,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = data;
            None
        }
    }
}

impl std::fmt::Display for SumKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
