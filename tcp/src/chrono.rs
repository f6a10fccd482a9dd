//! What limits a sender, by time: Linux's "chrono" accounting (`tcp_chrono_start`/`stop`,
//! reported in `tcp_info` as `busy_time`, `rwnd_limited` and `sndbuf_limited`), extended with
//! cwnd- and application-limited time.
//!
//! The connection classifies itself at the end of every transmit poll (when it has nothing
//! more it may send now) and whenever it emits a segment; the time until the next
//! classification is charged to the state found. The owner's clock is passed in (sans-IO).

use netcore::Instant;

use crate::stats::TcpStats;

/// The sender's state between two transmit polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Limit {
    /// Nothing in flight and nothing queued (or not synchronized): not counted.
    #[default]
    Idle,
    /// Sending, or holding queued data for another reason (Nagle, pacing, a record boundary).
    Busy,
    /// Queued data waits: the congestion window is full.
    Cwnd,
    /// Queued data waits: the peer's receive window is full.
    Rwnd,
    /// Everything queued is sent and in flight, and the send buffer is full: the owner cannot
    /// queue more until an ACK frees room.
    Sndbuf,
    /// Everything queued is sent and in flight, with room in the send buffer: the owner has
    /// given nothing more.
    App,
}

/// The current [`Limit`] and since when it holds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Chrono {
    state: Limit,
    since: Instant,
}

impl Chrono {
    /// The sender is in `state` from `now` on: charge the time since the last change to the
    /// previous state's counters in `stats`.
    pub(crate) fn set(&mut self, now: Instant, state: Limit, stats: &mut TcpStats) {
        if state == self.state {
            return;
        }
        let ns = now.saturating_duration_since(self.since).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        if self.state != Limit::Idle {
            stats.busy_ns += ns;
        }
        match self.state {
            Limit::Idle | Limit::Busy => {}
            Limit::Cwnd => stats.cwnd_limited_ns += ns,
            Limit::Rwnd => stats.rwnd_limited_ns += ns,
            Limit::Sndbuf => stats.sndbuf_limited_ns += ns,
            Limit::App => stats.app_limited_ns += ns,
        }
        self.state = state;
        self.since = now;
    }

    /// The state now (tests).
    #[cfg(test)]
    pub(crate) fn state(&self) -> Limit {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_goes_to_the_state_left() {
        let mut c = Chrono::default();
        let mut s = TcpStats::default();
        let ms = Instant::from_millis;
        c.set(ms(10), Limit::Busy, &mut s); // idle time is not counted
        c.set(ms(12), Limit::Cwnd, &mut s);
        c.set(ms(12), Limit::Cwnd, &mut s); // no change
        c.set(ms(15), Limit::Rwnd, &mut s);
        c.set(ms(20), Limit::App, &mut s);
        c.set(ms(21), Limit::Sndbuf, &mut s);
        c.set(ms(25), Limit::Idle, &mut s);
        c.set(ms(40), Limit::Busy, &mut s);
        assert_eq!(s.busy_ns, 15_000_000);
        assert_eq!(s.cwnd_limited_ns, 3_000_000);
        assert_eq!(s.rwnd_limited_ns, 5_000_000);
        assert_eq!(s.app_limited_ns, 1_000_000);
        assert_eq!(s.sndbuf_limited_ns, 4_000_000);
        assert_eq!(c.state(), Limit::Busy);
    }
}
