//! The RFC 1071 ones-complement sum, the TCP checksum's (RFC 9293 §3.1) and IPv4's, over a
//! payload: it runs on every transmitted payload byte and every received segment.
//!
//! The implementation is chosen once per process, at run time, by CPU features ([`detect`]):
//! `copycrc`'s AVX-512 kernel (AVX-512F/BW), its AVX2 kernel, or the portable loop (any CPU,
//! any architecture). All give the same values; [`current`] names the one in use, for the log.

use std::sync::atomic::{AtomicU8, Ordering};

use copycrc::SumKernel;

/// An implementation of [`ones_complement_sum`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SumImpl {
    /// A `copycrc` kernel with intrinsics.
    Kernel(SumKernel),
    /// [`portable`]: a loop of 64-bit adds the compiler vectorizes.
    Portable,
}

impl SumImpl {
    /// The name used in logs (`avx512`, `avx2`, `portable`).
    pub const fn name(self) -> &'static str {
        match self {
            SumImpl::Kernel(k) => k.name(),
            SumImpl::Portable => "portable",
        }
    }

    /// The sum of `data` by this implementation (see [`ones_complement_sum`]); the portable
    /// loop when this CPU does not run the kernel.
    #[inline]
    pub fn sum(self, data: &[u8]) -> u16 {
        match self {
            SumImpl::Kernel(k) => k.sum(data).unwrap_or_else(|| portable(data)),
            SumImpl::Portable => portable(data),
        }
    }

    const fn code(self) -> u8 {
        match self {
            SumImpl::Kernel(SumKernel::Avx512) => 1,
            SumImpl::Kernel(SumKernel::Avx2) => 2,
            SumImpl::Portable => 3,
        }
    }

    const fn from_code(code: u8) -> Option<SumImpl> {
        match code {
            1 => Some(SumImpl::Kernel(SumKernel::Avx512)),
            2 => Some(SumImpl::Kernel(SumKernel::Avx2)),
            3 => Some(SumImpl::Portable),
            _ => None,
        }
    }
}

impl std::fmt::Display for SumImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// 0: not chosen yet; otherwise [`SumImpl::code`].
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// The widest kernel this CPU runs (`copycrc::SumKernel::ALL` is widest first), else the
/// portable loop. At a 1448-byte payload on the Intel Xeon of BENCHMARKS.md §4 the AVX-512
/// kernel takes 15 ns where the portable loop (in AVX2) takes 26.
pub fn detect() -> SumImpl {
    SumKernel::ALL
        .into_iter()
        .find(|k| k.available())
        .map_or(SumImpl::Portable, SumImpl::Kernel)
}

/// The implementation in use ([`detect`]'s on first use unless [`set_impl`] was called).
#[inline]
pub fn current() -> SumImpl {
    match SumImpl::from_code(CHOICE.load(Ordering::Relaxed)) {
        Some(imp) => imp,
        None => choose_now(),
    }
}

/// [`current`]'s first call.
#[cold]
#[inline(never)]
fn choose_now() -> SumImpl {
    let d = detect();
    // A concurrent `set_impl` wins over the guess.
    let _ = CHOICE.compare_exchange(0, d.code(), Ordering::Relaxed, Ordering::Relaxed);
    SumImpl::from_code(CHOICE.load(Ordering::Relaxed)).unwrap_or(d)
}

/// Use `imp` from now on, process-wide (one this CPU does not run falls back to the portable
/// loop). Only the speed differs.
pub fn set_impl(imp: SumImpl) {
    CHOICE.store(imp.code(), Ordering::Relaxed);
}

/// RFC 1071 sum of `data` as 16-bit big-endian words (an odd tail padded with zero), with the
/// carries folded in and not complemented: 0 only for all-zero data. Sums of even-length
/// pieces combine by ones-complement addition.
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    current().sum(data)
}

/// [`ones_complement_sum`] without intrinsics, computed as RFC 1071 §2 suggests for speed:
/// 64-bit little-endian words split into their 32-bit halves, added into eight independent
/// 64-bit accumulators (§2(C), deferred carries: no overflow below 2^32 words; independent
/// sums keep the adds from waiting on each other and the loop vectorizes on any x86-64),
/// folded to 16 bits, and byte-swapped at the end (§2(B), byte-order independence). Compiled
/// twice and chosen at run time by CPU features (`multiversion`): with AVX2 the same loop
/// runs in 256-bit lanes.
#[multiversion::multiversion(targets("x86_64+avx2"))]
pub fn portable(data: &[u8]) -> u16 {
    let mut lo = [0u64; 4];
    let mut hi = [0u64; 4];
    let mut blocks = data.chunks_exact(32);
    for b in &mut blocks {
        for (i, w) in b.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            lo[i] += w & 0xffff_ffff;
            hi[i] += w >> 32;
        }
    }
    let mut acc: u64 = lo
        .iter()
        .chain(&hi)
        .fold(0, |a, &x| a + (x & 0xffff_ffff) + (x >> 32));
    let mut words = blocks.remainder().chunks_exact(4);
    for c in &mut words {
        acc += u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    // The tail (0-3 bytes) zero-padded to a word: in the little-endian view an odd last byte
    // is the low half of its 16-bit word, which the final swap makes the high half (RFC 1071).
    let mut tail = [0u8; 4];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    acc += u64::from(u32::from_le_bytes(tail));
    fold(acc).swap_bytes()
}

/// End-around-carry fold of a sum of 16-bit words to 16 bits (RFC 1071 §2(C)), without a
/// loop: 2^32 and 2^16 are both 1 modulo 0xffff, so each step keeps the value modulo 0xffff
/// and a non-zero sum stays non-zero; four steps bring any u64 below 2^16, to the one value
/// in 0..=0xffff (0 only for a zero sum) the repeated fold reaches. `tcp::wire` folds its
/// header and pseudo-header sums with it too.
pub fn fold(acc: u64) -> u16 {
    let acc = (acc & 0xffff_ffff) + (acc >> 32); // < 2^33
    let acc = (acc & 0xffff) + (acc >> 16); // < 2^17 + 2^16
    let acc = (acc & 0xffff) + (acc >> 16); // <= 0xffff + 2
    let acc = (acc & 0xffff) + (acc >> 16); // <= 0xffff
    // Truncation impossible: at most 0xffff after the steps above.
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(data: &[u8]) -> u16 {
        let mut acc: u64 = 0;
        for c in data.chunks(2) {
            acc += u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0));
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// Every implementation (the kernels this CPU lacks fall back to the portable loop) equals
    /// the RFC 1071 definition at every length 0..300, every start offset 0..64, and at the
    /// data path's sizes; the all-ones case has the largest partial sums.
    #[test]
    fn every_implementation_matches_the_definition() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let buf: Vec<u8> = (0..9200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let ones = vec![0xffu8; 65600];
        let imps = [
            SumImpl::Kernel(SumKernel::Avx512),
            SumImpl::Kernel(SumKernel::Avx2),
            SumImpl::Portable,
        ];
        for imp in imps {
            for off in 0..64 {
                for len in (0..300).chain([1448, 1449, 9000, 9092]) {
                    let d = &buf[off..off + len];
                    assert_eq!(imp.sum(d), reference(d), "{imp} off {off} len {len}");
                }
                let d = &ones[off..off + 65536 - off % 3];
                assert_eq!(imp.sum(d), reference(d), "{imp} ones off {off}");
            }
            assert_eq!(imp.sum(&[0; 100]), 0);
        }
    }

    /// The choice is the detected one until set, and survives a round trip through its code.
    #[test]
    fn the_choice_is_detected_and_can_be_set() {
        assert_eq!(current(), detect());
        for imp in [
            SumImpl::Kernel(SumKernel::Avx512),
            SumImpl::Kernel(SumKernel::Avx2),
            SumImpl::Portable,
        ] {
            assert_eq!(SumImpl::from_code(imp.code()), Some(imp));
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512bw") {
            assert_eq!(detect(), SumImpl::Kernel(SumKernel::Avx512));
        }
    }
}
