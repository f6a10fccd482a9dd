//! SIGINT/SIGTERM set a stop flag that the poll loops and the control thread watch.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Install the handlers for SIGINT and SIGTERM.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an extern "C" fn that only does an atomic store, which is
        // async-signal-safe; a zeroed sigaction with sa_sigaction set is a valid argument.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether a stop was requested (by a signal or [`request_stop`]).
#[inline]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Ask every loop to stop (used by timed runs and tests).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}
