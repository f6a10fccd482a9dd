//! ARP frames shared between the dataplane threads of one port.
//!
//! With RSS over several queues, ARP carries no IP/TCP 4-tuple: the NIC puts every ARP frame
//! on one queue (usually queue 0), so only that thread would learn its neighbours, and an ARP
//! reply to another thread's request would never reach the thread that asked. Each thread
//! therefore copies the ARP frames it receives to every other thread, which feeds them to
//! its interface with [`tcp::iface::Iface::observe_arp`] (learn only: no reply, no event).
//! ARP is rare (a few frames per neighbour per minute), so a mutex-protected queue per thread
//! costs nothing on the data path: a thread looks at its queue only when an atomic counter
//! says something is there. Queues are bounded; a frame beyond the bound is dropped and
//! counted (ARP retries cover it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Frames waiting per thread before new ones are dropped.
const QUEUE_CAP: usize = 256;

/// Ethertype of ARP.
const ETHERTYPE_ARP: [u8; 2] = [0x08, 0x06];

/// The bus: one inbox per thread (a cheap, cloneable handle).
#[derive(Debug, Clone)]
pub struct ArpBus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    inboxes: Vec<Inbox>,
    dropped: AtomicU64,
}

#[derive(Debug, Default)]
struct Inbox {
    pending: AtomicUsize,
    frames: Mutex<VecDeque<Box<[u8]>>>,
}

impl ArpBus {
    /// A bus for `threads` threads.
    pub fn new(threads: usize) -> Self {
        ArpBus {
            inner: Arc::new(Inner {
                inboxes: (0..threads).map(|_| Inbox::default()).collect(),
                dropped: AtomicU64::new(0),
            }),
        }
    }

    /// Whether `frame` is an ARP frame (Ethernet, no VLAN tag).
    #[inline]
    pub fn is_arp(frame: &[u8]) -> bool {
        frame.get(12..14) == Some(&ETHERTYPE_ARP[..])
    }

    /// Copy `frame` (received by thread `from`) to every other thread. Returns how many
    /// inboxes took it.
    pub fn share(&self, from: usize, frame: &[u8]) -> usize {
        let mut n = 0;
        for (i, inbox) in self.inner.inboxes.iter().enumerate() {
            if i == from {
                continue;
            }
            let mut q = inbox.frames.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() >= QUEUE_CAP {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            q.push_back(frame.into());
            inbox.pending.store(q.len(), Ordering::Release);
            n += 1;
        }
        n
    }

    /// Take the frames other threads shared with thread `me` (oldest first) into `out`.
    /// One atomic load when there are none.
    #[inline]
    pub fn take(&self, me: usize, out: &mut Vec<Box<[u8]>>) {
        let Some(inbox) = self.inner.inboxes.get(me) else {
            return;
        };
        if inbox.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut q = inbox.frames.lock().unwrap_or_else(|e| e.into_inner());
        out.extend(q.drain(..));
        inbox.pending.store(0, Ordering::Release);
    }

    /// Frames dropped because an inbox was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_reach_every_other_thread_once() {
        let bus = ArpBus::new(3);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ETHERTYPE_ARP);
        assert!(ArpBus::is_arp(&arp));
        assert!(!ArpBus::is_arp(&[0u8; 13]));
        assert_eq!(bus.share(1, &arp), 2);
        let mut got = Vec::new();
        bus.take(1, &mut got);
        assert!(got.is_empty(), "the sender does not get its own frame");
        bus.take(0, &mut got);
        bus.take(2, &mut got);
        assert_eq!(got.len(), 2);
        assert_eq!(&*got[0], &arp[..]);
        got.clear();
        bus.take(0, &mut got);
        assert!(got.is_empty());
        for _ in 0..QUEUE_CAP + 5 {
            bus.share(0, &arp);
        }
        assert_eq!(bus.dropped(), 2 * 5);
        bus.take(1, &mut got);
        assert_eq!(got.len(), QUEUE_CAP);
    }
}
