//! CPU use per side: user + system time of whole processes (every thread: the embedded
//! dataplane thread and the application's), read from `/proc/PID/stat` (fields 14 and 15, in
//! USER_HZ = 100 ticks per second on Linux), against wall time.

use std::time::Instant;

/// User + system seconds of process `pid` (`None` for this process), if readable.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// utime + stime in seconds from a `/proc/PID/stat` line (the command may contain spaces
/// and parentheses: fields are counted after the last `)`).
pub fn parse_stat(line: &str) -> Option<f64> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ut: u64 = f.get(11)?.parse().ok()?;
    let st: u64 = f.get(12)?.parse().ok()?;
    Some((ut + st) as f64 / 100.0)
}

/// Measures CPU per cent of one core over an interval, for this process and optionally
/// another (the daemon).
#[derive(Debug, Clone)]
pub struct CpuMeter {
    pids: Vec<Option<u32>>,
    start: Instant,
    cpu0: f64,
}

impl CpuMeter {
    /// Start measuring.
    pub fn start(daemon: Option<u32>) -> CpuMeter {
        let mut pids = vec![None];
        pids.extend(daemon.map(Some));
        let cpu0 = Self::total(&pids);
        CpuMeter {
            pids,
            start: Instant::now(),
            cpu0,
        }
    }

    fn total(pids: &[Option<u32>]) -> f64 {
        pids.iter().filter_map(|p| cpu_seconds(*p)).sum()
    }

    /// Per cent of one core since `start` (200 = two cores busy).
    pub fn percent(&self) -> f64 {
        let wall = self.start.elapsed().as_secs_f64().max(1e-6);
        (Self::total(&self.pids) - self.cpu0).max(0.0) / wall * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let l =
            "1234 (iwarp (perf) x) R 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 1 0 0";
        assert_eq!(parse_stat(l), Some(3.25));
        assert!(cpu_seconds(None).is_some());
        let m = CpuMeter::start(None);
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 60 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0 && m.percent() >= 0.0);
    }
}
