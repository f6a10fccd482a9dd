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

/// SACK blocks remembered in report order (at most 4 fit an ACK, RFC 2018 §3).
const RECENT: usize = 4;

#[derive(Debug)]
pub(crate) struct RecvQueue<B> {
    inorder: VecDeque<(B, Range<usize>)>,
    inorder_bytes: usize,
    ooo: BTreeMap<u64, (B, Range<usize>)>,
    ooo_bytes: usize,
    /// The held data as merged ranges `start -> end` (what SACK blocks report).
    ranges: BTreeMap<u64, u64>,
    /// A sequence number inside each of the most recently changed blocks, most recent first:
    /// the order SACK blocks are reported in (RFC 2018 §4: the block of the latest segment
    /// first, then the most recently reported ones, as Linux's `selective_acks`).
    recent: [Option<u64>; RECENT],
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
            ranges: BTreeMap::new(),
            recent: [None; RECENT],
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
        if self.block_of(start).is_some_and(|(_, e)| e >= end) {
            // Everything is held already (RFC 2883 §4.1.3: D-SACKed by the caller); its block
            // is reported next.
            self.touch(start);
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
        self.add_range(start, end);
        self.touch(start);
        Insert::Held
    }

    /// Merge `[s, e)` into the held ranges.
    fn add_range(&mut self, mut s: u64, mut e: u64) {
        if let Some((&ps, &pe)) = self.ranges.range(..=s).next_back()
            && pe >= s
        {
            s = ps;
            e = e.max(pe);
            self.ranges.remove(&ps);
        }
        while let Some((&ns, &ne)) = self.ranges.range(s..).next()
            && ns <= e
        {
            e = e.max(ne);
            self.ranges.remove(&ns);
        }
        self.ranges.insert(s, e);
    }

    /// The held block containing `seq`.
    fn block_of(&self, seq: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self.ranges.range(..=seq).next_back()?;
        (seq < e).then_some((s, e))
    }

    /// The block containing `seq` changed: report it first from now on.
    fn touch(&mut self, seq: u64) {
        let Some((bs, be)) = self.block_of(seq) else {
            return;
        };
        let mut out = [None; RECENT];
        out[0] = Some(seq);
        let mut n = 1;
        for p in self.recent.iter().flatten() {
            // Entries of the same block (it may have absorbed others) collapse into one.
            if n < RECENT && !(bs <= *p && *p < be) {
                out[n] = Some(*p);
                n += 1;
            }
        }
        self.recent = out;
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
            // The block this segment belongs to is being pulled in entirely.
            if let Some((&rs, _)) = self.ranges.first_key_value()
                && rs <= start
            {
                self.ranges.pop_first();
            }
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

    /// Fill `out` with SACK blocks (absolute, [left, right)): the most recently changed
    /// blocks first (RFC 2018 §4: the block of the latest segment, then the most recently
    /// reported), then the highest others. Returns how many were written. Allocation-free.
    pub(crate) fn sack_blocks(&self, out: &mut [(u64, u64)]) -> usize {
        let mut n = 0;
        for p in self.recent.iter().flatten() {
            if n == out.len() {
                return n;
            }
            if let Some(b) = self.block_of(*p)
                && !out[..n].contains(&b)
            {
                out[n] = b;
                n += 1;
            }
        }
        for (&s, &e) in self.ranges.iter().rev() {
            if n == out.len() {
                break;
            }
            if !out[..n].contains(&(s, e)) {
                out[n] = (s, e);
                n += 1;
            }
        }
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

    /// RFC 2018 §4: the first block holds the latest segment, the others are the most
    /// recently reported ones (not the lowest): a block that stopped growing is still reported
    /// while it is among the last changed, and one absorbed by a merge is not repeated.
    #[test]
    fn sack_blocks_in_recency_order() {
        let mut q: RecvQueue<Vec<u8>> = RecvQueue::new(1 << 20, 100, 100);
        let mut nxt = 0u64;
        for s in [10u64, 30, 50, 70] {
            assert_eq!(q.insert(&mut nxt, s, vec![0; 10], 0..10, 100), Insert::Held);
        }
        let mut b = [(0, 0); 3];
        assert_eq!(q.sack_blocks(&mut b), 3);
        assert_eq!(b, [(70, 80), (50, 60), (30, 40)]);
        // Extending the second block reports it first; the lowest stays out.
        assert_eq!(q.insert(&mut nxt, 40, vec![0; 5], 0..5, 100), Insert::Held);
        q.sack_blocks(&mut b);
        assert_eq!(b, [(30, 45), (70, 80), (50, 60)]);
        // A segment joining two blocks: one block, reported first.
        assert_eq!(q.insert(&mut nxt, 45, vec![0; 5], 0..5, 100), Insert::Held);
        q.sack_blocks(&mut b);
        assert_eq!(b, [(30, 60), (70, 80), (10, 20)]);
        // A duplicate inside held data is reported as held, its block first.
        assert_eq!(
            q.insert(&mut nxt, 12, vec![0; 4], 0..4, 100),
            Insert::Duplicate
        );
        q.sack_blocks(&mut b);
        assert_eq!(b, [(10, 20), (30, 60), (70, 80)]);
        // Filling the first gap pulls in the first block only.
        assert_eq!(
            q.insert(&mut nxt, 0, vec![0; 10], 0..10, 100),
            Insert::InOrder { filled: true }
        );
        assert_eq!(nxt, 20);
        assert_eq!(q.sack_blocks(&mut b), 2);
        assert_eq!(b[..2], [(30, 60), (70, 80)]);
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
