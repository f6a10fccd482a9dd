//! One dataplane thread's network stack: the L2/L3 interface, the TCP endpoint whose segment
//! buffers are the received mbufs themselves (zero-copy receive), the diagnostic services, and a
//! timer wheel for per-connection timers.
//!
//! Per poll-loop iteration: [`Netstack::handle_frame`] for each received frame, then
//! [`Netstack::poll`] once (timers, services, transmission).

use crate::diag::{Discard, Echo, Pattern, Sender};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::rss::RssSteering;
use crate::timers::TimerWheel;
use netcore::Instant;
use smoltcp::wire::Ipv4Address;
// Keyed by our own connection handles: FxHash, not SipHash, on the per-step lookups.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;
use tcp::iface::{
    ETH_HEADER_LEN, IP_PROTO_TCP, IPV4_HEADER_LEN, Iface, MIN_FRAME_LEN, Resolve, RxAction,
};
use tcp::{CloseReason, ConnHandle, Dispatch, Endpoint, Event, State, TcpConfig, TcpStats};

/// A job for the sender service.
#[derive(Debug, Clone)]
pub struct SendJob {
    /// Destination address.
    pub dst: [u8; 4],
    /// Destination port.
    pub port: u16,
    /// Pattern bytes per connection (a 32-byte SHA-256 follows them).
    pub bytes: u64,
    /// Parallel connections.
    pub connections: u32,
    /// Append the SHA-256 of the pattern bytes (zeros when off: benchmarks).
    pub sha256: bool,
}

/// Which diagnostic services run.
#[derive(Debug, Clone, Default)]
pub struct Services {
    /// Echo service port.
    pub echo_port: Option<u16>,
    /// Discard service port.
    pub discard_port: Option<u16>,
    /// Hash what the discard service receives.
    pub discard_sha256: bool,
    /// Connect out and send.
    pub send: Option<SendJob>,
    /// Echo ring per connection, bytes.
    pub echo_buffer: usize,
    /// With RSS over several queues: how the NIC spreads flows and which queue is ours, so
    /// active opens pick source ports whose replies come back to this thread.
    pub steering: Option<(RssSteering, u16)>,
}

/// Outcome of the sender, for the exit report.
#[derive(Debug, Clone, Default)]
pub struct SendReport {
    /// Connections that delivered everything and closed normally.
    pub completed: u32,
    /// Connections that failed.
    pub failed: u32,
    /// Bytes acknowledged (pattern + digest, all connections).
    pub bytes: u64,
    /// Seconds from the first connect to the last completion.
    pub secs: f64,
}

enum Service {
    Echo(Echo),
    Discard(Discard),
    Sender(Sender),
}

struct ConnState {
    svc: Service,
    /// The peer sent FIN.
    peer_closed: bool,
    /// We called close().
    closing: bool,
    /// Why the connection ended (from its Closed event).
    reason: Option<CloseReason>,
    /// The sender's outcome was already reported (its FIN was acknowledged).
    reported: bool,
}

impl ConnState {
    fn new(svc: Service) -> Self {
        ConnState {
            svc,
            peer_closed: false,
            closing: false,
            reason: None,
            reported: false,
        }
    }
}

/// Counters of the glue (TCP's own are in [`TcpStats`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NetstackStats {
    /// Frames TCP produced that were then lost because the next hop's MAC stayed unknown:
    /// endpoint-level RSTs and SYN-cookie SYN-ACKs (which keep no state) still unresolved
    /// after [`HOLD_STATELESS`] or beyond [`MAX_HELD`] waiting (connections are held back
    /// before TCP produces a segment instead: `tx_wait_neighbor`).
    pub tx_no_neighbor: u64,
    /// Stateless segments held while their next hop was being resolved (RFC 1122
    /// §2.3.2.2), sent once it was learned.
    pub tx_held_neighbor: u64,
    /// Times a connection was not asked for segments because its next hop is being resolved
    /// (back-pressure: TCP sends them once the neighbour is learned, nothing is lost).
    pub tx_wait_neighbor: u64,
    /// Times a connection was not asked for segments because the frames waiting for the TX
    /// queue reached [`TX_QUEUE_LIMIT`] (back-pressure: it is polled again next iteration).
    pub tx_backpressure: u64,
    /// Frames not sent because the mbuf pool was empty.
    pub tx_no_mbuf: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections reaped after closing.
    pub reaped: u64,
}

/// The per-thread stack.
pub struct Netstack {
    /// L2/L3.
    pub iface: Iface,
    tcp: Endpoint<Mbuf>,
    services: Services,
    conns: HashMap<ConnHandle, ConnState>,
    dirty: Vec<ConnHandle>,
    /// `dirty` while it is worked through (empty between polls, its capacity kept: no
    /// allocation and free per loop step with work, issue #8).
    work: Vec<ConnHandle>,
    wheel: TimerWheel<ConnHandle>,
    armed: HashMap<ConnHandle, Instant>,
    expired: Vec<ConnHandle>,
    /// Stateless segments waiting for their next hop's MAC (see `tx_held_neighbor`).
    held: Vec<HeldSegment>,
    /// Connections held back until a neighbour is learned (see `tx_wait_neighbor`).
    wait_neighbor: Vec<ConnHandle>,
    /// `neighbor_learned` of the iface when `wait_neighbor` was last released.
    learned_seen: u64,
    spare: Option<Mbuf>,
    /// Mbufs allocated in bulk ([`Mempool::alloc_bulk`]) for [`Netstack::emit_rdma`]'s frames:
    /// one call into DPDK per [`TX_STASH`] frames instead of one per frame.
    stash: Vec<Mbuf>,
    /// Frames of the current [`Netstack::emit_rdma`] batch still to be finished (kept for its
    /// allocation).
    unsealed: Vec<(usize, crate::rdma::glue::Unsealed)>,
    mtu: usize,
    send_pending: u32,
    send_started: Option<Instant>,
    /// Sender results.
    pub send_report: SendReport,
    /// Glue counters.
    pub stats: NetstackStats,
    seed: u64,
    next_port_offset: u32,
    /// The sender's pattern, shared by its connections (made on first use).
    pattern: Option<Arc<Pattern>>,
    /// The RDMA engine of this thread (iWARP connections live there, not in `conns`).
    pub rdma: Option<crate::rdma::engine::Engine>,
}

/// Segments one connection may emit per poll before others get a turn.
const TX_BUDGET: usize = 64;
/// Mbufs [`Netstack::emit_rdma`] allocates at once.
const TX_STASH: usize = 32;

/// Frames waiting for the TX queue beyond which connections are not asked for more segments
/// (the poll loop keeps up to twice this many for a full TX queue; only frames TCP keeps no
/// state for, such as ARP and ICMP replies, can push it further and be dropped there).
pub const TX_QUEUE_LIMIT: usize = 2048;

/// Room for one endpoint-level segment (a SYN-ACK with every option is 20 + 40 bytes).
const STATELESS_MAX: usize = 64;

/// How long a stateless segment waits for its next hop's MAC: the ARP retries of one
/// resolution (a SYN-ACK lost here costs the peer its SYN retransmission, 1 s).
const HOLD_STATELESS: netcore::Duration = netcore::Duration::from_secs(1);

/// Stateless segments held at once (a flood from unresolvable addresses cannot grow it).
const MAX_HELD: usize = 64;

/// A stateless segment waiting for its next hop's MAC.
struct HeldSegment {
    dst: [u8; 4],
    len: usize,
    seg: [u8; STATELESS_MAX],
    until: Instant,
}

impl Netstack {
    /// A stack for `iface`, TCP with `tcp_cfg`, and `services`; `secret` keys the ISNs.
    pub fn new(iface: Iface, tcp_cfg: TcpConfig, services: Services, secret: [u8; 16]) -> Self {
        let ip = Ipv4Address::from(iface.config().ip);
        let mtu = usize::from(iface.config().mtu);
        let mut tcp = Endpoint::new(tcp_cfg, ip, secret);
        for p in [services.echo_port, services.discard_port]
            .into_iter()
            .flatten()
        {
            tcp.listen(p);
        }
        let send_pending = services.send.as_ref().map_or(0, |j| j.connections);
        Netstack {
            iface,
            tcp,
            conns: HashMap::default(),
            dirty: Vec::new(),
            work: Vec::new(),
            // 100 us ticks, 8192 slots: 0.8 s per turn.
            wheel: TimerWheel::new(8192, 100_000),
            armed: HashMap::default(),
            expired: Vec::new(),
            wait_neighbor: Vec::new(),
            held: Vec::new(),
            learned_seen: 0,
            spare: None,
            stash: Vec::new(),
            unsealed: Vec::new(),
            mtu,
            send_pending,
            send_started: None,
            send_report: SendReport::default(),
            stats: NetstackStats::default(),
            seed: u64::from_le_bytes(secret[..8].try_into().unwrap_or([0; 8])),
            services,
            next_port_offset: 0,
            pattern: None,
            rdma: None,
        }
    }

    /// Aggregate TCP counters.
    pub fn tcp_stats(&self) -> TcpStats {
        self.tcp.stats()
    }

    /// The TCP endpoint, read-only (connection gauges for the stats file).
    pub fn tcp(&self) -> &Endpoint<Mbuf> {
        &self.tcp
    }

    /// Whether the sender job (if any) has finished, successfully or not.
    pub fn send_done(&self) -> bool {
        self.services.send.as_ref().is_some_and(|j| {
            self.send_pending == 0
                && self.send_report.completed + self.send_report.failed == j.connections
        })
    }

    /// Handle one received frame: L2/L3 in place; TCP segments keep the mbuf (zero-copy).
    /// Replies are pushed to `tx`. Returns the iface's verdict for counting.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        m: Mbuf,
        scratch: &mut [u8],
        pool: &Mempool,
        tx: &mut Vec<Mbuf>,
    ) -> RxAction {
        let action = self.iface.handle_frame(now, m.data(), scratch);
        match &action {
            RxAction::Reply(len) => push_copy(pool, &scratch[..*len], tx, &mut self.stats),
            RxAction::Tcp { src, dst, payload } => {
                let (s, d) = (Ipv4Address::from(*src), Ipv4Address::from(*dst));
                match self.tcp.handle_segment(now, s, d, m, payload.clone()) {
                    Dispatch::Conn(h) => self.dirty.push(h),
                    Dispatch::NewConn(h) => {
                        self.dirty.push(h);
                    }
                    Dispatch::Dropped | Dispatch::Reset | Dispatch::Cookie => {}
                }
            }
            RxAction::Consumed | RxAction::Dropped(_) => {}
        }
        action
    }

    /// Timers, services and transmission.
    pub fn poll(&mut self, now: Instant, pool: &Mempool, tx: &mut Vec<Mbuf>) {
        self.poll_timers(now, pool, tx, true);
    }

    /// Like [`Netstack::poll`]; with `timers` false, due timers wait for a later poll (the
    /// poll loop defers them while received frames, which may hold ACKs, are still queued).
    pub fn poll_timers(&mut self, now: Instant, pool: &Mempool, tx: &mut Vec<Mbuf>, timers: bool) {
        self.start_senders(now);
        self.poll_rdma(now);
        while let Some(h) = self.tcp.accept() {
            self.on_accept(now, h);
        }
        if timers {
            self.wheel.expire(now, &mut self.expired);
        }
        // The list keeps its capacity from poll to poll (as `work` below).
        let mut expired = std::mem::take(&mut self.expired);
        for &h in &expired {
            self.armed.remove(&h);
            if let Some(c) = self.tcp.conn_mut(h)
                && c.poll_timeout().is_some_and(|t| t <= now)
            {
                c.handle_timeout(now);
            }
            self.dirty.push(h);
        }
        expired.clear();
        self.expired = expired;
        // Endpoint-level segments (RSTs for segments that matched nothing, SYN-cookie
        // SYN-ACKs): polled into a small buffer first, so an idle loop costs no mbuf.
        let mut seg = [0u8; STATELESS_MAX];
        while let Some(t) = self.tcp.poll_transmit(&mut seg) {
            let dst = t.dst.octets();
            if !self.emit_stateless(now, dst, &seg[..t.len], pool, tx) {
                self.hold_stateless(now, dst, &seg[..t.len]);
            }
        }
        if !self.held.is_empty() {
            self.release_held(now, pool, tx);
        }

        self.release_neighbor_waiters();
        let mut work = std::mem::take(&mut self.work);
        std::mem::swap(&mut work, &mut self.dirty);
        work.sort_unstable();
        work.dedup();
        for &h in &work {
            self.service(now, h);
            if self.emit(now, pool, tx, h) {
                self.dirty.push(h); // budget exhausted: more to send next time
            }
            self.finish_or_arm(now, h);
        }
        work.clear();
        self.work = work;
    }

    /// At shutdown: reset every connection (RFC 9293 §3.10.5 ABORT), so peers learn at once
    /// that this end is gone instead of waiting for their timeouts; the RSTs (and the RDMA
    /// engine's QP errors and events) come out of the next [`Netstack::poll`]s. Returns how
    /// many connections were open.
    pub fn abort_all(&mut self) -> usize {
        let handles = self.tcp.handles();
        let mut open = 0;
        for h in handles {
            if let Some(c) = self.tcp.conn_mut(h)
                && !c.is_closed()
            {
                c.abort();
                open += 1;
                self.dirty.push(h);
            }
        }
        open
    }

    /// Whether a connection still has segments to send (a shutdown waits for its RSTs).
    pub fn has_pending_output(&self) -> bool {
        !self.dirty.is_empty()
    }

    fn on_accept(&mut self, now: Instant, h: ConnHandle) {
        if let (Some(e), Some(c)) = (self.rdma.as_mut(), self.tcp.conn_mut(h))
            && e.on_accept(now, h, c)
        {
            self.stats.accepted += 1;
            self.dirty.push(h);
            return;
        }
        let Some(c) = self.tcp.conn(h) else { return };
        let port = c.local().1;
        let svc = if Some(port) == self.services.echo_port {
            Service::Echo(Echo::new(self.services.echo_buffer.max(64 * 1024)))
        } else {
            Service::Discard(Discard::new(self.services.discard_sha256))
        };
        self.stats.accepted += 1;
        self.conns.insert(h, ConnState::new(svc));
        self.dirty.push(h);
    }

    fn start_senders(&mut self, now: Instant) {
        let Some(job) = self.services.send.clone() else {
            return;
        };
        while self.send_pending > 0 {
            match self.iface.resolve(now, job.dst) {
                Resolve::Known(_) => {}
                Resolve::Pending => return,
                Resolve::Failed | Resolve::NoRoute => {
                    tracing::error!(dst = ?job.dst, "sender: cannot resolve the destination");
                    self.send_report.failed += self.send_pending;
                    self.send_pending = 0;
                    return;
                }
            }
            let remote = (Ipv4Address::from(job.dst), job.port);
            // A random ephemeral port per run, so a new run does not collide with the peer's
            // TIME-WAIT state of the last one (RFC 6056 §3.3.1 spirit); with RSS, one whose
            // replies the NIC steers to our queue (DESIGN.md §1).
            let start = 49152
                + ((self.seed >> 16).wrapping_add(u64::from(self.next_port_offset)) % 16384) as u16;
            self.next_port_offset = self.next_port_offset.wrapping_add(1);
            let port = match &self.services.steering {
                Some((s, q)) => {
                    let local = self.iface.config().ip;
                    match s.pick_source_port((local, job.dst, job.port), *q, start, |_| false) {
                        Some(p) => {
                            self.next_port_offset = self
                                .next_port_offset
                                .wrapping_add(u32::from(p.wrapping_sub(start)));
                            p
                        }
                        None => start,
                    }
                }
                None => start,
            };
            match self.tcp.connect(now, port, remote) {
                Ok(h) => {
                    let pattern = self
                        .pattern
                        .get_or_insert_with(|| Arc::new(Pattern::new(self.seed)))
                        .clone();
                    // Each connection starts elsewhere in the pattern, so streams differ.
                    let shift = u64::from(self.send_pending) * 104_729;
                    let svc = Service::Sender(Sender::new(job.bytes, pattern, shift, job.sha256));
                    self.conns.insert(h, ConnState::new(svc));
                    self.dirty.push(h);
                    self.send_started.get_or_insert(now);
                    self.send_pending -= 1;
                }
                Err(e) => {
                    tracing::error!(?e, "sender: connect failed");
                    self.send_report.failed += 1;
                    self.send_pending -= 1;
                }
            }
        }
    }

    /// Run the connection's service: events, readable data, data to queue.
    fn service(&mut self, now: Instant, h: ConnHandle) {
        let Some(c) = self.tcp.conn_mut(h) else {
            return;
        };
        if let Some(e) = self.rdma.as_mut()
            && e.service(now, h, c)
        {
            return;
        }
        let Some(st) = self.conns.get_mut(&h) else {
            return;
        };
        while let Some(ev) = c.poll_event() {
            match ev {
                Event::Connected => {
                    if let Service::Sender(s) = &mut st.svc {
                        s.started = Some(now);
                    }
                }
                Event::Acked { upto } => {
                    if let Service::Echo(e) = &mut st.svc {
                        e.acked(upto);
                    }
                }
                Event::PeerClosed => st.peer_closed = true,
                Event::Closed(r) => st.reason = Some(r),
            }
        }
        match &mut st.svc {
            Service::Echo(e) => {
                while e.has_room() && c.send_capacity() >= crate::diag::MAX_SEGMENT as u64 {
                    let Some((buf, r)) = c.poll_readable() else {
                        break;
                    };
                    let data = &buf.data()[r];
                    e.push(data);
                    let _ = c.send(data.len() as u64);
                }
                if st.peer_closed && c.readable_bytes() == 0 && !st.closing {
                    c.close();
                    st.closing = true;
                }
            }
            Service::Discard(d) => {
                while let Some((buf, r)) = c.poll_readable() {
                    d.push(&buf.data()[r]);
                }
                if st.peer_closed && !st.closing {
                    c.close();
                    st.closing = true;
                }
            }
            Service::Sender(s) => {
                if s.started.is_some() {
                    loop {
                        let n = s.next_chunk(c.send_capacity());
                        if n == 0 {
                            break;
                        }
                        let _ = c.send(n);
                    }
                    if s.all_queued() && !st.closing {
                        c.close();
                        st.closing = true;
                    }
                }
                // Anything the peer sends to a sender is read and dropped.
                while c.poll_readable().is_some() {}
            }
        }
    }

    /// Emit segments of connection `h`, at most TX_BUDGET. Returns true when the budget ran
    /// out.
    fn emit(&mut self, now: Instant, pool: &Mempool, tx: &mut Vec<Mbuf>, h: ConnHandle) -> bool {
        let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        // Back-pressure: TCP is asked for a segment only when the segment can leave now, so
        // nothing it counts as sent is dropped here (a segment polled and then dropped costs
        // a retransmission timeout).
        let Some(c) = self.tcp.conn_mut(h) else {
            return false;
        };
        let dst = c.remote().0.octets();
        let Resolve::Known(mac) = self.iface.resolve(now, dst) else {
            // The ARP request is on its way; `release_neighbor_waiters` wakes us.
            self.stats.tx_wait_neighbor += 1;
            self.wait_neighbor.push(h);
            if self.wait_neighbor.len() >= 1024 {
                // A connection waiting long is pushed at each of its timers: keep one entry.
                self.wait_neighbor.sort_unstable();
                self.wait_neighbor.dedup();
            }
            return false;
        };
        // Nothing to send (a data segment taken in, its ACK delayed; a service that queued
        // nothing): TCP records that poll's outcome without one, no mbuf is set up.
        if c.poll_nothing(now) {
            return false;
        }
        // Whether the RDMA engine builds this connection's frames: asked once per batch, not
        // per segment (its connections change only in its own poll, not while we emit).
        let zero_copy = self
            .rdma
            .as_ref()
            .is_some_and(|e| e.zero_copy() && e.owns(h));
        if zero_copy {
            return self.emit_rdma(now, pool, tx, h, mac);
        }
        for _ in 0..TX_BUDGET {
            if tx.len() >= TX_QUEUE_LIMIT {
                self.stats.tx_backpressure += 1;
                return true;
            }
            let Some(mut m) = self.spare.take().or_else(|| pool.alloc()) else {
                self.stats.tx_no_mbuf += 1;
                return false;
            };
            m.set_len(0);
            // The TCP contract: room for a 60-byte header plus a full EMSS (<= MTU - 40), so
            // full-sized segments count as full for sender SWS avoidance (RFC 9293 3.8.6.2.1).
            let Some(buf) = m.append(hdr + self.mtu + 20) else {
                self.stats.tx_no_mbuf += 1;
                return false;
            };
            let seg = &mut buf[hdr..];
            let Some(c) = self.tcp.conn_mut(h) else {
                self.spare = Some(m);
                return false;
            };
            // Not yet accepted (SYN-RECEIVED): no service, no payload yet.
            let rdma = self.rdma.as_mut().and_then(|e| e.log(h));
            let t = match (rdma, self.conns.get_mut(&h).map(|st| &mut st.svc)) {
                (Some(log), _) => c.poll_transmit(now, seg, log),
                (None, svc) => match svc {
                    Some(Service::Echo(e)) => c.poll_transmit(now, seg, e),
                    Some(Service::Sender(s)) => c.poll_transmit(now, seg, s),
                    Some(Service::Discard(_)) | None => c.poll_transmit(now, seg, &mut tcp::NoData),
                },
            };
            let Some(t) = t else {
                self.spare = Some(m);
                return false;
            };
            // The connection's peer, whose next hop was resolved above.
            let dst = t.dst.octets();
            self.iface
                .emit_ipv4_header(mac, dst, IP_PROTO_TCP, t.len, &mut buf[..hdr]);
            let frame_len = (hdr + t.len).max(MIN_FRAME_LEN);
            buf[hdr + t.len..frame_len].fill(0);
            m.set_len(frame_len);
            tx.push(m);
            if t.last {
                return false;
            }
        }
        true
    }

    /// [`Netstack::emit`] for a connection whose frames the RDMA engine builds
    /// ([`crate::rdma::glue::emit_zero_copy`]); frames whose payload was copied are finished
    /// (CRCs, checksum) after the batch ([`crate::rdma::glue::finish_copy`]).
    fn emit_rdma(
        &mut self,
        now: Instant,
        pool: &Mempool,
        tx: &mut Vec<Mbuf>,
        h: ConnHandle,
        mac: [u8; 6],
    ) -> bool {
        use crate::rdma::glue::{Emitted, Frames, emit_zero_copy, finish_copy};
        let Some(e) = self.rdma.as_mut() else {
            return false;
        };
        // The table is needed for payload by reference only: copying, no `Arc` traffic.
        let table = (!e.copy_payload()).then(|| e.mem().clone());
        let Some(log) = e.log(h) else {
            return false;
        };
        let copy = log.copy_mode();
        let mut f = Frames {
            log,
            table: table.as_deref(),
            mac,
            copy,
        };
        let mut unsealed = std::mem::take(&mut self.unsealed);
        // As `emit`: true when the connection may have more to send (budget used up, or the
        // TX queue full), false when it ran out of segments or mbufs.
        let mut more = true;
        for _ in 0..TX_BUDGET {
            if tx.len() >= TX_QUEUE_LIMIT {
                self.stats.tx_backpressure += 1;
                break;
            }
            if self.spare.is_none() {
                // From the stash, refilled in bulk; when the pool has too few for a bulk
                // allocation, emit_zero_copy allocates one.
                if self.stash.is_empty() {
                    pool.alloc_bulk(&mut self.stash, TX_STASH);
                }
                self.spare = self.stash.pop();
            }
            let spare = &mut self.spare;
            let (tcp, iface) = (&mut self.tcp, &mut self.iface);
            match emit_zero_copy(now, h, &mut f, tcp, iface, pool, spare) {
                Emitted::Frame(m, u, last) => {
                    tx.push(m);
                    if let Some(u) = u {
                        unsealed.push((tx.len() - 1, u));
                    }
                    if last {
                        // TCP did the poll after this frame itself: nothing follows.
                        more = false;
                        break;
                    }
                }
                Emitted::NoMbuf => {
                    self.stats.tx_no_mbuf += 1;
                    more = false;
                    break;
                }
                Emitted::Nothing => {
                    more = false;
                    break;
                }
            }
        }
        for (i, u) in unsealed.drain(..) {
            if let Some(m) = tx.get_mut(i) {
                finish_copy(f.log, m, u);
            }
        }
        self.unsealed = unsealed;
        more
    }

    /// Send an endpoint-level segment to `dst` if its next hop is known (else an ARP request
    /// is on its way, and false is returned).
    fn emit_stateless(
        &mut self,
        now: Instant,
        dst: [u8; 4],
        seg: &[u8],
        pool: &Mempool,
        tx: &mut Vec<Mbuf>,
    ) -> bool {
        let Resolve::Known(mac) = self.iface.resolve(now, dst) else {
            return false;
        };
        let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        let mut frame = [0u8; 128];
        self.iface
            .emit_ipv4_header(mac, dst, IP_PROTO_TCP, seg.len(), &mut frame[..hdr]);
        frame[hdr..hdr + seg.len()].copy_from_slice(seg);
        let len = (hdr + seg.len()).max(MIN_FRAME_LEN);
        push_copy(pool, &frame[..len], tx, &mut self.stats);
        true
    }

    /// RFC 1122 §2.3.2.2: keep a packet for an address being resolved instead of dropping
    /// it (a SYN-cookie SYN-ACK or RST to a peer we have not talked to yet); bounded.
    fn hold_stateless(&mut self, now: Instant, dst: [u8; 4], seg: &[u8]) {
        if self.held.len() >= MAX_HELD || seg.len() > STATELESS_MAX {
            self.stats.tx_no_neighbor += 1;
            return;
        }
        let mut h = HeldSegment {
            dst,
            len: seg.len(),
            seg: [0; STATELESS_MAX],
            until: now + HOLD_STATELESS,
        };
        h.seg[..seg.len()].copy_from_slice(seg);
        self.held.push(h);
    }

    /// Send the held segments whose next hop is now known; drop (count) those whose
    /// resolution failed or whose time ran out.
    fn release_held(&mut self, now: Instant, pool: &Mempool, tx: &mut Vec<Mbuf>) {
        let mut held = std::mem::take(&mut self.held);
        held.retain(|h| {
            if self.emit_stateless(now, h.dst, &h.seg[..h.len], pool, tx) {
                self.stats.tx_held_neighbor += 1;
                return false;
            }
            let failed = matches!(
                self.iface.resolve(now, h.dst),
                Resolve::Failed | Resolve::NoRoute
            );
            if failed || now >= h.until {
                self.stats.tx_no_neighbor += 1;
                return false;
            }
            true
        });
        self.held = held;
    }

    /// Connections held back for a neighbour go back to work once the iface learned any
    /// neighbour (an ARP reply, or one another thread saw: `observe_arp`); those whose next
    /// hop is still unknown come back at their next attempt. Checked by a counter, so a
    /// loop with nothing learned costs one comparison.
    fn release_neighbor_waiters(&mut self) {
        let learned = self.iface.stats().neighbor_learned;
        if learned != self.learned_seen {
            self.learned_seen = learned;
            self.dirty.append(&mut self.wait_neighbor);
        }
    }

    /// Reap a finished connection (reporting its service), or arm its next timer.
    fn finish_or_arm(&mut self, now: Instant, h: ConnHandle) {
        let Some(c) = self.tcp.conn(h) else {
            self.conns.remove(&h);
            return;
        };
        if c.is_closed() {
            // Collect a Closed event the service has not seen yet.
            self.service(now, h);
            let Some(c) = self.tcp.conn(h) else { return };
            let acked = c.acked_offset();
            self.tcp.reap(h);
            self.armed.remove(&h);
            self.stats.reaped += 1;
            if let Some(e) = self.rdma.as_mut() {
                e.on_reaped(now, h);
            }
            if let Some(st) = self.conns.remove(&h) {
                let reason = st.reason;
                self.report(now, h, st, reason, acked);
            }
            return;
        }
        // A sender is done once everything, FIN included, is acknowledged (FIN-WAIT-2 or
        // TIME-WAIT): report it now rather than after TIME-WAIT.
        if matches!(c.state(), State::FinWait2 | State::TimeWait)
            && let Some(st) = self.conns.get_mut(&h)
            && let Service::Sender(snd) = &st.svc
            && !st.reported
            && c.acked_offset() >= snd.stream_len()
        {
            st.reported = true;
            let (acked, secs, total, sha) = (
                c.acked_offset(),
                snd.started.map_or(0.0, |t| (now - t).as_secs_f64()),
                snd.total,
                snd.digest_hex(),
            );
            self.sender_done(now, h, true, acked, secs, total, sha.unwrap_or_default());
        }
        let Some(c) = self.tcp.conn(h) else { return };
        let rdma_t = self.rdma.as_ref().and_then(|e| e.poll_timeout(h));
        let t = match (c.poll_timeout(), rdma_t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = t {
            let earlier = self.armed.get(&h).is_none_or(|&a| t < a);
            if earlier {
                self.wheel.insert(t, h);
                self.armed.insert(h, t);
            }
        }
    }

    fn report(
        &mut self,
        now: Instant,
        h: ConnHandle,
        st: ConnState,
        reason: Option<CloseReason>,
        acked: u64,
    ) {
        match st.svc {
            Service::Echo(e) => tracing::info!(
                conn = %h,
                bytes = e.bytes,
                ?reason,
                "echo connection closed"
            ),
            Service::Discard(mut d) => {
                let bytes = d.bytes;
                match d.digest() {
                    Some(g) => {
                        tracing::info!(conn = %h, bytes, ?reason, sha256 = %g.all, "discard connection closed");
                        println!(
                            "iwarpd: discard bytes={bytes} sha256={} body_sha256={} trailer={} trailer_ok={}",
                            g.all,
                            g.body,
                            g.trailer,
                            g.trailer_ok()
                        );
                    }
                    None => {
                        tracing::info!(conn = %h, bytes, ?reason, "discard connection closed");
                        println!("iwarpd: discard bytes={bytes}");
                    }
                }
            }
            Service::Sender(s) => {
                if !st.reported {
                    let ok = reason == Some(CloseReason::Normal) && acked >= s.stream_len();
                    let secs = s.started.map_or(0.0, |t| (now - t).as_secs_f64());
                    self.sender_done(
                        now,
                        h,
                        ok,
                        acked,
                        secs,
                        s.total,
                        s.digest_hex().unwrap_or_default(),
                    );
                }
            }
        }
    }
}

impl Netstack {
    /// The RDMA engine's commands and work (its connections are serviced like the others).
    fn poll_rdma(&mut self, now: Instant) {
        let Some(e) = self.rdma.as_mut() else { return };
        let mut net = crate::rdma::glue::StackNet {
            tcp: &mut self.tcp,
            iface: &mut self.iface,
            steering: &self.services.steering,
            seed: self.seed,
            next_port_offset: &mut self.next_port_offset,
        };
        e.poll(now, &mut net, &mut self.dirty);
    }

    #[allow(clippy::too_many_arguments)]
    fn sender_done(
        &mut self,
        now: Instant,
        h: ConnHandle,
        ok: bool,
        acked: u64,
        secs: f64,
        total: u64,
        sha: String,
    ) {
        if ok {
            self.send_report.completed += 1;
        } else {
            self.send_report.failed += 1;
        }
        self.send_report.bytes += acked;
        if let Some(t0) = self.send_started {
            self.send_report.secs = (now - t0).as_secs_f64();
        }
        tracing::info!(
            conn = %h,
            bytes = total,
            acked,
            ok,
            secs,
            "sender connection done"
        );
        let gbps = if secs > 0.0 {
            total as f64 * 8.0 / secs / 1e9
        } else {
            0.0
        };
        println!(
            "iwarpd: sender conn={} ok={ok} bytes={total} secs={secs:.3} gbps={gbps:.3} sha256={sha}",
            h.index()
        );
    }
}

fn push_copy(pool: &Mempool, frame: &[u8], tx: &mut Vec<Mbuf>, st: &mut NetstackStats) {
    match pool.alloc_copy(frame) {
        Some(m) => tx.push(m),
        None => st.tx_no_mbuf += 1,
    }
}
