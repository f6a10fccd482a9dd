//! The x86-64 kernels of the RFC 1071 ones-complement sum (the TCP checksum, RFC 9293 §3.1).
//!
//! RFC 1071 §2 allows any order and any word size: the sum of the 16-bit words, carries
//! added back, is the same value modulo 0xffff however it is grouped (§2(A), (C)), and summing
//! the words of the other byte order gives the byte-swapped sum (§2(B)). So the kernels add
//! little-endian 16-bit words in vector lanes and swap once at the end.
//!
//! A word is added as `w - 0x8000`: its sign bit flipped (`w ^ 0x8000`) and read as signed,
//! which a multiply-add by one (`vpmaddwd`) turns into pairs summed in 32-bit lanes: three
//! instructions per vector, where 64-bit lanes (the portable loop's) need four per 32 bytes.
//! Each word's `0x8000` is added back once at the end (an exact count per block). AVX-512
//! VNNI's `vpdpwssd` does the multiply-add and the add in one instruction: faster on bytes in
//! L1, but slower on bytes just stored, as the sender sums them (the loads arrive late and its
//! 5-cycle accumulation chain becomes the critical path; `cargo bench -p netcore --bench sum`,
//! BENCHMARKS.md §4), so it is not used.
//!
//! The AVX-512 kernel loads 64-byte blocks aligned to 64 bytes (no load spans two cache lines,
//! which costs a second access on every load of a misaligned buffer), the first and the last
//! with a mask of the bytes that belong to the input: masked-out bytes are not read (no fault
//! either) and count as zero words, which add nothing. Words then pair bytes by address; for
//! an input at an odd address that is the other byte order, whose sum is the byte-swapped one.

use std::arch::x86_64::*;
use std::sync::atomic::AtomicU8;

/// Whole 64-byte blocks per [`blocks512`] call: the 32-bit lanes stay below 2^31 in magnitude
/// (each block adds at most 2 * 0x8000 to a lane) for 16384 blocks, 1 MiB.
const CHUNK_BLOCKS: usize = 16384;

/// Each word's offset, added back: 32 words of `0x8000` per 64-byte block (2^20).
const BLOCK_BIAS_SHIFT: u32 = 20;

/// [`avx512_available`]'s probe, once.
static AVX512: AtomicU8 = AtomicU8::new(0);
/// [`avx2_available`]'s probe, once.
static AVX2: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has what [`avx512`] uses (AVX-512F/BW).
#[inline]
pub(crate) fn avx512_available() -> bool {
    crate::probed(&AVX512, || {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    })
}

/// Whether this CPU has what [`avx2`] uses.
#[inline]
pub(crate) fn avx2_available() -> bool {
    crate::probed(&AVX2, || std::is_x86_feature_detected!("avx2"))
}

/// End-around-carry fold of a sum of 16-bit words to 16 bits (RFC 1071 §2(C)): 0 only for a
/// zero sum.
#[inline]
pub(crate) fn fold(acc: u64) -> u16 {
    let acc = (acc & 0xffff_ffff) + (acc >> 32);
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The sum of the 32-bit signed lanes of `v`, in 64 bits.
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_sum(v: __m512i) -> i64 {
    let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
    let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v));
    _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi))
}

/// The RFC 1071 sum of `len` bytes at `src` (big-endian words, folded, not complemented), by
/// the AVX-512 kernel: address-aligned 64-byte blocks, in pieces of at most [`CHUNK_BLOCKS`]
/// blocks, swapped for an odd start and to big-endian words.
///
/// # Safety
/// AVX-512F/BW are available ([`avx512_available`]); `src` is valid for reads of `len` bytes.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn avx512(src: *const u8, len: usize) -> u16 {
    let lead = src as usize % 64;
    let mut acc = 0u64;
    let mut at = 0;
    while at < len {
        // Every piece after the first starts on a block boundary.
        let room = CHUNK_BLOCKS * 64 - if at == 0 { lead } else { 0 };
        let n = (len - at).min(room);
        // SAFETY: [at, at + n) lies inside the caller's range.
        acc += unsafe { blocks512(src.add(at), n) };
        at += n;
    }
    let s = fold(acc);
    // Words paired by address: for an odd start the other byte order (RFC 1071 §2(B)).
    let s = if lead % 2 == 1 { s.swap_bytes() } else { s };
    s.swap_bytes()
}

/// The mask of the bytes `[from, to)` of a 64-byte block (`from < to <= 64`).
#[inline]
fn byte_mask(from: usize, to: usize) -> u64 {
    let below_to = if to == 64 { !0 } else { (1u64 << to) - 1 };
    below_to & (!0u64 << from)
}

/// The sum of the little-endian words of the 64-byte-aligned blocks covering `[src, src +
/// len)`, bytes outside the range counted as zero, unfolded; at most [`CHUNK_BLOCKS`] blocks.
///
/// # Safety
/// As [`avx512`]; the range spans at most [`CHUNK_BLOCKS`] blocks.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn blocks512(src: *const u8, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let lead = src as usize % 64;
    // Not dereferenced outside [src, src + len): the masks leave those bytes unread.
    let base = src.wrapping_sub(lead);
    let end = lead + len;
    let blocks = end.div_ceil(64);
    let flip = _mm512_set1_epi16(i16::MIN);
    let ones = _mm512_set1_epi16(1);
    let step = |acc, v| _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_xor_si512(v, flip), ones));
    let zero = _mm512_setzero_si512();
    // SAFETY: the mask selects only bytes of [src, src + len) (block 0 holds bytes lead..end).
    let first = unsafe { _mm512_maskz_loadu_epi8(byte_mask(lead, end.min(64)), base.cast::<i8>()) };
    let mut acc = [step(zero, first), zero, zero, zero];
    if blocks > 1 {
        let last = blocks - 1;
        let mut b = 1;
        while b + 4 <= last {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: block b + i < last lies wholly inside the range; aligned.
                let v = unsafe { _mm512_load_si512(base.wrapping_add(64 * (b + i)).cast()) };
                *a = step(*a, v);
            }
            b += 4;
        }
        // The 0-3 whole blocks left, one to each accumulator (constant indices keep them in
        // registers).
        for (i, a) in acc.iter_mut().enumerate().take(last - b) {
            // SAFETY: as above.
            let v = unsafe { _mm512_load_si512(base.wrapping_add(64 * (b + i)).cast()) };
            *a = step(*a, v);
        }
        // SAFETY: the mask selects the bytes of the last block below `end`.
        let v = unsafe {
            _mm512_maskz_loadu_epi8(
                byte_mask(0, end - 64 * last),
                base.wrapping_add(64 * last).cast::<i8>(),
            )
        };
        acc[1] = step(acc[1], v);
    }
    let t = _mm512_add_epi32(
        _mm512_add_epi32(acc[0], acc[1]),
        _mm512_add_epi32(acc[2], acc[3]),
    );
    // Exact: each of the 32 words per block was added as w - 0x8000.
    (lanes_sum(t) + ((blocks as i64) << BLOCK_BIAS_SHIFT)) as u64
}

/// The RFC 1071 sum of `len` bytes at `src` (big-endian words, folded, not complemented), by
/// the AVX2 kernel: 32-byte blocks (unaligned), four accumulators, the rest as 32-bit words.
///
/// # Safety
/// AVX2 is available ([`avx2_available`]); `src` is valid for reads of `len` bytes.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn avx2(src: *const u8, len: usize) -> u16 {
    let flip = _mm256_set1_epi16(i16::MIN);
    let ones = _mm256_set1_epi16(1);
    let mut total = 0u64;
    let mut at = 0;
    while len - at >= 32 {
        // Pieces of at most CHUNK_BLOCKS * 2 blocks of 32 bytes: lanes below 2^31.
        let n = ((len - at) / 32).min(2 * CHUNK_BLOCKS);
        let step = |acc, b: usize| {
            // SAFETY: b < n: [at + 32 b, at + 32 b + 32) lies inside the range.
            let v = unsafe { _mm256_loadu_si256(src.add(at + 32 * b).cast()) };
            _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_xor_si256(v, flip), ones))
        };
        let mut acc = [_mm256_setzero_si256(); 4];
        let mut b = 0;
        while b + 4 <= n {
            for (i, a) in acc.iter_mut().enumerate() {
                *a = step(*a, b + i);
            }
            b += 4;
        }
        // The 0-3 blocks left, one to each accumulator (constant indices keep them in
        // registers).
        for (i, a) in acc.iter_mut().enumerate().take(n - b) {
            *a = step(*a, b + i);
        }
        let t = _mm256_add_epi32(
            _mm256_add_epi32(acc[0], acc[1]),
            _mm256_add_epi32(acc[2], acc[3]),
        );
        let lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(t));
        let hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(t));
        let w = _mm256_add_epi64(lo, hi);
        let mut q = [0i64; 4];
        // SAFETY: q holds four i64.
        unsafe { _mm256_storeu_si256(q.as_mut_ptr().cast(), w) };
        // Exact: 16 words per 32-byte block, each added as w - 0x8000.
        total += (q.iter().sum::<i64>() + ((n as i64) << 19)) as u64;
        at += 32 * n;
    }
    while len - at >= 4 {
        // SAFETY: [at, at + 4) lies inside the range.
        let w = unsafe { src.add(at).cast::<u32>().read_unaligned() };
        total += u64::from(w);
        at += 4;
    }
    let mut tail = [0u8; 4];
    for (i, t) in tail.iter_mut().enumerate().take(len - at) {
        // SAFETY: at + i < len.
        *t = unsafe { src.add(at + i).read() };
    }
    total += u64::from(u32::from_le_bytes(tail));
    fold(total).swap_bytes()
}

/// Load 64 bytes from `src + at`, store them at `dst + at`.
///
/// # Safety
/// `[at, at + 64)` lies inside both ranges of [`copy_avx512`]'s contract.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn copy_block(src: *const u8, dst: *mut u8, at: usize) -> __m512i {
    // SAFETY: inside the source range (caller); unaligned loads are allowed.
    let v = unsafe { _mm512_loadu_si512(src.add(at).cast()) };
    // SAFETY: inside the destination range (caller); unaligned stores are allowed.
    unsafe { _mm512_storeu_si512(dst.add(at).cast(), v) };
    v
}

/// Copy `len` bytes from `src` to `dst` and return the sum of the same bytes' little-endian
/// 16-bit words paired from `src` (an odd last byte padded with zero), unfolded: each
/// 64-byte block loaded once, stored and summed from the register (the technique of
/// [`blocks512`], two accumulators), the last 0-63 bytes loaded and stored with a mask.
/// The sum is of the values stored, even if another process changes the source meanwhile.
///
/// # Safety
/// AVX-512F/BW are available ([`avx512_available`]); `src` is valid for reads and `dst` for
/// writes of `len` bytes, the ranges do not overlap; `len <= CHUNK_BLOCKS * 64`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn copy_avx512(src: *const u8, dst: *mut u8, len: usize) -> u64 {
    let flip = _mm512_set1_epi16(i16::MIN);
    let ones = _mm512_set1_epi16(1);
    let step = |acc, v| _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_xor_si512(v, flip), ones));
    let mut acc = [_mm512_setzero_si512(); 2];
    let mut at = 0;
    while at + 128 <= len {
        // SAFETY: at + 128 <= len.
        let (a, b) = unsafe { (copy_block(src, dst, at), copy_block(src, dst, at + 64)) };
        acc = [step(acc[0], a), step(acc[1], b)];
        at += 128;
    }
    if at + 64 <= len {
        // SAFETY: at + 64 <= len.
        acc[0] = step(acc[0], unsafe { copy_block(src, dst, at) });
        at += 64;
    }
    let mut blocks = at / 64;
    let rest = len - at;
    if rest > 0 {
        let m = byte_mask(0, rest);
        // SAFETY: the mask selects bytes [at, len) only: masked-out bytes are neither read
        // nor written (and cannot fault). They count as zero words.
        let v = unsafe { _mm512_maskz_loadu_epi8(m, src.add(at).cast::<i8>()) };
        // SAFETY: as above, for the destination.
        unsafe { _mm512_mask_storeu_epi8(dst.add(at).cast::<i8>(), m, v) };
        acc[1] = step(acc[1], v);
        blocks += 1;
    }
    let t = lanes_sum(_mm512_add_epi32(acc[0], acc[1]));
    // Exact: each of the 32 words per block was added as w - 0x8000.
    (t + ((blocks as i64) << BLOCK_BIAS_SHIFT)) as u64
}
