//! Many connections behind one local address: demultiplexing by 4-tuple, listeners, active
//! opens, keyed ISNs (RFC 6528), resets for segments that match nothing
//! (RFC 9293 §3.10.7.1), SYN cookies (RFC 4987 §3.6), limits on connections per endpoint and
//! per listener, and the per-endpoint budget of out-of-order segments.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;

use netcore::Instant;
use smoltcp::wire::Ipv4Address;

use crate::config::TcpConfig;
use crate::conn::input::rst_for;
use crate::conn::{Connection, SegBuf, Segment, SendSource, SockAddr, Transmit};
use crate::cookie::{self, CookieJar, CookieOpts};
use crate::isn::IsnGenerator;
use crate::stats::TcpStats;
use crate::wire::{OutHeader, SegError, SegmentHeader, parse_segment_into};

/// A connection inside an [`Endpoint`]: its slot and the slot's generation. Slots are reused
/// after [`Endpoint::reap`]; the generation changes each time, so a handle kept after its
/// connection was reaped finds nothing (`conn` returns `None`) instead of driving whatever
/// connection took the slot next.
///
/// Both halves live in one `u64` (index high, generation low: the order is the order of
/// `(index, generation)`) so that a handle is written and read as one 8-byte word. Two 4-byte
/// fields were stored separately and then loaded as one 8-byte word where a handle travels
/// through memory (`Dispatch::Conn` from [`Endpoint::handle_segment`] into the caller's list):
/// a load wider than the stores in flight cannot take its data from the store buffer and waits
/// for them to commit, ~10 ns of every received segment on an Intel Xeon (issue #8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(u64);

impl ConnHandle {
    fn new(index: u32, generation: u32) -> Self {
        ConnHandle(u64::from(index) << 32 | u64::from(generation))
    }

    /// The slot index as stored (the high half).
    fn slot(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The slot index (small, dense: usable to index per-connection tables of the owner).
    pub fn index(self) -> usize {
        self.slot() as usize
    }

    /// The slot's generation when the handle was made.
    pub fn generation(self) -> u32 {
        // Truncation is the point: the low half.
        self.0 as u32
    }
}

/// `index.generation`, e.g. `3.1`, for log lines.
impl core::fmt::Display for ConnHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.index(), self.generation())
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
    /// The endpoint holds [`TcpConfig::max_connections`] connections.
    Limit,
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
    /// No connection yet: the listener's half-open queue is full and a SYN-ACK carrying a SYN
    /// cookie was queued (RFC 4987 §3.6).
    Cookie,
}

/// `by_tuple`'s key: local port, remote address, remote port.
type TupleKey = (u16, Ipv4Address, u16);

/// Connections keyed by (local port, remote address, remote port) on one local IPv4 address.
#[derive(Debug)]
pub struct Endpoint<B> {
    cfg: TcpConfig,
    local_ip: Ipv4Address,
    isn: IsnGenerator,
    listeners: HashSet<u16>,
    conns: Vec<Slot<B>>,
    free: Vec<u32>,
    by_tuple: HashMap<TupleKey, ConnHandle>,
    /// The last entry of `by_tuple` a segment was dispatched by: a run of segments of one
    /// connection skips the (SipHash) lookup. Cleared whenever `by_tuple` changes.
    last_tuple: Option<(TupleKey, ConnHandle)>,
    accept_q: VecDeque<ConnHandle>,
    /// Live passive connections per local port (the per-listener limit).
    per_port: HashMap<u16, usize>,
    cookies: CookieJar,
    /// When the last SYN cookie was sent: cookie ACKs are checked only for a while after.
    last_cookie: Option<Instant>,
    /// Out-of-order segments held by all connections (the per-thread budget).
    ooo_held: usize,
    ctl: VecDeque<(OutHeader, Ipv4Address)>,
    next_port: u16,
    backlog: usize,
    stats: TcpStats,
    closed_stats: TcpStats,
}

/// Bound on queued endpoint-level segments, resets and cookie SYN-ACKs (excess ones are not
/// sent).
const MAX_CTL: usize = 1024;

/// How long after the last SYN cookie was sent cookie ACKs are checked (two 64 s slots).
const COOKIE_LIFE: netcore::Duration = netcore::Duration::from_secs(128);

impl<B: SegBuf> Endpoint<B> {
    /// An endpoint for `local_ip`; `isn_key` is the RFC 6528 secret (random, from the caller).
    pub fn new(cfg: TcpConfig, local_ip: Ipv4Address, isn_key: [u8; 16]) -> Self {
        // The cookie key: another key derived from the secret (the ISN key stays as it is).
        let mut ck = isn_key;
        for b in &mut ck {
            *b = b.rotate_left(3) ^ 0xa5;
        }
        Endpoint {
            per_port: HashMap::new(),
            cookies: CookieJar::new(ck),
            last_cookie: None,
            ooo_held: 0,
            cfg,
            local_ip,
            isn: IsnGenerator::new(isn_key),
            listeners: HashSet::new(),
            conns: Vec::new(),
            free: Vec::new(),
            by_tuple: HashMap::new(),
            last_tuple: None,
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

    /// Bound on connections whose handshake completed and that [`Endpoint::accept`] has not
    /// taken yet (the accept queue); SYNs beyond it are dropped (the peer retransmits; counted:
    /// `syn_dropped`). Default 1024. Half-open connections are bounded by
    /// [`TcpConfig::syn_backlog`], then SYN cookies take over.
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
        let h = ConnHandle::new(index, slot.generation);
        self.by_tuple.insert(key, h);
        self.last_tuple = None;
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
        if self.live() >= self.cfg.max_connections {
            self.stats.conn_limit_drops += 1;
            return Err(ConnectError::Limit);
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
        // Parsed in place and handed to the connection by reference: no copy of the header
        // (`parse_segment_into`).
        let mut h = SegmentHeader::default();
        match parse_segment_into(buf.as_ref(), range, src, dst, self.cfg.checksum, &mut h) {
            Ok(()) => {}
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
        let budget = self.cfg.max_ooo_segments_total;
        let held = self.ooo_held;
        let found = match self.last_tuple {
            Some((k, hd)) if k == key => Some(hd),
            _ => self.by_tuple.get(&key).copied(),
        };
        if let Some(hd) = found
            && let Some(c) = self.conn_mut(hd)
            && !c.is_closed()
        {
            let before = c.ooo_segments();
            c.set_ooo_budget(budget.saturating_sub(held));
            c.handle_parsed(now, &h, buf);
            let after = c.ooo_segments();
            self.ooo_held = (held + after).saturating_sub(before);
            self.last_tuple = Some((key, hd));
            return Dispatch::Conn(hd);
        }
        if self.listeners.contains(&h.dst_port) {
            // RFC 9293 §3.10.7.2 LISTEN.
            if h.rst {
                return Dispatch::Dropped;
            }
            if h.ack.is_none() {
                return if h.syn {
                    self.listen_syn(now, src, dst, &h)
                } else {
                    Dispatch::Dropped
                };
            }
            if !h.syn
                && let Some(opts) = self.check_cookie(now, src, dst, &h)
            {
                return self.accept_cookie(now, src, dst, h, buf, opts);
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

    /// Connections in slots (any state, until reaped).
    fn live(&self) -> usize {
        self.conns.len() - self.free.len()
    }

    /// Whether a new passive connection on `port` stays within the per-endpoint and
    /// per-listener limits (counting the refusal when not).
    fn room_for_passive(&mut self, port: u16) -> bool {
        if self.live() >= self.cfg.max_connections {
            self.stats.conn_limit_drops += 1;
            return false;
        }
        if self.per_port.get(&port).copied().unwrap_or(0) >= self.cfg.max_listener_connections {
            self.stats.listener_limit_drops += 1;
            return false;
        }
        true
    }

    /// Connections of listener `port` waiting for [`Endpoint::accept`]: (half-open,
    /// established). Closed ones leave the queue here.
    fn pending(&mut self, port: u16) -> (usize, usize) {
        if self.accept_q.len() < self.backlog.min(self.cfg.syn_backlog) {
            // Fewer than either bound in all: no need to count.
            return (0, 0);
        }
        let mut q = std::mem::take(&mut self.accept_q);
        q.retain(|&h| self.conn(h).is_some_and(|c| !c.is_closed()));
        let (mut half, mut est) = (0, 0);
        for c in q.iter().filter_map(|&h| self.conn(h)) {
            if c.local().1 == port {
                if c.state().is_synchronized() {
                    est += 1;
                } else {
                    half += 1;
                }
            }
        }
        self.accept_q = q;
        (half, est)
    }

    /// A SYN for listener `h.dst_port` (RFC 9293 §3.10.7.2): a new connection in SYN-RECEIVED,
    /// or a SYN cookie when the half-open queue is full (RFC 4987 §3.6).
    fn listen_syn(
        &mut self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        h: &SegmentHeader,
    ) -> Dispatch {
        let (half_open, established) = self.pending(h.dst_port);
        if established >= self.backlog {
            // The accept queue is full: drop the SYN, the peer retries (as Linux does).
            self.stats.syn_dropped += 1;
            return Dispatch::Dropped;
        }
        if !self.room_for_passive(h.dst_port) {
            return Dispatch::Dropped;
        }
        if half_open >= self.cfg.syn_backlog {
            if !self.cfg.syn_cookies {
                self.stats.syn_dropped += 1;
                return Dispatch::Dropped;
            }
            return self.send_cookie(now, src, dst, h);
        }
        let local = (dst, h.dst_port);
        let remote = (src, h.src_port);
        let iss = self.isn.isn(now, local, remote);
        let Some(c) = Connection::accept(self.cfg.clone(), now, local, remote, iss, h) else {
            return Dispatch::Dropped;
        };
        // A closed connection on this 4-tuple whose owner has not reaped it yet keeps its
        // slot (and its unpolled events); the new one gets another slot and the 4-tuple.
        let hd = self.insert(c);
        *self.per_port.entry(h.dst_port).or_insert(0) += 1;
        self.accept_q.push_back(hd);
        Dispatch::NewConn(hd)
    }

    /// Queue a SYN-ACK whose ISS is a SYN cookie (RFC 4987 §3.6); no state is kept. Window
    /// scale and SACK are offered only with timestamps, whose low bits remember them.
    fn send_cookie(
        &mut self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        h: &SegmentHeader,
    ) -> Dispatch {
        if self.ctl.len() >= MAX_CTL {
            self.stats.syn_dropped += 1;
            return Dispatch::Dropped;
        }
        let local = (dst, h.dst_port);
        let remote = (src, h.src_port);
        let (iss, _) = self
            .cookies
            .make(now, local, remote, h.seq, h.mss.unwrap_or(536));
        let mut o = OutHeader {
            src_port: h.dst_port,
            dst_port: h.src_port,
            seq: iss,
            ack: Some(h.seq + 1u32),
            syn: true,
            // RFC 7323 §2.2: the window of a SYN is never scaled.
            window: u16::try_from(self.cfg.recv_window).unwrap_or(u16::MAX),
            mss: Some(self.cfg.mss),
            ..Default::default()
        };
        if let (true, Some((tsval, _))) = (self.cfg.timestamps, h.timestamp) {
            let ws = h.wscale.filter(|_| self.cfg.window_scale.is_some());
            let sack = self.cfg.sack && h.sack_permitted;
            o.wscale = self
                .cfg
                .window_scale
                .filter(|_| ws.is_some())
                .map(|w| w.min(14));
            o.sack_permitted = sack;
            let clock = crate::conn::ts_offset(iss).wrapping_add(now.as_millis() as u32);
            o.timestamp = Some((cookie::encode_ts(clock, ws, sack), tsval));
        }
        self.ctl.push_back((o, src));
        self.stats.syn_cookies_sent += 1;
        self.last_cookie = Some(now);
        Dispatch::Cookie
    }

    /// Whether `h` (an ACK to a listener, no connection) completes a handshake we answered
    /// with a cookie; the options the cookie carries if so.
    fn check_cookie(
        &self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        h: &SegmentHeader,
    ) -> Option<CookieOpts> {
        // Only while cookies were sent lately (as Linux), so stray ACKs never pass by luck
        // when none are outstanding: a cookie lives two 64 s slots.
        let last = self.last_cookie?;
        if !self.cfg.syn_cookies || now.saturating_duration_since(last) > COOKIE_LIFE {
            return None;
        }
        let ack = h.ack?;
        let local = (dst, h.dst_port);
        let remote = (src, h.src_port);
        let mss = self.cookies.check(now, local, remote, h.seq - 1, ack - 1)?;
        let tsecr = h.timestamp.filter(|_| self.cfg.timestamps).map(|(_, e)| e);
        Some(CookieOpts::new(mss, tsecr))
    }

    /// Create the connection a valid cookie stands for and hand it the ACK.
    fn accept_cookie(
        &mut self,
        now: Instant,
        src: Ipv4Address,
        dst: Ipv4Address,
        h: SegmentHeader,
        buf: B,
        opts: CookieOpts,
    ) -> Dispatch {
        let (_, established) = self.pending(h.dst_port);
        if established >= self.backlog || !self.room_for_passive(h.dst_port) {
            if established >= self.backlog {
                self.stats.syn_dropped += 1;
            }
            // The peer retransmits its data (or ACK) and may find room then.
            return Dispatch::Dropped;
        }
        let local = (dst, h.dst_port);
        let remote = (src, h.src_port);
        let iss = h.ack.unwrap_or_default() - 1;
        let Some(mut c) =
            Connection::accept_cookie(self.cfg.clone(), now, local, remote, iss, &h, opts)
        else {
            return Dispatch::Dropped;
        };
        self.stats.syn_cookies_accepted += 1;
        c.set_ooo_budget(
            self.cfg
                .max_ooo_segments_total
                .saturating_sub(self.ooo_held),
        );
        c.handle_segment(now, Segment { header: h, buf });
        self.ooo_held += c.ooo_segments();
        let hd = self.insert(c);
        *self.per_port.entry(local.1).or_insert(0) += 1;
        self.accept_q.push_back(hd);
        Dispatch::NewConn(hd)
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
        if slot.generation != h.generation() {
            return None;
        }
        slot.conn.as_ref()
    }

    /// The connection behind `h`, mutably.
    pub fn conn_mut(&mut self, h: ConnHandle) -> Option<&mut Connection<B>> {
        let slot = self.conns.get_mut(h.index())?;
        if slot.generation != h.generation() {
            return None;
        }
        slot.conn.as_mut()
    }

    /// The handle of slot `i` if it holds a connection.
    fn handle_at(&self, i: usize) -> Option<ConnHandle> {
        let slot = self.conns.get(i)?;
        slot.conn.as_ref()?;
        Some(ConnHandle::new(u32::try_from(i).ok()?, slot.generation))
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
        if slot.generation != h.generation() {
            return None;
        }
        let c = slot.conn.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        let key = (c.local().1, c.remote().0, c.remote().1);
        if self.by_tuple.get(&key) == Some(&h) {
            self.by_tuple.remove(&key);
            self.last_tuple = None;
        }
        self.free.push(h.slot());
        self.ooo_held = self.ooo_held.saturating_sub(c.ooo_segments());
        if c.is_passive()
            && let Some(n) = self.per_port.get_mut(&c.local().1)
        {
            *n = n.saturating_sub(1);
        }
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
        if h.rst {
            self.stats.resets_sent += 1;
        }
        self.stats.segs_out += 1;
        Some(Transmit {
            len: hl,
            header_len: hl,
            payload: 0..0,
            src: self.local_ip,
            dst,
            last: self.ctl.is_empty(),
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
                let h = ConnHandle::new(u32::try_from(i).ok()?, slot.generation);
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

#[cfg(test)]
mod tests {
    use super::ConnHandle;

    /// The packed handle gives back its index and generation, prints as before, and orders
    /// (the netstack sorts its dirty list of handles) as the pair `(index, generation)`.
    #[test]
    fn conn_handle_packs_index_and_generation() {
        let pairs = [
            (0, 0),
            (0, 1),
            (1, 0),
            (3, u32::MAX),
            (u32::MAX, 0),
            (u32::MAX, 7),
        ];
        for &(i, g) in &pairs {
            let h = ConnHandle::new(i, g);
            assert_eq!((h.index(), h.generation()), (i as usize, g));
            assert_eq!(h.to_string(), format!("{i}.{g}"));
            for &(j, k) in &pairs {
                assert_eq!(h.cmp(&ConnHandle::new(j, k)), (i, g).cmp(&(j, k)));
            }
        }
    }
}
