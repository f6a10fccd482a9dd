//! Identifiers shared by the control thread and the dataplane threads.
//!
//! A stale id must never reach a new object (a reused slot number would let a late command or
//! event drive the wrong connection, the review finding of issue 7). Connection and listener
//! ids are 64-bit and never reused ([`IdGen`]); QP numbers are 32-bit, shown to applications,
//! and handed out by a [`QpNumAllocator`] that only reuses a number after the other 2^32 - 2
//! have been used.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// One TCP connection carrying (or setting up) an MPA/RDMAP stream. Never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(u64);

impl ConnId {
    /// The raw value (for logs and the wire of the control protocol).
    pub fn raw(self) -> u64 {
        self.0
    }
    /// Rebuild an id from [`ConnId::raw`] (e.g. decoded from a client request). An id that was
    /// never allocated matches nothing.
    pub fn from_raw(v: u64) -> ConnId {
        ConnId(v)
    }
}

/// A listening endpoint (one TCP port on every dataplane thread). Never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(u64);

impl ListenerId {
    /// The raw value.
    pub fn raw(self) -> u64 {
        self.0
    }
    /// Rebuild an id from [`ListenerId::raw`].
    pub fn from_raw(v: u64) -> ListenerId {
        ListenerId(v)
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// Allocator of [`ConnId`]s and [`ListenerId`]s, shared (`Arc`) by the control thread (active
/// opens, listeners) and the dataplane threads (passive opens). Lock-free.
#[derive(Debug)]
pub struct IdGen {
    next: AtomicU64,
}

impl Default for IdGen {
    fn default() -> Self {
        IdGen {
            next: AtomicU64::new(1),
        }
    }
}

impl IdGen {
    /// A fresh connection id.
    pub fn conn(&self) -> ConnId {
        ConnId(self.next.fetch_add(1, Ordering::Relaxed))
    }
    /// A fresh listener id.
    pub fn listener(&self) -> ListenerId {
        ListenerId(self.next.fetch_add(1, Ordering::Relaxed))
    }
}

/// A queue pair number, as applications see it (`ibv_qp::qp_num`). 0 is never used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QpNum(pub u32);

impl fmt::Display for QpNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qp#{}", self.0)
    }
}

/// A client of the daemon (a process attached over the control socket, or the in-process
/// diagnostic service). Regions and QPs of another client are invisible to a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u32);

/// Hands out QP numbers: the next number after the last one handed out that is not in use, so
/// a number comes back only after a full turn of the 32-bit space (a destroyed QP's number is
/// not reused by the next QP, and a stale number matches nothing for a very long time).
#[derive(Debug, Default)]
pub struct QpNumAllocator {
    last: u32,
    in_use: HashSet<u32>,
}

impl QpNumAllocator {
    /// A new number, `None` only when every number is in use.
    pub fn alloc(&mut self) -> Option<QpNum> {
        if self.in_use.len() >= u32::MAX as usize - 1 {
            return None;
        }
        loop {
            self.last = self.last.wrapping_add(1);
            if self.last != 0 && self.in_use.insert(self.last) {
                return Some(QpNum(self.last));
            }
        }
    }

    /// Return a number (no-op for a number not in use).
    pub fn free(&mut self, qp: QpNum) {
        self.in_use.remove(&qp.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused() {
        let g = IdGen::default();
        let a = g.conn();
        let b = g.listener();
        let c = g.conn();
        assert_ne!(a.raw(), b.raw());
        assert_ne!(a, c);
        assert_eq!(ConnId::from_raw(a.raw()), a);
    }

    #[test]
    fn qp_numbers_do_not_come_back_at_once() {
        let mut q = QpNumAllocator::default();
        let a = q.alloc().unwrap();
        q.free(a);
        let b = q.alloc().unwrap();
        assert_ne!(a, b);
        assert_ne!(b.0, 0);
        // Wrap-around skips numbers in use and 0.
        q.last = u32::MAX - 1;
        q.in_use.insert(u32::MAX);
        let c = q.alloc().unwrap();
        assert_eq!(c.0, 1);
    }
}
