//! Many connections behind one local address: demultiplexing by 4-tuple, listeners, active
//! opens, keyed ISNs (RFC 6528) and resets for segments that match nothing
//! (RFC 9293 §3.10.7.1).

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;

use netcore::Instant;
use smoltcp::wire::Ipv4Address;

use crate::config::TcpConfig;
use crate::conn::input::rst_for;
use crate::conn::{Connection, SegBuf, Segment, SendSource, SockAddr, Transmit};
use crate::isn::IsnGenerator;
use crate::stats::TcpStats;
use crate::wire::{OutHeader, SegError, parse_segment};

/// A connection inside an [`Endpoint`]: its slot and the slot's generation. Slots are reused
/// after [`Endpoint::reap`]; the generation changes each time, so a handle kept after its
/// connection was reaped finds nothing (`conn` returns `None`) instead of driving whatever
/// connection took the slot next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle {
    index: u32,
    generation: u32,
}

impl ConnHandle {
    /// The slot index (small, dense: usable to index per-connection tables of the owner).
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The slot's generation when the handle was made.
    pub fn generation(self) -> u32 {
        self.generation
    }
}

/// `index.generation`, e.g. `3.1`, for log lines.
impl core::fmt::Display for ConnHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.index, self.generation)
    }
}

/// One connection slot; `generation` counts the connections it held.
#[derive(Debug)]
struct Slot<B> {
    generation: u32,
    conn: Option<Connection<B>>,
}

/// Errors from [`Endpoint::connect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectError {
    /// That 4-tuple is in use.
    InUse,
    /// No free ephemeral port.
    NoPort,
}

/// What happened to a segment given to [`Endpoint::handle_segment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// Delivered to an existing connection.
    Conn(ConnHandle),
    /// A listener created this connection (SYN-RECEIVED).
    NewConn(ConnHandle),
    /// Dropped (bad checksum, malformed, or an unmatched RST).
    Dropped,
    /// No connection: a reset was queued (RFC 9293 §3.10.7.1).
    Reset,
}

/// Connections keyed by (local port, remote address, remote port) on one local IPv4 address.
#[derive(Debug)]
pub struct Endpoint<B> {
    cfg: TcpConfig,
    local_ip: Ipv4Address,
    isn: IsnGenerator,
    listeners: HashSet<u16>,
    conns: Vec<Slot<B>>,
    free: Vec<u32>,
    by_tuple: HashMap<(u16, Ipv4Address, u16), ConnHandle>,
    accept_q: VecDeque<ConnHandle>,
    ctl: VecDeque<(OutHeader, Ipv4Address)>,
    next_port: u16,
    backlog: usize,
    stats: TcpStats,
    closed_stats: TcpStats,
}

/// Bound on queued endpoint-level resets (excess resets are not sent).
const MAX_CTL: usize = 1024;

impl<B: SegBuf> Endpoint<B> {
    /// An endpoint for `local_ip`; `isn_key` is the RFC 6528 secret (random, from the caller).
    pub fn new(cfg: TcpConfig, local_ip: Ipv4Address, isn_key: [u8; 16]) -> Self {
        Endpoint {
            cfg,
            local_ip,
            isn: IsnGenerator::new(isn_key),
            listeners: HashSet::new(),
            conns: Vec::new(),
            free: Vec::new(),
            by_tuple: HashMap::new(),
            accept_q: VecDeque::new(),
            ctl: VecDeque::new(),
            next_port: 49152,
            backlog: 1024,
            stats: TcpStats::default(),
            closed_stats: TcpStats::default(),
        }
    }

    /// Accept connections on `port`.
    pub fn listen(&mut self, port: u16) {
        self.listeners.insert(port);
    }

    /// Bound on connections created by listeners and not yet taken by [`Endpoint::accept`];
    /// SYNs beyond it are dropped (the peer retransmits). Default 1024.
    pub fn set_backlog(&mut self, n: usize) {
        self.backlog = n;
    }

    /// Stop accepting on `port` (existing connections stay).
    pub fn unlisten(&mut self, port: u16) {
        self.listeners.remove(&port);
    }

    fn insert(&mut self, c: Connection<B>) -> ConnHandle {
        let key = (c.local().1, c.remote().0, c.remote().1);
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(Slot {
                    generation: 0,
                    conn: None,
                });
                // Slot counts are bounded by memory long before 2^32.
                u32::try_from(self.conns.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let slot = &mut self.conns[index as usize];
        slot.conn = Some(c);
        let h = ConnHandle {
            index,
            generation: slot.generation,
        };
        self.by_tuple.insert(key, h);
        h
    }

    /// Active open to `remote`; `local_port` 0 picks an ephemeral port.
    pub fn connect(
        &mut self,
        now: Instant,
        local_port: u16,
        remote: SockAddr,
    ) -> Result<ConnHandle, ConnectError> {
        let port = if local_port != 0 {
            local_port
        } else {
            let mut found = None;
            for _ in 0..16384 {
                let p = self.next_port;
                self.next_port = if p == u16::MAX { 49152 } else { p + 1 };
                if !self.by_tuple.contains_key(&(p, remote.0, remote.1))
                    && !self.listeners.contains(&p)
                {
                    found = Some(p);
                    break;
                }
            }
            found.ok_or(ConnectError::NoPort)?
        };
        if self.by_tuple.contains_key(&(port, remote.0, remote.1)) {
            return Err(ConnectError::InUse);
        }
        let local = (self.local_ip, port);
        let iss = self.isn.isn(now, local, remote);
        Ok(self.insert(Connection::connect(
            self.cfg.clone(),
            now,
            local,
            remote,
            iss,
        )))
    }

    /// Process a received TCP segment `buf[range]` from `src` to `dst`.
    pub fn handle_segment(
        &mut self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        buf: B,
        range: Range<usize>,
    ) -> Dispatch {
        let h = match parse_segment(buf.as_ref(), range, src, dst, self.cfg.checksum) {
            Ok(h) => h,
            Err(SegError::BadChecksum) => {
                tracing::trace!(%src, "tcp segment with bad checksum dropped");
                self.stats.bad_checksum += 1;
                return Dispatch::Dropped;
            }
            Err(SegError::Malformed) => {
                self.stats.malformed += 1;
                return Dispatch::Dropped;
            }
        };
        if dst != self.local_ip {
            // Not ours (the IP layer should not have passed it): never answer for another address.
            self.stats.malformed += 1;
            return Dispatch::Dropped;
        }
        let key = (h.dst_port, src, h.src_port);
        if let Some(&hd) = self.by_tuple.get(&key)
            && let Some(c) = self.conn_mut(hd)
            && !c.is_closed()
        {
            c.handle_segment(now, Segment { header: h, buf });
            return Dispatch::Conn(hd);
        }
        if self.listeners.contains(&h.dst_port) {
            // RFC 9293 §3.10.7.2 LISTEN.
            if h.rst {
                return Dispatch::Dropped;
            }
            if h.ack.is_none() && h.syn {
                if self.accept_q.len() >= self.backlog {
                    let mut q = std::mem::take(&mut self.accept_q);
                    q.retain(|&h| self.conn(h).is_some_and(|c| !c.is_closed()));
                    self.accept_q = q;
                    if self.accept_q.len() >= self.backlog {
                        return Dispatch::Dropped;
                    }
                }
                let local = (dst, h.dst_port);
                let remote = (src, h.src_port);
                let iss = self.isn.isn(now, local, remote);
                if let Some(c) = Connection::accept(self.cfg.clone(), now, local, remote, iss, &h) {
                    // A closed connection on this 4-tuple whose owner has not reaped it yet
                    // keeps its slot (and its unpolled events); the new one gets another slot
                    // and takes over the 4-tuple.
                    let hd = self.insert(c);
                    self.accept_q.push_back(hd);
                    return Dispatch::NewConn(hd);
                }
                return Dispatch::Dropped;
            }
            if h.ack.is_none() {
                return Dispatch::Dropped;
            }
        }
        match rst_for(&h) {
            Some(r) if self.ctl.len() < MAX_CTL => {
                self.ctl.push_back((r, src));
                Dispatch::Reset
            }
            _ => Dispatch::Dropped,
        }
    }

    /// Next connection created by a listener that completed its handshake.
    pub fn accept(&mut self) -> Option<ConnHandle> {
        let mut i = 0;
        while i < self.accept_q.len() {
            let h = self.accept_q[i];
            match self.conn(h) {
                Some(c) if c.state().is_synchronized() => {
                    self.accept_q.remove(i);
                    return Some(h);
                }
                Some(c) if !c.is_closed() => i += 1,
                _ => {
                    self.accept_q.remove(i);
                }
            }
        }
        None
    }

    /// The connection behind `h`.
    pub fn conn(&self, h: ConnHandle) -> Option<&Connection<B>> {
        let slot = self.conns.get(h.index())?;
        if slot.generation != h.generation {
            return None;
        }
        slot.conn.as_ref()
    }

    /// The connection behind `h`, mutably.
    pub fn conn_mut(&mut self, h: ConnHandle) -> Option<&mut Connection<B>> {
        let slot = self.conns.get_mut(h.index())?;
        if slot.generation != h.generation {
            return None;
        }
        slot.conn.as_mut()
    }

    /// The handle of slot `i` if it holds a connection.
    fn handle_at(&self, i: usize) -> Option<ConnHandle> {
        let slot = self.conns.get(i)?;
        slot.conn.as_ref()?;
        Some(ConnHandle {
            index: u32::try_from(i).ok()?,
            generation: slot.generation,
        })
    }

    /// Handles of all live connection slots.
    pub fn handles(&self) -> Vec<ConnHandle> {
        (0..self.conns.len())
            .filter_map(|i| self.handle_at(i))
            .collect()
    }

    /// Drop a connection (its counters move into the aggregate). The slot's generation
    /// changes, so `h` and its copies no longer find anything.
    pub fn reap(&mut self, h: ConnHandle) -> Option<Connection<B>> {
        let slot = self.conns.get_mut(h.index())?;
        if slot.generation != h.generation {
            return None;
        }
        let c = slot.conn.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        let key = (c.local().1, c.remote().0, c.remote().1);
        if self.by_tuple.get(&key) == Some(&h) {
            self.by_tuple.remove(&key);
        }
        self.free.push(h.index);
        self.closed_stats.add(c.stats());
        Some(c)
    }

    /// Reap every closed connection whose events were all polled; returns how many.
    pub fn reap_closed(&mut self) -> usize {
        let dead: Vec<ConnHandle> = (0..self.conns.len())
            .filter_map(|i| self.handle_at(i))
            .filter(|&h| {
                self.conn(h)
                    .is_some_and(|c| c.is_closed() && !c.has_events())
            })
            .collect();
        for h in &dead {
            self.reap(*h);
        }
        dead.len()
    }

    /// Endpoint-level segments (resets for unmatched segments).
    #[must_use]
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let (h, dst) = self.ctl.pop_front()?;
        let hl = h.header_len();
        let seg = buf.get_mut(..hl)?;
        h.emit(seg, self.local_ip, dst, self.cfg.checksum);
        self.stats.resets_sent += 1;
        self.stats.segs_out += 1;
        Some(Transmit {
            len: hl,
            header_len: hl,
            payload: 0..0,
            src: self.local_ip,
            dst,
        })
    }

    /// Earliest timer over all connections.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .iter()
            .filter_map(|s| s.conn.as_ref()?.poll_timeout())
            .min()
    }

    /// Run expired timers of all connections.
    pub fn handle_timeout(&mut self, now: Instant) {
        for c in self.conns.iter_mut().filter_map(|s| s.conn.as_mut()) {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
    }

    /// Poll every connection's output with one source; returns the first segment found.
    pub fn poll_transmit_all<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        src: &mut S,
    ) -> Option<(ConnHandle, Transmit)> {
        for (i, slot) in self.conns.iter_mut().enumerate() {
            if let Some(c) = slot.conn.as_mut()
                && let Some(t) = c.poll_transmit(now, buf, src)
            {
                let h = ConnHandle {
                    index: u32::try_from(i).ok()?,
                    generation: slot.generation,
                };
                return Some((h, t));
            }
        }
        None
    }

    /// Counters: endpoint-level plus every live and reaped connection.
    pub fn stats(&self) -> TcpStats {
        let mut s = self.stats;
        s.add(&self.closed_stats);
        for c in self.conns.iter().filter_map(|s| s.conn.as_ref()) {
            s.add(c.stats());
        }
        s
    }
}
