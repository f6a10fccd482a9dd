//! Errors from the DPDK layer, with DPDK's own message text.

use std::ffi::CStr;

/// A DPDK call failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {msg} (rte_errno {code})")]
pub struct DpdkError {
    /// What we were doing.
    pub what: String,
    /// The (positive) errno value DPDK reported.
    pub code: i32,
    /// `rte_strerror(code)`.
    pub msg: String,
}

impl DpdkError {
    /// Build an error for `what` from a negative return value or `rte_errno`.
    pub fn new(what: impl Into<String>, code: i32) -> Self {
        let code = code.abs();
        DpdkError {
            what: what.into(),
            code,
            msg: strerror(code),
        }
    }

    /// Build an error for `what` from the thread's current `rte_errno`.
    pub fn from_errno(what: impl Into<String>) -> Self {
        Self::new(what, crate::eal::errno())
    }
}

/// DPDK's text for an errno value.
#[allow(unsafe_code)]
pub fn strerror(code: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string
    // that stays valid at least until the next call on this thread; we copy it at once.
    unsafe {
        let p = dpdk_sys::rte_strerror(code);
        if p.is_null() {
            return format!("errno {code}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}
