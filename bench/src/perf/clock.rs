//! The measurement loops' clock: the TSC (`rdtsc`, as perftest's `get_cycles`) in nanoseconds,
//! at a rate calibrated once against the OS clock, where the kernel keeps its own time by the
//! TSC (clocksource `tsc`: the kernel found it invariant and in step across CPUs); otherwise
//! the OS clock (`clock_gettime`). On the AMD EPYC guest of BENCHMARKS.md a `clock_gettime`
//! costs ~33 ns against ~9 for `rdtsc`, and a latency test reads the clock at every post,
//! inside the round trip it measures (issue #8, bar (b)).

use dataplane::clock::TscClock;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where [`now_ns`] reads the time.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// The TSC, at the calibrated rate (Hz).
    Tsc(TscClock, u64),
    /// The OS clock, from this origin.
    Os(Instant),
}

static SOURCE: OnceLock<Source> = OnceLock::new();

/// How long the TSC is compared with the OS clock: two clock reads' error (~100 ns) over it
/// is 5 parts per million.
const CALIBRATION: Duration = Duration::from_millis(20);

/// Nanoseconds since the clock was chosen (monotonic).
#[inline]
pub fn now_ns() -> u64 {
    match source() {
        Source::Tsc(c, _) => c.now().as_nanos(),
        Source::Os(origin) => origin.elapsed().as_nanos() as u64,
    }
}

/// The clock [`now_ns`] reads, chosen (and calibrated, ~20 ms) at the first call: make it
/// before measuring.
pub fn source() -> &'static Source {
    SOURCE.get_or_init(|| {
        let tsc_kept = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc");
        match tsc_kept.then(calibrate).flatten() {
            Some(hz) => Source::Tsc(TscClock::with_hz(hz), hz),
            None => Source::Os(Instant::now()),
        }
    })
}

/// The TSC's rate against the OS clock over [`CALIBRATION`]; `None` when implausible.
fn calibrate() -> Option<u64> {
    let (t0, c0) = (Instant::now(), TscClock::cycles());
    std::thread::sleep(CALIBRATION);
    let (t1, c1) = (Instant::now(), TscClock::cycles());
    let ns = t1.duration_since(t0).as_nanos();
    let hz = u128::from(c1.checked_sub(c0)?) * 1_000_000_000 / ns.max(1);
    let hz = u64::try_from(hz).ok()?;
    (100_000_000..=20_000_000_000).contains(&hz).then_some(hz)
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Tsc(_, hz) => write!(f, "TSC at {:.3} MHz", *hz as f64 / 1e6),
            Source::Os(_) => write!(f, "clock_gettime(CLOCK_MONOTONIC)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock follows the OS clock: over 50 ms the two agree within 1 %, and never go
    /// backwards. A preemption between the paired readings skews one attempt (0.5 ms is
    /// 1 %), so the agreement needs one of three attempts; a wrong rate fails all three.
    #[test]
    fn now_ns_follows_the_os_clock() {
        let _ = source();
        let mut ratios = Vec::new();
        for _ in 0..3 {
            let (t0, n0) = (Instant::now(), now_ns());
            let mut last = n0;
            while t0.elapsed() < Duration::from_millis(50) {
                let n = now_ns();
                assert!(n >= last, "{n} < {last}");
                last = n;
            }
            let (os, ours) = (t0.elapsed().as_nanos() as f64, (now_ns() - n0) as f64);
            ratios.push(ours / os);
            if (ours / os - 1.0).abs() < 0.01 {
                return;
            }
        }
        panic!("ours / OS clock {ratios:?} ({})", source());
    }
}
