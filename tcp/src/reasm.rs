//! Receive side storage: in-order payload waiting for the application, and out-of-order
//! segments held (bounded, counted) until the gap before them fills (RFC 9293 §3.10.7.4,
//! "seventh, process the segment text"; RFC 2018 for the SACK blocks built from it).
//!
//! Payload is never copied: each entry is the caller's buffer plus a byte range into it.
//! Sequence numbers here are absolute 64-bit offsets (see [`crate::conn`]).

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

/// Outcome of [`RecvQueue::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Appended in order; `filled` says whether held segments were pulled in behind it.
    InOrder { filled: bool },
    /// Held out of order.
    Held,
    /// Entirely old data.
    Duplicate,
    /// Out of order but over a bound: dropped.
    Dropped(Bound),
}

/// Which bound refused an out-of-order segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Bytes or segments held by this connection.
    Connection,
    /// Tiny segments held by this connection.
    Small,
    /// Segments held over the whole endpoint (the caller's budget).
    Budget,
}

#[derive(Debug)]
pub(crate) struct RecvQueue<B> {
    inorder: VecDeque<(B, Range<usize>)>,
    inorder_bytes: usize,
    ooo: BTreeMap<u64, (B, Range<usize>)>,
    ooo_bytes: usize,
    last_ooo: Option<(u64, u64)>,
    max_bytes: usize,
    max_segs: usize,
    /// Held segments shorter than `small_len`, and the bound on them.
    small: usize,
    small_len: usize,
    max_small: usize,
}

impl<B: AsRef<[u8]>> RecvQueue<B> {
    pub(crate) fn new(max_bytes: usize, max_segs: usize, max_small: usize) -> Self {
        RecvQueue {
            inorder: VecDeque::new(),
            inorder_bytes: 0,
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            last_ooo: None,
            max_bytes,
            max_segs,
            small: 0,
            small_len: 0,
            max_small,
        }
    }

    /// Segments shorter than `len` bytes count as small (set once the MSS is known).
    pub(crate) fn set_small_len(&mut self, len: usize) {
        if self.ooo.is_empty() {
            self.small_len = len;
        }
    }

    fn is_small(&self, r: &Range<usize>) -> bool {
        r.len() < self.small_len
    }

    /// Segments held out of order (each pins one receive buffer).
    pub(crate) fn ooo_segments(&self) -> usize {
        self.ooo.len()
    }

    /// Unread in-order bytes.
    pub(crate) fn readable_bytes(&self) -> usize {
        self.inorder_bytes
    }

    /// Bytes held out of order.
    pub(crate) fn ooo_bytes(&self) -> usize {
        self.ooo_bytes
    }

    /// Whether anything is held out of order.
    pub(crate) fn has_ooo(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Insert payload `buf[range]` starting at absolute sequence `start`; `rcv_nxt` advances
    /// over whatever becomes contiguous. The caller has already trimmed to the window.
    /// `budget`: how many more segments the endpoint lets this connection hold out of order.
    pub(crate) fn insert(
        &mut self,
        rcv_nxt: &mut u64,
        start: u64,
        buf: B,
        range: Range<usize>,
        budget: usize,
    ) -> Insert {
        let len = range.len() as u64;
        let end = start + len;
        if len == 0 || end <= *rcv_nxt {
            return Insert::Duplicate;
        }
        if start <= *rcv_nxt {
            let skip = (*rcv_nxt - start) as usize;
            let r = (range.start + skip)..range.end;
            self.inorder_bytes += r.len();
            self.inorder.push_back((buf, r));
            *rcv_nxt = end;
            let filled = self.drain(rcv_nxt);
            return Insert::InOrder { filled };
        }
        if let Some((_, r)) = self.ooo.get(&start)
            && r.len() as u64 >= len
        {
            self.last_ooo = Some((start, start + r.len() as u64));
            return Insert::Duplicate;
        }
        let replaces = self.ooo.contains_key(&start);
        if self.ooo_bytes + range.len() > self.max_bytes
            || (!replaces && self.ooo.len() >= self.max_segs)
        {
            return Insert::Dropped(Bound::Connection);
        }
        if !replaces && budget == 0 {
            return Insert::Dropped(Bound::Budget);
        }
        let small = self.is_small(&range);
        if small && self.small >= self.max_small {
            return Insert::Dropped(Bound::Small);
        }
        self.ooo_bytes += range.len();
        self.small += usize::from(small);
        if let Some((_, old)) = self.ooo.insert(start, (buf, range)) {
            self.ooo_bytes -= old.len();
            self.small -= usize::from(self.is_small(&old));
        }
        self.last_ooo = Some((start, end));
        Insert::Held
    }

    fn drain(&mut self, rcv_nxt: &mut u64) -> bool {
        let mut filled = false;
        while let Some(entry) = self.ooo.first_entry() {
            let start = *entry.key();
            if start > *rcv_nxt {
                break;
            }
            let (buf, range) = entry.remove();
            self.ooo_bytes -= range.len();
            self.small -= usize::from(self.is_small(&range));
            filled = true;
            let end = start + range.len() as u64;
            if end > *rcv_nxt {
                let skip = (*rcv_nxt - start) as usize;
                let r = (range.start + skip)..range.end;
                self.inorder_bytes += r.len();
                self.inorder.push_back((buf, r));
                *rcv_nxt = end;
            }
        }
        filled
    }

    /// The next in-order chunk, without removing it.
    pub(crate) fn front(&self) -> Option<(&B, Range<usize>)> {
        self.inorder.front().map(|(b, r)| (b, r.clone()))
    }

    /// Drop `n` bytes from the front of the in-order data (across chunks); returns how many
    /// were dropped.
    pub(crate) fn consume(&mut self, mut n: usize) -> usize {
        let mut done = 0;
        while n > 0 {
            let Some((_, r)) = self.inorder.front_mut() else {
                break;
            };
            let k = n.min(r.len());
            r.start += k;
            n -= k;
            done += k;
            self.inorder_bytes -= k;
            if r.start >= r.end {
                self.inorder.pop_front();
            }
        }
        done
    }

    /// Next in-order chunk for the application.
    pub(crate) fn pop(&mut self) -> Option<(B, Range<usize>)> {
        let (b, r) = self.inorder.pop_front()?;
        self.inorder_bytes -= r.len();
        Some((b, r))
    }

    /// Visit the held data as merged ranges in ascending order until `f` returns false.
    fn for_each_merged(&self, mut f: impl FnMut((u64, u64)) -> bool) {
        let mut cur: Option<(u64, u64)> = None;
        for (&s, (_, r)) in &self.ooo {
            let e = s + r.len() as u64;
            match cur {
                Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
                Some(block) => {
                    if !f(block) {
                        return;
                    }
                    cur = Some((s, e));
                }
                None => cur = Some((s, e)),
            }
        }
        if let Some(block) = cur {
            f(block);
        }
    }

    /// Fill `out` with SACK blocks (absolute, [left, right)), the first containing the most
    /// recently received out-of-order segment (RFC 2018 §4), then the others in ascending
    /// order. Returns how many were written. Allocation-free.
    pub(crate) fn sack_blocks(&self, out: &mut [(u64, u64)]) -> usize {
        if out.is_empty() {
            return 0;
        }
        let mut first = None;
        if let Some((ls, _)) = self.last_ooo {
            self.for_each_merged(|(s, e)| {
                if s <= ls && ls < e {
                    first = Some((s, e));
                    return false;
                }
                true
            });
        }
        let mut n = 0;
        if let Some(b) = first {
            out[0] = b;
            n = 1;
        }
        self.for_each_merged(|b| {
            if Some(b) != first {
                out[n] = b;
                n += 1;
            }
            n < out.len()
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_trims_and_bounds() {
        let mut q: RecvQueue<Vec<u8>> = RecvQueue::new(10, 8, 8);
        let mut nxt = 100u64;
        assert_eq!(
            q.insert(&mut nxt, 105, b"fghij".to_vec(), 0..5, 100),
            Insert::Held
        );
        let mut blocks = [(0, 0); 3];
        assert_eq!(q.sack_blocks(&mut blocks), 1);
        assert_eq!(blocks[0], (105, 110));
        assert_eq!(
            q.insert(&mut nxt, 112, b"0123456789".to_vec(), 0..10, 100),
            Insert::Dropped(Bound::Connection)
        );
        // Overlaps 105..107: trimmed on drain.
        assert_eq!(
            q.insert(&mut nxt, 100, b"abcdefg".to_vec(), 0..7, 100),
            Insert::InOrder { filled: true }
        );
        assert_eq!(nxt, 110);
        assert_eq!(q.readable_bytes(), 10);
        let mut out = Vec::new();
        while let Some((b, r)) = q.pop() {
            out.extend_from_slice(&b[r]);
        }
        assert_eq!(out, b"abcdefghij");
        // Partial consumption across chunks.
        assert_eq!(
            q.insert(&mut nxt, 110, b"klm".to_vec(), 0..3, 100),
            Insert::InOrder { filled: false }
        );
        assert_eq!(
            q.insert(&mut nxt, 113, b"nop".to_vec(), 0..3, 100),
            Insert::InOrder { filled: false }
        );
        assert_eq!(q.consume(4), 4);
        let (b, r) = q.front().unwrap();
        assert_eq!(&b[r], b"op");
        assert_eq!(q.readable_bytes(), 2);
        assert_eq!(q.consume(10), 2);
        assert!(q.front().is_none());
        assert_eq!(
            q.insert(&mut nxt, 100, b"x".to_vec(), 0..1, 100),
            Insert::Duplicate
        );
        assert_eq!(q.ooo_bytes(), 0);
    }

    #[test]
    fn small_segments_and_budget_bounded() {
        let mut q: RecvQueue<Vec<u8>> = RecvQueue::new(1 << 20, 100, 2);
        q.set_small_len(4);
        let mut nxt = 0u64;
        assert_eq!(q.insert(&mut nxt, 10, vec![1], 0..1, 100), Insert::Held);
        assert_eq!(q.insert(&mut nxt, 20, vec![1], 0..1, 100), Insert::Held);
        assert_eq!(
            q.insert(&mut nxt, 30, vec![1], 0..1, 100),
            Insert::Dropped(Bound::Small)
        );
        // Full-sized segments are still taken, within the endpoint's budget.
        assert_eq!(q.insert(&mut nxt, 40, vec![1; 8], 0..8, 1), Insert::Held);
        assert_eq!(
            q.insert(&mut nxt, 50, vec![1; 8], 0..8, 0),
            Insert::Dropped(Bound::Budget)
        );
        assert_eq!(q.ooo_segments(), 3);
        // Draining releases the small ones.
        assert_eq!(
            q.insert(&mut nxt, 0, vec![0; 30], 0..30, 0),
            Insert::InOrder { filled: true }
        );
        assert_eq!(q.ooo_segments(), 1);
        assert_eq!(q.insert(&mut nxt, 60, vec![1], 0..1, 100), Insert::Held);
    }
}
