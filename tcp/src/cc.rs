//! Congestion control: NewReno (RFC 5681, RFC 6582), CUBIC (RFC 9438) and BBR
//! ([`crate::bbr`]).
//!
//! Windows are in bytes. Loss recovery itself (which segment to resend) lives in the
//! connection; this module only moves `cwnd` and `ssthresh` (and BBR's pacing rate).

use netcore::{Duration, Instant};

use crate::bbr::{Bbr, BbrAck};
use crate::config::CongestionControl;

/// CUBIC constants (RFC 9438 §4.2 / §4.6).
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

#[derive(Debug, Clone)]
pub(crate) struct Congestion {
    kind: CongestionControl,
    pub(crate) cwnd: u64,
    pub(crate) ssthresh: u64,
    mss: u64,
    /// Bytes acknowledged since the last congestion-avoidance increment (Reno).
    acc: u64,
    // CUBIC state (RFC 9438 §4).
    w_max: f64,
    k: f64,
    epoch: Option<Instant>,
    w_est: f64,
    /// BBR's state when `kind` is BBR.
    bbr: Option<Box<Bbr>>,
}

impl Congestion {
    /// A controller; `now` and `seed` (per connection) start BBR's clocks and schedule.
    pub(crate) fn new(
        kind: CongestionControl,
        mss: u16,
        initial_segments: u32,
        now: Instant,
        seed: u64,
    ) -> Self {
        let mss = u64::from(mss.max(1));
        let iw = mss * u64::from(initial_segments.max(1));
        Congestion {
            bbr: (kind == CongestionControl::Bbr).then(|| Box::new(Bbr::new(now, mss, iw, seed))),
            kind,
            // RFC 5681 §3.1 / RFC 6928: IW.
            cwnd: mss * u64::from(initial_segments.max(1)),
            ssthresh: u64::MAX,
            mss,
            acc: 0,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
        }
    }

    /// The sender MSS changed (after option negotiation).
    pub(crate) fn set_mss(&mut self, mss: u16, initial_segments: u32) {
        self.mss = u64::from(mss.max(1));
        self.cwnd = self.mss * u64::from(initial_segments.max(1));
        if let Some(b) = &mut self.bbr {
            b.set_mss(self.mss, self.cwnd);
        }
    }

    /// Whether this is BBR (model-based: driven by [`Congestion::on_bbr_ack`] on every ACK).
    pub(crate) fn is_bbr(&self) -> bool {
        self.bbr.is_some()
    }

    /// BBR's state, for tests and traces.
    pub(crate) fn bbr(&self) -> Option<&Bbr> {
        self.bbr.as_deref()
    }

    /// The pacing rate in bytes per second, for controllers that pace (BBR).
    pub(crate) fn pacing_rate(&self) -> Option<f64> {
        self.bbr.as_ref().map(|b| b.pacing_rate())
    }

    /// The largest burst pacing lets out at once.
    pub(crate) fn send_quantum(&self) -> u64 {
        self.bbr.as_ref().map_or(2 * self.mss, |b| b.send_quantum())
    }

    /// Every ACK, for BBR (draft-ietf-ccwg-bbr §5.1 BBRUpdateOnACK).
    pub(crate) fn on_bbr_ack(&mut self, a: &BbrAck) {
        if let Some(b) = &mut self.bbr {
            b.on_ack(a, &mut self.cwnd);
        }
    }

    /// Entering fast recovery (RFC 5681 §3.2, RFC 6675 §5; BBR: packet conservation).
    /// `flight`: the reduction's base (pipe); `delivered`: bytes delivered so far.
    pub(crate) fn enter_recovery(&mut self, flight: u64, delivered: u64) {
        match &mut self.bbr {
            Some(b) => b.on_enter_recovery(flight, delivered, &mut self.cwnd),
            None => self.on_loss(flight),
        }
    }

    /// The loss repaired by a tail loss probe (RFC 8985 §7.4.2): the reduction of a fast
    /// recovery for loss-based controllers; BBR does not react (as Linux's).
    pub(crate) fn on_tlp_loss(&mut self) {
        if self.bbr.is_none() {
            self.on_loss(self.cwnd);
        }
    }

    /// Everything outstanding at a retransmission timeout is acknowledged.
    pub(crate) fn on_rto_repaired(&mut self) {
        if let Some(b) = &mut self.bbr {
            b.on_rto_repaired(&mut self.cwnd);
        }
    }

    /// New data acknowledged outside recovery.
    pub(crate) fn on_ack(&mut self, now: Instant, acked: u64, srtt: Option<Duration>) {
        if self.bbr.is_some() {
            return;
        }
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1 slow start, with appropriate byte counting (RFC 3465, L = 2).
            self.cwnd += acked.min(2 * self.mss);
            return;
        }
        match self.kind {
            CongestionControl::NewReno => self.reno_ca(acked),
            CongestionControl::Cubic => self.cubic_ca(now, acked, srtt),
            CongestionControl::Bbr => {}
        }
    }

    fn reno_ca(&mut self, acked: u64) {
        // RFC 5681 §3.1: cwnd += SMSS*SMSS/cwnd per ACK, done by byte counting.
        self.acc += acked;
        if self.acc >= self.cwnd {
            self.acc -= self.cwnd;
            self.cwnd += self.mss;
        }
    }

    fn cubic_ca(&mut self, now: Instant, acked: u64, srtt: Option<Duration>) {
        let mss = self.mss as f64;
        let cwnd_seg = self.cwnd as f64 / mss;
        let epoch = *self.epoch.get_or_insert_with(|| {
            // RFC 9438 §4.2: start of a congestion-avoidance epoch.
            if self.w_max < cwnd_seg {
                self.w_max = cwnd_seg;
                self.k = 0.0;
            } else {
                self.k = ((self.w_max - cwnd_seg) / CUBIC_C).cbrt();
            }
            self.w_est = cwnd_seg;
            now
        });
        let rtt = srtt.unwrap_or(Duration::from_millis(1)).as_secs_f64();
        let t = (now - epoch).as_secs_f64();
        // RFC 9438 §4.2, eq. 1, evaluated one RTT ahead (§4.4).
        let target = CUBIC_C * (t + rtt - self.k).powi(3) + self.w_max;
        let target = target.clamp(cwnd_seg, 1.5 * cwnd_seg);
        // RFC 9438 §4.3: Reno-friendly estimate, alpha = 3(1-beta)/(1+beta).
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        self.w_est += alpha * (acked as f64 / mss) / cwnd_seg.max(1.0);
        let inc_seg = if self.w_est > target {
            (self.w_est - cwnd_seg).max(0.0) * (acked as f64 / mss) / cwnd_seg.max(1.0)
        } else {
            (target - cwnd_seg) * (acked as f64 / mss) / cwnd_seg.max(1.0)
        };
        // Truncation is intended: increments are whole bytes.
        self.cwnd += (inc_seg * mss) as u64;
    }

    /// Entering fast recovery (RFC 5681 §3.2 step 2; RFC 9438 §4.6).
    fn on_loss(&mut self, flight: u64) {
        match self.kind {
            CongestionControl::NewReno | CongestionControl::Bbr => {
                self.ssthresh = (flight / 2).max(2 * self.mss);
            }
            CongestionControl::Cubic => {
                let cwnd_seg = self.cwnd as f64 / self.mss as f64;
                // RFC 9438 §4.7 fast convergence.
                self.w_max = if cwnd_seg < self.w_max {
                    cwnd_seg * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd_seg
                };
                self.epoch = None;
                let reduced = (self.cwnd as f64 * CUBIC_BETA) as u64;
                self.ssthresh = reduced.max(2 * self.mss);
            }
        }
        self.cwnd = self.ssthresh;
        self.acc = 0;
    }

    /// Retransmission timeout (RFC 5681 §3.1 eq. 4; RFC 9438 §4.8): loss window of one segment.
    pub(crate) fn on_rto(&mut self, flight: u64) {
        if let Some(b) = &mut self.bbr {
            b.on_rto(&mut self.cwnd);
            return;
        }
        self.on_loss(flight);
        self.cwnd = self.mss;
    }

    /// Leaving recovery with a full ACK (RFC 6582 §3.2 step 3; BBR: the window from before).
    pub(crate) fn on_recovery_exit(&mut self, flight: u64) {
        if let Some(b) = &mut self.bbr {
            b.on_exit_recovery(&mut self.cwnd);
            return;
        }
        self.cwnd = self
            .ssthresh
            .min(flight.max(self.mss) + self.mss)
            .max(self.mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reno_slow_start_then_halving() {
        let mut c = Congestion::new(CongestionControl::NewReno, 1000, 2, Instant::ZERO, 1);
        assert_eq!(c.cwnd, 2000);
        c.on_ack(Instant::ZERO, 1000, None);
        assert_eq!(c.cwnd, 3000);
        c.on_loss(3000);
        assert_eq!(c.ssthresh, 2000);
        assert_eq!(c.cwnd, 2000);
        // Congestion avoidance: one MSS per cwnd of acked bytes.
        c.on_ack(Instant::ZERO, 1000, None);
        assert_eq!(c.cwnd, 2000);
        c.on_ack(Instant::ZERO, 1000, None);
        assert_eq!(c.cwnd, 3000);
        c.on_rto(3000);
        assert_eq!(c.cwnd, 1000);
    }

    #[test]
    fn cubic_reduces_by_beta_and_grows_back() {
        let mut c = Congestion::new(CongestionControl::Cubic, 1000, 100, Instant::ZERO, 1);
        c.on_loss(100_000);
        assert_eq!(c.cwnd, 70_000);
        let mut now = Instant::ZERO;
        // K = cbrt(W_max * (1 - beta) / C) = cbrt(75) ~ 4.2 s to regain W_max.
        for _ in 0..6000 {
            now += Duration::from_millis(1);
            c.on_ack(now, 1000, Some(Duration::from_millis(1)));
        }
        assert!(c.cwnd > 100_000, "cwnd {}", c.cwnd);
    }
}
