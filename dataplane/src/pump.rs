//! Embedded run-to-completion mode: the application thread steps the dataplane loop itself
//! while it polls (like Demikernel's library OS), so on a shared core a Write costs no
//! hand-off between the application and the dataplane thread (issue #8, bar (b)).
//!
//! The loop state ([`Lcore`]) sits in a mutex: whoever holds it steps it, one thread at a time
//! (the queue, the connections and their mbufs move between threads only through the lock).
//! The dataplane thread stays the fallback: while the application polled within the last
//! [`APP_ACTIVE`], it is parked (not napping and polling: the application thread, pinned to
//! the same core, has the core alone); it wakes to look after [`APP_ACTIVE`], then after
//! twice as long each time the application still polls, up to [`PARK_MAX`] (plus the
//! [`PARK_SLACK`] that lets a scheduler tick wake it), or at once when the application hands
//! the loop back ([`Pump::release`]: before it blocks, e.g. on the control socket); once the
//! application's last poll is [`APP_ACTIVE`] old it steps the loop as before, so timers,
//! ACKs and connections progress when the application does not poll.
//!
//! An application thread that steps a loop is registered with DPDK on its first step (it
//! gets an lcore id, hence mempool caches: without one, every mbuf allocated or freed by the
//! port's RX and TX paths goes to the pool's shared ring, ~8 % of a 64 KiB `write_bw`
//! sender). [`leave_current_thread`] drops the registration; a thread that exits drops it too.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;

use spin::mutex::{SpinMutex, SpinMutexGuard};

use crate::clock::TscClock;
use crate::eal::{Eal, LcoreThread};
use crate::lcore::{Lcore, LcoreReport};
use crate::signal;
use crate::stats::SharedLcoreStats;
use std::time::Duration;

/// How long after the application's last poll the dataplane thread keeps off the loop. Also
/// its first park (then [`PARK_MAX`]): each wake-up, which also publishes the counters, is a
/// context switch on the application's core.
pub const APP_ACTIVE: Duration = Duration::from_millis(2);
/// How often (in the dataplane thread's turns) it publishes the counters.
const PUBLISH_EVERY: u64 = 1024;
/// How late the parked dataplane thread may wake (its timer slack): one scheduler tick at
/// `CONFIG_HZ=250`, so the kernel expires its park timeout inside a tick's timer interrupt
/// instead of raising one of its own. On the 2-vCPU guest of BENCHMARKS.md a timer interrupt
/// takes ~14 us from a spinning application, and the 2 ms wake-ups of both sides' parked
/// threads were 70 % of `write_lat`'s samples above 8 us (issue #8, bar (b)). A release still
/// wakes it at once; an application that stops polling without one waits up to
/// [`APP_ACTIVE`] + this for the loop.
pub const PARK_SLACK: Duration = Duration::from_millis(4);
/// The longest park of the dataplane thread while the application keeps polling: each time
/// it wakes to find the application still polling, it parks twice as long as before, from
/// [`APP_ACTIVE`] up to this. Each wake-up is a context switch on the application's core,
/// inside a tick's interrupt (~10 us more on that sample, which p99.9 of `write_lat` is
/// made of on the guest of BENCHMARKS.md); a release still wakes it at once, and an
/// application that stops polling without one waits up to this + [`PARK_SLACK`] for the loop.
pub const PARK_MAX: Duration = Duration::from_millis(16);

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

/// The loop's lock: taken only by trying ([`LoopLock::try_lock`]: one compare-exchange),
/// released by one store (`spin`'s `SpinMutex`). A `std::sync::Mutex` releases with an atomic
/// swap (to wake waiters, and nobody waits here), and the application's poll of an idle loop
/// paid both atomics each turn (the swap alone was a quarter of [`Pump::poll`]'s samples on the
/// Xeon of BENCHMARKS.md §4, issue #8). Poisoned, as a `Mutex` is, when a holder panics.
#[derive(Debug)]
struct LoopLock {
    lcore: SpinMutex<Option<Lcore>>,
    poisoned: AtomicBool,
}

/// Why [`LoopLock::try_lock`] gave no guard.
#[derive(Debug, PartialEq, Eq)]
enum Locked {
    /// Another thread holds the loop.
    Busy,
    /// A holder panicked: the loop is left alone.
    Poisoned,
}

impl LoopLock {
    fn new(lcore: Option<Lcore>) -> LoopLock {
        LoopLock {
            lcore: SpinMutex::new(lcore),
            poisoned: AtomicBool::new(false),
        }
    }

    /// The loop, unless another thread holds it or a holder panicked; never waits.
    #[inline]
    fn try_lock(&self) -> Result<LoopGuard<'_>, Locked> {
        let g = self.take()?;
        // Relaxed: a panicking holder stored it before its guard's Release unlock, which the
        // Acquire of `take` follows.
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(Locked::Poisoned); // `g` lets go
        }
        Ok(g)
    }

    /// The loop, poisoned or not, once no other thread holds it (yielding meanwhile): for the
    /// dataplane thread's start and end.
    fn lock(&self) -> LoopGuard<'_> {
        loop {
            if let Ok(g) = self.take() {
                return g;
            }
            std::thread::yield_now();
        }
    }

    #[inline]
    fn take(&self) -> Result<LoopGuard<'_>, Locked> {
        match self.lcore.try_lock() {
            Some(held) => Ok(LoopGuard {
                held,
                poisoned: &self.poisoned,
            }),
            None => Err(Locked::Busy),
        }
    }
}

/// The held loop of a [`LoopLock`]; lets go when dropped (after marking the lock poisoned
/// if its holder is panicking).
struct LoopGuard<'a> {
    held: SpinMutexGuard<'a, Option<Lcore>>,
    poisoned: &'a AtomicBool,
}

impl std::ops::Deref for LoopGuard<'_> {
    type Target = Option<Lcore>;

    #[inline]
    fn deref(&self) -> &Option<Lcore> {
        &self.held
    }
}

impl std::ops::DerefMut for LoopGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Option<Lcore> {
        &mut self.held
    }
}

impl Drop for LoopGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Runs before `held` is dropped, so the mark precedes the unlock's Release.
        if std::thread::panicking() {
            self.poisoned.store(true, Ordering::Relaxed);
        }
    }
}

/// One dataplane loop that the application may step ([`Pump::poll`]).
#[derive(Debug)]
pub struct Pump {
    lcore: LoopLock,
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
    /// the loop. `clock` is the loop's own (its setup's: the steps run at its readings).
    pub fn new(clock: TscClock, core: Option<usize>) -> Pump {
        Pump {
            lcore: LoopLock::new(None),
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
        let mark = |now: netcore::Instant| {
            self.app_polled
                .store(now.as_nanos().max(1), Ordering::Relaxed)
        };
        match self.lcore.try_lock() {
            Ok(mut g) => g
                .as_mut()
                .map(|l| {
                    // One clock reading for both, taken under the lock: the loop's steps
                    // (this thread's and the others') see their times in order (TCP
                    // timestamps, RTT samples and the timer wheel rely on it). The loop's
                    // clock is this one (`Pump::new`).
                    let now = self.clock.now();
                    mark(now);
                    register_current_thread(l.eal());
                    l.step_at(now)
                })
                .is_some(),
            // Busy, or a panic on the loop's thread: leave the loop alone.
            Err(Locked::Busy | Locked::Poisoned) => {
                mark(self.clock.now());
                false
            }
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
    if let Err(e) = set_timer_slack(PARK_SLACK) {
        tracing::debug!("dataplane thread keeps the default timer slack: {e}");
    }
    *pump.lcore.lock() = Some(lcore);
    let _ = pump.thread.set(std::thread::current());
    let mut turns = 0u64;
    let mut parks = ParkBackoff::default();
    while !signal::stop_requested() {
        turns += 1;
        if let Some(left) = pump.app_left() {
            if let Ok(mut g) = pump.lcore.try_lock()
                && let Some(l) = g.as_mut()
            {
                l.publish(shared);
            }
            // Woken early by `release` (also on a stop).
            std::thread::park_timeout(parks.next(left));
            continue;
        }
        parks.reset();
        let idle = match pump.lcore.try_lock() {
            Ok(mut g) => {
                let Some(l) = g.as_mut() else { break };
                let idle = l.step();
                if turns.is_multiple_of(PUBLISH_EVERY) {
                    l.publish(shared);
                }
                idle
            }
            Err(Locked::Busy) => true,
            Err(Locked::Poisoned) => break,
        };
        if idle && idle_yield {
            std::thread::yield_now();
        }
    }
    let l = pump.lcore.lock().take();
    match l {
        Some(l) => l.finish(shared),
        None => LcoreReport::default(),
    }
}

/// How long the dataplane thread parks while the application polls ([`PARK_MAX`]).
#[derive(Debug, Default)]
struct ParkBackoff {
    /// Parks in a row that found the application still polling.
    parks: u32,
}

impl ParkBackoff {
    /// The next park, at least `left` (until the application counts as gone): the first one
    /// lasts [`APP_ACTIVE`], each further one twice the one before, up to [`PARK_MAX`].
    fn next(&mut self, left: Duration) -> Duration {
        let d = APP_ACTIVE
            .saturating_mul(1 << self.parks.min(16))
            .min(PARK_MAX);
        self.parks = self.parks.saturating_add(1);
        d.max(left)
    }

    /// The application left (or handed the loop back): the next park starts short again.
    fn reset(&mut self) {
        self.parks = 0;
    }
}

/// Set the calling thread's timer slack (`prctl(PR_SET_TIMERSLACK)`): how much later than
/// asked the kernel may end its sleeps, so it can serve them from a timer interrupt that
/// happens anyway (the scheduler tick).
#[allow(unsafe_code)]
pub fn set_timer_slack(slack: Duration) -> std::io::Result<()> {
    let ns = libc::c_ulong::try_from(slack.as_nanos()).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes plain integers, reads no memory, and changes only the
    // calling thread's timer slack.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Lock the process's memory, present and future, into RAM (`mlockall(MCL_CURRENT |
/// MCL_FUTURE)`), populating every mapping now and each new one when it is made: no page
/// fault later on a latency path. Without it an embedded engine's first pass over a memif
/// ring takes two page faults per message and side (the shared buffers are mapped but not
/// yet touched in this process: ~2,000 faults in the first 2,000 `write_lat` iterations).
/// Costs the memory of every mapping, thread stacks included; needs `CAP_IPC_LOCK` or a
/// large enough `RLIMIT_MEMLOCK`.
#[allow(unsafe_code)]
pub fn lock_memory() -> std::io::Result<()> {
    // SAFETY: mlockall takes flags only and reads no memory of ours.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's timer slack as the kernel reports it (`/proc/TID/timerslack_ns`;
    /// `/proc/thread-self` links to `PID/task/TID`).
    fn timer_slack_ns() -> u64 {
        let link = std::fs::read_link("/proc/thread-self").expect("procfs");
        let tid = link.file_name().expect("PID/task/TID");
        std::fs::read_to_string(
            std::path::Path::new("/proc")
                .join(tid)
                .join("timerslack_ns"),
        )
        .expect("procfs")
        .trim()
        .parse()
        .expect("a number")
    }

    #[test]
    fn timer_slack_is_set_for_the_calling_thread_only() {
        let before = timer_slack_ns();
        let t = std::thread::spawn(|| {
            set_timer_slack(PARK_SLACK).expect("prctl");
            timer_slack_ns()
        });
        assert_eq!(t.join().unwrap(), 4_000_000);
        assert_eq!(timer_slack_ns(), before);
    }

    /// One holder at a time; a guard's drop lets go; a holder's panic poisons the lock for
    /// `try_lock` (the loop is left alone) but not for `lock` (the thread's start and end).
    #[test]
    fn the_loop_lock_has_one_holder_and_is_poisoned_by_a_panic() {
        let l = std::sync::Arc::new(LoopLock::new(None));
        let g = l.try_lock().expect("free");
        assert_eq!(l.try_lock().err(), Some(Locked::Busy));
        assert!(g.is_none());
        drop(g);
        assert!(l.try_lock().is_ok());
        let l2 = l.clone();
        let r = std::thread::spawn(move || {
            let _g = l2.try_lock().expect("free");
            panic!("a step panics");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(l.try_lock().err(), Some(Locked::Poisoned));
        assert_eq!(
            l.try_lock().err(),
            Some(Locked::Poisoned),
            "still, and not held"
        );
        let g = l.lock();
        assert_eq!(l.try_lock().err(), Some(Locked::Busy));
        drop(g);
    }

    #[test]
    fn parks_double_while_the_application_polls_and_start_over_after_it_left() {
        let mut b = ParkBackoff::default();
        let ms = Duration::from_millis;
        let got: Vec<Duration> = (0..6).map(|_| b.next(ms(1))).collect();
        assert_eq!(got, [ms(2), ms(4), ms(8), ms(16), ms(16), ms(16)]);
        assert_eq!(b.next(ms(30)), ms(30), "never shorter than the time left");
        b.reset();
        assert_eq!(b.next(Duration::ZERO), APP_ACTIVE);
        for _ in 0..100 {
            b.next(Duration::ZERO);
        }
        assert_eq!(b.next(Duration::ZERO), PARK_MAX);
    }

    /// What `control::embedded` relies on: threads started by a thread with the slack
    /// (the engine's control, client and dataplane threads) have it too.
    #[test]
    fn threads_inherit_the_timer_slack_of_their_creator() {
        let t = std::thread::spawn(|| {
            set_timer_slack(PARK_SLACK).expect("prctl");
            std::thread::spawn(timer_slack_ns).join().unwrap()
        });
        assert_eq!(t.join().unwrap(), 4_000_000);
    }
}
