//! Results from timestamps, as perftest computes them (`print_report_bw`, `print_report_lat`),
//! with latency percentiles from an HdrHistogram.

use super::report::{BwRow, LatRow};
use hdrhistogram::Histogram;

/// Bandwidth from per-message post and completion times (nanoseconds), perftest's way:
/// the average over the whole run (first post to last completion); the peak as the best
/// rate over any run of consecutive messages whose last one completed with a signaled
/// completion (`cq_mod` apart), which is O(n^2 / cq_mod): above 20,000 messages the start
/// points are sampled. `gbits`: Gb/s (10^9 bit/s), else MiB/s (perftest's MB/sec).
pub fn bw(
    size: u64,
    posted: &[u64],
    completed: &[u64],
    cq_mod: usize,
    gbits: bool,
    peak: bool,
) -> BwRow {
    let n = posted.len().min(completed.len());
    let unit = if gbits { 125_000_000.0 } else { 1_048_576.0 };
    if n == 0 {
        return BwRow {
            size,
            iters: 0,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        };
    }
    let total_ns = completed[n - 1].saturating_sub(posted[0]).max(1) as f64;
    let bw_avg = size as f64 * n as f64 / (total_ns / 1e9) / unit;
    let msg_rate = n as f64 / (total_ns / 1e9) / 1e6;
    let mut bw_peak = 0.0;
    if peak {
        let cq_mod = cq_mod.max(1);
        let stride = (n / 20_000).max(1);
        let mut best = completed[0].saturating_sub(posted[0]).max(1) as f64;
        let mut i = 0;
        while i < n {
            let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
            while j < n {
                let t = completed[j].saturating_sub(posted[i]) as f64 / (j - i + 1) as f64;
                if t > 0.0 && t < best {
                    best = t;
                }
                j += cq_mod;
            }
            if !n.is_multiple_of(cq_mod) {
                let j = n - 1;
                let t = completed[j].saturating_sub(posted[i]) as f64 / (j - i + 1) as f64;
                if t > 0.0 && t < best {
                    best = t;
                }
            }
            i += stride;
        }
        bw_peak = size as f64 / (best / 1e9) / unit;
    }
    BwRow {
        size,
        iters: n as u64,
        bw_peak,
        bw_avg,
        msg_rate,
    }
}

/// Latency from samples in nanoseconds (each one round trip, or one Read/atomic), divided by
/// `rtt_factor` (2 for ping-pong tests: half the round trip). As perftest, the two largest
/// samples are left out; the rest go into an HdrHistogram (3 significant digits) for the
/// median (`t_typical`) and the percentiles; min, max, mean and standard deviation are exact.
pub fn lat(size: u64, iters: u64, samples_ns: &[u64], rtt_factor: f64) -> LatRow {
    let mut v: Vec<u64> = samples_ns.to_vec();
    v.sort_unstable();
    let keep = v.len().saturating_sub(2).max(v.len().min(1));
    v.truncate(keep);
    let to_us = |ns: f64| ns / rtt_factor / 1000.0;
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    for &x in &v {
        let _ = h.record(x.max(1));
    }
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    // The histogram reports the top of a value's bucket (3 significant digits): never above
    // the exact extremes (perftest's percentiles come from the sorted samples).
    let lo = v.first().copied().unwrap_or(0);
    let hi = v.last().copied().unwrap_or(0);
    let q = |p: f64| h.value_at_quantile(p).clamp(lo, hi) as f64;
    LatRow {
        size,
        iters,
        t_min: to_us(v.first().copied().unwrap_or(0) as f64),
        t_max: to_us(v.last().copied().unwrap_or(0) as f64),
        t_typical: to_us(q(0.5)),
        t_avg: to_us(mean),
        t_stdev: to_us(var.sqrt()),
        p99: to_us(q(0.99)),
        p99_9: to_us(q(0.999)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_from_timestamps() {
        // 10 messages of 1250 bytes, each completing 2 us after its post; the first one
        // posted 5 us before the rest, which then follow 1 us apart: the average counts the
        // gap (12500 B in 15 us = 6.67 Gb/s), the peak does not (9 in 10 us = 9 Gb/s).
        let posted: Vec<u64> = std::iter::once(0)
            .chain((1..10).map(|i| 4000 + i * 1000))
            .collect();
        let completed: Vec<u64> = posted.iter().map(|p| p + 2000).collect();
        let r = bw(1250, &posted, &completed, 1, true, true);
        assert_eq!(r.iters, 10);
        assert!((r.bw_avg - 12500.0 * 8.0 / 15_000.0).abs() < 1e-9, "{r:?}");
        assert!((r.bw_peak - 9.0).abs() < 1e-9, "{r:?}");
        assert!((r.msg_rate - 10.0 / 15.0).abs() < 1e-9);
        let mib = bw(1250, &posted, &completed, 1, false, false);
        assert_eq!(mib.bw_peak, 0.0);
        assert!((mib.bw_avg - 12500.0 / 15e-6 / 1_048_576.0).abs() < 1e-6);
    }

    #[test]
    fn latency_halves_round_trips_and_drops_two_outliers() {
        let mut s: Vec<u64> = (1..=1000).map(|i| 2000 + i).collect(); // 2.001..3.0 us RTT
        s.push(1_000_000);
        s.push(2_000_000);
        let r = lat(2, 1000, &s, 2.0);
        assert!((r.t_min - 1.0005).abs() < 1e-9, "{r:?}");
        assert!((r.t_max - 1.5).abs() < 1e-9, "{r:?}");
        assert!((r.t_typical - 1.25).abs() < 0.002, "{r:?}");
        assert!((r.p99 - 1.495).abs() < 0.003, "{r:?}");
        assert!(r.p99_9 <= r.t_max && r.t_typical >= r.t_min);
        let one = lat(8, 1, &[5000], 1.0);
        assert_eq!(one.t_min, 5.0);
    }
}
