//! Embedded run-to-completion mode: the application thread steps the dataplane loop itself
//! while it polls (like Demikernel's library OS), so on a shared core a Write costs no
//! hand-off between the application and the dataplane thread (issue #8, bar (b)).
//!
//! The loop state ([`Lcore`]) sits in a mutex: whoever holds it steps it, one thread at a time
//! (the queue, the connections and their mbufs move between threads only through the lock).
//! The dataplane thread stays the fallback: while the application polled within the last
//! [`APP_ACTIVE`], it is parked (not napping and polling: the application thread, pinned to
//! the same core, has the core alone); it wakes when the application's last poll is
//! [`APP_ACTIVE`] old, or at once when the application hands the loop back
//! ([`Pump::release`]: before it blocks, e.g. on the control socket), and steps the loop as
//! before, so timers, ACKs and connections progress when the application does not poll.
//!
//! An application thread that steps a loop is registered with DPDK on its first step (it
//! gets an lcore id, hence mempool caches: without one, every mbuf allocated or freed by the
//! port's RX and TX paths goes to the pool's shared ring, ~8 % of a 64 KiB `write_bw`
//! sender). [`leave_current_thread`] drops the registration; a thread that exits drops it too.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};
use std::thread::Thread;

use crate::clock::TscClock;
use crate::eal::{Eal, LcoreThread};
use crate::lcore::{Lcore, LcoreReport};
use crate::signal;
use crate::stats::SharedLcoreStats;
use std::time::Duration;

/// How long after the application's last poll the dataplane thread keeps off the loop. Also
/// how often the parked dataplane thread wakes to look (and publishes the counters): each
/// wake-up is a context switch on the application's core.
pub const APP_ACTIVE: Duration = Duration::from_millis(2);
/// How often (in the dataplane thread's turns) it publishes the counters.
const PUBLISH_EVERY: u64 = 1024;

/// The calling thread's DPDK registration for stepping loops ([`Pump::poll`]).
enum AppLcore {
    /// Not looked at yet.
    Unknown,
    /// Registered by [`Pump::poll`]; unregistered on drop.
    Own { _guard: LcoreThread },
    /// The thread has an lcore of its own (EAL's main thread, a dataplane thread), or none
    /// was free: no registration.
    NotOurs,
}

thread_local! {
    static APP_LCORE: RefCell<AppLcore> = const { RefCell::new(AppLcore::Unknown) };
}

/// Drop the calling thread's registration made by [`Pump::poll`], if any. Call it before
/// stopping the engine from a thread that stepped it: a registration holds the [`Eal`], and
/// EAL is cleaned up only when its last handle goes on the thread that initialised it.
pub fn leave_current_thread() {
    let _ = APP_LCORE.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            *r = AppLcore::Unknown;
        }
    });
}

/// Give the calling thread an lcore id (mempool caches) on its first step of a loop.
fn register_current_thread(eal: &Eal) {
    APP_LCORE.with(|r| {
        let mut r = r.borrow_mut();
        if matches!(*r, AppLcore::Unknown) {
            *r = match eal.register_thread() {
                Ok(g) => {
                    tracing::debug!(lcore_id = g.lcore_id(), "application thread registered");
                    AppLcore::Own { _guard: g }
                }
                Err(e) => {
                    tracing::debug!("application thread not registered: {e}");
                    AppLcore::NotOurs
                }
            };
        }
    });
}

/// One dataplane loop that the application may step ([`Pump::poll`]).
#[derive(Debug)]
pub struct Pump {
    lcore: Mutex<Option<Lcore>>,
    clock: TscClock,
    /// The application's last poll (clock nanoseconds; 0: never, or handed back).
    app_polled: AtomicU64,
    /// The CPU the loop's dataplane thread is pinned to, if any.
    core: Option<usize>,
    /// The dataplane thread, to wake it ([`Pump::release`]).
    thread: OnceLock<Thread>,
}

impl Pump {
    /// An empty pump for the loop of a dataplane thread pinned to `core`; [`run`] installs
    /// the loop.
    pub fn new(clock: TscClock, core: Option<usize>) -> Pump {
        Pump {
            lcore: Mutex::new(None),
            clock,
            app_polled: AtomicU64::new(0),
            core,
            thread: OnceLock::new(),
        }
    }

    /// The CPU the loop's dataplane thread runs on (an application thread that drives the
    /// loop belongs there too: one runnable thread per core, no migrations).
    pub fn core(&self) -> Option<usize> {
        self.core
    }

    /// Step the loop once, unless another thread holds it (then return at once). Returns
    /// whether a step ran. No effect once the loop stopped.
    pub fn poll(&self) -> bool {
        let now = self.clock.now().as_nanos();
        self.app_polled.store(now.max(1), Ordering::Relaxed);
        match self.lcore.try_lock() {
            Ok(mut g) => g
                .as_mut()
                .map(|l| {
                    register_current_thread(l.eal());
                    l.step()
                })
                .is_some(),
            // A panic on the loop's thread: leave the loop alone.
            Err(TryLockError::Poisoned(_)) | Err(TryLockError::WouldBlock) => false,
        }
    }

    /// The application stops polling for a while (it is about to block): the dataplane
    /// thread takes the loop back now instead of after [`APP_ACTIVE`]. Its next
    /// [`Pump::poll`] takes it again.
    pub fn release(&self) {
        self.app_polled.store(0, Ordering::Relaxed);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// While the application drives the loop: how long until it counts as gone.
    fn app_left(&self) -> Option<Duration> {
        let last = self.app_polled.load(Ordering::Relaxed);
        let until = last.checked_add(APP_ACTIVE.as_nanos() as u64)?;
        let now = self.clock.now().as_nanos();
        (last != 0 && now < until).then(|| Duration::from_nanos(until - now))
    }
}

/// The dataplane thread's loop over `lcore`, shared with the application through `pump`:
/// step while the application is not polling, park while it is; until a stop is requested.
pub fn run(lcore: Lcore, pump: &Pump, shared: &SharedLcoreStats) -> LcoreReport {
    let idle_yield = lcore.idle_yield();
    *pump.lcore.lock().unwrap_or_else(|e| e.into_inner()) = Some(lcore);
    let _ = pump.thread.set(std::thread::current());
    let mut turns = 0u64;
    while !signal::stop_requested() {
        turns += 1;
        if let Some(left) = pump.app_left() {
            if let Ok(mut g) = pump.lcore.try_lock()
                && let Some(l) = g.as_mut()
            {
                l.publish(shared);
            }
            // Woken early by `release`; a stop is seen within APP_ACTIVE.
            std::thread::park_timeout(left);
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
