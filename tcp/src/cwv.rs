//! Congestion window validation (the aim of RFC 7661; RFC 9438 §5.8 asks it of CUBIC), as
//! Linux does it (`tcp_cwnd_validate`, `tcp_is_cwnd_limited`): an ACK grows the congestion
//! window only if the sender used the window in the current round. Without it a sender held
//! back by something else (its application, its CPU, the peer's window) grows cwnd without
//! bound (a bulk run over memif ended at 1 GB) and releases all of it as one burst when more
//! data comes.

/// How the sender used its window in the current round (about one RTT).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CwndUse {
    /// The window held data back in this round.
    limited: bool,
    /// The largest flight (bytes outstanding) seen in this round.
    max_flight: u64,
    /// The round ends when SND.UNA reaches this (SND.NXT when it began).
    round_end: u64,
}

impl CwndUse {
    /// After a transmit poll: `flight` bytes outstanding, `cwnd_limited` whether the window
    /// held queued data back. A new round starts when the last one's data is acknowledged,
    /// when the window limits, or with a larger flight while it did not limit.
    pub(crate) fn on_transmit_poll(
        &mut self,
        snd_una: u64,
        snd_nxt: u64,
        flight: u64,
        cwnd_limited: bool,
    ) {
        if snd_una >= self.round_end || cwnd_limited || (!self.limited && flight > self.max_flight)
        {
            self.limited = cwnd_limited;
            self.max_flight = flight;
            self.round_end = snd_nxt;
        }
    }

    /// Whether an ACK may grow `cwnd`: the window limited the sender in this round, or, in
    /// slow start, it is below twice the largest flight (slow start still doubles what the
    /// sender used).
    pub(crate) fn may_grow(&self, cwnd: u64, slow_start: bool) -> bool {
        self.limited || (slow_start && cwnd < 2 * self.max_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_only_when_the_window_was_used() {
        let mut u = CwndUse::default();
        // Application-limited: 10 kB in flight under a 100 kB window.
        u.on_transmit_poll(0, 10_000, 10_000, false);
        assert!(!u.may_grow(100_000, false));
        // Slow start grows up to twice the flight used, not beyond.
        assert!(u.may_grow(15_000, true));
        assert!(!u.may_grow(20_000, true));
        // The window fills: growth again, for the rest of the round even if the next poll
        // finds room (an ACK opened it).
        u.on_transmit_poll(0, 100_000, 100_000, true);
        assert!(u.may_grow(100_000, false));
        u.on_transmit_poll(50_000, 100_000, 50_000, false);
        assert!(u.may_grow(100_000, false));
        // The round's data is acknowledged and the window did not limit since: no growth.
        u.on_transmit_poll(100_000, 120_000, 20_000, false);
        assert!(!u.may_grow(100_000, false));
    }
}
