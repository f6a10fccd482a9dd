//! CRC32c (Castagnoli), the MPA FPDU CRC (RFC 5044 §4.3, same as iSCSI RFC 3720 B.4).
//!
//! Every caller goes through [`crc32c`] / [`crc32c_append`] / [`Crc32c`], so the implementation
//! is chosen in one place, at run time, for the CPU the process runs on. Three candidates:
//!
//! - [`CrcImpl::Crc32cCrate`]: the `crc32c` crate (SSE4.2 `crc32` instruction, 3-way interleave);
//! - [`CrcImpl::CrcFast`]: the `crc-fast` crate (`crc32` fused with (V)PCLMULQDQ folding);
//! - [`CrcImpl::CopyCrc`]: our `copycrc` crate (512-bit VPCLMULQDQ folding; on CPUs without
//!   AVX-512, three interleaved `crc32` streams), the only one that computes the CRC of bytes
//!   while it copies them ([`CrcImpl::copy_append`]): the data path
//!   copies every FPDU payload once (sender: region to frame; receiver: frame to region), so
//!   with it the CRC costs no second pass over the bytes.
//!
//! Which one is faster depends on the CPU and not only on its feature flags (BENCHMARKS.md §3:
//! an Intel Xeon and an AMD EPYC with the same flags ranked `crc32c` and `crc-fast` in opposite
//! orders). So:
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
    /// The `copycrc` crate (AVX-512 VPCLMULQDQ folding fused with the copy; without AVX-512,
    /// three `crc32` streams fused with the copy and the `crc32c` crate for longer CRCs without
    /// one; the `crc32c` crate behind a buffer without SSE4.2 and PCLMULQDQ).
    CopyCrc,
}

impl CrcImpl {
    /// Every candidate, in a fixed order.
    pub const ALL: [CrcImpl; 3] = [CrcImpl::Crc32cCrate, CrcImpl::CrcFast, CrcImpl::CopyCrc];

    /// The name used in logs, configs and benchmark ids (`crc32c`, `crc-fast`, `copycrc`).
    pub const fn name(self) -> &'static str {
        match self {
            CrcImpl::Crc32cCrate => "crc32c",
            CrcImpl::CrcFast => "crc-fast",
            CrcImpl::CopyCrc => "copycrc",
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
            CrcImpl::CopyCrc => copycrc::crc32c_append(crc, data),
        }
    }

    /// Copy `src` into `dst[..src.len()]` and continue `crc` over the same bytes: in one pass
    /// with [`CrcImpl::CopyCrc`]; with the others, the CRC of `src` (hot in cache while it is
    /// read) and then the copy, never a CRC of the bytes just written (their stores are still
    /// in flight). Panics if `dst` is shorter than `src`.
    #[inline]
    pub fn copy_append(self, crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
        match self {
            CrcImpl::CopyCrc => copycrc::copy_crc32c(crc, src, dst),
            _ => {
                let c = self.append(crc, src);
                dst[..src.len()].copy_from_slice(src);
                c
            }
        }
    }

    /// Whether [`calibrate`] times this implementation on this CPU: all but `copycrc` without
    /// a fused kernel, which is the `crc32c` crate behind a bounce buffer (it could only win
    /// by noise). Forcing it still works.
    pub fn candidate_here(self) -> bool {
        self != CrcImpl::CopyCrc || copycrc::fuses_copy()
    }

    /// Whether [`CrcImpl::copy_append`] computes the CRC in the copy's pass (callers with
    /// memory no reference may be formed over call `copycrc` themselves when this is true).
    pub const fn fuses_copy(self) -> bool {
        matches!(self, CrcImpl::CopyCrc)
    }

    const fn code(self) -> u8 {
        match self {
            CrcImpl::Crc32cCrate => 1,
            CrcImpl::CrcFast => 2,
            CrcImpl::CopyCrc => 3,
        }
    }

    const fn from_code(code: u8) -> Option<CrcImpl> {
        match code {
            1 => Some(CrcImpl::Crc32cCrate),
            2 => Some(CrcImpl::CrcFast),
            3 => Some(CrcImpl::CopyCrc),
            _ => None,
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

/// The implementation CPU features suggest: `copycrc` when it fuses copies here (its 512-bit
/// folding kernels: AVX-512F/VL, VPCLMULQDQ; or its `crc32` streams: SSE4.2, PCLMULQDQ),
/// `crc32c` otherwise. A guess: [`calibrate`] measures.
pub fn detect() -> CrcImpl {
    if copycrc::fuses_copy() {
        CrcImpl::CopyCrc
    } else {
        CrcImpl::Crc32cCrate
    }
}

/// The implementation in use (decided by [`detect`] on first use unless [`set_impl`] was called).
#[inline]
pub fn current() -> CrcImpl {
    match CrcImpl::from_code(CHOICE.load(Ordering::Relaxed)) {
        Some(imp) => imp,
        None => {
            let d = detect();
            // A concurrent `set_impl` wins over the guess.
            let _ = CHOICE.compare_exchange(0, d.code(), Ordering::Relaxed, Ordering::Relaxed);
            CrcImpl::from_code(CHOICE.load(Ordering::Relaxed)).unwrap_or(d)
        }
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
    /// A CRC continued from `value` (a [`Crc32c::value`], e.g. returned by a copying kernel).
    pub const fn from_value(value: u32) -> Self {
        Crc32c(value)
    }
    /// Copy `src` into `dst[..src.len()]` and feed the same bytes ([`CrcImpl::copy_append`]
    /// of the implementation in use). Panics if `dst` is shorter than `src`.
    #[inline]
    pub fn copy_update(&mut self, src: &[u8], dst: &mut [u8]) {
        self.0 = current().copy_append(self.0, src, dst);
    }
    /// Feed more bytes (none: nothing to do, no call; an FPDU without a pad feeds an empty one).
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        if !data.is_empty() {
            self.0 = crc32c_append(self.0, data);
        }
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
    /// `(implementation, size in bytes, best ns per call)` of a copy with its CRC
    /// ([`CrcImpl::copy_append`]).
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

    /// One line for a log: `copycrc (copy+CRC: crc32c 1440 B 8.1 GB/s, ...)`.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .samples
            .iter()
            .map(|(i, n, _)| format!("{i} {n} B {:.1} GB/s", self.gbps(*i, *n).unwrap_or(0.0)))
            .collect();
        format!("{} (copy+CRC: {})", self.best, parts.join(", "))
    }
}

/// The sizes [`calibrate`] times: a full FPDU at MTU 1500 and at MTU 9000 (RFC 5044 §8's
/// one-FPDU-per-segment rule makes those the common CRC spans).
pub const CALIBRATION_SIZES: [usize; 2] = [1440, 8940];

/// Time every implementation with the caller's clock (`now_ns`, any monotonic nanosecond
/// counter) and return the fastest. What is timed is what the data path does with every FPDU
/// payload: a copy with its CRC ([`CrcImpl::copy_append`]). About 2-5 ms of CPU. Each
/// (implementation, size) is timed in `ROUNDS` alternating rounds and the best round counts,
/// so a preempted round does not decide. The result is not applied: call [`set_impl`] with
/// [`Calibration::best`].
pub fn calibrate(mut now_ns: impl FnMut() -> u64) -> Calibration {
    const ROUNDS: usize = 7;
    const BYTES_PER_ROUND: usize = 256 * 1024;
    let max = CALIBRATION_SIZES.iter().copied().max().unwrap_or(0);
    let data: Vec<u8> = (0..max)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8 >> 1)
        .collect();
    let mut out = vec![0u8; max];
    let n = CALIBRATION_SIZES.len();
    let runs = CrcImpl::candidate_here;
    let mut best = vec![f64::INFINITY; CrcImpl::ALL.len() * n];
    let mut sink = 0u32;
    for _ in 0..ROUNDS {
        for (si, &size) in CALIBRATION_SIZES.iter().enumerate() {
            let calls = (BYTES_PER_ROUND / size).max(1);
            for (ii, imp) in CrcImpl::ALL.into_iter().enumerate() {
                if !runs(imp) {
                    continue;
                }
                let t0 = now_ns();
                for _ in 0..calls {
                    let src = std::hint::black_box(&data[..size]);
                    sink = sink.wrapping_add(imp.copy_append(sink & 1, src, &mut out));
                }
                let dt = now_ns().saturating_sub(t0) as f64 / calls as f64;
                let slot = &mut best[ii * n + si];
                *slot = slot.min(dt);
            }
        }
    }
    std::hint::black_box((sink, &out));
    let mut samples = Vec::new();
    for (ii, imp) in CrcImpl::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, i)| runs(*i))
    {
        for (si, &size) in CALIBRATION_SIZES.iter().enumerate() {
            samples.push((imp, size, best[ii * n + si]));
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
        .filter(|i| runs(*i))
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
    /// `copycrc` crate (512-bit VPCLMULQDQ folding; without AVX-512, the `crc32c` crate for
    /// CRCs of 64 bytes and more).
    pub fn copycrc(data: &[u8]) -> u32 {
        CrcImpl::CopyCrc.append(0, data)
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
        assert_eq!(candidates::copycrc(&data), whole);
        for len in 0..300 {
            assert_eq!(
                CrcImpl::CrcFast.append(0x1234_5678, &data[..len]),
                CrcImpl::Crc32cCrate.append(0x1234_5678, &data[..len]),
                "len {len}"
            );
        }
    }

    /// Every implementation's copy writes the bytes and gives the CRC of `crc32c`, from any
    /// start value, at lengths around the folding kernels' block sizes.
    #[test]
    fn copy_append_copies_and_agrees() {
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 13 + 5) as u8).collect();
        for imp in CrcImpl::ALL {
            for len in [
                0usize, 1, 15, 16, 63, 64, 65, 255, 256, 511, 512, 1448, 2000,
            ] {
                let mut out = vec![0xeeu8; len + 1];
                let c = imp.copy_append(0xdead_beef, &data[..len], &mut out);
                assert_eq!(
                    c,
                    ::crc32c::crc32c_append(0xdead_beef, &data[..len]),
                    "{imp} {len}"
                );
                assert_eq!(&out[..len], &data[..len], "{imp} {len}");
                assert_eq!(out[len], 0xee);
            }
        }
        let mut c = Crc32c::from_value(crc32c(b"ab"));
        let mut out = [0u8; 3];
        c.copy_update(b"cde", &mut out);
        assert_eq!((c.value(), &out), (crc32c(b"abcde"), b"cde"));
    }

    #[test]
    fn names_round_trip() {
        for imp in CrcImpl::ALL {
            assert_eq!(CrcImpl::from_name(imp.name()), Some(imp));
        }
        assert_eq!(CrcImpl::from_name("zlib"), None);
    }

    /// With a fake clock that charges one implementation double, calibration does not pick
    /// it; the samples cover every (implementation, size).
    #[test]
    fn calibrate_picks_the_cheaper() {
        for slow in CrcImpl::ALL {
            // The clock advances by a fixed step per read; the step is larger while `slow`
            // is being timed. Timing order is known: impl loop inside size loop inside rounds.
            let mut reads = 0u64;
            let mut t = 0u64;
            let cal = calibrate(|| {
                let pair = reads / 2; // two reads per timed block
                let timed: Vec<CrcImpl> = CrcImpl::ALL
                    .into_iter()
                    .filter(|i| i.candidate_here())
                    .collect();
                let imp = timed[(pair % timed.len() as u64) as usize];
                reads += 1;
                t += if imp == slow { 2000 } else { 1000 };
                t
            });
            let timed = CrcImpl::ALL.iter().filter(|i| i.candidate_here()).count();
            assert_eq!(cal.samples.len(), 2 * timed);
            assert_ne!(cal.best, slow, "{}", cal.summary());
            if slow.candidate_here() {
                assert!(cal.gbps(slow, 1440).is_some());
            }
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
