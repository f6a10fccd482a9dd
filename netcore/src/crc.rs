//! CRC32c (Castagnoli), the MPA FPDU CRC (RFC 5044 §4.3, same as iSCSI RFC 3720 B.4).
//!
//! Every caller goes through [`crc32c`] / [`crc32c_append`] / [`Crc32c`], so the implementation
//! is chosen in one place, at run time, for the CPU the process runs on. Two candidates:
//!
//! - [`CrcImpl::Crc32cCrate`]: the `crc32c` crate (SSE4.2 `crc32` instruction, 3-way interleave);
//! - [`CrcImpl::CrcFast`]: the `crc-fast` crate (`crc32` fused with (V)PCLMULQDQ folding).
//!
//! Which one is faster depends on the CPU and not only on its feature flags: on an Intel Xeon
//! with AVX-512 + VPCLMULQDQ `crc-fast` is 4-5x faster at FPDU sizes, while on the AMD EPYC
//! guests of BENCHMARKS.md, which report the same flags, `crc32c` wins. So:
//!
//! - until someone decides, the first call picks by CPU features ([`detect`]);
//! - a program that owns a clock calls [`calibrate`] once at startup (this crate reads no
//!   clock: the caller passes one) and [`set_impl`] with the winner, and logs it.
//!
//! The choice is one relaxed atomic load per call.

use std::sync::atomic::{AtomicU8, Ordering};

/// A CRC32c implementation that [`crc32c_append`] can dispatch to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrcImpl {
    /// The `crc32c` crate (SSE4.2 `crc32` instruction, software table without it).
    Crc32cCrate,
    /// The `crc-fast` crate (`crc32` fused with PCLMULQDQ / AVX-512 VPCLMULQDQ folding).
    CrcFast,
}

impl CrcImpl {
    /// Every candidate, in a fixed order.
    pub const ALL: [CrcImpl; 2] = [CrcImpl::Crc32cCrate, CrcImpl::CrcFast];

    /// The name used in logs, configs and benchmark ids (`crc32c`, `crc-fast`).
    pub const fn name(self) -> &'static str {
        match self {
            CrcImpl::Crc32cCrate => "crc32c",
            CrcImpl::CrcFast => "crc-fast",
        }
    }

    /// Parse [`CrcImpl::name`].
    pub fn from_name(name: &str) -> Option<CrcImpl> {
        CrcImpl::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Continue a CRC with this implementation (see [`crc32c_append`]).
    #[inline]
    pub fn append(self, crc: u32, data: &[u8]) -> u32 {
        match self {
            CrcImpl::Crc32cCrate => ::crc32c::crc32c_append(crc, data),
            CrcImpl::CrcFast => crc_fast_append(crc, data),
        }
    }

    const fn code(self) -> u8 {
        match self {
            CrcImpl::Crc32cCrate => 1,
            CrcImpl::CrcFast => 2,
        }
    }
}

impl std::fmt::Display for CrcImpl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `crc-fast` with a running value: its reflected state is the finalised CRC inverted. A CRC
/// from the start (an FPDU sealed whole) skips the `Digest`, whose construction copies the
/// algorithm's ~200-byte parameter block on every call.
#[inline]
fn crc_fast_append(crc: u32, data: &[u8]) -> u32 {
    if crc == 0 {
        return crc_fast::crc32_iscsi(data);
    }
    let mut d =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    d.finalize() as u32
}

/// 0: not chosen yet; otherwise [`CrcImpl::code`].
static CHOICE: AtomicU8 = AtomicU8::new(0);

/// The implementation CPU features suggest: `crc-fast` when the CPU has AVX-512 VL and
/// VPCLMULQDQ (its 512-bit folding path), `crc32c` otherwise. A guess: [`calibrate`] measures.
pub fn detect() -> CrcImpl {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("sse4.2")
        {
            return CrcImpl::CrcFast;
        }
    }
    CrcImpl::Crc32cCrate
}

/// The implementation in use (decided by [`detect`] on first use unless [`set_impl`] was called).
#[inline]
pub fn current() -> CrcImpl {
    match CHOICE.load(Ordering::Relaxed) {
        1 => CrcImpl::Crc32cCrate,
        2 => CrcImpl::CrcFast,
        _ => {
            let d = detect();
            // A concurrent `set_impl` wins over the guess.
            let _ = CHOICE.compare_exchange(0, d.code(), Ordering::Relaxed, Ordering::Relaxed);
            current_set().unwrap_or(d)
        }
    }
}

fn current_set() -> Option<CrcImpl> {
    match CHOICE.load(Ordering::Relaxed) {
        1 => Some(CrcImpl::Crc32cCrate),
        2 => Some(CrcImpl::CrcFast),
        _ => None,
    }
}

/// Use `imp` from now on, process-wide. Both give the same values; only the speed differs.
pub fn set_impl(imp: CrcImpl) {
    CHOICE.store(imp.code(), Ordering::Relaxed);
}

/// Running CRC32c state (the finalised value so far, as `crc32c_append` takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Crc32c(u32);

impl Crc32c {
    /// A fresh CRC (of zero bytes).
    pub const fn new() -> Self {
        Crc32c(0)
    }
    /// Feed more bytes.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.0 = crc32c_append(self.0, data);
    }
    /// The CRC of everything fed so far.
    pub const fn value(self) -> u32 {
        self.0
    }
}

/// CRC32c of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continue a CRC32c: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    current().append(crc, data)
}

/// What [`calibrate`] measured: nanoseconds per call (best of its rounds) for each
/// implementation at each size, and the winner.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// `(implementation, size in bytes, best ns per call)`.
    pub samples: Vec<(CrcImpl, usize, f64)>,
    /// The implementation with the lowest total time over [`CALIBRATION_SIZES`].
    pub best: CrcImpl,
}

impl Calibration {
    /// GB/s (10^9 bytes per second) of `imp` at `size`, if measured.
    pub fn gbps(&self, imp: CrcImpl, size: usize) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.0 == imp && s.1 == size)
            .map(|s| s.1 as f64 / s.2.max(1e-3))
    }

    /// One line for a log: `crc-fast (crc32c 1440 B 8.1 GB/s, ...)`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .samples
            .iter()
            .map(|(i, n, _)| format!("{i} {n} B {:.1} GB/s", self.gbps(*i, *n).unwrap_or(0.0)))
            .collect();
        format!("{} ({})", self.best, parts.join(", "))
    }
}

/// The sizes [`calibrate`] times: a full FPDU at MTU 1500 and at MTU 9000 (RFC 5044 §8's
/// one-FPDU-per-segment rule makes those the common CRC spans).
pub const CALIBRATION_SIZES: [usize; 2] = [1440, 8940];

/// Time both implementations with the caller's clock (`now_ns`, any monotonic nanosecond
/// counter) and return the faster one. About 1-3 ms of CPU. Each (implementation, size) is
/// timed in `ROUNDS` alternating rounds and the best round counts, so a preempted round does
/// not decide. The result is not applied: call [`set_impl`] with [`Calibration::best`].
pub fn calibrate(mut now_ns: impl FnMut() -> u64) -> Calibration {
    const ROUNDS: usize = 7;
    const BYTES_PER_ROUND: usize = 256 * 1024;
    let max = CALIBRATION_SIZES.iter().copied().max().unwrap_or(0);
    let data: Vec<u8> = (0..max)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8 >> 1)
        .collect();
    let mut best = vec![f64::INFINITY; CrcImpl::ALL.len() * CALIBRATION_SIZES.len()];
    let mut sink = 0u32;
    for _ in 0..ROUNDS {
        for (si, &size) in CALIBRATION_SIZES.iter().enumerate() {
            let calls = (BYTES_PER_ROUND / size).max(1);
            for (ii, imp) in CrcImpl::ALL.into_iter().enumerate() {
                let t0 = now_ns();
                for _ in 0..calls {
                    sink = sink
                        .wrapping_add(imp.append(sink & 1, std::hint::black_box(&data[..size])));
                }
                let dt = now_ns().saturating_sub(t0) as f64 / calls as f64;
                let slot = &mut best[ii * CALIBRATION_SIZES.len() + si];
                *slot = slot.min(dt);
            }
        }
    }
    std::hint::black_box(sink);
    let mut samples = Vec::new();
    for (ii, imp) in CrcImpl::ALL.into_iter().enumerate() {
        for (si, &size) in CALIBRATION_SIZES.iter().enumerate() {
            samples.push((imp, size, best[ii * CALIBRATION_SIZES.len() + si]));
        }
    }
    let total = |imp: CrcImpl| -> f64 {
        samples
            .iter()
            .filter(|s| s.0 == imp)
            .map(|s| s.2 / s.1 as f64)
            .sum()
    };
    let best = CrcImpl::ALL
        .into_iter()
        .min_by(|a, b| total(*a).total_cmp(&total(*b)))
        .unwrap_or(CrcImpl::Crc32cCrate);
    Calibration { samples, best }
}

/// Alternative implementations by name, kept for the benchmarks that compare them.
pub mod candidates {
    use super::CrcImpl;

    /// `crc32c` crate (SSE4.2 `crc32` instruction, 3-way interleaved).
    pub fn crc32c_crate(data: &[u8]) -> u32 {
        CrcImpl::Crc32cCrate.append(0, data)
    }
    /// `crc-fast` crate (PCLMULQDQ/VPCLMULQDQ folding).
    pub fn crc_fast(data: &[u8]) -> u32 {
        CrcImpl::CrcFast.append(0, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 Appendix B.4 test vectors, through every implementation.
    #[test]
    fn rfc3720_vectors() {
        let inc: Vec<u8> = (0u8..32).collect();
        let dec: Vec<u8> = (0u8..32).rev().collect();
        for imp in CrcImpl::ALL {
            let f = |d: &[u8]| imp.append(0, d);
            assert_eq!(f(&[0u8; 32]), 0x8a91_36aa, "{imp}");
            assert_eq!(f(&[0xffu8; 32]), 0x62a8_ab43, "{imp}");
            assert_eq!(f(&inc), 0x46dd_794e, "{imp}");
            assert_eq!(f(&dec), 0x113f_db5c, "{imp}");
        }
        assert_eq!(crc32c(&inc), 0x46dd_794e);
    }

    /// Splitting anywhere, with either implementation per piece, gives the one-shot value.
    #[test]
    fn append_and_candidates_agree() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = CrcImpl::Crc32cCrate.append(0, &data);
        for split in [
            0, 1, 3, 15, 16, 17, 63, 64, 255, 256, 257, 1000, 4096, 8999, 9000,
        ] {
            for a in CrcImpl::ALL {
                for b in CrcImpl::ALL {
                    let c = b.append(a.append(0, &data[..split]), &data[split..]);
                    assert_eq!(c, whole, "split {split} {a} then {b}");
                }
            }
        }
        let mut c = Crc32c::new();
        c.update(&data[..1000]);
        c.update(&data[1000..]);
        assert_eq!(c.value(), whole);
        assert_eq!(candidates::crc32c_crate(&data), whole);
        assert_eq!(candidates::crc_fast(&data), whole);
        for len in 0..300 {
            assert_eq!(
                CrcImpl::CrcFast.append(0x1234_5678, &data[..len]),
                CrcImpl::Crc32cCrate.append(0x1234_5678, &data[..len]),
                "len {len}"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for imp in CrcImpl::ALL {
            assert_eq!(CrcImpl::from_name(imp.name()), Some(imp));
        }
        assert_eq!(CrcImpl::from_name("zlib"), None);
    }

    /// With a fake clock that charges crc-fast double, calibration picks crc32c, and the
    /// other way round; the samples cover every (implementation, size).
    #[test]
    fn calibrate_picks_the_cheaper() {
        for slow in CrcImpl::ALL {
            // The clock advances by a fixed step per read; the step is larger while `slow`
            // is being timed. Timing order is known: impl loop inside size loop inside rounds.
            let mut reads = 0u64;
            let mut t = 0u64;
            let cal = calibrate(|| {
                let pair = reads / 2; // two reads per timed block
                let imp = CrcImpl::ALL[(pair % 2) as usize];
                reads += 1;
                t += if imp == slow { 2000 } else { 1000 };
                t
            });
            assert_eq!(cal.samples.len(), 4);
            assert_ne!(cal.best, slow, "{}", cal.summary());
            assert!(cal.gbps(slow, 1440).is_some());
        }
    }

    #[test]
    fn selection_is_process_wide_and_values_do_not_change() {
        let data = b"123456789";
        let before = crc32c(data);
        assert_eq!(before, 0xe306_9283);
        let old = current();
        for imp in CrcImpl::ALL {
            set_impl(imp);
            assert_eq!(current(), imp);
            assert_eq!(crc32c(data), before);
        }
        set_impl(old);
    }
}
