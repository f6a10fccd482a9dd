//! Opaque monotonic time in nanoseconds, made by the caller (never read from a clock here).

use core::ops::{Add, AddAssign, Sub};
pub use core::time::Duration;

/// A point in time: nanoseconds since an arbitrary origin chosen by whoever drives the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);

    /// Build an instant from nanoseconds since the caller's origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// Build an instant from milliseconds since the caller's origin (handy in tests).
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Milliseconds since the origin (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// `ns` nanoseconds later (saturating), as `self + Duration::from_nanos(ns)` without the
    /// round trip through `Duration`'s seconds and nanoseconds.
    pub const fn add_nanos(self, ns: u64) -> Self {
        Instant(self.0.saturating_add(ns))
    }

    /// Nanoseconds elapsed since `earlier`, zero if `earlier` is later.
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

fn dur_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(dur_ns(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(dur_ns(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t + Duration::from_millis(1), Instant::from_millis(6));
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(t - Instant::from_millis(2), Duration::from_millis(3));
        assert_eq!(t.add_nanos(7), t + Duration::from_nanos(7));
        assert_eq!(t.add_nanos(u64::MAX), Instant::from_nanos(u64::MAX));
        assert_eq!(t.nanos_since(Instant::from_millis(2)), 3_000_000);
        assert_eq!(Instant::ZERO.nanos_since(t), 0);
    }
}
