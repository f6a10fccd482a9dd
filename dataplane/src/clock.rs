//! The one place where the TSC becomes a [`netcore::Instant`].
//!
//! One clock is made at bring-up and copied into every dataplane thread, so all threads share
//! one origin: an `Instant` means the same moment on every thread (timestamps handed between
//! threads, shared neighbour state, stats).
#![allow(unsafe_code)]

use crate::eal::Eal;
use netcore::Instant;

/// Converts TSC readings to nanoseconds since the clock was made. `Copy`: copies share the
/// origin.
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    origin: u64,
    /// Nanoseconds per cycle as a 32.32 fixed-point factor.
    ns_per_cycle_q32: u128,
}

impl TscClock {
    /// A clock whose origin is now, at the TSC frequency EAL measured.
    pub fn new(eal: &Eal) -> Self {
        Self::with_hz(eal.tsc_hz())
    }

    /// A clock whose origin is now, for a TSC running at `hz`.
    pub fn with_hz(hz: u64) -> Self {
        let origin = Self::cycles();
        let hz = hz.max(1);
        TscClock {
            origin,
            ns_per_cycle_q32: ((1_000_000_000u128) << 32) / u128::from(hz),
        }
    }

    /// Raw TSC (inline `rdtsc`, as DPDK's `rte_rdtsc`, without a call into the shim).
    #[inline]
    pub fn cycles() -> u64 {
        // SAFETY: rdtsc has no preconditions; every x86-64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Now, as an Instant.
    #[inline]
    pub fn now(&self) -> Instant {
        self.at(Self::cycles())
    }

    /// The Instant of a TSC reading.
    #[inline]
    pub fn at(&self, tsc: u64) -> Instant {
        let d = u128::from(tsc.saturating_sub(self.origin));
        Instant::from_nanos(u64::try_from((d * self.ns_per_cycle_q32) >> 32).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_the_origin() {
        let c = TscClock::with_hz(2_000_000_000);
        let d = c;
        let t = TscClock::cycles();
        assert_eq!(c.at(t), d.at(t));
        // 2 GHz: 2000 cycles are 1 us.
        assert_eq!(c.at(c.origin + 2000).as_nanos(), 1000);
        assert_eq!(c.at(c.origin.saturating_sub(5)), Instant::ZERO);
    }
}
