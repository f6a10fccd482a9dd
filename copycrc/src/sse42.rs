//! The x86-64 kernels for CPUs without the AVX-512 folding of `fold` but with SSE4.2 and
//! PCLMULQDQ (AMD Zen 2/3, many Intel parts; also what valgrind shows a program): a copy fused
//! with three interleaved `crc32` streams, and a short single-stream CRC.
//!
//! [`copy_crc`] splits its input into three equal streams of whole 16-byte steps; each 8-byte
//! word is loaded once, stored, and fed to its stream's `crc32` from the register (each source
//! byte is read once, and the CRC covers exactly the bytes written). The three registers (the
//! first from `state`, the others from zero) are combined by moving each over the bytes after
//! it ([`shift_const`], as `fold::hybrid` does); the rest, under 48 bytes, runs one stream.
//! Three streams hide the instruction's 3-cycle latency: one word a cycle, 8 bytes a cycle,
//! in the same pass as the copy.
//!
//! [`crc`] serves short inputs (the data path's 2-byte MPA length fields, 14-byte DDP headers
//! and pads): one stream with no set-up, where the `crc32c` crate's per-call head and tail
//! cost more than the bytes.
//!
//! `state` is the CRC register (the inverted CRC value), as in `fold`.

use std::arch::x86_64::*;
use std::sync::atomic::AtomicU8;

use crate::poly::shift_const;

/// [`available`]'s probe, once.
static AVAILABLE: AtomicU8 = AtomicU8::new(0);

/// Whether this CPU has what these kernels use (SSE4.2, PCLMULQDQ; probed once).
#[inline]
pub(crate) fn available() -> bool {
    crate::probed(&AVAILABLE, || {
        std::is_x86_feature_detected!("sse4.2") && std::is_x86_feature_detected!("pclmulqdq")
    })
}

/// Bytes each stream takes per loop step: two words.
const STEP: usize = 16;
/// Most steps per stream whose shifts are tabled: streams of up to 4 KiB, pieces of 12 KiB.
const MAX_STEPS: usize = 256;
/// For streams of `n` steps (index `n - 1`): the multipliers moving a register over `s` and
/// `2s` bytes, `s = n * STEP` ([`shift_const`]).
const SHIFTS: [[u64; 2]; MAX_STEPS] = {
    let mut t = [[0u64; 2]; MAX_STEPS];
    let mut n = 0;
    while n < MAX_STEPS {
        let s = ((n + 1) * STEP) as u32;
        t[n] = [shift_const(s), shift_const(2 * s)];
        n += 1;
    }
    t
};

/// Copy `len` bytes from `src` to `dst` and return the register after them from `state`.
///
/// # Safety
/// SSE4.2 and PCLMULQDQ are available ([`available`]); `src` is valid for reads and `dst` for
/// writes of `len` bytes, the ranges do not overlap. No alignment is required.
#[target_feature(enable = "sse4.2,pclmulqdq")]
pub(crate) unsafe fn copy_crc(mut state: u32, src: *const u8, dst: *mut u8, len: usize) -> u32 {
    let mut at = 0;
    while len - at >= 3 * STEP {
        let n = ((len - at) / (3 * STEP)).min(MAX_STEPS);
        // SAFETY: [at, at + 3 n STEP) lies inside both ranges (n STEP * 3 <= len - at).
        state = unsafe { streams(state, src.add(at), dst.add(at), n) };
        at += 3 * n * STEP;
    }
    // SAFETY: [at, len) lies inside both ranges.
    unsafe { words::<true>(state, src, dst, at, len) }
}

/// The register after `len` bytes from `src`, one stream (for short inputs).
///
/// # Safety
/// SSE4.2 is available ([`available`]); `src` is valid for reads of `len` bytes.
#[inline]
#[target_feature(enable = "sse4.2")]
pub(crate) unsafe fn crc(state: u32, src: *const u8, len: usize) -> u32 {
    // SAFETY: without a copy the destination is not used; [0, len) is inside the source.
    unsafe { words::<false>(state, src, std::ptr::null_mut(), 0, len) }
}

/// Three streams of `n` steps each over `[0, 3 n STEP)`, copied, combined into the register
/// after them from `state`.
///
/// # Safety
/// As [`copy_crc`] with `len = 3 n STEP`, `1 <= n <= MAX_STEPS`.
#[inline]
#[target_feature(enable = "sse4.2,pclmulqdq")]
unsafe fn streams(state: u32, src: *const u8, dst: *mut u8, n: usize) -> u32 {
    let s = n * STEP;
    // One word of each stream: loaded once, stored, fed to the stream's register.
    let word = |r: &mut [u64; 3], at: usize| {
        for (k, reg) in r.iter_mut().enumerate() {
            let at = k * s + at;
            // SAFETY: callers pass at + 8 <= s, so the word lies in [0, 3 s): inside both
            // ranges; the accesses are unaligned.
            let w = unsafe { src.add(at).cast::<u64>().read_unaligned() };
            // SAFETY: as above.
            unsafe { dst.add(at).cast::<u64>().write_unaligned(w) };
            *reg = _mm_crc32_u64(*reg, w);
        }
    };
    let mut r = [u64::from(state), 0, 0];
    let mut i = 0;
    // Four words of each stream a step (the loop's own instructions spread over 96 bytes),
    // then two when n is odd.
    while i + 2 * STEP <= s {
        word(&mut r, i);
        word(&mut r, i + 8);
        word(&mut r, i + 16);
        word(&mut r, i + 24);
        i += 2 * STEP;
    }
    if i < s {
        word(&mut r, i);
        word(&mut r, i + 8);
    }
    let [k1, k2] = SHIFTS[n - 1];
    shift(r[0] as u32, k2) ^ shift(r[1] as u32, k1) ^ r[2] as u32
}

/// Register `r` moved over the zero bytes `k` stands for ([`shift_const`]; also how `fold`'s
/// hybrid kernel combines its streams).
#[inline]
#[target_feature(enable = "pclmulqdq,sse4.2")]
pub(crate) fn shift(r: u32, k: u64) -> u32 {
    let p =
        _mm_clmulepi64_si128::<0x00>(_mm_cvtsi64_si128(i64::from(r)), _mm_cvtsi64_si128(k as i64));
    _mm_crc32_u64(0, _mm_cvtsi128_si64(p) as u64) as u32
}

/// The register after bytes `[at, len)` by one `crc32` stream, 8 bytes at a time, copying
/// them with `COPY` (also the tail of `fold`'s kernels).
///
/// # Safety
/// SSE4.2 is available; `[at, len)` lies inside the source range and, with `COPY`, the
/// destination range.
#[inline]
#[target_feature(enable = "sse4.2")]
pub(crate) unsafe fn words<const COPY: bool>(
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
    if at + 4 <= len {
        // SAFETY: at + 4 <= len: inside the source range; unaligned read.
        let w = unsafe { src.add(at).cast::<u32>().read_unaligned() };
        if COPY {
            // SAFETY: inside the destination range; unaligned write.
            unsafe { dst.add(at).cast::<u32>().write_unaligned(w) };
        }
        r = _mm_crc32_u32(r, w);
        at += 4;
    }
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
