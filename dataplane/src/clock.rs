//! The one place where the TSC becomes a [`netcore::Instant`].
#![allow(unsafe_code)]

use netcore::Instant;

/// Converts TSC readings to nanoseconds since the clock was made.
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    origin: u64,
    /// Nanoseconds per cycle as a 32.32 fixed-point factor.
    ns_per_cycle_q32: u128,
}

impl TscClock {
    /// A clock whose origin is now. Requires EAL to be initialised (for the TSC frequency).
    pub fn new() -> Self {
        // SAFETY: a plain read of the TSC frequency EAL measured.
        let hz = unsafe { dpdk_sys::shim_tsc_hz() };
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

impl Default for TscClock {
    fn default() -> Self {
        Self::new()
    }
}
