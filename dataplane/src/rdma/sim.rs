//! Two hosts in memory, each a TCP endpoint plus an RDMA engine (or a raw TCP peer), joined by
//! a link with seeded loss: the engine end to end without DPDK. Time is simulated.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use netcore::rng::Xoshiro256;
use netcore::{Duration, Instant, Rng};
use smoltcp::wire::Ipv4Address;
use tcp::iface::Resolve;
use tcp::{ConnHandle, Dispatch, Endpoint, TcpConfig};

use super::api::{EngineConfig, EngineHandle, engine_channels};
use super::diag::{DiagRdma, DiagRdmaConfig};
use super::engine::{Engine, Net};
use super::memory::MemTable;

/// A segment in flight: bytes (TCP header + payload), source, destination.
type Seg = (Vec<u8>, Ipv4Address, Ipv4Address);

struct HostNet<'a> {
    tcp: &'a mut Endpoint<Vec<u8>>,
}

impl Net<Vec<u8>> for HostNet<'_> {
    fn tcp(&mut self) -> &mut Endpoint<Vec<u8>> {
        self.tcp
    }
    fn resolve(&mut self, _now: Instant, _ip: [u8; 4]) -> Resolve {
        Resolve::Known([2, 0, 0, 0, 0, 1])
    }
    fn source_port(&mut self, _remote: SocketAddrV4) -> u16 {
        0
    }
}

/// One host: TCP, and an engine with its control-side handle.
pub(crate) struct Host {
    pub(crate) ip: Ipv4Address,
    pub(crate) tcp: Endpoint<Vec<u8>>,
    pub(crate) engine: Engine,
    pub(crate) handle: EngineHandle,
    dirty: Vec<ConnHandle>,
    /// Connections driven by a test as a raw TCP peer: their send stream.
    pub(crate) raw: std::collections::HashMap<ConnHandle, Vec<u8>>,
}

impl Host {
    pub(crate) fn new(last: u8, cfg: EngineConfig, diag: Option<DiagRdmaConfig>) -> Host {
        let ip = Ipv4Address::new(10, 9, 0, last);
        let mem = MemTable::new(1024, u64::from(last));
        let (handle, mut setups) = engine_channels(1, mem.clone(), cfg);
        let setup = setups.remove(0);
        let diag = diag.map(|d| DiagRdma::new(d, mem, setup.ids.clone(), 0));
        Host {
            ip,
            tcp: Endpoint::new(TcpConfig::default(), ip, [last; 16]),
            engine: Engine::new(setup, diag, true),
            handle,
            dirty: Vec::new(),
            raw: std::collections::HashMap::new(),
        }
    }

    pub(crate) fn addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(self.ip.octets()), port)
    }

    /// One round: engine, accepts, timers, services, transmission into `out`.
    fn step(&mut self, now: Instant, out: &mut Vec<Seg>) {
        let mut net = HostNet { tcp: &mut self.tcp };
        self.engine.poll(now, &mut net, &mut self.dirty);
        while let Some(h) = self.tcp.accept() {
            if let Some(c) = self.tcp.conn_mut(h) {
                self.engine.on_accept(now, h, c);
            }
            self.dirty.push(h);
        }
        for h in self.tcp.handles() {
            let Some(c) = self.tcp.conn_mut(h) else {
                continue;
            };
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
                self.dirty.push(h);
            }
            if self.engine.poll_timeout(h).is_some_and(|t| t <= now) {
                self.dirty.push(h);
            }
        }
        let mut work = std::mem::take(&mut self.dirty);
        work.sort_unstable();
        work.dedup();
        let mut buf = vec![0u8; 1600];
        for h in work {
            let Some(c) = self.tcp.conn_mut(h) else {
                continue;
            };
            self.engine.service(now, h, c);
            while let Some(c) = self.tcp.conn_mut(h) {
                let t = match (self.engine.log(h), self.raw.get(&h)) {
                    (Some(log), _) => c.poll_transmit(now, &mut buf, log),
                    (None, Some(raw)) => {
                        let mut src = |off: u64, dst: &mut [u8]| {
                            let o = off as usize;
                            dst.copy_from_slice(&raw[o..o + dst.len()]);
                        };
                        c.poll_transmit(now, &mut buf, &mut src)
                    }
                    (None, None) => c.poll_transmit(now, &mut buf, &mut tcp::NoData),
                };
                let Some(t) = t else { break };
                out.push((buf[..t.len].to_vec(), t.src, t.dst));
            }
            if self.tcp.conn(h).is_some_and(|c| c.is_closed()) {
                // Collect the Closed event first.
                if let Some(c) = self.tcp.conn_mut(h) {
                    self.engine.service(now, h, c);
                }
                self.tcp.reap(h);
                self.engine.on_reaped(now, h);
            }
        }
        while let Some(t) = self.tcp.poll_transmit(&mut buf) {
            out.push((buf[..t.len].to_vec(), t.src, t.dst));
        }
    }

    /// Mark a connection for servicing (a test queued data on it).
    pub(crate) fn touch(&mut self, h: ConnHandle) {
        self.dirty.push(h);
    }

    fn deliver(&mut self, now: Instant, seg: Seg) {
        let len = seg.0.len();
        match self.tcp.handle_segment(now, seg.1, seg.2, seg.0, 0..len) {
            Dispatch::Conn(h) | Dispatch::NewConn(h) => self.dirty.push(h),
            _ => {}
        }
    }

    /// Earliest timer of any connection.
    fn next_timer(&self) -> Option<Instant> {
        if self.engine.wants_step() {
            // Due now (the simulation never goes back in time).
            return Some(Instant::ZERO);
        }
        self.tcp
            .handles()
            .into_iter()
            .filter_map(|h| {
                let t = self.tcp.conn(h).and_then(|c| c.poll_timeout());
                let e = self.engine.poll_timeout(h);
                match (t, e) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }
}

/// Two hosts and the link between them.
pub(crate) struct Sim {
    pub(crate) a: Host,
    pub(crate) b: Host,
    pub(crate) now: Instant,
    rng: Xoshiro256,
    /// Probability (per million) that a segment is lost.
    pub(crate) loss_ppm: u64,
    /// Segments dropped so far.
    pub(crate) dropped: u64,
    wire: VecDeque<(Instant, bool, Seg)>,
    delay: Duration,
    /// Segments delivered per step at most (a receive burst; unbounded by default).
    pub(crate) burst: usize,
}

impl Sim {
    pub(crate) fn new(a: Host, b: Host, seed: u64) -> Sim {
        Sim {
            a,
            b,
            now: Instant::from_millis(1000),
            rng: Xoshiro256::seed_from_u64(seed),
            loss_ppm: 0,
            dropped: 0,
            wire: VecDeque::new(),
            delay: Duration::from_micros(20),
            burst: usize::MAX,
        }
    }

    /// One round; returns whether anything moved.
    pub(crate) fn step(&mut self) -> bool {
        let mut out_a = Vec::new();
        let mut out_b = Vec::new();
        self.a.step(self.now, &mut out_a);
        self.b.step(self.now, &mut out_b);
        let moved = !out_a.is_empty() || !out_b.is_empty();
        let at = self.now + self.delay;
        for (to_b, segs) in [(true, out_a), (false, out_b)] {
            for s in segs {
                if self.loss_ppm > 0 && self.rng.next_u64() % 1_000_000 < self.loss_ppm {
                    self.dropped += 1;
                    continue;
                }
                self.wire.push_back((at, to_b, s));
            }
        }
        // Advance time to the next delivery or timer.
        let next_wire = self.wire.front().map(|w| w.0);
        let next_timer = [self.a.next_timer(), self.b.next_timer()]
            .into_iter()
            .flatten()
            .min();
        let next = match (next_wire, next_timer) {
            (Some(w), Some(t)) => w.min(t),
            (w, t) => w.or(t).unwrap_or(self.now + Duration::from_millis(1)),
        };
        // Poll at least every millisecond (rings and the diagnostic service are polled).
        self.now = next.max(self.now).min(self.now + Duration::from_millis(1));
        let mut delivered = 0;
        while let Some((t, _, _)) = self.wire.front() {
            if *t > self.now || delivered == self.burst {
                break;
            }
            delivered += 1;
            if let Some((_, to_b, seg)) = self.wire.pop_front() {
                if to_b {
                    self.b.deliver(self.now, seg);
                } else {
                    self.a.deliver(self.now, seg);
                }
            }
        }
        moved || !self.wire.is_empty()
    }

    /// Step until `done` or `limit` of simulated time passed; returns whether `done` held.
    pub(crate) fn run_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut Sim) -> bool,
    ) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }
}
