//! Round-trip time estimation and the retransmission timeout (RFC 6298).

use netcore::{Duration, Instant};

/// RFC 6298 estimator with exponential backoff.
///
/// Kept in `u64` nanoseconds (exact below 584 years), not `Duration` (seconds and
/// nanoseconds: each multiplication and division splits and carries, ~100 instructions per
/// sample): the estimator runs once per ACK that ends an RTT probe, i.e. once per message of
/// a ping-pong. The results are those of the same formulas in `Duration` arithmetic: the
/// divisions are by 2, 4 and 8, which divide 10^9, so `Duration`'s split division rounds as
/// one division of the whole nanoseconds does; sums and products that could pass `u64`
/// saturate, and every RTO is capped by `max` anyway.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<u64>,
    rttvar: u64,
    /// SRTT + max(G, 4 RTTVAR) (RFC 6298 §2.3), or the initial RTO before a sample; the
    /// lower bound is applied when the timer is armed ([`RttEstimator::rto_with_floor`]).
    base: u64,
    min: u64,
    max: u64,
    /// Number of consecutive backoffs (RFC 6298 §5.5).
    pub(crate) backoff: u32,
}

/// Clock granularity G (RFC 6298 §2), ns: our clock is in nanoseconds, so take one microsecond.
const G: u64 = 1_000;

/// A `Duration` in nanoseconds, saturating (at 584 years).
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `x * num / den` rounded down without overflow, for `den` a power of two above `num`.
fn scale(x: u64, num: u64, den: u64) -> u64 {
    x / den * num + x % den * num / den
}

impl RttEstimator {
    pub(crate) fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        // RFC 6298 §2.1: until a sample is taken, RTO = initial (1 s by default).
        RttEstimator {
            srtt: None,
            rttvar: 0,
            base: ns(initial),
            min: ns(min),
            max: ns(max),
            backoff: 0,
        }
    }

    /// Smoothed RTT, once sampled.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt.map(Duration::from_nanos)
    }

    /// Smoothed RTT in nanoseconds, once sampled.
    pub(crate) fn srtt_ns(&self) -> Option<u64> {
        self.srtt
    }

    /// Feed one RTT measurement in nanoseconds (RFC 6298 §2.2, §2.3; alpha = 1/8,
    /// beta = 1/4).
    pub(crate) fn sample_ns(&mut self, r: u64) {
        let srtt = match self.srtt {
            None => {
                self.rttvar = r / 2;
                r
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(r);
                self.rttvar = scale(self.rttvar, 3, 4) + delta / 4;
                scale(srtt, 7, 8) + r / 8
            }
        };
        self.srtt = Some(srtt);
        self.base = srtt.saturating_add(G.max(self.rttvar.saturating_mul(4)));
        // RFC 6298 §5.7: a new sample after backoff collapses the backoff.
        self.backoff = 0;
    }

    /// Feed one RTT measurement ([`RttEstimator::sample_ns`]).
    #[cfg(test)]
    pub(crate) fn sample(&mut self, r: Duration) {
        self.sample_ns(ns(r));
    }

    /// The RTO to arm now, including backoff (RFC 6298 §5.5), within [min, max] (§2.4, §2.5).
    #[cfg(test)]
    pub(crate) fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto_ns())
    }

    /// [`RttEstimator::rto`] in nanoseconds.
    pub(crate) fn rto_ns(&self) -> u64 {
        self.rto_with_floor_ns(self.min)
    }

    /// Like [`RttEstimator::rto_ns`] with `floor` (ns) as the lower bound instead of the
    /// minimum.
    pub(crate) fn rto_with_floor_ns(&self, floor: u64) -> u64 {
        let shift = self.backoff.min(20);
        let rto = self.base.max(floor).min(self.max);
        rto.saturating_mul(1u64 << shift).min(self.max)
    }

    /// Double the RTO (RFC 6298 §5.5).
    pub(crate) fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

/// A windowed minimum of RTT samples over the last `window` (Kathleen Nichols' algorithm, as
/// Linux's `win_minmax` for `tcp_min_rtt`): the best sample and two later, larger candidates
/// that take over as the best ages out, so a path whose RTT rose (a route change, a standing
/// queue) is followed within one window instead of being judged forever by its lowest sample
/// (RFC 8985 §6.2 step 2 and the reordering window, step 4, use the recent minimum).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WindowedMin {
    s: [(Instant, Duration); 3],
    set: bool,
}

impl WindowedMin {
    /// The current minimum, once sampled.
    pub(crate) fn get(&self) -> Option<Duration> {
        self.set.then_some(self.s[0].1)
    }

    /// Feed sample `v` taken at `now`; samples older than `window` expire.
    pub(crate) fn update(&mut self, now: Instant, v: Duration, window: Duration) {
        let new = (now, v);
        if !self.set || v <= self.s[0].1 || now.saturating_duration_since(self.s[2].0) > window {
            // A new minimum, or nothing in the window: restart with this sample.
            self.s = [new; 3];
            self.set = true;
            return;
        }
        if v <= self.s[1].1 {
            self.s[1] = new;
            self.s[2] = new;
        } else if v <= self.s[2].1 {
            self.s[2] = new;
        }
        self.subwin_update(now, new, window);
    }

    /// Age the candidates: the best leaves after a whole window, the second moves up after a
    /// quarter, the third after half, so the window keeps candidates from its later parts.
    fn subwin_update(&mut self, now: Instant, new: (Instant, Duration), window: Duration) {
        let age = now.saturating_duration_since(self.s[0].0);
        if age > window {
            self.s = [self.s[1], self.s[2], new];
            if now.saturating_duration_since(self.s[0].0) > window {
                self.s = [self.s[1], self.s[2], new];
            }
        } else if self.s[1].0 == self.s[0].0 && age > window / 4 {
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].0 == self.s[1].0 && age > window / 2 {
            self.s[2] = new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_min_follows_a_rise_within_one_window() {
        let ms = Duration::from_millis;
        let at = Instant::from_millis;
        let w = ms(1000);
        let mut m = WindowedMin::default();
        assert_eq!(m.get(), None);
        m.update(at(0), ms(10), w);
        m.update(at(100), ms(12), w);
        assert_eq!(m.get(), Some(ms(10)));
        // The path's RTT rises to 50 ms and stays there.
        for t in (300..=1400).step_by(100) {
            m.update(at(t), ms(50), w);
        }
        assert_eq!(m.get(), Some(ms(50)), "the 10 ms sample aged out");
        // A lower sample takes over at once.
        m.update(at(1500), ms(40), w);
        assert_eq!(m.get(), Some(ms(40)));
    }

    /// A sample fed a third time at the same instant changes nothing: from any state (not only
    /// reachable ones), two updates with `(now, v)` leave the filter where three do. The filter
    /// only compares times and values, so a small domain of times around the window's
    /// quarter, half and whole, and of values, covers its cases ([`crate::rack`]'s
    /// cumulative delivery feeds a run of equal samples twice).
    #[test]
    fn windowed_min_a_repeated_sample_settles_after_two_updates() {
        let w = Duration::from_nanos(8);
        let pts: Vec<(Instant, Duration)> = (0..10u64)
            .flat_map(|t| (0..5u64).map(move |v| (Instant::from_nanos(t), Duration::from_nanos(v))))
            .collect();
        for &a in &pts {
            for &b in &pts {
                for &c in &pts {
                    for now in [9u64, 11, 13, 17, 20] {
                        let now = Instant::from_nanos(now);
                        for v in 0..5u64 {
                            let v = Duration::from_nanos(v);
                            let mut m = WindowedMin {
                                s: [a, b, c],
                                set: true,
                            };
                            m.update(now, v, w);
                            m.update(now, v, w);
                            let twice = m.s;
                            m.update(now, v, w);
                            assert_eq!(m.s, twice, "{a:?} {b:?} {c:?} {now:?} {v:?}");
                        }
                    }
                }
            }
        }
        let mut m = WindowedMin::default();
        m.update(Instant::from_nanos(3), Duration::from_nanos(2), w);
        let once = m.s;
        m.update(Instant::from_nanos(3), Duration::from_nanos(2), w);
        assert_eq!(m.s, once);
    }

    /// The estimator as it was in `Duration` arithmetic (the reference for the `u64` one).
    struct DurationRef {
        srtt: Option<Duration>,
        rttvar: Duration,
        base: Duration,
        min: Duration,
        max: Duration,
    }

    impl DurationRef {
        fn sample(&mut self, r: Duration) {
            match self.srtt {
                None => {
                    self.srtt = Some(r);
                    self.rttvar = r / 2;
                }
                Some(srtt) => {
                    let delta = srtt.abs_diff(r);
                    self.rttvar = self.rttvar * 3 / 4 + delta / 4;
                    self.srtt = Some(srtt * 7 / 8 + r / 8);
                }
            }
            let srtt = self.srtt.unwrap_or(r);
            self.base = srtt + Duration::from_micros(1).max(self.rttvar * 4);
        }

        fn rto_with_floor(&self, backoff: u32, floor: Duration) -> Duration {
            let rto = self.base.max(floor).min(self.max);
            rto.saturating_mul(1u32 << backoff.min(20)).min(self.max)
        }
    }

    #[test]
    fn nanosecond_arithmetic_gives_the_duration_results() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6298);
        for run in 0..200 {
            let (min, max) = (
                Duration::from_nanos(rng.gen_range(0..2_000_000_000)),
                Duration::from_nanos(rng.gen_range(1..200_000_000_000)),
            );
            let init = Duration::from_nanos(rng.gen_range(0..5_000_000_000));
            let mut a = RttEstimator::new(init, min, max);
            let mut r = DurationRef {
                srtt: None,
                rttvar: Duration::ZERO,
                base: init,
                min,
                max,
            };
            // Samples of every magnitude: odd nanoseconds, microseconds, seconds, hours.
            let scale = [1_000u64, 1_000_000, 1_000_000_000, 10_000_000_000_000][run % 4];
            for _ in 0..500 {
                let s = Duration::from_nanos(rng.gen_range(0..=scale) + rng.gen_range(0..3));
                a.sample(s);
                r.sample(s);
                assert_eq!(a.srtt(), r.srtt);
                for backoff in [0, 1, 3, 20, 40] {
                    a.backoff = backoff;
                    assert_eq!(a.rto(), r.rto_with_floor(backoff, r.min), "{s:?}");
                    let floor = Duration::from_nanos(rng.gen_range(0..1_000_000_000));
                    assert_eq!(
                        Duration::from_nanos(a.rto_with_floor_ns(ns(floor))),
                        r.rto_with_floor(backoff, floor)
                    );
                }
            }
        }
    }

    #[test]
    fn rfc6298_formulas() {
        let ms = Duration::from_millis;
        let mut r = RttEstimator::new(ms(1000), ms(1), ms(60_000));
        assert_eq!(r.rto(), ms(1000));
        r.sample(ms(100));
        // SRTT = 100, RTTVAR = 50, RTO = 100 + 200.
        assert_eq!(r.rto(), ms(300));
        r.sample(ms(100));
        // RTTVAR = 37.5, SRTT = 100 -> RTO = 250.
        assert_eq!(r.rto(), ms(250));
        r.back_off();
        r.back_off();
        assert_eq!(r.rto(), ms(1000));
        for _ in 0..30 {
            r.back_off();
        }
        assert_eq!(r.rto(), ms(60_000));
    }
}
