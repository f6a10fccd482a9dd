//! `--outliers FILE`: where the slow iterations of a latency test happened (issue #8, bar
//! (b)'s p99.9), to lay them beside a kernel trace taken at the same time.
//!
//! Each iteration's start is also read from the TSC (`rdtsc`, the same counter as the
//! kernel's `x86-tsc` trace clock: `echo x86-tsc > /sys/kernel/tracing/trace_clock`), and the
//! samples above a threshold are written with the TSC readings that bound them. The samples
//! and the report are not changed: this only says which ones were slow, and when.

use std::io::Write;
use std::path::PathBuf;

/// An empty buffer for the clock readings of `iters` posts (and one more), its pages already
/// written: a first write to a fresh page is a page fault, ~200 of them in a 100,000-iteration
/// run of 8-byte readings, each in the middle of a measured round trip (issue #8, bar (b)).
pub fn prefaulted(iters: u64) -> Vec<u64> {
    let n = usize::try_from(iters.saturating_add(1)).unwrap_or(0);
    let mut v = Vec::with_capacity(n);
    v.resize(n, 1);
    std::hint::black_box(&mut v);
    v.clear();
    v
}

/// One slow sample: iteration `index` ran from TSC `start` to TSC `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outlier {
    /// The sample's index (0: between the first and second post).
    pub index: usize,
    /// TSC at the sample's start.
    pub start: u64,
    /// TSC at its end.
    pub end: u64,
    /// The sample as reported (divided by the test's `rtt_factor`), nanoseconds.
    pub ns: u64,
}

/// The recorder of one latency run: a TSC reading beside each post.
#[derive(Debug)]
pub struct TscLog {
    path: PathBuf,
    threshold_ns: u64,
    tsc: Vec<u64>,
}

impl TscLog {
    /// A log for up to `iters` posts, written to `path` (appended: one block per size), for
    /// samples above `threshold_ns` (as reported, i.e. half a round trip for ping-pongs).
    pub fn new(path: PathBuf, threshold_ns: u64, iters: u64) -> TscLog {
        TscLog {
            path,
            threshold_ns,
            tsc: prefaulted(iters),
        }
    }

    /// Stamp one post (call it right after the post's clock reading).
    #[inline]
    pub fn stamp(&mut self) {
        self.tsc.push(dataplane::clock::TscClock::cycles());
    }

    /// Append the outliers of this run (`posted`: the posts' clock readings, ns) to the file:
    /// a `#` header with the size, the sample count, the TSC rate and the run's first and last
    /// TSC readings, then one line per
    /// outlier, `index start_tsc end_tsc ns`. Returns how many were written.
    pub fn write(&self, size: u64, posted: &[u64], rtt_factor: f64) -> std::io::Result<usize> {
        let found = select(posted, &self.tsc, rtt_factor, self.threshold_ns);
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        let mut text = format!(
            "# size {size} samples {} threshold_ns {} tsc_hz {:.0} tsc_first {} tsc_last {}\n",
            posted.len().saturating_sub(1),
            self.threshold_ns,
            tsc_hz(posted, &self.tsc).unwrap_or(0.0),
            self.tsc.first().copied().unwrap_or(0),
            self.tsc.last().copied().unwrap_or(0),
        );
        for o in &found {
            text.push_str(&format!("{} {} {} {}\n", o.index, o.start, o.end, o.ns));
        }
        f.write_all(text.as_bytes())?;
        Ok(found.len())
    }
}

/// The samples (differences of consecutive `posted` readings, divided by `rtt_factor`) above
/// `threshold_ns`, with the TSC readings taken at the same posts.
pub fn select(posted: &[u64], tsc: &[u64], rtt_factor: f64, threshold_ns: u64) -> Vec<Outlier> {
    let n = posted.len().min(tsc.len());
    (1..n)
        .filter_map(|i| {
            let ns = (posted[i].saturating_sub(posted[i - 1]) as f64 / rtt_factor) as u64;
            (ns > threshold_ns).then_some(Outlier {
                index: i - 1,
                start: tsc[i - 1],
                end: tsc[i],
                ns,
            })
        })
        .collect()
}

/// The TSC's rate over the run, from its first and last readings against the clock's.
fn tsc_hz(posted: &[u64], tsc: &[u64]) -> Option<f64> {
    let n = posted.len().min(tsc.len());
    if n < 2 {
        return None;
    }
    let ns = posted[n - 1].checked_sub(posted[0]).filter(|&d| d > 0)?;
    let cycles = tsc[n - 1].checked_sub(tsc[0])?;
    Some(cycles as f64 * 1e9 / ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_the_slow_samples_with_their_tsc_bounds() {
        // Round trips of 4, 4, 30, 4, 20 us; half of them reported.
        let posted = [0, 4_000, 8_000, 38_000, 42_000, 62_000];
        let tsc = [100, 110, 120, 130, 140, 150];
        let got = select(&posted, &tsc, 2.0, 8_000);
        assert_eq!(
            got,
            vec![
                Outlier {
                    index: 2,
                    start: 120,
                    end: 130,
                    ns: 15_000
                },
                Outlier {
                    index: 4,
                    start: 140,
                    end: 150,
                    ns: 10_000
                },
            ]
        );
        // One round trip (Reads): the whole sample counts.
        assert_eq!(select(&posted, &tsc, 1.0, 8_000).len(), 2);
        assert_eq!(select(&posted, &tsc, 1.0, 3_000).len(), 5);
        assert!(select(&posted[..1], &tsc, 2.0, 0).is_empty());
    }

    #[test]
    fn writes_a_header_and_one_line_per_outlier() {
        let dir = std::env::temp_dir().join(format!("iwarp-outliers-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let mut log = TscLog::new(dir.clone(), 8_000, 4);
        log.tsc = vec![1_000, 5_000, 35_000, 39_000];
        let posted = [0, 4_000, 34_000, 38_000];
        assert_eq!(log.write(2, &posted, 2.0).unwrap(), 1);
        assert_eq!(log.write(4096, &posted, 2.0).unwrap(), 1);
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(
            text,
            "# size 2 samples 3 threshold_ns 8000 tsc_hz 1000000000 tsc_first 1000 tsc_last 39000\n\
             1 5000 35000 15000\n\
             # size 4096 samples 3 threshold_ns 8000 tsc_hz 1000000000 tsc_first 1000 tsc_last 39000\n\
             1 5000 35000 15000\n"
        );
    }

    /// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10).
    fn minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
        // The fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')').expect("(comm)") + 2..];
        rest.split(' ')
            .nth(7)
            .expect("minflt")
            .parse()
            .expect("a number")
    }

    fn fill(v: &mut Vec<u64>, n: u64) -> u64 {
        let before = minor_faults();
        for i in 0..n {
            v.push(i);
        }
        minor_faults() - before
    }

    #[test]
    fn prefaulted_buffers_take_their_samples_without_page_faults() {
        const N: u64 = 1 << 20; // 8 MiB: its own mapping, 2048 pages
        let mut fresh = Vec::with_capacity(N as usize + 1);
        let faults_fresh = fill(&mut fresh, N);
        let mut pre = prefaulted(N);
        assert!(pre.is_empty() && pre.capacity() > N as usize);
        let faults_pre = fill(&mut pre, N);
        assert_eq!(pre.len() as u64, N);
        assert_eq!(pre[N as usize - 1], N - 1);
        // A fresh buffer faults on each page (fewer with transparent huge pages).
        assert!(faults_fresh >= 4, "fresh buffer: {faults_fresh} faults");
        assert_eq!(faults_pre, 0, "prefaulted buffer: {faults_pre} faults");
    }

    #[test]
    fn stamps_read_a_rising_tsc() {
        let mut log = TscLog::new(PathBuf::from("/nonexistent"), 0, 2);
        log.stamp();
        log.stamp();
        assert_eq!(log.tsc.len(), 2);
        assert!(log.tsc[1] >= log.tsc[0]);
    }
}
