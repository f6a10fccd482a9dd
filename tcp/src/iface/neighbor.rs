//! The neighbour (ARP) cache: IPv4 address -> MAC, with retries, expiry and a negative cache.
//!
//! Heads up: RFC 826 (the merge algorithm lives in `arp.rs`) and RFC 1122 section 2.3.2.1
//! (cache validation, flooding limits) are the rules here.
//!
//! Life of an entry:
//! - `Incomplete`: created by a lookup miss. A broadcast request goes out at once and is
//!   repeated every `arp_retry` until `1 + arp_max_retries` requests are sent; one `arp_retry`
//!   after the last one the entry becomes `Failed`. RFC 1122 2.3.2.1: "prevent ARP flooding",
//!   at most one request per `arp_retry` per destination.
//! - `Reachable`: learned from ARP, valid for `arp_timeout`.
//! - `Probing`: a lookup found the entry expired. The old MAC is still used while unicast
//!   requests revalidate it (RFC 1122 2.3.2.1 "unicast poll"); with the same retry budget.
//! - `Failed`: resolution ran out of retries; lookups answer `Failed` for `arp_failed_hold`,
//!   after which a lookup starts over.

use netcore::{Duration, Instant};

/// What the cache knows about one neighbour (a read-only view for callers and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighborState {
    /// Resolution in progress; no MAC known yet.
    Incomplete,
    /// Resolved and fresh.
    Reachable([u8; 6]),
    /// Expired; still used while being revalidated.
    Probing([u8; 6]),
    /// Resolution failed recently.
    Failed,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Incomplete {
        sent: u32,
        next: Instant,
    },
    Reachable {
        mac: [u8; 6],
        expires: Instant,
    },
    Probing {
        mac: [u8; 6],
        sent: u32,
        next: Instant,
    },
    Failed {
        until: Instant,
    },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    ip: [u8; 4],
    state: State,
    /// Last time the entry was created or learned (eviction order).
    touched: Instant,
}

/// Result of a cache lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    Known([u8; 6]),
    Pending,
    Failed,
}

/// An ARP request the cache wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArpSolicit {
    pub(super) target_ip: [u8; 4],
    /// `Some(mac)` for a unicast revalidation, `None` for a broadcast.
    pub(super) unicast: Option<[u8; 6]>,
}

/// Timers of the cache (copied from the interface configuration).
#[derive(Debug, Clone, Copy)]
pub(super) struct Timers {
    pub(super) timeout: Duration,
    pub(super) retry: Duration,
    pub(super) max_retries: u32,
    pub(super) failed_hold: Duration,
}

impl Timers {
    fn max_sends(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }
}

/// Fixed-capacity neighbour cache (linear scan: a host on a LAN talks to few neighbours).
#[derive(Debug)]
pub(super) struct NeighborCache {
    entries: Vec<Entry>,
    capacity: usize,
    timers: Timers,
}

impl NeighborCache {
    pub(super) fn new(capacity: usize, timers: Timers) -> Self {
        let capacity = capacity.max(1);
        NeighborCache {
            entries: Vec::with_capacity(capacity),
            capacity,
            timers,
        }
    }

    fn find(&self, ip: [u8; 4]) -> Option<usize> {
        self.entries.iter().position(|e| e.ip == ip)
    }

    /// Public view of one entry.
    pub(super) fn state(&self, ip: [u8; 4]) -> Option<NeighborState> {
        self.find(ip).and_then(|i| self.entries.get(i)).map(view)
    }

    /// Every entry, for stats output.
    pub(super) fn iter(&self) -> impl Iterator<Item = ([u8; 4], NeighborState)> + '_ {
        self.entries.iter().map(|e| (e.ip, view(e)))
    }

    /// Look `ip` up, starting or restarting resolution when needed. Returns whether an
    /// entry had to be evicted to make room as the second value.
    pub(super) fn lookup(&mut self, now: Instant, ip: [u8; 4]) -> (Lookup, bool) {
        if let Some(e) = self.find(ip).and_then(|i| self.entries.get_mut(i)) {
            let res = match e.state {
                State::Incomplete { .. } => Lookup::Pending,
                State::Reachable { mac, expires } => {
                    if now >= expires {
                        e.state = State::Probing {
                            mac,
                            sent: 0,
                            next: now,
                        };
                    }
                    Lookup::Known(mac)
                }
                State::Probing { mac, .. } => Lookup::Known(mac),
                State::Failed { until } => {
                    if now >= until {
                        e.state = State::Incomplete { sent: 0, next: now };
                        e.touched = now;
                        Lookup::Pending
                    } else {
                        Lookup::Failed
                    }
                }
            };
            return (res, false);
        }
        let evicted = self.insert(now, ip, State::Incomplete { sent: 0, next: now });
        (Lookup::Pending, evicted)
    }

    /// Record `ip` at `mac` (an ARP packet told us). Updates an existing entry of any state;
    /// creates one only when `create` is set. Returns whether the cache changed, and whether
    /// an entry was evicted.
    pub(super) fn learn(
        &mut self,
        now: Instant,
        ip: [u8; 4],
        mac: [u8; 6],
        create: bool,
    ) -> (bool, bool) {
        let state = State::Reachable {
            mac,
            expires: now + self.timers.timeout,
        };
        if let Some(e) = self.find(ip).and_then(|i| self.entries.get_mut(i)) {
            e.state = state;
            e.touched = now;
            return (true, false);
        }
        if !create {
            return (false, false);
        }
        let evicted = self.insert(now, ip, state);
        (true, evicted)
    }

    /// Whether `ip` has an entry (RFC 826 merge: "already in my translation table").
    #[cfg(test)]
    fn contains(&self, ip: [u8; 4]) -> bool {
        self.find(ip).is_some()
    }

    fn insert(&mut self, now: Instant, ip: [u8; 4], state: State) -> bool {
        let mut evicted = false;
        if self.entries.len() >= self.capacity {
            // Evict a failed entry first, otherwise the least recently learned one.
            let victim = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| (!matches!(e.state, State::Failed { .. }), e.touched))
                .map(|(i, _)| i);
            if let Some(i) = victim {
                self.entries.swap_remove(i);
                evicted = true;
            }
        }
        self.entries.push(Entry {
            ip,
            state,
            touched: now,
        });
        evicted
    }

    /// Fail the first entry whose retries are used up and whose last retry interval has
    /// passed (it becomes `Failed`). Returns its address; call until `None`.
    pub(super) fn expire(&mut self, now: Instant) -> Option<[u8; 4]> {
        let t = self.timers;
        for e in self.entries.iter_mut() {
            let (sent, next) = match e.state {
                State::Incomplete { sent, next } | State::Probing { sent, next, .. } => {
                    (sent, next)
                }
                _ => continue,
            };
            if next <= now && sent >= t.max_sends() {
                e.state = State::Failed {
                    until: now + t.failed_hold,
                };
                return Some(e.ip);
            }
        }
        None
    }

    /// The next ARP request due at `now` (its retry timer is armed). Call [`Self::expire`]
    /// first, then this until `None`.
    pub(super) fn poll(&mut self, now: Instant) -> Option<ArpSolicit> {
        let t = self.timers;
        for e in self.entries.iter_mut() {
            let (sent, next, unicast) = match e.state {
                State::Incomplete { sent, next } => (sent, next, None),
                State::Probing { mac, sent, next } => (sent, next, Some(mac)),
                _ => continue,
            };
            if next > now || sent >= t.max_sends() {
                continue;
            }
            let next = now + t.retry;
            let sent = sent + 1;
            e.state = match unicast {
                None => State::Incomplete { sent, next },
                Some(mac) => State::Probing { mac, sent, next },
            };
            return Some(ArpSolicit {
                target_ip: e.ip,
                unicast,
            });
        }
        None
    }

    /// Earliest retry or failure deadline.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.entries
            .iter()
            .filter_map(|e| match e.state {
                State::Incomplete { next, .. } | State::Probing { next, .. } => Some(next),
                _ => None,
            })
            .min()
    }
}

fn view(e: &Entry) -> NeighborState {
    match e.state {
        State::Incomplete { .. } => NeighborState::Incomplete,
        State::Reachable { mac, .. } => NeighborState::Reachable(mac),
        State::Probing { mac, .. } => NeighborState::Probing(mac),
        State::Failed { .. } => NeighborState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: [u8; 4] = [10, 0, 0, 2];
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn cache(cap: usize) -> NeighborCache {
        NeighborCache::new(
            cap,
            Timers {
                timeout: Duration::from_secs(60),
                retry: Duration::from_secs(1),
                max_retries: 3,
                failed_hold: Duration::from_secs(3),
            },
        )
    }

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn miss_retries_then_fails_then_holds() {
        let mut c = cache(4);
        assert_eq!(c.lookup(ms(0), IP).0, Lookup::Pending);
        // 1 + 3 requests at 0, 1000, 2000, 3000 ms.
        for t in [0, 1000, 2000, 3000] {
            assert_eq!(c.expire(ms(t)), None);
            assert_eq!(
                c.poll(ms(t)),
                Some(ArpSolicit {
                    target_ip: IP,
                    unicast: None
                })
            );
            assert_eq!(c.poll(ms(t)), None);
            assert_eq!(c.expire(ms(t + 999)), None);
            assert_eq!(c.poll(ms(t + 999)), None);
            assert_eq!(c.poll_timeout(), Some(ms(t + 1000)));
        }
        assert_eq!(c.poll(ms(4000)), None);
        assert_eq!(c.expire(ms(3999)), None);
        assert_eq!(c.expire(ms(4000)), Some(IP));
        assert_eq!(c.expire(ms(4000)), None);
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.lookup(ms(6999), IP).0, Lookup::Failed);
        assert_eq!(c.lookup(ms(7000), IP).0, Lookup::Pending);
        assert_eq!(c.state(IP), Some(NeighborState::Incomplete));
    }

    #[test]
    fn expiry_probes_unicast_and_keeps_mac() {
        let mut c = cache(4);
        assert_eq!(c.learn(ms(0), IP, MAC, true), (true, false));
        assert_eq!(c.lookup(ms(59_999), IP).0, Lookup::Known(MAC));
        assert_eq!(c.poll(ms(59_999)), None);
        assert_eq!(c.lookup(ms(60_000), IP).0, Lookup::Known(MAC));
        assert_eq!(c.state(IP), Some(NeighborState::Probing(MAC)));
        assert_eq!(
            c.poll(ms(60_000)),
            Some(ArpSolicit {
                target_ip: IP,
                unicast: Some(MAC)
            })
        );
        // A reply refreshes it.
        c.learn(ms(60_010), IP, MAC, false);
        assert_eq!(c.state(IP), Some(NeighborState::Reachable(MAC)));
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn learn_without_create_only_updates() {
        let mut c = cache(4);
        assert_eq!(c.learn(ms(0), IP, MAC, false), (false, false));
        assert!(!c.contains(IP));
        c.lookup(ms(0), IP);
        assert_eq!(c.learn(ms(5), IP, MAC, false), (true, false));
        assert_eq!(c.state(IP), Some(NeighborState::Reachable(MAC)));
    }

    #[test]
    fn full_cache_evicts_failed_then_oldest() {
        let mut c = cache(2);
        c.learn(ms(0), [10, 0, 0, 1], MAC, true);
        c.learn(ms(1), [10, 0, 0, 2], MAC, true);
        assert_eq!(c.learn(ms(2), [10, 0, 0, 3], MAC, true), (true, true));
        assert!(!c.contains([10, 0, 0, 1]));
        assert!(c.contains([10, 0, 0, 2]) && c.contains([10, 0, 0, 3]));
    }
}
