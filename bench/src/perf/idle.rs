//! What a measurement loop does with a poll that found nothing (issue #8, bar (a)).
//!
//! In embedded mode each process has a dataplane thread pinned to a core and this application
//! thread beside it: two busy-polling threads on one core. Yielding on every empty poll keeps
//! the application's reaction time short, but while it has nothing to do for long (a
//! `write_bw` server waits for the final exchange during the whole test) every idle poll of
//! the dataplane thread costs a switch to this thread and back, and the dataplane's
//! `sched_yield` never finds the core free. So after [`PATIENCE`] without progress the loop
//! naps ([`NAP`]) and leaves the core to the dataplane; any progress makes it yield again.

use std::time::{Duration, Instant};

/// How long a loop keeps yielding (or spinning) after its last progress before it naps.
pub const PATIENCE: Duration = Duration::from_millis(1);
/// One nap (the kernel's timer slack adds up to 50 us more).
pub const NAP: Duration = Duration::from_micros(50);

/// What one idle turn does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Busy-wait (`--idle spin`, cores of our own).
    Spin,
    /// `sched_yield`: give the core to the dataplane thread for one of its iterations.
    Yield,
    /// Sleep: leave the core to the dataplane until the nap ends.
    Nap(Duration),
}

/// How the loops wait ([`Backoff::turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `--idle yield`: the dataplane threads share our cores.
    pub yield_: bool,
    /// `--pump on`: this thread steps the engine itself (it must keep polling).
    pub pumped: bool,
}

impl Policy {
    /// The turn after `idle_for` without progress.
    pub fn decide(self, idle_for: Duration) -> Turn {
        if !self.yield_ {
            // The cores are ours.
            return Turn::Spin;
        }
        if self.pumped || idle_for < PATIENCE {
            // Pumping: our polls are the engine's steps.
            Turn::Yield
        } else {
            Turn::Nap(NAP)
        }
    }
}

/// The idle state of one polling loop: when its current run of empty polls began.
#[derive(Debug, Default)]
pub struct Backoff {
    since: Option<Instant>,
}

impl Backoff {
    /// The loop made progress (a completion, a message): the next empty poll starts afresh.
    pub fn progress(&mut self) {
        self.since = None;
    }

    /// The turn for an empty poll now ([`Policy::decide`]).
    pub fn turn(&mut self, policy: Policy) -> Turn {
        if !policy.yield_ || policy.pumped {
            // Not a matter of time: no clock read per empty poll (bar (b)).
            return policy.decide(Duration::ZERO);
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        policy.decide(now.duration_since(since))
    }
}

/// Carry out `turn`.
pub fn wait(turn: Turn) {
    match turn {
        Turn::Spin => std::hint::spin_loop(),
        Turn::Yield => std::thread::yield_now(),
        Turn::Nap(d) => std::thread::sleep(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARED: Policy = Policy {
        yield_: true,
        pumped: false,
    };

    #[test]
    fn yields_while_patient_then_naps() {
        assert_eq!(SHARED.decide(Duration::ZERO), Turn::Yield);
        assert_eq!(SHARED.decide(PATIENCE / 2), Turn::Yield);
        assert_eq!(SHARED.decide(PATIENCE), Turn::Nap(NAP));
        assert_eq!(SHARED.decide(Duration::from_secs(5)), Turn::Nap(NAP));
    }

    #[test]
    fn pumping_and_spinning_never_nap() {
        let pumped = Policy {
            yield_: true,
            pumped: true,
        };
        let spin = Policy {
            yield_: false,
            pumped: false,
        };
        for idle in [Duration::ZERO, Duration::from_secs(1)] {
            assert_eq!(pumped.decide(idle), Turn::Yield);
            assert_eq!(spin.decide(idle), Turn::Spin);
        }
    }

    #[test]
    fn progress_restarts_the_patience() {
        let mut b = Backoff {
            since: Some(Instant::now() - Duration::from_secs(1)),
        };
        assert_eq!(b.turn(SHARED), Turn::Nap(NAP));
        b.progress();
        assert_eq!(b.turn(SHARED), Turn::Yield);
    }
}
