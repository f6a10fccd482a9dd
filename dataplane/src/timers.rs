//! A hashed timing wheel for per-connection timers (RTO, delayed ACK, persist, keepalive,
//! TIME-WAIT). Entries are never cancelled: the owner keeps the deadline it armed per item and
//! ignores stale expiries, so arming is O(1) and the poll loop touches only due slots.

use netcore::Instant;

/// A timing wheel of `slots` buckets of `tick_ns` each; deadlines beyond one turn wait in their
/// bucket for later turns.
#[derive(Debug)]
pub struct TimerWheel<T> {
    tick_ns: u64,
    slots: Vec<Vec<(u64, T)>>,
    /// Next tick to visit.
    cur: u64,
    len: usize,
}

impl<T: Copy> TimerWheel<T> {
    /// A wheel of `slots` buckets (a power of two) of `tick_ns` nanoseconds each.
    pub fn new(slots: usize, tick_ns: u64) -> Self {
        assert!(
            slots.is_power_of_two() && tick_ns > 0,
            "slots must be a power of two"
        );
        TimerWheel {
            tick_ns,
            slots: (0..slots).map(|_| Vec::new()).collect(),
            cur: 0,
            len: 0,
        }
    }

    fn tick_of(&self, t: Instant) -> u64 {
        t.as_nanos() / self.tick_ns
    }

    /// Arm `item` to expire at `deadline` (at the latest one tick after it).
    pub fn insert(&mut self, deadline: Instant, item: T) {
        // Never file into a bucket already passed in this turn.
        let tick = self.tick_of(deadline).max(self.cur);
        let mask = self.slots.len() as u64 - 1;
        self.slots[(tick & mask) as usize].push((tick, item));
        self.len += 1;
    }

    /// Move every item due at `now` into `out`.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<T>) {
        let now_tick = self.tick_of(now);
        if self.len == 0 {
            self.cur = now_tick + 1;
            return;
        }
        let mask = self.slots.len() as u64 - 1;
        // Visit each bucket at most once per call even after a long pause.
        let last = now_tick.min(self.cur + mask);
        while self.cur <= last {
            let slot = &mut self.slots[(self.cur & mask) as usize];
            let mut i = 0;
            while i < slot.len() {
                if slot[i].0 <= now_tick {
                    out.push(slot.swap_remove(i).1);
                    self.len -= 1;
                } else {
                    i += 1;
                }
            }
            self.cur += 1;
        }
        if now_tick > last {
            // After a pause longer than a turn, sweep everything once for overdue items.
            for slot in &mut self.slots {
                let before = slot.len();
                slot.retain(|&(t, item)| {
                    if t <= now_tick {
                        out.push(item);
                        false
                    } else {
                        true
                    }
                });
                self.len -= before - slot.len();
            }
            self.cur = now_tick + 1;
        }
    }

    /// Items armed (including stale ones).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No item armed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn expires_in_order_of_ticks() {
        let mut w = TimerWheel::new(64, 1_000_000);
        w.insert(ms(5), 'a');
        w.insert(ms(2), 'b');
        w.insert(ms(200), 'c'); // beyond one turn of 64 ms
        let mut out = Vec::new();
        w.expire(ms(1), &mut out);
        assert!(out.is_empty());
        w.expire(ms(2), &mut out);
        assert_eq!(out, vec!['b']);
        w.expire(ms(64 + 5), &mut out);
        assert_eq!(out, vec!['b', 'a']);
        w.expire(ms(199), &mut out);
        assert_eq!(out.len(), 2, "'c' is not due before 200 ms");
        w.expire(ms(200), &mut out);
        assert_eq!(out, vec!['b', 'a', 'c']);
        assert!(w.is_empty());
    }

    #[test]
    fn long_pause_and_past_deadlines() {
        let mut w = TimerWheel::new(8, 1_000_000);
        let mut out = Vec::new();
        w.expire(ms(10), &mut out);
        w.insert(ms(3), 1); // already past: fires at the next expire
        w.insert(ms(1000), 2);
        w.insert(ms(15), 3);
        w.expire(ms(11), &mut out);
        assert_eq!(out, vec![1]);
        w.expire(ms(5000), &mut out);
        out.sort_unstable();
        assert_eq!(out, vec![1, 2, 3]);
        assert_eq!(w.len(), 0);
    }
}
