//! Round-trip time estimation and the retransmission timeout (RFC 6298).

use netcore::Duration;

/// RFC 6298 estimator with exponential backoff.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
    /// Number of consecutive backoffs (RFC 6298 §5.5).
    pub(crate) backoff: u32,
}

/// Clock granularity G (RFC 6298 §2): our clock is in nanoseconds, so take one microsecond.
const G: Duration = Duration::from_micros(1);

impl RttEstimator {
    pub(crate) fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        // RFC 6298 §2.1: until a sample is taken, RTO = initial (1 s by default).
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            rto: initial,
            min,
            max,
            backoff: 0,
        }
    }

    /// Smoothed RTT, once sampled.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Feed one RTT measurement (RFC 6298 §2.2, §2.3; alpha = 1/8, beta = 1/4).
    pub(crate) fn sample(&mut self, r: Duration) {
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
        // RFC 6298 §2.4/§2.5: clamp to [min, max].
        self.rto = (srtt + G.max(self.rttvar * 4)).clamp(self.min, self.max);
        // RFC 6298 §5.7: a new sample after backoff collapses the backoff.
        self.backoff = 0;
    }

    /// The RTO to arm now, including backoff (RFC 6298 §5.5), capped at the maximum.
    pub(crate) fn rto(&self) -> Duration {
        let shift = self.backoff.min(20);
        self.rto.saturating_mul(1u32 << shift).min(self.max)
    }

    /// Double the RTO (RFC 6298 §5.5).
    pub(crate) fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
