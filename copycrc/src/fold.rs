//! The x86-64 kernels: four 512-bit accumulators folded 256 bytes at a time, one for the
//! remaining 64-byte blocks, one 128-bit lane for the remaining 16-byte blocks, then the SSE4.2
//! `crc32` instruction for the last 16 bytes of state and the tail (see [`crate::poly`]).
//!
//! `state` is the CRC register (the inverted CRC value, RFC 3720 B.4's initial all-ones
//! included); it is added to the first 32 bits of the data, after which every fold starts from
//! zero, and the `crc32` instruction turns the final 128-bit block into the register again.

use std::arch::x86_64::*;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::poly::fold_pair;

/// 0: not probed; 1: no; 2: yes.
static AVAILABLE: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has what the kernels use (probed once).
#[inline]
pub(crate) fn available() -> bool {
    match AVAILABLE.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => {
            let yes = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("vpclmulqdq")
                && std::is_x86_feature_detected!("pclmulqdq")
                && std::is_x86_feature_detected!("sse4.2");
            AVAILABLE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
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

/// # Safety
/// As [`copy_crc`] (with `COPY` false, `dst` is not used).
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn kernel<const COPY: bool>(state: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    if len < 64 {
        // SAFETY: forwarded contract, whole range.
        return unsafe { tail::<COPY>(state, src, dst, 0, len) };
    }
    // The register is added to the first 32 bits of the data (RFC 3720 B.4's shift register
    // and a CRC of the message with that prefix added are the same linear map).
    let seed = _mm512_zextsi128_si512(_mm_cvtsi32_si128(state as i32));
    let mut at;
    let mut x;
    if len >= 512 {
        // SAFETY: len >= 512.
        let mut a = unsafe {
            [
                _mm512_xor_si512(block::<COPY>(src, dst, 0), seed),
                block::<COPY>(src, dst, 64),
                block::<COPY>(src, dst, 128),
                block::<COPY>(src, dst, 192),
                block::<COPY>(src, dst, 256),
                block::<COPY>(src, dst, 320),
                block::<COPY>(src, dst, 384),
                block::<COPY>(src, dst, 448),
            ]
        };
        at = 512;
        let k = splat(K512B);
        while at + 512 <= len {
            for (i, acc) in a.iter_mut().enumerate() {
                // SAFETY: at + 64 * i + 64 <= at + 512 <= len.
                let y = unsafe { block::<COPY>(src, dst, at + 64 * i) };
                *acc = fold512(*acc, k, y);
            }
            at += 512;
        }
        let k4 = splat(K256B);
        let b = [
            fold512(a[0], k4, a[4]),
            fold512(a[1], k4, a[5]),
            fold512(a[2], k4, a[6]),
            fold512(a[3], k4, a[7]),
        ];
        let t = fold512(b[0], splat(K192B), b[3]);
        let t = fold512(b[1], splat(K128B), t);
        x = fold512(b[2], splat(K64B), t);
    } else {
        // SAFETY: len >= 64.
        x = _mm512_xor_si512(unsafe { block::<COPY>(src, dst, 0) }, seed);
        at = 64;
    }
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
    // The last 16 bytes of state: a CRC of them from a zero register is the register.
    let lo = _mm_cvtsi128_si64(v) as u64;
    let hi = _mm_extract_epi64::<1>(v) as u64;
    let r = _mm_crc32_u64(_mm_crc32_u64(0, lo), hi) as u32;
    // SAFETY: [at, len) is inside both ranges.
    unsafe { tail::<COPY>(r, src, dst, at, len) }
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

/// The register after bytes `[at, len)` by the `crc32` instruction, 8 bytes at a time, copying
/// them with `COPY`.
///
/// # Safety
/// `[at, len)` lies inside both ranges of the kernel's contract.
#[inline]
#[target_feature(enable = "sse4.2")]
unsafe fn tail<const COPY: bool>(
    state: u32,
    src: *const u8,
    dst: *mut u8,
    mut at: usize,
    len: usize,
) -> u32 {
    let mut r = u64::from(state);
    while at + 8 <= len {
        // SAFETY: at + 8 <= len: inside the source range; unaligned read.
        let w = unsafe { src.add(at).cast::<u64>().read_unaligned() };
        if COPY {
            // SAFETY: inside the destination range; unaligned write.
            unsafe { dst.add(at).cast::<u64>().write_unaligned(w) };
        }
        r = _mm_crc32_u64(r, w);
        at += 8;
    }
    let mut r = r as u32;
    while at < len {
        // SAFETY: at < len: inside the source range.
        let b = unsafe { src.add(at).read() };
        if COPY {
            // SAFETY: inside the destination range.
            unsafe { dst.add(at).write(b) };
        }
        r = _mm_crc32_u8(r, b);
        at += 1;
    }
    r
}
