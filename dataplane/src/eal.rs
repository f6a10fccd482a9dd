//! EAL initialisation and cleanup.
#![allow(unsafe_code)]

use crate::DpdkError;
use std::ffi::{CStr, CString, c_char};
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALISED: AtomicBool = AtomicBool::new(false);

/// The initialised Environment Abstraction Layer. Dropping it calls `rte_eal_cleanup`, after
/// which no DPDK object may be used: drop ports and mempools first.
#[derive(Debug)]
pub struct Eal {
    _private: (),
}

impl Eal {
    /// `rte_eal_init` with `args` (the program name is added in front). Only once per process.
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::new("rte_eal_init", libc::EALREADY));
        }
        let mut owned: Vec<CString> = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("iwarpd").expect("no NUL"));
        for a in args {
            owned.push(
                CString::new(a.as_str())
                    .map_err(|_| DpdkError::new(format!("EAL argument {a:?}"), libc::EINVAL))?,
            );
        }
        // EAL keeps and permutes the argv pointers it is given: they must live for the
        // process, so the strings and the array are leaked on purpose (DPDK.md).
        let argv: &'static mut [*mut c_char] =
            Vec::leak(owned.into_iter().map(|s| s.into_raw()).collect::<Vec<_>>());
        let argc = i32::try_from(argv.len()).expect("few arguments");
        // SAFETY: argv holds argc valid NUL-terminated strings that are never freed.
        let rc = unsafe { dpdk_sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if rc < 0 {
            INITIALISED.store(false, Ordering::SeqCst);
            return Err(DpdkError::from_errno("rte_eal_init"));
        }
        Ok(Eal { _private: () })
    }

    /// DPDK's version string, e.g. "DPDK 22.11.11".
    pub fn version() -> String {
        // SAFETY: rte_version returns a pointer to a static NUL-terminated string.
        unsafe { CStr::from_ptr(dpdk_sys::shim_version()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Register the calling (non-EAL) thread with DPDK so it gets an lcore id and mempool
    /// caches. Call once at the start of each dataplane thread.
    pub fn register_thread(&self) -> Result<u32, DpdkError> {
        // SAFETY: EAL is initialised (we hold `self`); registering the current thread is
        // allowed from any thread.
        let rc = unsafe { dpdk_sys::rte_thread_register() };
        if rc < 0 {
            return Err(DpdkError::from_errno("rte_thread_register"));
        }
        // SAFETY: reads the calling thread's lcore id, set just above.
        Ok(unsafe { dpdk_sys::shim_lcore_id() })
    }

    /// Undo [`Eal::register_thread`] before a dataplane thread exits.
    pub fn unregister_thread(&self) {
        // SAFETY: EAL is initialised; unregistering a registered or unregistered thread is fine.
        unsafe { dpdk_sys::rte_thread_unregister() }
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        // SAFETY: called once, after every port and mempool owned by the program was dropped
        // (their owners hold a reference to `Eal`'s lifetime in practice: see control::run).
        let rc = unsafe { dpdk_sys::rte_eal_cleanup() };
        if rc < 0 {
            tracing::warn!("rte_eal_cleanup failed: {}", crate::error::strerror(rc));
        }
    }
}

/// The calling thread's `rte_errno`.
pub fn errno() -> i32 {
    // SAFETY: reads a thread-local integer.
    unsafe { dpdk_sys::shim_errno() }
}
