//! Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation, the input of BBR):
//! each transmission records the connection's delivery state; when it is delivered
//! (cumulatively or SACKed) the bytes delivered since then over the time it took give one rate
//! sample per ACK.

use netcore::{Duration, Instant};

/// The connection's delivery state stamped on a transmission (the draft's `P.delivered`,
/// `P.delivered_time`, `P.first_sent_time`, `P.is_app_limited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxState {
    pub(crate) delivered: u64,
    pub(crate) delivered_time: Instant,
    pub(crate) first_sent_time: Instant,
    pub(crate) app_limited: bool,
}

impl Default for TxState {
    fn default() -> Self {
        TxState {
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent_time: Instant::ZERO,
            app_limited: false,
        }
    }
}

/// One rate sample (the draft's `rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateSample {
    /// Bytes delivered over the interval.
    pub(crate) delivered: u64,
    /// max(send elapsed, ack elapsed).
    pub(crate) interval: Duration,
    /// Whether the flow was application-limited when the sampled data was sent.
    pub(crate) app_limited: bool,
    /// `C.delivered` when the sampled data was sent (for round counting).
    pub(crate) prior_delivered: u64,
}

impl RateSample {
    /// Bytes per second.
    pub(crate) fn rate(&self) -> f64 {
        self.delivered as f64 / self.interval.as_secs_f64().max(1e-9)
    }
}

/// Per-connection delivery state (`C.*` in the draft) and the sample being built for the
/// current ACK.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeliveryRate {
    /// `C.delivered`: bytes delivered so far.
    pub(crate) delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    /// `C.app_limited`: 0, or the `delivered` mark until which samples are app-limited.
    app_limited: u64,
    // The sample of the ACK being processed.
    acc: Option<Acc>,
}

#[derive(Debug, Clone, Copy)]
struct Acc {
    prior_delivered: u64,
    prior_time: Instant,
    send_elapsed: Duration,
    ack_elapsed: Duration,
    app_limited: bool,
}

impl DeliveryRate {
    /// A transmission at `now`; `idle`: nothing was in flight before it (the draft restarts
    /// the send and delivery clocks then).
    pub(crate) fn on_send(&mut self, now: Instant, idle: bool) -> TxState {
        if idle {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        TxState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited != 0,
        }
    }

    /// The sender has nothing more to send and is not limited by its window: samples until
    /// what is in flight now is delivered are application-limited (draft §3.4).
    pub(crate) fn on_app_limited(&mut self, inflight: u64) {
        self.app_limited = (self.delivered + inflight).max(1);
    }

    /// `len` bytes sent at `sent` with state `p` were delivered at `now`.
    pub(crate) fn on_delivered(&mut self, now: Instant, len: u64, sent: Instant, p: &TxState) {
        self.delivered += len;
        self.delivered_time = now;
        // The most recently sent delivered data defines the sample (draft §3.3).
        let newer = self.acc.is_none_or(|a| p.delivered >= a.prior_delivered);
        if newer {
            self.acc = Some(Acc {
                prior_delivered: p.delivered,
                prior_time: p.delivered_time,
                send_elapsed: sent.saturating_duration_since(p.first_sent_time),
                ack_elapsed: now.saturating_duration_since(p.delivered_time),
                app_limited: p.app_limited,
            });
            self.first_sent_time = sent;
        }
    }

    /// Close the sample of this ACK. The user discards samples whose interval is shorter
    /// than the min RTT (draft §3.3: ACK compression would inflate them).
    pub(crate) fn take_sample(&mut self) -> Option<RateSample> {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let a = self.acc.take()?;
        let delivered = self.delivered - a.prior_delivered;
        let interval = a.send_elapsed.max(a.ack_elapsed);
        if delivered == 0 {
            return None;
        }
        let _ = a.prior_time;
        Some(RateSample {
            delivered,
            interval,
            app_limited: a.app_limited,
            prior_delivered: a.prior_delivered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    #[test]
    fn steady_flow_rate() {
        let mut r = DeliveryRate::default();
        // A 1000-byte packet every 10 us, each delivered 100 us after it was sent: 100 MB/s.
        let mut sent = std::collections::VecDeque::new();
        let mut last = None;
        for step in 0..40u64 {
            let now = us(step * 10);
            if step >= 10 {
                let (t, p) = sent.pop_front().unwrap();
                r.on_delivered(now, 1000, t, &p);
                last = r.take_sample();
            }
            let idle = sent.is_empty();
            sent.push_back((now, r.on_send(now, idle)));
        }
        let s = last.unwrap();
        assert_eq!(s.delivered, 10_000);
        assert!((s.rate() - 1e8).abs() < 1e6, "{}", s.rate());
        assert!(!s.app_limited);
    }

    #[test]
    fn app_limited_marks_samples_until_delivered() {
        let mut r = DeliveryRate::default();
        let p = r.on_send(us(0), true);
        r.on_app_limited(1000);
        let q = r.on_send(us(5), false);
        assert!(!p.app_limited && q.app_limited);
        r.on_delivered(us(50), 1000, us(0), &p);
        assert!(r.take_sample().is_some());
        r.on_delivered(us(55), 1000, us(5), &q);
        let s = r.take_sample().unwrap();
        assert!(s.app_limited);
        // Delivered beyond the mark: no longer app-limited.
        assert_eq!(r.app_limited, 0);
        // A short sample is reported with its interval (the user filters by min RTT).
        let x = r.on_send(us(60), true);
        r.on_delivered(us(61), 1000, us(60), &x);
        assert_eq!(r.take_sample().unwrap().interval, Duration::from_micros(1));
    }
}
