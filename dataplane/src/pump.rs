//! Embedded run-to-completion mode: the application thread steps the dataplane loop itself
//! while it polls (like Demikernel's library OS), so on a shared core a Write costs no
//! hand-off between the application and the dataplane thread (issue #8, bar (b)).
//!
//! The loop state ([`Lcore`]) sits in a mutex: whoever holds it steps it, one thread at a time
//! (the queue, the connections and their mbufs move between threads only through the lock).
//! The dataplane thread stays the fallback: while the application polled within the last
//! [`APP_ACTIVE`], it sleeps instead of polling; otherwise it steps the loop as before, so
//! timers, ACKs and connections progress when the application does not poll.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};

use crate::clock::TscClock;
use crate::lcore::{Lcore, LcoreReport};
use crate::signal;
use crate::stats::SharedLcoreStats;
use std::time::Duration;

/// How long after the application's last poll the dataplane thread keeps off the loop.
pub const APP_ACTIVE: Duration = Duration::from_micros(500);
/// The dataplane thread's nap while the application drives.
const NAP: Duration = Duration::from_micros(100);
/// How often (in the dataplane thread's turns) it publishes the counters.
const PUBLISH_EVERY: u64 = 1024;

/// One dataplane loop that the application may step ([`Pump::poll`]).
#[derive(Debug)]
pub struct Pump {
    lcore: Mutex<Option<Lcore>>,
    clock: TscClock,
    /// The application's last poll (clock nanoseconds; 0: never).
    app_polled: AtomicU64,
}

impl Pump {
    /// An empty pump; [`run`] installs the loop.
    pub fn new(clock: TscClock) -> Pump {
        Pump {
            lcore: Mutex::new(None),
            clock,
            app_polled: AtomicU64::new(0),
        }
    }

    /// Step the loop once, unless another thread holds it (then return at once). Returns
    /// whether a step ran. No effect once the loop stopped.
    pub fn poll(&self) -> bool {
        let now = self.clock.now().as_nanos();
        self.app_polled.store(now.max(1), Ordering::Relaxed);
        match self.lcore.try_lock() {
            Ok(mut g) => g.as_mut().map(|l| l.step()).is_some(),
            // A panic on the loop's thread: leave the loop alone.
            Err(TryLockError::Poisoned(_)) | Err(TryLockError::WouldBlock) => false,
        }
    }

    fn app_active(&self) -> bool {
        let last = self.app_polled.load(Ordering::Relaxed);
        last != 0 && self.clock.now().as_nanos() < last + APP_ACTIVE.as_nanos() as u64
    }
}

/// The dataplane thread's loop over `lcore`, shared with the application through `pump`:
/// step while the application is not polling, nap while it is; until a stop is requested.
pub fn run(lcore: Lcore, pump: &Pump, shared: &SharedLcoreStats) -> LcoreReport {
    let idle_yield = lcore.idle_yield();
    *pump.lcore.lock().unwrap_or_else(|e| e.into_inner()) = Some(lcore);
    let mut turns = 0u64;
    while !signal::stop_requested() {
        turns += 1;
        if pump.app_active() {
            if turns.is_multiple_of(64)
                && let Ok(mut g) = pump.lcore.try_lock()
                && let Some(l) = g.as_mut()
            {
                l.publish(shared);
            }
            std::thread::sleep(NAP);
            continue;
        }
        let idle = match pump.lcore.try_lock() {
            Ok(mut g) => {
                let Some(l) = g.as_mut() else { break };
                let idle = l.step();
                if turns.is_multiple_of(PUBLISH_EVERY) {
                    l.publish(shared);
                }
                idle
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Poisoned(_)) => break,
        };
        if idle && idle_yield {
            std::thread::yield_now();
        }
    }
    let l = pump.lcore.lock().unwrap_or_else(|e| e.into_inner()).take();
    match l {
        Some(l) => l.finish(shared),
        None => LcoreReport::default(),
    }
}
