//! Seeded network simulator: loss, reordering (jitter), duplication, corruption and delay
//! between two of our endpoints, and between ours and smoltcp's socket TCP (an independent
//! implementation). Every transfer must arrive byte-exact.
//!
//! `SIM_SEED=<n>` runs only that seed; the seed is printed when a run fails. `SIM_TRACE=1`
//! prints control segments and the connection state on failure, `SIM_TRACE=2` every segment.
#![allow(clippy::collapsible_if, clippy::too_many_arguments)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use netcore::{Duration, Instant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr};
use tcp::{CongestionControl, ConnHandle, Endpoint, Event, TcpConfig};

const A_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const B_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const PORT: u16 = 5000;

/// Link impairments for one run.
#[derive(Debug, Clone, Copy)]
struct LinkParams {
    loss: f64,
    dup: f64,
    corrupt: f64,
    reorder: f64,
    delay: Duration,
    jitter: Duration,
    /// Bottleneck rate in bytes per second (0: none) and its drop-tail queue in bytes.
    rate: f64,
    queue: usize,
}

impl LinkParams {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        LinkParams {
            loss: rng.gen_range(0.0..0.05),
            dup: rng.gen_range(0.0..0.02),
            corrupt: rng.gen_range(0.0..0.005),
            reorder: rng.gen_range(0.0..0.1),
            delay: Duration::from_micros(rng.gen_range(50..5000)),
            jitter: Duration::from_micros(rng.gen_range(0..2000)),
            rate: 0.0,
            queue: 0,
        }
    }
}

/// One direction of the wire: packets in flight ordered by delivery time.
struct Link {
    q: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    n: u64,
    p: LinkParams,
    delivered: u64,
    /// When the bottleneck finishes serializing what it holds.
    busy_until: Instant,
}

impl Link {
    fn new(p: LinkParams) -> Self {
        Link {
            q: BinaryHeap::new(),
            n: 0,
            p,
            delivered: 0,
            busy_until: Instant::ZERO,
        }
    }
    fn send(&mut self, now: Instant, pkt: Vec<u8>, rng: &mut ChaCha8Rng) {
        if rng.gen_bool(self.p.loss) {
            return;
        }
        let mut now = now;
        if self.p.rate > 0.0 {
            // A bottleneck: serialize at `rate`, drop when its queue is full.
            let start = self.busy_until.max(now);
            let backlog = (start - now).as_secs_f64() * self.p.rate;
            if backlog > self.p.queue as f64 {
                return;
            }
            self.busy_until = start + Duration::from_secs_f64(pkt.len() as f64 / self.p.rate);
            now = self.busy_until;
        }
        let copies = if rng.gen_bool(self.p.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let mut pkt = pkt.clone();
            if rng.gen_bool(self.p.corrupt) && pkt.len() > 20 {
                let i = rng.gen_range(20..pkt.len());
                pkt[i] ^= 1 << rng.gen_range(0..8);
            }
            let j = self.p.jitter.as_nanos() as u64;
            // A fraction of packets is held back by up to `jitter`: that reorders them.
            let extra = if j > 0 && rng.gen_bool(self.p.reorder) {
                rng.gen_range(0..j)
            } else {
                0
            };
            let at = now + self.p.delay + Duration::from_nanos(extra);
            self.n += 1;
            self.q.push(Reverse((at, self.n, pkt)));
        }
    }
    fn next_at(&self) -> Option<Instant> {
        self.q.peek().map(|Reverse((t, _, _))| *t)
    }
    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_at()? <= now {
            self.delivered += 1;
            self.q.pop().map(|Reverse((_, _, p))| p)
        } else {
            None
        }
    }
}

/// A host on the simulated wire.
trait Node {
    fn recv(&mut self, now: Instant, pkt: Vec<u8>);
    fn transmit(&mut self, now: Instant, out: &mut Vec<Vec<u8>>);
    fn next_timeout(&mut self, now: Instant) -> Option<Instant>;
    fn on_time(&mut self, now: Instant);
    /// Application step: queue data, read data, close when done.
    fn app(&mut self, now: Instant);
    fn received(&self) -> &[u8];
    fn peer_finished(&self) -> bool;
    fn all_acked(&self) -> bool;
    fn closed(&self) -> bool;
    fn describe(&self) -> String;
}

fn ip_wrap(src: Ipv4Address, dst: Ipv4Address, tcp: &[u8]) -> Vec<u8> {
    let repr = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Tcp,
        payload_len: tcp.len(),
        hop_limit: 64,
    };
    let mut buf = vec![0u8; repr.buffer_len() + tcp.len()];
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut p, &smoltcp::phy::ChecksumCapabilities::default());
    buf[repr.buffer_len()..].copy_from_slice(tcp);
    buf
}

/// Our endpoint plus a tiny application.
struct Ours {
    ep: Endpoint<Vec<u8>>,
    ip: Ipv4Address,
    conn: Option<ConnHandle>,
    tx: Vec<u8>,
    queued: u64,
    use_records: bool,
    rx: Vec<u8>,
    fin: bool,
    closed: bool,
    close_sent: bool,
    acked_upto: u64,
    why: Option<tcp::CloseReason>,
    /// Close only after the peer's FIN (smoltcp 0.12 drops its retransmission timer on
    /// every ACK it gets in CLOSE-WAIT, so it can stall if we half-close while it sends).
    close_after_fin: bool,
    /// Use `poll_transmit_header` (zero-copy TX path).
    split_tx: bool,
    /// Slow reader: read at most `read_chunks` chunks every `read_every`.
    read_every: Option<Duration>,
    read_chunks: usize,
    next_read: Instant,
    next_trace: Instant,
    connected_at: Option<Instant>,
}

impl Ours {
    fn new(cfg: TcpConfig, ip: Ipv4Address, tx: Vec<u8>, key: u8) -> Self {
        Ours {
            ep: Endpoint::new(cfg, ip, [key; 16]),
            ip,
            conn: None,
            tx,
            queued: 0,
            use_records: key.is_multiple_of(2),
            rx: Vec::new(),
            fin: false,
            closed: false,
            close_sent: false,
            acked_upto: 0,
            why: None,
            close_after_fin: false,
            split_tx: key >= 2,
            read_every: None,
            read_chunks: usize::MAX,
            next_read: Instant::ZERO,
            next_trace: Instant::ZERO,
            connected_at: None,
        }
    }
}

impl Node for Ours {
    fn recv(&mut self, now: Instant, pkt: Vec<u8>) {
        let Ok(p) = Ipv4Packet::new_checked(&pkt[..]) else {
            return;
        };
        let Ok(repr) = Ipv4Repr::parse(&p, &smoltcp::phy::ChecksumCapabilities::default()) else {
            return;
        };
        if repr.dst_addr != self.ip || repr.next_header != IpProtocol::Tcp {
            return;
        }
        let hl = usize::from(p.header_len());
        let end = hl + repr.payload_len;
        if let tcp::Dispatch::NewConn(h) =
            self.ep
                .handle_segment(now, repr.src_addr, repr.dst_addr, pkt, hl..end)
        {
            self.conn = Some(h);
        }
    }
    fn transmit(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
        let mut buf = vec![0u8; 1600];
        while let Some(t) = self.ep.poll_transmit(&mut buf) {
            out.push(ip_wrap(t.src, t.dst, &buf[..t.len]));
        }
        let tx = &self.tx;
        let mut src = |off: u64, dst: &mut [u8]| {
            let o = off as usize;
            dst.copy_from_slice(&tx[o..o + dst.len()]);
        };
        if self.split_tx {
            // Header-only transmission, payload attached from the owner's memory.
            let Some(h) = self.conn else { return };
            let Some(c) = self.ep.conn_mut(h) else { return };
            while let Some(t) = c.poll_transmit_header(now, &mut buf, &mut src) {
                assert_eq!(t.len, t.header_len);
                let mut seg = buf[..t.len].to_vec();
                seg.extend_from_slice(&tx[t.payload.start as usize..t.payload.end as usize]);
                assert!(seg.len() <= 1480, "oversized segment {}", seg.len());
                out.push(ip_wrap(t.src, t.dst, &seg));
            }
            return;
        }
        while let Some((_, t)) = self.ep.poll_transmit_all(now, &mut buf, &mut src) {
            assert!(t.len <= 1460 + 40 - 20 + 20, "oversized segment {}", t.len);
            out.push(ip_wrap(t.src, t.dst, &buf[..t.len]));
        }
    }
    fn next_timeout(&mut self, _now: Instant) -> Option<Instant> {
        let t = self.ep.poll_timeout();
        let unread = self
            .conn
            .and_then(|h| self.ep.conn(h))
            .is_some_and(|c| c.readable_bytes() > 0);
        match (t, self.read_every.is_some() && unread) {
            (Some(t), true) => Some(t.min(self.next_read)),
            (None, true) => Some(self.next_read),
            (t, false) => t,
        }
    }
    fn on_time(&mut self, now: Instant) {
        self.ep.handle_timeout(now);
    }
    fn app(&mut self, now: Instant) {
        let Some(h) = self.conn else { return };
        let Some(c) = self.ep.conn_mut(h) else { return };
        if let Ok(v) = std::env::var("SIM_CC_TRACE")
            && !self.tx.is_empty()
            && now >= self.next_trace
        {
            // Congestion-control trace of the sending side every SIM_CC_TRACE microseconds.
            self.next_trace = now + Duration::from_micros(v.parse().unwrap_or(10_000));
            eprintln!(
                "{:>10.3} ms cwnd {:>8} acked {:>9} rtx {:>5} rtos {} bbr {:?}",
                now.as_nanos() as f64 / 1e6,
                c.cwnd(),
                c.acked_offset(),
                c.stats().retransmissions,
                c.stats().rtos,
                c.bbr_state()
            );
        }
        while let Some(e) = c.poll_event() {
            match e {
                Event::Closed(why) => {
                    self.closed = true;
                    self.why = Some(why);
                }
                Event::PeerClosed => self.fin = true,
                Event::Acked { upto } => {
                    assert!(upto >= self.acked_upto, "acked offset went backwards");
                    self.acked_upto = upto;
                }
                Event::Connected => self.connected_at = Some(now),
            }
        }
        if self.read_every.is_none() || now >= self.next_read {
            let mut n = 0;
            while n < self.read_chunks {
                let Some((b, r)) = c.poll_readable() else {
                    break;
                };
                self.rx.extend_from_slice(&b[r]);
                n += 1;
            }
            if let Some(d) = self.read_every {
                self.next_read = now + d;
            }
        }
        if !c.state().is_synchronized()
            && c.state() != tcp::State::SynReceived
            && c.state() != tcp::State::SynSent
        {
            return;
        }
        let total = self.tx.len() as u64;
        if self.queued < total && c.state() != tcp::State::SynSent {
            if self.use_records {
                // Records of 1..3 EMSS, like FPDUs.
                loop {
                    let emss = u64::from(c.emss());
                    let len =
                        (emss * (1 + self.queued % 3) - (self.queued % 7)).min(total - self.queued);
                    if len == 0 || c.send_record(len).is_err() {
                        break;
                    }
                    self.queued += len;
                }
            } else if let Ok(n) = c.send(total - self.queued) {
                self.queued += n;
            }
        }
        if self.queued == total
            && !self.close_sent
            && c.state().is_synchronized()
            && (!self.close_after_fin || self.fin)
        {
            c.close();
            self.close_sent = true;
        }
    }
    fn received(&self) -> &[u8] {
        &self.rx
    }
    fn peer_finished(&self) -> bool {
        self.fin
    }
    fn all_acked(&self) -> bool {
        self.acked_upto == self.tx.len() as u64
    }
    fn closed(&self) -> bool {
        self.closed
    }
    fn describe(&self) -> String {
        match self.conn.and_then(|h| self.ep.conn(h)) {
            Some(c) if std::env::var("SIM_TRACE").is_ok_and(|v| v == "3") => format!("{c:?}"),
            Some(c) => format!(
                "{:?} {:?} {:?} {:?}",
                self.why,
                c.state(),
                c.stats(),
                c.negotiated()
            ),
            None => "no conn".into(),
        }
    }
}

mod smol {
    //! smoltcp's socket TCP behind an in-memory IP device.
    use super::*;
    use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
    use smoltcp::phy::{Device, DeviceCapabilities, Medium};
    use smoltcp::socket::tcp;
    use smoltcp::wire::{HardwareAddress, IpCidr};

    #[derive(Default)]
    pub(super) struct Dev {
        rx: VecDeque<Vec<u8>>,
        tx: Vec<Vec<u8>>,
    }
    pub(super) struct Rx(Vec<u8>);
    pub(super) struct Tx<'a>(&'a mut Vec<Vec<u8>>);
    impl smoltcp::phy::RxToken for Rx {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
            f(&self.0)
        }
    }
    impl smoltcp::phy::TxToken for Tx<'_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            let mut b = vec![0u8; len];
            let r = f(&mut b);
            self.0.push(b);
            r
        }
    }
    impl Device for Dev {
        type RxToken<'a> = Rx;
        type TxToken<'a> = Tx<'a>;
        fn receive(&mut self, _t: smoltcp::time::Instant) -> Option<(Rx, Tx<'_>)> {
            let p = self.rx.pop_front()?;
            Some((Rx(p), Tx(&mut self.tx)))
        }
        fn transmit(&mut self, _t: smoltcp::time::Instant) -> Option<Tx<'_>> {
            Some(Tx(&mut self.tx))
        }
        fn capabilities(&self) -> DeviceCapabilities {
            let mut c = DeviceCapabilities::default();
            c.medium = Medium::Ip;
            c.max_transmission_unit = 1500;
            c
        }
    }

    pub(super) struct Smol {
        iface: Interface,
        dev: Dev,
        sockets: SocketSet<'static>,
        h: SocketHandle,
        tx: Vec<u8>,
        sent: usize,
        rx: Vec<u8>,
        fin: bool,
        close_sent: bool,
        connected_once: bool,
    }

    fn st(now: Instant) -> smoltcp::time::Instant {
        smoltcp::time::Instant::from_micros((now.as_nanos() / 1000) as i64)
    }

    impl Smol {
        pub(super) fn new(ip: Ipv4Address, peer: Option<Ipv4Address>, tx: Vec<u8>) -> Self {
            let mut dev = Dev::default();
            let mut iface = Interface::new(
                Config::new(HardwareAddress::Ip),
                &mut dev,
                st(Instant::ZERO),
            );
            iface.update_ip_addrs(|a| {
                a.push(IpCidr::new(IpAddress::Ipv4(ip), 24)).unwrap();
            });
            let rxb = tcp::SocketBuffer::new(vec![0; 256 * 1024]);
            let txb = tcp::SocketBuffer::new(vec![0; 256 * 1024]);
            let mut s = tcp::Socket::new(rxb, txb);
            s.set_nagle_enabled(false);
            let mut sockets = SocketSet::new(vec![]);
            match peer {
                None => s.listen(PORT).unwrap(),
                Some(p) => s
                    .connect(iface.context(), (IpAddress::Ipv4(p), PORT), 40001)
                    .unwrap(),
            }
            let h = sockets.add(s);
            Smol {
                iface,
                dev,
                sockets,
                h,
                tx,
                sent: 0,
                rx: Vec::new(),
                fin: false,
                close_sent: false,
                connected_once: false,
            }
        }
    }

    impl Node for Smol {
        fn recv(&mut self, _now: Instant, pkt: Vec<u8>) {
            self.dev.rx.push_back(pkt);
        }
        fn transmit(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
            self.iface.poll(st(now), &mut self.dev, &mut self.sockets);
            out.append(&mut self.dev.tx);
        }
        fn next_timeout(&mut self, now: Instant) -> Option<Instant> {
            self.iface
                .poll_at(st(now), &self.sockets)
                .map(|t| Instant::from_nanos((t.total_micros().max(0) as u64) * 1000))
        }
        fn on_time(&mut self, now: Instant) {
            self.iface.poll(st(now), &mut self.dev, &mut self.sockets);
        }
        fn app(&mut self, _now: Instant) {
            let s = self.sockets.get_mut::<tcp::Socket>(self.h);
            if s.is_active() && s.state() == tcp::State::Established {
                self.connected_once = true;
            }
            while s.can_recv() {
                let n = s.recv(|b| (b.len(), b.to_vec())).unwrap();
                if n.is_empty() {
                    break;
                }
                self.rx.extend_from_slice(&n);
            }
            if matches!(
                s.state(),
                tcp::State::CloseWait
                    | tcp::State::LastAck
                    | tcp::State::TimeWait
                    | tcp::State::Closing
                    | tcp::State::Closed
            ) && self.connected_once
            {
                self.fin = !s.may_recv();
            }
            if self.sent < self.tx.len() && s.can_send() {
                self.sent += s.send_slice(&self.tx[self.sent..]).unwrap();
            }
            if self.sent == self.tx.len()
                && !self.close_sent
                && matches!(s.state(), tcp::State::Established | tcp::State::CloseWait)
            {
                s.close();
                self.close_sent = true;
            }
        }
        fn received(&self) -> &[u8] {
            &self.rx
        }
        fn peer_finished(&self) -> bool {
            self.fin
        }
        fn all_acked(&self) -> bool {
            let s = self.sockets.get::<tcp::Socket>(self.h);
            self.sent == self.tx.len() && s.send_queue() == 0
        }
        fn closed(&self) -> bool {
            let s = self.sockets.get::<tcp::Socket>(self.h);
            matches!(s.state(), tcp::State::Closed | tcp::State::TimeWait)
        }
        fn describe(&self) -> String {
            let s = self.sockets.get::<tcp::Socket>(self.h);
            if std::env::var("SIM_TRACE").is_ok() {
                return format!("smoltcp {s:?}");
            }
            format!("smoltcp {:?}", s.state())
        }
    }
}

fn trace(now: Instant, dir: &str, pk: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(pk) else {
        return;
    };
    let hl = usize::from(p.header_len());
    if let Ok(t) = smoltcp::wire::TcpPacket::new_checked(&pk[hl..]) {
        if t.fin() || t.syn() || t.rst() || std::env::var("SIM_TRACE").is_ok_and(|v| v == "2") {
            eprintln!(
                "{:?} {dir} seq {} ack {} fin {} syn {} rst {} len {} win {} opts {:?}",
                now,
                t.seq_number().0 as u32,
                t.ack_number().0 as u32,
                t.fin(),
                t.syn(),
                t.rst(),
                t.payload().len(),
                t.window_len(),
                t.options()
            );
        }
    }
}

fn digest(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Drive two nodes over two impaired links until both transfers complete and both sides are
/// closed. Panics (printing the seed) on a mismatch, deadlock or time limit.
fn simulate(
    seed: u64,
    a: &mut dyn Node,
    b: &mut dyn Node,
    a_tx: &[u8],
    b_tx: &[u8],
    rng: &mut ChaCha8Rng,
    p: LinkParams,
    require_close: bool,
) -> Instant {
    let mut ab = Link::new(p);
    let mut ba = Link::new(p);
    let mut now = Instant::ZERO;
    let limit = Instant::from_millis(600_000);
    let mut out = Vec::new();
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps < 5_000_000, "seed {seed}: step limit");
        while let Some(pk) = ab.pop_due(now) {
            if std::env::var("SIM_TRACE").is_ok() {
                trace(now, "a->b", &pk);
            }
            b.recv(now, pk);
        }
        while let Some(pk) = ba.pop_due(now) {
            if std::env::var("SIM_TRACE").is_ok() {
                trace(now, "b->a", &pk);
            }
            a.recv(now, pk);
        }
        if a.next_timeout(now).is_some_and(|t| t <= now) {
            a.on_time(now);
        }
        if b.next_timeout(now).is_some_and(|t| t <= now) {
            b.on_time(now);
        }
        a.app(now);
        b.app(now);
        a.transmit(now, &mut out);
        for pk in out.drain(..) {
            ab.send(now, pk, rng);
        }
        b.transmit(now, &mut out);
        for pk in out.drain(..) {
            ba.send(now, pk, rng);
        }
        a.app(now);
        b.app(now);
        let done = a.received().len() == b_tx.len()
            && b.received().len() == a_tx.len()
            && a.peer_finished()
            && b.peer_finished()
            && a.all_acked()
            && b.all_acked()
            && (!require_close || (a.closed() && b.closed()));
        if done {
            break;
        }
        let next = [
            ab.next_at(),
            ba.next_at(),
            a.next_timeout(now),
            b.next_timeout(now),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            eprintln!("a: {}\nb: {}", a.describe(), b.describe());
            panic!(
                "seed {seed}: deadlock at {:?}: a got {}/{} fin {} acked {} closed {}, b got {}/{} fin {} acked {} closed {} ({p:?})",
                now,
                a.received().len(),
                b_tx.len(),
                a.peer_finished(),
                a.all_acked(),
                a.closed(),
                b.received().len(),
                a_tx.len(),
                b.peer_finished(),
                b.all_acked(),
                b.closed()
            );
        };
        now = now.max(next);
        if now >= limit {
            eprintln!("a: {}\nb: {}", a.describe(), b.describe());
        }
        assert!(
            now < limit,
            "seed {seed}: time limit: a got {}/{}, b got {}/{} ({p:?})",
            a.received().len(),
            b_tx.len(),
            b.received().len(),
            a_tx.len()
        );
    }
    if std::env::var("SIM_TRACE").is_ok() {
        eprintln!(
            "seed {seed}: done at {now:?} after {steps} steps, {} + {} packets",
            ab.delivered, ba.delivered
        );
        eprintln!("a: {}\nb: {}", a.describe(), b.describe());
    }
    assert_eq!(
        digest(a.received()),
        digest(b_tx),
        "seed {seed}: a received corrupted data"
    );
    assert_eq!(
        digest(b.received()),
        digest(a_tx),
        "seed {seed}: b received corrupted data"
    );
    now
}

fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("SIM_SEED") {
        Ok(s) => vec![s.parse().expect("SIM_SEED must be an integer")],
        Err(_) => default.collect(),
    }
}

fn sim_cfg(rng: &mut ChaCha8Rng) -> TcpConfig {
    TcpConfig {
        cc: match rng.gen_range(0..3) {
            0 => CongestionControl::Cubic,
            1 => CongestionControl::NewReno,
            _ => CongestionControl::Bbr,
        },
        sack: rng.gen_bool(0.8),
        timestamps: rng.gen_bool(0.7),
        window_scale: if rng.gen_bool(0.8) {
            Some(rng.gen_range(0..9))
        } else {
            None
        },
        delayed_ack: if rng.gen_bool(0.5) {
            Some(Duration::from_millis(rng.gen_range(1..40)))
        } else {
            None
        },
        recv_window: rng.gen_range(16_384..4_000_000),
        time_wait: Duration::from_millis(500),
        rto_min: Duration::from_millis(10),
        // `SIM_RACK=0`: RFC 6675 recovery instead of RACK-TLP, for comparisons.
        rack_tlp: std::env::var("SIM_RACK").map_or(true, |v| v != "0"),
        ..TcpConfig::default()
    }
}

fn random_bytes(rng: &mut ChaCha8Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    v
}

fn run_seed<F: FnOnce()>(seed: u64, f: F) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    if let Err(e) = r {
        eprintln!("simulation failed: rerun with SIM_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

/// Ours <-> ours, data both ways at once, orderly close on both sides. Prints the summed
/// loss-recovery counters of both ends (`--nocapture`), for before/after comparisons.
#[test]
fn ours_to_ours() {
    let mut total = tcp::TcpStats::default();
    for seed in seeds(0..50) {
        run_seed(seed, || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let p = LinkParams::random(&mut rng);
            let a_len = rng.gen_range(
                1 << 20..(if seed % 10 == 0 {
                    4 << 20
                } else {
                    (3 << 20) / 2
                }),
            );
            let b_len = rng.gen_range(0..(256 << 10));
            let a_tx = random_bytes(&mut rng, a_len);
            let b_tx = random_bytes(&mut rng, b_len);
            let mut b_cfg = sim_cfg(&mut rng);
            let slow = seed.is_multiple_of(3);
            if slow {
                // A slow reader behind a small window: zero windows, persist probes, updates.
                b_cfg.recv_window = rng.gen_range(4096..65536);
            }
            let mut b = Ours::new(b_cfg, B_IP, b_tx.clone(), 2);
            if slow {
                b.read_every = Some(Duration::from_micros(rng.gen_range(100..3000)));
                b.read_chunks = rng.gen_range(1..8);
            }
            b.ep.listen(PORT);
            let mut a = Ours::new(sim_cfg(&mut rng), A_IP, a_tx.clone(), 1);
            a.conn = Some(a.ep.connect(Instant::ZERO, 0, (B_IP, PORT)).unwrap());
            simulate(seed, &mut a, &mut b, &a_tx, &b_tx, &mut rng, p, true);
            let s = a.ep.stats();
            total.add(&s);
            total.add(&b.ep.stats());
            if std::env::var("SIM_STATS").is_ok() {
                let n = a.conn.and_then(|h| a.ep.conn(h)).map(|c| c.negotiated());
                eprintln!(
                    "seed {seed}: rtos {}+{} tlp {}+{} negotiated {n:?} {p:?}",
                    s.rtos,
                    b.ep.stats().rtos,
                    s.tlp_probes,
                    b.ep.stats().tlp_probes
                );
            }
            if p.loss > 0.01 {
                assert!(
                    s.retransmissions > 0,
                    "seed {seed}: loss without retransmissions"
                );
            }
        });
    }
    eprintln!(
        "ours_to_ours totals: rtos {} retransmissions {} fast_retransmits {} tlp_probes {} rack_lost {} segs_out {}",
        total.rtos,
        total.retransmissions,
        total.fast_retransmits,
        total.tlp_probes,
        total.rack_lost,
        total.segs_out
    );
}

/// Ours (client, sends) -> smoltcp (server, sends some back).
#[test]
fn ours_to_smoltcp() {
    for seed in seeds(100..150) {
        run_seed(seed, || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let p = LinkParams::random(&mut rng);
            let a_tx = {
                let n = rng.gen_range(1 << 20..(2 << 20));
                random_bytes(&mut rng, n)
            };
            let b_tx = {
                let n = rng.gen_range(0..(64 << 10));
                random_bytes(&mut rng, n)
            };
            let mut b = smol::Smol::new(B_IP, None, b_tx.clone());
            let mut a = Ours::new(sim_cfg(&mut rng), A_IP, a_tx.clone(), 3);
            a.split_tx = seed.is_multiple_of(2);
            // smoltcp 0.12 also idles its retransmission timer when our FIN reaches it in
            // FIN-WAIT-1 with its own data unacknowledged (-> CLOSING, stalls; seed 101).
            a.close_after_fin = true;
            a.conn = Some(a.ep.connect(Instant::ZERO, 0, (B_IP, PORT)).unwrap());
            simulate(seed, &mut a, &mut b, &a_tx, &b_tx, &mut rng, p, false);
        });
    }
}

/// smoltcp (client, sends) -> ours (server, sends some back).
#[test]
fn smoltcp_to_ours() {
    for seed in seeds(200..250) {
        run_seed(seed, || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let p = LinkParams::random(&mut rng);
            let a_tx = {
                let n = rng.gen_range(1 << 20..(2 << 20));
                random_bytes(&mut rng, n)
            };
            let b_tx = {
                let n = rng.gen_range(0..(64 << 10));
                random_bytes(&mut rng, n)
            };
            let mut b = Ours::new(sim_cfg(&mut rng), B_IP, b_tx.clone(), 4);
            b.ep.listen(PORT);
            b.close_after_fin = true;
            b.split_tx = seed.is_multiple_of(2);
            let mut a = smol::Smol::new(A_IP, Some(B_IP), a_tx.clone());
            simulate(seed, &mut a, &mut b, &a_tx, &b_tx, &mut rng, p, false);
        });
    }
}

/// Heavy random loss on a short path with the production RTO floor (as the veth benchmark):
/// ours -> ours, 4 MiB, 5 % loss both ways, 50 us one-way delay, rto_min 200 ms. Ignored
/// (a measurement); prints the recovery counters; `SIM_RACK=0` for RFC 6675 recovery.
/// Measured: RTOs 37 (RFC 6675) -> 4 (RACK-TLP).
#[test]
#[ignore = "measurement: run in release with --ignored --nocapture"]
fn heavy_loss_short_path() {
    let seed = 7u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p = LinkParams {
        loss: 0.05,
        dup: 0.0,
        corrupt: 0.0,
        reorder: 0.0,
        delay: Duration::from_micros(50),
        jitter: Duration::ZERO,
        rate: 0.0,
        queue: 0,
    };
    let a_tx = random_bytes(&mut rng, 4 << 20);
    let cfg = TcpConfig {
        rack_tlp: std::env::var("SIM_RACK").map_or(true, |v| v != "0"),
        ..TcpConfig::default()
    };
    let mut b = Ours::new(cfg.clone(), B_IP, Vec::new(), 2);
    b.ep.listen(PORT);
    let mut a = Ours::new(cfg, A_IP, a_tx.clone(), 1);
    a.conn = Some(a.ep.connect(Instant::ZERO, 0, (B_IP, PORT)).unwrap());
    simulate(seed, &mut a, &mut b, &a_tx, &[], &mut rng, p, false);
    let s = a.ep.stats();
    eprintln!(
        "heavy_loss_short_path: rtos {} retransmissions {} fast_retransmits {} tlp_probes {} rack_lost {} segs_out {}",
        s.rtos, s.retransmissions, s.fast_retransmits, s.tlp_probes, s.rack_lost, s.segs_out
    );
}

/// One sender through a bottleneck with random loss; returns (goodput in Mb/s of simulated
/// time, sender stats).
fn bottleneck_run(
    cc: CongestionControl,
    loss: f64,
    seed: u64,
    bytes: usize,
) -> (f64, tcp::TcpStats) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p = LinkParams {
        loss,
        dup: 0.0,
        corrupt: 0.0,
        reorder: 0.0,
        delay: Duration::from_micros(500),
        jitter: Duration::ZERO,
        // 100 Mb/s, a 1 ms-RTT path with a queue of two BDPs.
        rate: 12.5e6,
        queue: 25_000,
    };
    let cfg = TcpConfig {
        cc,
        ..TcpConfig::default()
    };
    bottleneck_run_with(cfg, p, seed, bytes, &mut rng)
}

/// One sender with `cfg` over link `p`; returns (goodput in Mb/s of simulated time from the
/// handshake's end, sender stats).
fn bottleneck_run_with(
    cfg: TcpConfig,
    p: LinkParams,
    seed: u64,
    bytes: usize,
    rng: &mut ChaCha8Rng,
) -> (f64, tcp::TcpStats) {
    let a_tx = random_bytes(rng, bytes);
    let mut b = Ours::new(cfg.clone(), B_IP, Vec::new(), 2);
    b.ep.listen(PORT);
    let mut a = Ours::new(cfg, A_IP, a_tx.clone(), 1);
    a.conn = Some(a.ep.connect(Instant::ZERO, 0, (B_IP, PORT)).unwrap());
    let end = simulate(seed, &mut a, &mut b, &a_tx, &[], rng, p, false);
    // From the handshake's end: a lost SYN costs the initial RTO, not the algorithm's doing.
    let t = end - a.connected_at.unwrap_or(Instant::ZERO);
    (bytes as f64 * 8.0 / t.as_secs_f64() / 1e6, a.ep.stats())
}

/// BBR (draft-ietf-ccwg-bbr with Linux's loss response) through a 100 Mb/s, 1 ms bottleneck:
/// without loss it fills the link without filling the queue (few drops); under 1 % and 5 %
/// random loss it keeps most of the link where CUBIC, which takes random loss for congestion,
/// falls far below (simulated time, deterministic seeds).
#[test]
fn bbr_keeps_the_link_under_random_loss() {
    let mb = 8 << 20;
    let (clean, s) = bottleneck_run(CongestionControl::Bbr, 0.0, 11, mb);
    eprintln!(
        "bbr 0%: {clean:.1} Mb/s, retransmissions {}",
        s.retransmissions
    );
    assert!(clean > 80.0, "bbr without loss: {clean:.1} Mb/s");
    for loss in [0.01, 0.05] {
        let (bbr, sb) = bottleneck_run(CongestionControl::Bbr, loss, 12, mb);
        let (cubic, sc) = bottleneck_run(CongestionControl::Cubic, loss, 12, mb);
        eprintln!(
            "loss {loss}: bbr {bbr:.1} Mb/s (rtos {}), cubic {cubic:.1} Mb/s (rtos {})",
            sb.rtos, sc.rtos
        );
        assert!(bbr > 50.0, "bbr at {loss}: {bbr:.1} Mb/s");
        assert!(bbr > cubic, "bbr {bbr:.1} <= cubic {cubic:.1} at {loss}");
    }
}

/// HyStart++ (RFC 9406 §4.2): CUBIC's initial slow start through a 100 Mb/s bottleneck on a
/// 20 ms path with a queue of two BDPs (up to 40 ms of queueing). Classic slow start doubles
/// the window until the queue overflows and drops a large part of a window; HyStart++ sees
/// the RTT rise by RttThresh (4 ms) first, grows a quarter as fast for CSS_ROUNDS rounds,
/// and enters congestion avoidance having lost less than half as much (seed 21: 1151 -> 434
/// retransmissions of 4 MiB; CSS's five rounds at 1.25x per round still overshoot a queue
/// that had 4 ms of delay when the rise was seen).
#[test]
fn hystart_leaves_slow_start_before_the_queue_overflows() {
    let p = LinkParams {
        loss: 0.0,
        dup: 0.0,
        corrupt: 0.0,
        reorder: 0.0,
        delay: Duration::from_millis(10),
        jitter: Duration::ZERO,
        rate: 12.5e6,
        queue: 500_000,
    };
    let run = |hystart: bool| {
        let cfg = TcpConfig {
            cc: CongestionControl::Cubic,
            hystart,
            ..TcpConfig::default()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        bottleneck_run_with(cfg, p, 21, 4 << 20, &mut rng)
    };
    let (classic, sc) = run(false);
    let (hs, sh) = run(true);
    eprintln!(
        "classic: {classic:.1} Mb/s, retransmissions {}; hystart++: {hs:.1} Mb/s, retransmissions {}",
        sc.retransmissions, sh.retransmissions
    );
    assert!(
        sc.retransmissions > 50,
        "classic slow start overflowed: {}",
        sc.retransmissions
    );
    assert!(
        sh.retransmissions * 2 < sc.retransmissions,
        "hystart++ {} vs {}",
        sh.retransmissions,
        sc.retransmissions
    );
}
