//! HyStart++ (RFC 9406): leave the initial slow start when the round-trip time starts to
//! rise, through a Conservative Slow Start (CSS) phase, instead of growing the window until
//! the bottleneck's queue overflows and a whole window of data is lost at once.
//!
//! Rounds are delimited by sequence numbers (RFC 9406 §4.2: a round ends when the data sent
//! at its start, `windowEnd` = SND.NXT, is acknowledged). Each round keeps the minimum of the
//! RTT samples of its ACKs; once a round has `N_RTT_SAMPLE` samples, a minimum at least
//! `RttThresh` above the last round's enters CSS, where the window grows a quarter as fast;
//! a lower minimum in CSS was a false alarm (back to slow start); `CSS_ROUNDS` rounds of CSS
//! end slow start (ssthresh = cwnd).

use netcore::Duration;

/// RFC 9406 §4.3 constants.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
const N_RTT_SAMPLE: u32 = 8;
/// Growth divisor in CSS (RFC 9406 §4.3 `CSS_GROWTH_DIVISOR`).
pub(crate) const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;

/// What the slow start should do on this ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Standard slow start.
    SlowStart,
    /// Conservative Slow Start: growth divided by [`CSS_GROWTH_DIVISOR`].
    Css,
    /// Enter congestion avoidance now (ssthresh = cwnd).
    Exit,
}

/// HyStart++ state for one slow start (RFC 9406 §4.2).
#[derive(Debug, Clone, Default)]
pub(crate) struct HyStart {
    /// `windowEnd`: the round ends when SND.UNA reaches it.
    window_end: Option<u64>,
    last_round_min: Option<Duration>,
    cur_round_min: Option<Duration>,
    samples: u32,
    /// `cssBaselineMinRtt`: set while in CSS.
    css_baseline: Option<Duration>,
    css_rounds: u32,
}

impl HyStart {
    /// One ACK of new data in slow start: SND.UNA after it, SND.MAX, and the RTT sample it
    /// gave (if any).
    pub(crate) fn on_ack(&mut self, una: u64, snd_max: u64, rtt: Option<Duration>) -> Phase {
        if self.window_end.is_none_or(|e| una >= e) {
            // A new round (RFC 9406 §4.2).
            if self.css_baseline.is_some() {
                self.css_rounds += 1;
                if self.css_rounds >= CSS_ROUNDS {
                    return Phase::Exit;
                }
            }
            self.last_round_min = self.cur_round_min.take();
            self.samples = 0;
            self.window_end = Some(snd_max);
        }
        if let Some(r) = rtt {
            self.cur_round_min = Some(self.cur_round_min.map_or(r, |m| m.min(r)));
            self.samples += 1;
        }
        if let (Some(cur), Some(last)) = (self.cur_round_min, self.last_round_min)
            && self.samples >= N_RTT_SAMPLE
        {
            match self.css_baseline {
                None => {
                    let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                    if cur >= last + thresh {
                        self.css_baseline = Some(cur);
                        self.css_rounds = 0;
                    }
                }
                // The RTT came back down: the increase was spurious, resume slow start.
                Some(base) if cur < base => self.css_baseline = None,
                Some(_) => {}
            }
        }
        if self.css_baseline.is_some() {
            Phase::Css
        } else {
            Phase::SlowStart
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One round: ten ACKs with RTT `rtt_ms`, the first of them acknowledging the last
    /// round's `windowEnd` (`base`).
    fn round(h: &mut HyStart, base: &mut u64, rtt_ms: u64) -> Phase {
        let max = *base + 10_000;
        let mut p = Phase::SlowStart;
        for i in 0..10 {
            p = h.on_ack(*base + i * 1000, max, Some(Duration::from_millis(rtt_ms)));
            if p == Phase::Exit {
                break;
            }
        }
        *base = max;
        p
    }

    #[test]
    fn rtt_rise_enters_css_then_exits_after_css_rounds() {
        let (mut h, mut base) = (HyStart::default(), 0);
        assert_eq!(round(&mut h, &mut base, 20), Phase::SlowStart);
        assert_eq!(round(&mut h, &mut base, 21), Phase::SlowStart);
        // RttThresh = clamp(21/8, 4, 16) = 4 ms: 26 >= 21 + 4.
        assert_eq!(round(&mut h, &mut base, 26), Phase::Css);
        for _ in 0..4 {
            assert_eq!(round(&mut h, &mut base, 26), Phase::Css);
        }
        assert_eq!(round(&mut h, &mut base, 26), Phase::Exit);
    }

    #[test]
    fn rtt_back_down_in_css_resumes_slow_start() {
        let (mut h, mut base) = (HyStart::default(), 0);
        round(&mut h, &mut base, 20);
        assert_eq!(round(&mut h, &mut base, 30), Phase::Css);
        assert_eq!(round(&mut h, &mut base, 20), Phase::SlowStart);
    }
}
