//! EAL initialisation and cleanup, and the ownership rules that keep every DPDK object valid.
//!
//! # Who keeps what alive (sound by the types, nothing to do per packet)
//!
//! - [`Eal`] is a cheap handle (an `Arc`). Every object made from it holds a clone:
//!   [`crate::mempool::Mempool`] holds the `Eal`; a [`crate::port::Port`] holds its pool; a
//!   [`crate::port::Queue`] holds its port; a [`LcoreThread`] (a registered dataplane thread)
//!   holds the `Eal`; an [`crate::extbuf::ExtRegion`] holds the `Eal` and the ports it is
//!   DMA-mapped for. So a port is closed only after its last queue is gone, and a pool outlives
//!   every port that receives into it.
//! - An [`crate::mbuf::Mbuf`] holds nothing (no reference count per packet). Instead a pool whose
//!   last handle is dropped is not freed at once: it is *retired* into the `Eal`, and when the
//!   last `Eal` handle goes, every retired pool is checked. Only if each one has all its mbufs
//!   back are the pools freed and `rte_eal_cleanup` called. If any mbuf is still out (an `Mbuf`
//!   kept past shutdown: in a static, a detached thread, a leaked value), everything is leaked
//!   instead, with a warning, so that `Mbuf` stays valid for the rest of the process.
//!
//! Why that check is exact: it runs when no handle exists, so nothing can allocate (allocation
//! needs a pool handle; a NIC refills its RX ring only inside `rx_burst`, which needs a queue);
//! no thread is registered (registrations hold the `Eal`), so no per-lcore mempool cache can
//! change except the main thread's, and the check runs on the main thread (the one that called
//! `rte_eal_init`; dropped elsewhere, the final handle leaks instead). An unregistered thread can
//! only return mbufs straight to the pool's ring, which can only make the count of outstanding
//! mbufs look higher, never lower, than it is: a race leaks, it never frees early.
#![allow(unsafe_code)]

use crate::DpdkError;
use std::cell::Cell;
use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

static INITIALISED: AtomicBool = AtomicBool::new(false);

/// `rte_lcore_id()` of a thread without an lcore (`LCORE_ID_ANY`, rte_lcore.h).
pub(crate) const LCORE_ID_ANY: u32 = u32::MAX;

/// How the process's EAL ended (see [`shutdown_outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownOutcome {
    /// Every pool was freed and `rte_eal_cleanup` ran.
    CleanedUp,
    /// Some mbufs were still out: pools and EAL were left to the process exit.
    MbufsOutstanding,
    /// The last handle was dropped off the main thread: left to the process exit.
    OffMainThread,
}

/// 0: not shut down; else a `ShutdownOutcome` discriminant + 1.
static OUTCOME: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// How the EAL ended, once its last handle is gone (None before).
pub fn shutdown_outcome() -> Option<ShutdownOutcome> {
    match OUTCOME.load(Ordering::SeqCst) {
        1 => Some(ShutdownOutcome::CleanedUp),
        2 => Some(ShutdownOutcome::MbufsOutstanding),
        3 => Some(ShutdownOutcome::OffMainThread),
        _ => None,
    }
}

thread_local! {
    /// This thread holds a live [`LcoreThread`] registration.
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// The initialised Environment Abstraction Layer (a cheap, cloneable handle).
///
/// `rte_eal_cleanup` runs when the last handle (including those held inside pools, ports,
/// queues, thread registrations and external-memory regions) is dropped, on the thread that
/// called [`Eal::init`], and only if no mbuf is still out; see the module docs.
#[derive(Debug, Clone)]
pub struct Eal {
    inner: Arc<EalInner>,
}

#[derive(Debug)]
struct EalInner {
    main_thread: std::thread::ThreadId,
    retired: Mutex<Vec<RetiredPool>>,
}

/// A pool whose handles are all gone, waiting for the final check.
#[derive(Debug)]
pub(crate) struct RetiredPool {
    pub(crate) raw: NonNull<dpdk_sys::rte_mempool>,
    pub(crate) name: String,
}

// SAFETY: the pointer is only used (in_use count, free) by EalInner::drop, on one thread.
unsafe impl Send for RetiredPool {}

/// IOVA addressing mode EAL chose (`rte_eal_iova_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IovaMode {
    /// IO addresses are physical addresses (igb_uio, vfio without IOMMU).
    Pa,
    /// IO addresses are virtual addresses (`--no-huge`, vfio with an IOMMU, `--iova-mode=va`).
    Va,
}

impl Eal {
    /// `rte_eal_init` with `args` (the program name is added in front). Only once per process:
    /// DPDK cannot be initialised again, even after cleanup.
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        if INITIALISED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::new("rte_eal_init", libc::EALREADY));
        }
        let mut owned: Vec<CString> = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("iwarpd").expect("no NUL"));
        for a in args {
            match CString::new(a.as_str()) {
                Ok(s) => owned.push(s),
                Err(_) => {
                    INITIALISED.store(false, Ordering::SeqCst);
                    return Err(DpdkError::new(format!("EAL argument {a:?}"), libc::EINVAL));
                }
            }
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
        Ok(Eal {
            inner: Arc::new(EalInner {
                main_thread: std::thread::current().id(),
                retired: Mutex::new(Vec::new()),
            }),
        })
    }

    /// DPDK's version string, e.g. "DPDK 22.11.11".
    pub fn version() -> String {
        // SAFETY: rte_version returns a pointer to a static NUL-terminated string.
        unsafe { CStr::from_ptr(dpdk_sys::shim_version()) }
            .to_string_lossy()
            .into_owned()
    }

    /// The IOVA mode EAL runs in.
    pub fn iova_mode(&self) -> IovaMode {
        // SAFETY: EAL is initialised (we hold `self`); a plain query.
        let m = unsafe { dpdk_sys::rte_eal_iova_mode() };
        if m == dpdk_sys::rte_iova_mode_RTE_IOVA_PA {
            IovaMode::Pa
        } else {
            IovaMode::Va
        }
    }

    /// TSC ticks per second as EAL measured them.
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: EAL is initialised; a plain read.
        unsafe { dpdk_sys::shim_tsc_hz() }
    }

    /// Register the calling (non-EAL) thread with DPDK so it gets an lcore id and mempool
    /// caches. Keep the returned guard for as long as the thread polls; dropping it
    /// unregisters the thread. Fails with `EALREADY` on a thread that already has an lcore
    /// (the main thread, or a thread registered twice).
    pub fn register_thread(&self) -> Result<LcoreThread, DpdkError> {
        // SAFETY: reads the calling thread's lcore id (a thread-local).
        let current = unsafe { dpdk_sys::shim_lcore_id() };
        if REGISTERED.get() || current != LCORE_ID_ANY {
            return Err(DpdkError::new(
                "rte_thread_register (thread already has an lcore)",
                libc::EALREADY,
            ));
        }
        // SAFETY: EAL is initialised (we hold `self`); registering the current thread is
        // allowed from any thread.
        let rc = unsafe { dpdk_sys::rte_thread_register() };
        if rc < 0 {
            return Err(DpdkError::from_errno("rte_thread_register"));
        }
        REGISTERED.set(true);
        Ok(LcoreThread {
            // SAFETY: reads the calling thread's lcore id, set just above.
            lcore_id: unsafe { dpdk_sys::shim_lcore_id() },
            _eal: self.clone(),
            _not_send: PhantomData,
        })
    }

    /// Hand a pool whose last handle is gone to the final check (see the module docs).
    pub(crate) fn retire_pool(&self, pool: RetiredPool) {
        self.inner
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pool);
    }
}

impl Drop for EalInner {
    fn drop(&mut self) {
        let pools = std::mem::take(self.retired.get_mut().unwrap_or_else(|e| e.into_inner()));
        if std::thread::current().id() != self.main_thread {
            tracing::warn!(
                "the last EAL handle was dropped off the main thread: DPDK memory is left to the process exit"
            );
            OUTCOME.store(3, Ordering::SeqCst);
            return;
        }
        let busy: Vec<(String, u32)> = pools
            .iter()
            .map(|p| {
                // SAFETY: a retired pool is still allocated (never freed before this check).
                let n = unsafe { dpdk_sys::shim_mempool_in_use_count(p.raw.as_ptr()) };
                (p.name.clone(), n)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        if !busy.is_empty() {
            tracing::warn!(
                ?busy,
                "mbufs still in use at shutdown: pools and EAL are left to the process exit"
            );
            OUTCOME.store(2, Ordering::SeqCst);
            return;
        }
        for p in pools {
            // SAFETY: no handle, queue or mbuf of this pool exists (checked above, see the
            // module docs); freed exactly once.
            unsafe { dpdk_sys::rte_mempool_free(p.raw.as_ptr()) }
        }
        // SAFETY: last handle, on the main thread, no DPDK object left in use.
        let rc = unsafe { dpdk_sys::rte_eal_cleanup() };
        if rc < 0 {
            tracing::warn!("rte_eal_cleanup failed: {}", crate::error::strerror(rc));
        }
        OUTCOME.store(1, Ordering::SeqCst);
    }
}

/// A dataplane thread registered with DPDK (an lcore id, mempool caches). Unregisters on drop.
/// Not `Send`: it describes the thread that made it.
#[derive(Debug)]
pub struct LcoreThread {
    lcore_id: u32,
    _eal: Eal,
    _not_send: PhantomData<*const ()>,
}

impl LcoreThread {
    /// The lcore id DPDK gave this thread.
    pub fn lcore_id(&self) -> u32 {
        self.lcore_id
    }
}

impl Drop for LcoreThread {
    fn drop(&mut self) {
        // SAFETY: this thread registered itself (the guard is not Send) and EAL is alive (we
        // hold a handle).
        unsafe { dpdk_sys::rte_thread_unregister() }
        REGISTERED.set(false);
    }
}

/// The calling thread's `rte_errno`.
pub fn errno() -> i32 {
    // SAFETY: reads a thread-local integer.
    unsafe { dpdk_sys::shim_errno() }
}
