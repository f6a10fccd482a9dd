//! Sender-side SACK scoreboard (RFC 2018 §5, RFC 6675 §4/§5).
//!
//! Holds the SACKed ranges above SND.UNA as absolute 64-bit offsets, merged and sorted.

/// Bound on the number of ranges remembered (extra blocks are ignored, which is safe).
const MAX_RANGES: usize = 64;

#[derive(Debug, Clone, Default)]
pub(crate) struct Scoreboard {
    ranges: Vec<(u64, u64)>,
}

impl Scoreboard {
    pub(crate) fn clear(&mut self) {
        self.ranges.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Record a SACK block, clipped to `[una, max)`. Returns whether it added new information.
    pub(crate) fn add(&mut self, l: u64, r: u64, una: u64, max: u64) -> bool {
        let (l, r) = (l.max(una), r.min(max));
        if l >= r {
            return false;
        }
        let before = self.sacked_bytes();
        let i = self.ranges.partition_point(|&(_, e)| e < l);
        let (mut nl, mut nr) = (l, r);
        while i < self.ranges.len() && self.ranges[i].0 <= nr {
            nl = nl.min(self.ranges[i].0);
            nr = nr.max(self.ranges[i].1);
            self.ranges.remove(i);
        }
        if self.ranges.len() >= MAX_RANGES {
            return false;
        }
        self.ranges.insert(i, (nl, nr));
        self.sacked_bytes() > before
    }

    /// Forget everything below the cumulative ACK.
    pub(crate) fn advance(&mut self, una: u64) {
        self.ranges.retain_mut(|(l, r)| {
            *l = (*l).max(una);
            *l < *r
        });
    }

    pub(crate) fn sacked_bytes(&self) -> u64 {
        self.ranges.iter().map(|(l, r)| r - l).sum()
    }

    /// Highest SACKed offset (exclusive end).
    pub(crate) fn high(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// First un-SACKed range at or after `from` and below the highest SACKed byte: data the
    /// receiver skipped, hence presumed lost (a simplification of RFC 6675 IsLost()).
    pub(crate) fn next_hole(&self, from: u64) -> Option<(u64, u64)> {
        let mut cur = from;
        for &(l, r) in &self.ranges {
            if r <= cur {
                continue;
            }
            if l > cur {
                return Some((cur, l));
            }
            cur = r;
        }
        None
    }

    /// Whether `[l, r)` is entirely SACKed.
    pub(crate) fn covers(&self, l: u64, r: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= l);
        self.ranges.get(i).is_some_and(|&(s, e)| s <= l && r <= e)
    }

    /// The parts of `[l, r)` not SACKed, written to `out` (at most `out.len()`; a range that
    /// does not fit is merged into the last one). Returns how many were written.
    pub(crate) fn gaps(&self, l: u64, r: u64, out: &mut [(u64, u64)]) -> usize {
        let mut n = 0;
        let mut cur = l;
        let mut push = |a: u64, b: u64, n: &mut usize| {
            if a >= b || out.is_empty() {
                return;
            }
            if *n < out.len() {
                out[*n] = (a, b);
                *n += 1;
            } else {
                out[out.len() - 1].1 = b;
            }
        };
        let i = self.ranges.partition_point(|&(_, e)| e <= l);
        for &(s, e) in &self.ranges[i..] {
            if s >= r {
                break;
            }
            push(cur, s.min(r), &mut n);
            cur = cur.max(e);
        }
        push(cur, r, &mut n);
        n
    }

    /// Bytes in holes below the highest SACKed byte, and those of them below `rtx` (resent).
    pub(crate) fn hole_bytes(&self, una: u64, rtx: u64) -> (u64, u64) {
        let (mut lost, mut resent) = (0, 0);
        let mut cur = una;
        for &(l, r) in &self.ranges {
            if l > cur {
                lost += l - cur;
                resent += rtx.clamp(cur, l) - cur;
            }
            cur = cur.max(r);
        }
        (lost, resent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_holes_and_pipe_inputs() {
        let mut s = Scoreboard::default();
        assert!(s.add(20, 30, 0, 100));
        assert!(s.add(40, 50, 0, 100));
        assert!(!s.add(22, 28, 0, 100));
        assert!(s.add(30, 40, 0, 100));
        assert_eq!(s.sacked_bytes(), 30);
        assert_eq!(s.next_hole(0), Some((0, 20)));
        assert_eq!(s.next_hole(20), None);
        assert!(s.add(60, 70, 0, 100));
        assert_eq!(s.next_hole(20), Some((50, 60)));
        assert_eq!(s.hole_bytes(0, 10), (30, 10));
        assert!(s.covers(20, 50) && !s.covers(19, 21) && !s.covers(45, 61));
        let mut g = [(0, 0); 4];
        assert_eq!(s.gaps(10, 80, &mut g), 3);
        assert_eq!(g[..3], [(10, 20), (50, 60), (70, 80)]);
        assert_eq!(s.gaps(22, 28, &mut g), 0);
        let mut one = [(0, 0); 1];
        assert_eq!(s.gaps(0, 100, &mut one), 1);
        assert_eq!(one[0], (0, 100));
        s.advance(45);
        assert_eq!(s.sacked_bytes(), 15);
    }
}
