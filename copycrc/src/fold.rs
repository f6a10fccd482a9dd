//! The x86-64 kernels: eight 512-bit accumulators folded 512 bytes at a time, one for the
//! remaining 64-byte blocks, one 128-bit lane for the remaining 16-byte blocks, then the SSE4.2
//! `crc32` instruction for the last 16 bytes of state and the tail (see [`crate::poly`]).
//! Without a copy, inputs of [`HYBRID_MIN`] bytes and more also feed three `crc32` streams
//! beside the folding ([`hybrid`]); a copy is always folded alone ([`kernel`]).
//!
//! `state` is the CRC register (the inverted CRC value, RFC 3720 B.4's initial all-ones
//! included); it is added to the first 32 bits of the data, after which every fold starts from
//! zero, and the `crc32` instruction turns the final 128-bit block into the register again.

use std::arch::x86_64::*;
use std::sync::atomic::AtomicU8;

use crate::poly::{fold_pair, shift_const};
use crate::sse42;

/// [`available`]'s probe, once.
static AVAILABLE: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has what the kernels use (probed once).
#[inline]
pub(crate) fn available() -> bool {
    crate::probed(&AVAILABLE, || {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse4.2")
    })
}

const K512B: [u64; 2] = fold_pair(512 * 8);
const K256B: [u64; 2] = fold_pair(256 * 8);
const K192B: [u64; 2] = fold_pair(192 * 8);
const K128B: [u64; 2] = fold_pair(128 * 8);
const K64B: [u64; 2] = fold_pair(64 * 8);
const K48B: [u64; 2] = fold_pair(48 * 8);
const K32B: [u64; 2] = fold_pair(32 * 8);
const K16B: [u64; 2] = fold_pair(16 * 8);

/// A fold constant pair in every 128-bit lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn splat(k: [u64; 2]) -> __m512i {
    _mm512_set_epi64(
        k[1] as i64,
        k[0] as i64,
        k[1] as i64,
        k[0] as i64,
        k[1] as i64,
        k[0] as i64,
        k[1] as i64,
        k[0] as i64,
    )
}

/// Each 128-bit lane of `x` folded forward by the distance of `k`, plus `y`.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold512(x: __m512i, k: __m512i, y: __m512i) -> __m512i {
    let lo = _mm512_clmulepi64_epi128::<0x00>(x, k);
    let hi = _mm512_clmulepi64_epi128::<0x11>(x, k);
    _mm512_ternarylogic_epi64::<0x96>(lo, hi, y)
}

/// `x` folded forward by the distance of `k`, plus `y` (128 bits).
#[inline]
#[target_feature(enable = "pclmulqdq,sse2")]
fn fold128(x: __m128i, k: __m128i, y: __m128i) -> __m128i {
    let lo = _mm_clmulepi64_si128::<0x00>(x, k);
    let hi = _mm_clmulepi64_si128::<0x11>(x, k);
    _mm_xor_si128(_mm_xor_si128(lo, hi), y)
}

/// Load 64 bytes from `src + at` and, with `COPY`, store them at `dst + at`.
///
/// # Safety
/// `[at, at + 64)` lies inside both ranges of the kernel's contract.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn block<const COPY: bool>(src: *const u8, dst: *mut u8, at: usize) -> __m512i {
    // SAFETY: inside the source range (caller); unaligned loads are allowed.
    let v = unsafe { _mm512_loadu_si512(src.add(at).cast()) };
    if COPY {
        // SAFETY: inside the destination range (caller); unaligned stores are allowed.
        unsafe { _mm512_storeu_si512(dst.add(at).cast(), v) };
    }
    v
}

/// Load 16 bytes from `src + at` and, with `COPY`, store them at `dst + at`.
///
/// # Safety
/// As [`block`], for `[at, at + 16)`.
#[inline]
#[target_feature(enable = "sse2")]
unsafe fn block16<const COPY: bool>(src: *const u8, dst: *mut u8, at: usize) -> __m128i {
    // SAFETY: inside the source range (caller).
    let v = unsafe { _mm_loadu_si128(src.add(at).cast()) };
    if COPY {
        // SAFETY: inside the destination range (caller).
        unsafe { _mm_storeu_si128(dst.add(at).cast(), v) };
    }
    v
}

/// The CRC register after `len` bytes at `src`, from register `state`.
///
/// # Safety
/// The CPU has the features of [`available`]; `src` is valid for reads of `len` bytes.
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn crc(state: u32, src: *const u8, len: usize) -> u32 {
    // SAFETY: with COPY false nothing is written through the (unused) destination.
    unsafe { kernel::<false>(state, src, std::ptr::null_mut(), len) }
}

/// The CRC register after `len` bytes at `src`, from register `state`, copying them to `dst`.
///
/// # Safety
/// The CPU has the features of [`available`]; `src` is valid for reads and `dst` for writes of
/// `len` bytes; the ranges do not overlap.
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn copy_crc(state: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    // SAFETY: forwarded contract.
    unsafe { kernel::<true>(state, src, dst, len) }
}

/// Shortest input for [`hybrid`]: below it, the combination's fixed latency costs more than
/// the `crc32` streams save (`cargo bench -p copycrc --bench kernels`, BENCHMARKS.md §3).
const HYBRID_MIN: usize = 2048;
/// Bytes per [`hybrid`] step: 512 folded, [`STREAM_STEP`] for each of three `crc32` streams.
const STEP: usize = 512 + 3 * STREAM_STEP;
/// Bytes each `crc32` stream takes per step: ten instructions, under the 16 carry-less
/// multiplications of the folded 512 bytes.
const STREAM_STEP: usize = 80;
/// Most steps whose stream shifts are tabled.
const MAX_STEPS: usize = 128;
/// The piece longer inputs are taken in: [`MAX_STEPS`] whole steps.
const HYBRID_CHUNK: usize = MAX_STEPS * STEP;
/// For `n` steps (index `n - 1`): the multipliers moving a register over `s`, `2s` and `3s`
/// bytes, `s = n * STREAM_STEP` ([`shift_const`]).
const SHIFTS: [[u64; 3]; MAX_STEPS] = {
    let mut t = [[0u64; 3]; MAX_STEPS];
    let mut n = 0;
    while n < MAX_STEPS {
        let s = ((n + 1) * STREAM_STEP) as u32;
        t[n] = [shift_const(s), shift_const(2 * s), shift_const(3 * s)];
        n += 1;
    }
    t
};

/// # Safety
/// As [`copy_crc`] (with `COPY` false, `dst` is not used).
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn kernel<const COPY: bool>(
    mut state: u32,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> u32 {
    // With a copy, the folding alone at every length: each 64-byte block is loaded once,
    // stored and folded from the register, so the CRC covers exactly the bytes written
    // (`copy_crc32c_raw`'s promise, for a source another process may write). The `crc32`
    // streams of [`hybrid`] would read their bytes a second time, or store them 8 bytes at a
    // time, which measured slower than the folding alone (BENCHMARKS.md §4, "CRC32c kernels").
    if COPY || len < HYBRID_MIN {
        // SAFETY: forwarded contract.
        return unsafe { folded::<COPY>(state, src, dst, len) };
    }
    // Longer than the stream shifts are tabled for: whole pieces of HYBRID_CHUNK bytes first,
    // so that no piece leaves more than a few 64-byte blocks to the sequential folds.
    let mut at = 0;
    while len - at > HYBRID_CHUNK + HYBRID_MIN {
        // SAFETY: [at, at + HYBRID_CHUNK) is inside the source range.
        state = unsafe { hybrid(state, src.add(at), HYBRID_CHUNK) };
        at += HYBRID_CHUNK;
    }
    // SAFETY: [at, len) is inside the source range, len - at >= HYBRID_MIN.
    unsafe { hybrid(state, src.add(at), len - at) }
}

/// The carry-less multiplier folds about 16 bytes a cycle on the CPUs of BENCHMARKS.md and
/// the `crc32` instruction runs on other ports. So the input is split: the first part is
/// folded 512 bytes a step, and in the same step three `crc32` streams from zero registers
/// each take [`STREAM_STEP`] bytes of the last `3s` (their latency chains run under the
/// folding). The four registers are then combined by moving each over the bytes after it
/// ([`shift_const`]): the CRC register is linear, the register after `A ++ B` from `r` is the
/// one after `A` moved over `B`, plus `B`'s from zero.
///
/// # Safety
/// As [`crc`], with `len >= HYBRID_MIN`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn hybrid(state: u32, src: *const u8, len: usize) -> u32 {
    // Without a copy: `first8`, `fold8` and `finish` never write through the null destination.
    let dst = std::ptr::null_mut();
    let n = (len / STEP).clamp(1, MAX_STEPS);
    let s = n * STREAM_STEP;
    // a >= 512 n: the folded part holds every step's 512 bytes.
    let a = len - 3 * s;
    // SAFETY: a >= 512.
    let mut acc = unsafe { first8::<false>(state, src, dst) };
    let mut r = [0u64; 3];
    let k = splat(K512B);
    for step in 0..n {
        if step > 0 {
            // SAFETY: 512 (step + 1) <= 512 n <= a.
            unsafe { fold8::<false>(&mut acc, k, src, dst, 512 * step) };
        }
        let base = step * STREAM_STEP;
        for w in (0..STREAM_STEP).step_by(8) {
            for (i, reg) in r.iter_mut().enumerate() {
                // SAFETY: a + i s + base + w + 8 <= a + 3 s = len: inside the source range.
                let word = unsafe { src.add(a + i * s + base + w).cast::<u64>().read_unaligned() };
                *reg = _mm_crc32_u64(*reg, word);
            }
        }
    }
    // SAFETY: [512 n, a) is inside the source range.
    let ra = unsafe { finish::<false>(merge8(acc), src, dst, 512 * n, a) };
    let [k1, k2, k3] = SHIFTS[n - 1];
    sse42::shift(ra, k3)
        ^ sse42::shift(r[0] as u32, k2)
        ^ sse42::shift(r[1] as u32, k1)
        ^ r[2] as u32
}

/// The first 512 bytes as eight accumulators, the register added to the first 32 bits (RFC
/// 3720 B.4's shift register and a CRC of the message with that prefix added are the same
/// linear map).
///
/// # Safety
/// `[0, 512)` lies inside both ranges of the kernel's contract.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn first8<const COPY: bool>(state: u32, src: *const u8, dst: *mut u8) -> [__m512i; 8] {
    let seed = _mm512_zextsi128_si512(_mm_cvtsi32_si128(state as i32));
    // SAFETY: the caller's range.
    let mut a =
        [0usize, 64, 128, 192, 256, 320, 384, 448].map(|at| unsafe { block::<COPY>(src, dst, at) });
    a[0] = _mm512_xor_si512(a[0], seed);
    a
}

/// The eight accumulators folded forward 512 bytes over the bytes at `at`.
///
/// # Safety
/// `[at, at + 512)` lies inside both ranges of the kernel's contract.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
unsafe fn fold8<const COPY: bool>(
    acc: &mut [__m512i; 8],
    k: __m512i,
    src: *const u8,
    dst: *mut u8,
    at: usize,
) {
    for (i, a) in acc.iter_mut().enumerate() {
        // SAFETY: at + 64 i + 64 <= at + 512: the caller's range.
        let y = unsafe { block::<COPY>(src, dst, at + 64 * i) };
        *a = fold512(*a, k, y);
    }
}

/// The eight accumulators lined up with the last: one 512-bit state.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn merge8(a: [__m512i; 8]) -> __m512i {
    let k4 = splat(K256B);
    let b = [
        fold512(a[0], k4, a[4]),
        fold512(a[1], k4, a[5]),
        fold512(a[2], k4, a[6]),
        fold512(a[3], k4, a[7]),
    ];
    let t = fold512(b[0], splat(K192B), b[3]);
    let t = fold512(b[1], splat(K128B), t);
    fold512(b[2], splat(K64B), t)
}

/// The folding kernel alone.
///
/// # Safety
/// As [`kernel`].
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn folded<const COPY: bool>(state: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    if len < 64 {
        // SAFETY: forwarded contract, whole range.
        return unsafe { sse42::words::<COPY>(state, src, dst, 0, len) };
    }
    if len < 512 {
        let seed = _mm512_zextsi128_si512(_mm_cvtsi32_si128(state as i32));
        // SAFETY: len >= 64.
        let x = _mm512_xor_si512(unsafe { block::<COPY>(src, dst, 0) }, seed);
        // SAFETY: [64, len) is inside both ranges.
        return unsafe { finish::<COPY>(x, src, dst, 64, len) };
    }
    // SAFETY: len >= 512.
    let mut acc = unsafe { first8::<COPY>(state, src, dst) };
    let mut at = 512;
    let k = splat(K512B);
    while at + 512 <= len {
        // SAFETY: at + 512 <= len.
        unsafe { fold8::<COPY>(&mut acc, k, src, dst, at) };
        at += 512;
    }
    // SAFETY: [at, len) is inside both ranges.
    unsafe { finish::<COPY>(merge8(acc), src, dst, at, len) }
}

/// The register after the bytes before `at` (folded into `x`) and `[at, len)`: 64-byte
/// folds, the four lanes into one, 16-byte folds, then the `crc32` instruction.
///
/// # Safety
/// `[at, len)` lies inside both ranges of the kernel's contract.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn finish<const COPY: bool>(
    mut x: __m512i,
    src: *const u8,
    dst: *mut u8,
    mut at: usize,
    len: usize,
) -> u32 {
    let k = splat(K64B);
    while at + 64 <= len {
        // SAFETY: at + 64 <= len.
        x = fold512(x, k, unsafe { block::<COPY>(src, dst, at) });
        at += 64;
    }
    let mut v = reduce512(x);
    let k = _mm_set_epi64x(K16B[1] as i64, K16B[0] as i64);
    while at + 16 <= len {
        // SAFETY: at + 16 <= len.
        v = fold128(v, k, unsafe { block16::<COPY>(src, dst, at) });
        at += 16;
    }
    let r = register(v);
    // SAFETY: [at, len) is inside both ranges.
    unsafe { sse42::words::<COPY>(r, src, dst, at, len) }
}

/// The last 16 bytes of state: a CRC of them from a zero register is the register.
#[inline]
#[target_feature(enable = "sse4.2")]
fn register(v: __m128i) -> u32 {
    let lo = _mm_cvtsi128_si64(v) as u64;
    let hi = _mm_extract_epi64::<1>(v) as u64;
    _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32
}

/// The four 128-bit lanes of `x` folded into one: 48, 32 and 16 bytes forward, and the last.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn reduce512(x: __m512i) -> __m128i {
    let k = _mm512_set_epi64(
        0,
        0,
        K16B[1] as i64,
        K16B[0] as i64,
        K32B[1] as i64,
        K32B[0] as i64,
        K48B[1] as i64,
        K48B[0] as i64,
    );
    // Lane 3's constants are zero: its products vanish and it is added as it is.
    let lanes3 = _mm512_maskz_mov_epi64(0b1100_0000, x);
    let t = fold512(x, k, lanes3);
    let h = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64::<1>(t));
    _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// Bytes per [`copy_crc_sum`] call: the sum's 32-bit lanes stay below 2^31 in magnitude (each
/// 64-byte block adds at most 2 * 0x8000 to a lane) for 32768 blocks; half of that.
pub(crate) const SUM_CHUNK: usize = 1 << 20;

/// One 64-byte block's words added to the sum's lanes: each little-endian word `w` as
/// `w - 0x8000` (its sign bit flipped, read as signed), pairs summed by `vpmaddwd` (the
/// technique of [`crate::sum`]); 32 words of `0x8000` per block are added back at the end.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn sum_block(acc: __m512i, v: __m512i) -> __m512i {
    let flip = _mm512_set1_epi16(i16::MIN);
    let ones = _mm512_set1_epi16(1);
    _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_xor_si512(v, flip), ones))
}

/// The CRC register after `len` bytes at `src`, from register `state`, copying them to `dst`,
/// and the RFC 1071 sum of the same bytes: their little-endian 16-bit words paired from `src`
/// (an odd last byte padded with zero), unfolded. Every byte is loaded once; the copy, the CRC
/// and the sum are of the values in the registers. The blocks before the last partial one
/// run as [`folded`]'s (the sum's three instructions per block beside the folds); the last
/// 0-63 bytes are loaded and stored with a mask, and their CRC taken from a copy on the stack.
///
/// # Safety
/// The CPU has the features of [`available`] and AVX-512BW; `src` is valid for reads and `dst`
/// for writes of `len` bytes; the ranges do not overlap; `len <= SUM_CHUNK`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn copy_crc_sum(
    state: u32,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> (u32, u64) {
    let mut s = _mm512_setzero_si512();
    let mut at = 0;
    let mut state = state;
    if len >= 64 {
        let seed = _mm512_zextsi128_si512(_mm_cvtsi32_si128(state as i32));
        let mut x = if len >= 512 {
            // SAFETY: len >= 512.
            let mut acc = unsafe { first8::<true>(0, src, dst) };
            for a in &acc {
                s = sum_block(s, *a);
            }
            acc[0] = _mm512_xor_si512(acc[0], seed);
            at = 512;
            let k = splat(K512B);
            while at + 512 <= len {
                for (i, a) in acc.iter_mut().enumerate() {
                    // SAFETY: at + 64 i + 64 <= at + 512 <= len.
                    let y = unsafe { block::<true>(src, dst, at + 64 * i) };
                    s = sum_block(s, y);
                    *a = fold512(*a, k, y);
                }
                at += 512;
            }
            merge8(acc)
        } else {
            // SAFETY: len >= 64.
            let y = unsafe { block::<true>(src, dst, 0) };
            s = sum_block(s, y);
            at = 64;
            _mm512_xor_si512(y, seed)
        };
        let k = splat(K64B);
        while at + 64 <= len {
            // SAFETY: at + 64 <= len.
            let y = unsafe { block::<true>(src, dst, at) };
            s = sum_block(s, y);
            x = fold512(x, k, y);
            at += 64;
        }
        // The state of the bytes before `at`, as a register: the tail below continues it.
        let v = reduce512(x);
        state = register(v);
    }
    let mut blocks = at / 64;
    let rest = len - at;
    if rest > 0 {
        let m: u64 = (1u64 << rest) - 1;
        // SAFETY: the mask selects bytes [at, len) only: masked-out bytes are neither read
        // nor written (and cannot fault).
        let v = unsafe { _mm512_maskz_loadu_epi8(m, src.add(at).cast::<i8>()) };
        // SAFETY: as above, for the destination.
        unsafe { _mm512_mask_storeu_epi8(dst.add(at).cast::<i8>(), m, v) };
        s = sum_block(s, v);
        blocks += 1;
        let mut tail = [0u8; 64];
        // SAFETY: `tail` is ours, 64 bytes.
        unsafe { _mm512_storeu_si512(tail.as_mut_ptr().cast(), v) };
        // SAFETY: `tail` holds the `rest` bytes; nothing is written (no copy).
        state = unsafe {
            crate::sse42::words::<false>(state, tail.as_ptr(), std::ptr::null_mut(), 0, rest)
        };
    }
    let lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(s));
    let hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(s));
    let t = _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
    // Exact: each of the 32 words per block was added as w - 0x8000.
    (state, (t + ((blocks as i64) << 20)) as u64)
}

/// [`copy_crc_sum`] after a head of `hlen` bytes at `head`: the head copied to `dst` and its
/// CRC taken 8 bytes at a time, then the `len` bytes at `src` as [`copy_crc_sum`] does, stored
/// after the head. The sum is of the `src` bytes only. One call for both (an FPDU's head and
/// payload on the sender), where a separate call for the head cost a dispatch of its own.
///
/// # Safety
/// As [`copy_crc_sum`], with `head` valid for reads of `hlen` bytes, `dst` valid for writes of
/// `hlen + len` bytes, and neither source range overlapping the destination.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn copy_crc_sum_after(
    state: u32,
    head: *const u8,
    hlen: usize,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) -> (u32, u64) {
    // SAFETY: [0, hlen) is inside the head and the destination (caller).
    let state = unsafe { sse42::words::<true>(state, head, dst, 0, hlen) };
    // SAFETY: [hlen, hlen + len) of the destination, the `len` source bytes (caller).
    unsafe { copy_crc_sum(state, src, dst.add(hlen), len) }
}
