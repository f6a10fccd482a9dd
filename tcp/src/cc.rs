//! Congestion control: NewReno (RFC 5681, RFC 6582), CUBIC (RFC 9438) and BBR
//! ([`crate::bbr`]).
//!
//! Windows are in bytes. Loss recovery itself (which segment to resend) lives in the
//! connection; this module only moves `cwnd` and `ssthresh` (and BBR's pacing rate).

use netcore::{Duration, Instant};

use crate::bbr::{Bbr, BbrAck};
use crate::config::CongestionControl;
use crate::hystart::{CSS_GROWTH_DIVISOR, HyStart, Phase};

/// CUBIC constants (RFC 9438 §4.2 / §4.6).
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

/// The congestion state a retransmission timeout changed, kept until the timeout proves
/// genuine or spurious (RFC 4015 §2 step 0: `pipe_prev`; the CUBIC epoch as Linux's undo).
#[derive(Debug, Clone)]
pub(crate) struct CcUndo {
    /// `pipe_prev = max(FlightSize, ssthresh)` before the timeout (RFC 4015 §2 step 0).
    pipe_prev: u64,
    w_max: f64,
    k: f64,
    epoch: Option<Instant>,
    w_est: f64,
    cwnd_prior: f64,
}

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
    /// cwnd (segments) before the last reduction (RFC 9438 §4.3 `cwnd_prior`).
    cwnd_prior: f64,
    /// BBR's state when `kind` is BBR.
    bbr: Option<Box<Bbr>>,
    /// HyStart++ (RFC 9406) during the initial slow start, when enabled; gone after it.
    hystart: Option<HyStart>,
    /// The phase HyStart++ chose for the current ACK.
    phase: Phase,
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
            cwnd_prior: 0.0,
            hystart: None,
            phase: Phase::SlowStart,
        }
    }

    /// Use HyStart++ (RFC 9406) in the initial slow start (loss-based controllers only).
    pub(crate) fn enable_hystart(&mut self) {
        if self.bbr.is_none() && self.ssthresh == u64::MAX {
            self.hystart = Some(HyStart::default());
        }
    }

    /// Before [`Congestion::on_ack`]: the ACK's round bookkeeping and RTT sample for
    /// HyStart++ (RFC 9406 §4.2); `una` is SND.UNA after the ACK.
    pub(crate) fn hystart_ack(&mut self, una: u64, snd_max: u64, rtt: Option<Duration>) {
        self.phase = match &mut self.hystart {
            Some(h) if self.cwnd < self.ssthresh => h.on_ack(una, snd_max, rtt),
            _ => Phase::SlowStart,
        };
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
            // RFC 5681 §3.1 slow start, with appropriate byte counting (RFC 3465, L = 2);
            // RFC 9406 §4.2: a quarter of that in CSS, and CSS_ROUNDS of it end slow start.
            let inc = acked.min(2 * self.mss);
            match self.phase {
                Phase::SlowStart => self.cwnd += inc,
                Phase::Css => self.cwnd += (inc / CSS_GROWTH_DIVISOR).max(1),
                Phase::Exit => {
                    self.ssthresh = self.cwnd;
                    self.hystart = None;
                    self.phase = Phase::SlowStart;
                }
            }
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
        // RFC 9438 §4.3: Reno-friendly estimate, alpha = 3(1-beta)/(1+beta) until W_est
        // reaches cwnd_prior, then 1 (Reno's own rate).
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA)
        };
        self.w_est += alpha * (acked as f64 / mss) / cwnd_seg.max(1.0);
        if self.w_est > target {
            // RFC 9438 §4.3: in the Reno-friendly region cwnd = W_est.
            if self.w_est > cwnd_seg {
                // Truncation is intended: windows are whole bytes.
                self.cwnd = (self.w_est * mss) as u64;
            }
            return;
        }
        // RFC 9438 §4.4/§4.5: concave and convex regions.
        let inc_seg = (target - cwnd_seg) * (acked as f64 / mss) / cwnd_seg.max(1.0);
        // Truncation is intended: increments are whole bytes.
        self.cwnd += (inc_seg * mss) as u64;
    }

    /// Entering fast recovery (RFC 5681 §3.2 step 2; RFC 9438 §4.6). A loss ends HyStart++
    /// (RFC 9406 §4.2).
    fn on_loss(&mut self, flight: u64) {
        self.hystart = None;
        self.phase = Phase::SlowStart;
        match self.kind {
            CongestionControl::NewReno | CongestionControl::Bbr => {
                self.ssthresh = (flight / 2).max(2 * self.mss);
            }
            CongestionControl::Cubic => {
                let cwnd_seg = self.cwnd as f64 / self.mss as f64;
                self.cwnd_prior = cwnd_seg;
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

    /// What to restore should the timeout about to be taken prove spurious (call before
    /// [`Congestion::on_rto`]; RFC 4015 §2 step 0).
    pub(crate) fn undo_point(&self, flight: u64) -> CcUndo {
        CcUndo {
            pipe_prev: flight.max(self.ssthresh),
            w_max: self.w_max,
            k: self.k,
            epoch: self.epoch,
            w_est: self.w_est,
            cwnd_prior: self.cwnd_prior,
        }
    }

    /// The timeout was spurious (RFC 4015 §2 steps 5-6): ssthresh = pipe_prev, cwnd =
    /// FlightSize + min(bytes_acked, IW) (slow start regains the rest without a burst); the
    /// CUBIC curve from before the timeout. BBR: the window from before (Linux bbr_undo_cwnd).
    pub(crate) fn undo_rto(&mut self, u: &CcUndo, flight: u64, acked: u64, iw: u64) {
        if let Some(b) = &mut self.bbr {
            b.on_rto_repaired(&mut self.cwnd);
            return;
        }
        self.ssthresh = u.pipe_prev;
        self.cwnd = self.cwnd.max(flight + acked.min(iw)).max(self.mss);
        self.w_max = u.w_max;
        self.k = u.k;
        self.epoch = u.epoch;
        self.w_est = u.w_est;
        self.cwnd_prior = u.cwnd_prior;
        self.acc = 0;
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

    /// RFC 4015 §2: a spurious timeout restores ssthresh to max(FlightSize, ssthresh) from
    /// before it, and cwnd to FlightSize + min(bytes_acked, IW).
    #[test]
    fn spurious_rto_undone() {
        let mut c = Congestion::new(CongestionControl::Cubic, 1000, 40, Instant::ZERO, 1);
        c.on_loss(40_000);
        assert_eq!((c.cwnd, c.ssthresh), (28_000, 28_000));
        let u = c.undo_point(30_000);
        c.on_rto(30_000);
        assert_eq!((c.cwnd, c.ssthresh), (1000, 19_600));
        c.undo_rto(&u, 20_000, 10_000, 10_000);
        assert_eq!((c.cwnd, c.ssthresh), (30_000, 30_000));
        // Slow start back up to ssthresh.
        assert!(c.cwnd <= c.ssthresh);
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

    /// RFC 9438 §4.3: the Reno-friendly estimate W_est grows by alpha = 3(1-beta)/(1+beta) ~
    /// 0.53 segment per RTT, and by one (Reno's rate) once it reaches cwnd_prior; where it is
    /// above the cubic curve, cwnd = W_est. After a loss at 20 segments (K = cbrt(6/0.4) ~
    /// 2.5 s, RTT 100 ms) the curve and W_est both give about half a segment per RTT at first;
    /// from ~1.2 s the curve sits on its plateau near W_max = 20 (~0.1 segment per RTT) while
    /// W_est, past cwnd_prior, adds one segment per RTT, and cwnd follows W_est.
    #[test]
    fn cubic_reno_friendly_region() {
        let mss = 1000u64;
        let mut c = Congestion::new(CongestionControl::Cubic, 1000, 20, Instant::ZERO, 1);
        c.on_loss(20 * mss);
        assert_eq!(c.cwnd, 14 * mss);
        let rtt = Duration::from_millis(100);
        let mut now = Instant::ZERO;
        let mut per_rtt = Vec::new();
        for _ in 0..16 {
            let before = c.cwnd;
            // One window of ACKs per RTT, one segment each.
            for _ in 0..c.cwnd / mss {
                c.on_ack(now, mss, Some(rtt));
            }
            now += rtt;
            per_rtt.push((c.cwnd - before) as f64 / mss as f64);
        }
        assert!(
            per_rtt[..3].iter().all(|&g| (0.4..0.7).contains(&g)),
            "{per_rtt:?}"
        );
        // W_est past cwnd_prior (20): Reno's rate, above the curve's plateau.
        assert!(
            per_rtt[13..].iter().all(|&g| (0.85..1.2).contains(&g)),
            "{per_rtt:?}"
        );
    }
}
