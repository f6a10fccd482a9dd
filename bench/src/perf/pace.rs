//! perftest's software rate limiter (`--rate_limit`, `--rate_units`, `--burst_size`,
//! `--rate_limit_type SW`; perftest_resources.c `run_iter_bw`): messages are posted in bursts
//! of `burst` work requests, one burst per gap of `burst / rate` seconds. The deadlines follow
//! each other by one gap whatever the time a burst took, so a sender that fell behind (a full
//! send queue) catches up with bursts back to back, and the average rate is the limit.

/// The unit of `--rate_limit` (perftest's `--rate_units`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RateUnits {
    /// MiB/s of message payload.
    #[value(name = "M")]
    MebibytesPerSec,
    /// Gb/s of message payload (perftest's default).
    #[value(name = "g")]
    GigabitsPerSec,
    /// Messages per second.
    #[value(name = "p")]
    MessagesPerSec,
}

/// The limiter of `--rate_limit_type`. Only the software one runs here: perftest's `HW` and
/// `PP` program a NIC's rate limiter, which a software stack does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RateLimitType {
    /// Bursts spaced by the posting loop (perftest's SW).
    #[value(name = "SW")]
    Sw,
    /// A NIC's per-QP rate limiter (refused here).
    #[value(name = "HW")]
    Hw,
    /// A NIC's packet pacing (refused here).
    #[value(name = "PP")]
    Pp,
}

/// Messages per second for `rate` in `units`, messages of `size` bytes (perftest's
/// conversion: MiB/s and Gb/s of payload).
pub fn messages_per_sec(rate: f64, units: RateUnits, size: u64) -> f64 {
    let size = size.max(1) as f64;
    match units {
        RateUnits::MebibytesPerSec => rate / size * 1_048_576.0,
        RateUnits::GigabitsPerSec => rate / (size * 8.0) * 1e9,
        RateUnits::MessagesPerSec => rate,
    }
}

/// The state of the limiter in a posting loop, on a clock in nanoseconds.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Nanoseconds between the starts of two bursts.
    gap_ns: f64,
    /// Work requests per burst.
    burst: u64,
    /// When the next burst may start.
    deadline: f64,
    /// Work requests the current burst may still post (0: between bursts).
    left: u64,
}

impl Pacer {
    /// A limiter of `msgs_per_sec` in bursts of `burst` (>= 1), starting at `now_ns`.
    pub fn new(msgs_per_sec: f64, burst: u64, now_ns: u64) -> Pacer {
        let burst = burst.max(1);
        Pacer {
            gap_ns: 1e9 * burst as f64 / msgs_per_sec,
            burst,
            deadline: now_ns as f64,
            left: 0,
        }
    }

    /// Whether a work request may be posted now: inside a burst, or when the next burst's
    /// deadline has come (which starts it). `now_ns` is read only between bursts.
    pub fn may_post(&mut self, now_ns: impl FnOnce() -> u64) -> bool {
        if self.left == 0 {
            if (now_ns() as f64) < self.deadline {
                return false;
            }
            self.deadline += self.gap_ns;
            self.left = self.burst;
        }
        true
    }

    /// One work request was posted.
    pub fn posted(&mut self) {
        self.left = self.left.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_convert_as_perftest() {
        // 40 Gb/s of 64 KiB messages: 40e9 / (65536 * 8).
        let p = messages_per_sec(40.0, RateUnits::GigabitsPerSec, 65536);
        assert!((p - 76_293.945).abs() < 0.01, "{p}");
        assert_eq!(
            messages_per_sec(64.0, RateUnits::MebibytesPerSec, 65536),
            1024.0
        );
        assert_eq!(
            messages_per_sec(5000.0, RateUnits::MessagesPerSec, 8),
            5000.0
        );
    }

    /// Posts over `secs` seconds of a clock stepped by `step_ns`, posting whenever allowed.
    fn run(p: &mut Pacer, secs: f64, step_ns: u64) -> u64 {
        let mut n = 0;
        let mut t = 0;
        while (t as f64) < secs * 1e9 {
            while p.may_post(|| t) {
                p.posted();
                n += 1;
            }
            t += step_ns;
        }
        n
    }

    #[test]
    fn the_average_rate_is_the_limit_in_bursts() {
        // 1000 messages/s in bursts of 10: a burst every 10 ms, 10 messages each.
        let mut p = Pacer::new(1000.0, 10, 0);
        assert_eq!(run(&mut p, 1.0, 1000), 1000);
        let mut p = Pacer::new(1000.0, 10, 0);
        // At t = 0 the first burst of 10, then nothing until 10 ms.
        for _ in 0..10 {
            assert!(p.may_post(|| 0));
            p.posted();
        }
        assert!(!p.may_post(|| 9_999_999));
        assert!(p.may_post(|| 10_000_000));
    }

    #[test]
    fn a_sender_that_fell_behind_catches_up() {
        let mut p = Pacer::new(1000.0, 1, 0);
        // Nothing posted for 50 ms (a full send queue): then 51 messages at once, the 50 ms
        // owed and the current one, and the average stays 1000/s.
        let mut n = 0;
        while p.may_post(|| 50_000_000) {
            p.posted();
            n += 1;
        }
        assert_eq!(n, 51);
        assert!(!p.may_post(|| 50_000_001));
    }
}
