//! Congestion control: NewReno (RFC 5681, RFC 6582) and CUBIC (RFC 9438).
//!
//! Windows are in bytes. Loss recovery itself (which segment to resend) lives in the
//! connection; this module only moves `cwnd` and `ssthresh`.

use netcore::{Duration, Instant};

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
}

impl Congestion {
    pub(crate) fn new(kind: CongestionControl, mss: u16, initial_segments: u32) -> Self {
        let mss = u64::from(mss.max(1));
        Congestion {
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
    }

    /// New data acknowledged outside recovery.
    pub(crate) fn on_ack(&mut self, now: Instant, acked: u64, srtt: Option<Duration>) {
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1 slow start, with appropriate byte counting (RFC 3465, L = 2).
            self.cwnd += acked.min(2 * self.mss);
            return;
        }
        match self.kind {
            CongestionControl::NewReno => self.reno_ca(acked),
            CongestionControl::Cubic => self.cubic_ca(now, acked, srtt),
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
    pub(crate) fn on_loss(&mut self, flight: u64) {
        match self.kind {
            CongestionControl::NewReno => {
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
        self.on_loss(flight);
        self.cwnd = self.mss;
    }

    /// Leaving recovery with a full ACK (RFC 6582 §3.2 step 3).
    pub(crate) fn on_recovery_exit(&mut self, flight: u64) {
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
        let mut c = Congestion::new(CongestionControl::NewReno, 1000, 2);
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
        let mut c = Congestion::new(CongestionControl::Cubic, 1000, 100);
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
