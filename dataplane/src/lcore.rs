//! The run-to-completion poll loop of one dataplane thread.
//!
//! One iteration: `rx_burst` (up to 32 frames) -> Ethernet/ARP/IPv4/ICMP handled in place by the
//! sans-IO [`tcp::iface::Iface`] -> replies and the iface's own frames (ARP requests, pings)
//! batched -> `tx_burst`. Time is read once per iteration from the TSC ([`crate::clock`]).

use crate::arpbus::ArpBus;
use crate::clock::TscClock;
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::netstack::{Netstack, NetstackStats, SendReport, Services};
use crate::port::{MAX_BURST, Queue};
use crate::signal;
use crate::stats::{LcoreStats, SharedLcoreStats};
use netcore::{Duration, Instant};
use tcp::iface::{Iface, IfaceConfig, IfaceEvent, IfaceStats, RxAction};
use tcp::{TcpConfig, TcpStats};

/// What the loop does with received frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopMode {
    /// Full processing: L2/L3 (and, later, TCP and iWARP).
    Stack,
    /// Swap the MAC addresses and send every frame back (the poll-loop micro-benchmark).
    Echo,
}

/// A diagnostic ping to run once the link is up.
#[derive(Debug, Clone, Copy)]
pub struct PingRequest {
    /// Destination IPv4 address.
    pub dst: [u8; 4],
    /// Number of echo requests.
    pub count: u32,
    /// ICMP payload size.
    pub size: usize,
    /// Interval between requests.
    pub interval: Duration,
    /// Stop the whole daemon when the ping is done.
    pub exit_when_done: bool,
}

/// Outcome of a diagnostic ping.
#[derive(Debug, Clone, Default)]
pub struct PingResult {
    /// Requests sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// Round-trip times of the replies.
    pub rtts: Vec<Duration>,
}

/// Everything one dataplane thread needs.
#[derive(Debug, Clone)]
pub struct LcoreSetup {
    /// Thread index (0..n).
    pub index: usize,
    /// The clock, shared by all threads (one origin).
    pub clock: TscClock,
    /// Our addresses on that port.
    pub iface: IfaceConfig,
    /// Processing mode.
    pub mode: LoopMode,
    /// `sched_yield` after an iteration that received and sent nothing (a core shared with
    /// another polling thread); otherwise spin.
    pub idle_yield: bool,
    /// How long the loop holds its frames after a TX burst the device took only part of
    /// (its ring full) before it offers them again ([`TxBackoff`]; zero: at every iteration).
    pub tx_backoff: Duration,
    /// Optional diagnostic ping.
    pub ping: Option<PingRequest>,
    /// TCP configuration.
    pub tcp: TcpConfig,
    /// Diagnostic TCP services.
    pub services: Services,
    /// Stop the daemon when the sender job is done.
    pub exit_when_sent: bool,
    /// Secret for ISNs and pattern seeds (random per run).
    pub secret: [u8; 16],
    /// This thread's end of the RDMA engine queues (`None`: no RDMA).
    pub rdma: Option<crate::rdma::RdmaSetup>,
    /// The diagnostic RDMA service to run on this thread.
    pub diag_rdma: Option<crate::rdma::diag::DiagRdmaConfig>,
    /// With several queues: ARP frames shared with the other threads (see [`crate::arpbus`]).
    pub arp_bus: Option<ArpBus>,
}

/// What a thread reports when it stops.
#[derive(Debug, Clone, Default)]
pub struct LcoreReport {
    /// Loop counters.
    pub stats: LcoreStats,
    /// L2/L3 counters.
    pub iface: IfaceStats,
    /// Ping outcome, if one was asked for.
    pub ping: Option<PingResult>,
    /// TCP counters.
    pub tcp: TcpStats,
    /// Glue counters.
    pub netstack: NetstackStats,
    /// Sender outcome, if a sender ran.
    pub send: Option<SendReport>,
    /// Diagnostic RDMA service outcome, if it ran.
    pub rdma_diag: Option<crate::rdma::diag::DiagRdmaReport>,
}

/// Frames kept for the next iteration when the TX queue is full: twice the point at which
/// TCP connections stop being asked for segments ([`crate::netstack::TX_QUEUE_LIMIT`]), so
/// only frames TCP keeps no state for can ever be dropped here.
const TX_BACKLOG: usize = 2 * crate::netstack::TX_QUEUE_LIMIT;

/// RX bursts read per iteration at most, before timers run (while each one comes back full).
const RX_BURSTS: usize = 8;

/// Iterations in a row whose timers may wait for a still-full RX queue ([`TimerGate`]).
const MAX_TIMER_DEFER: u32 = 4;

/// How often counters are published for readers.
const PUBLISH_EVERY: u64 = 1024;

/// Run the loop on `q` (owned: no other thread can poll it) until a stop is requested.
/// `shared` is updated every few iterations.
pub fn run(setup: &LcoreSetup, q: Queue, pool: &Mempool, shared: &SharedLcoreStats) -> LcoreReport {
    let mut l = Lcore::new(setup, q, pool);
    while !signal::stop_requested() {
        let idle = l.step();
        if l.st.loops.is_multiple_of(PUBLISH_EVERY) {
            l.publish(shared);
        }
        if idle && setup.idle_yield {
            // Let a polling thread sharing this core run (returns at once when none waits).
            std::thread::yield_now();
        }
    }
    l.finish(shared)
}

/// The state of one dataplane loop: one [`Lcore::step`] is one iteration. [`run`] steps it on
/// its own thread; [`crate::pump::Pump`] lets an application thread step it too (embedded
/// run-to-completion mode), one thread at a time.
pub struct Lcore {
    setup: LcoreSetup,
    q: Queue,
    pool: Mempool,
    ns: Netstack,
    st: LcoreStats,
    rx: Vec<Mbuf>,
    tx: Vec<Mbuf>,
    scratch: Vec<u8>,
    arp_in: Vec<Box<[u8]>>,
    ping: Option<PingResult>,
    ping_started: bool,
    next_link_check: Instant,
    gate: TimerGate,
    backoff: TxBackoff,
    /// The previous iteration's start, if it was busy (received or sent).
    busy_since: Option<Instant>,
}

impl std::fmt::Debug for Lcore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lcore")
            .field("index", &self.setup.index)
            .field("loops", &self.st.loops)
            .finish_non_exhaustive()
    }
}

impl Lcore {
    /// The loop state for `q`.
    pub fn new(setup: &LcoreSetup, q: Queue, pool: &Mempool) -> Lcore {
        let mut ns = Netstack::new(
            Iface::new(setup.iface.clone()),
            setup.tcp.clone(),
            setup.services.clone(),
            setup.secret,
        );
        if let Some(r) = &setup.rdma {
            let diag = setup.diag_rdma.clone().map(|d| {
                crate::rdma::diag::DiagRdma::new(d, r.mem.clone(), r.ids.clone(), setup.index)
            });
            // Zero-copy transmit computes the software TCP checksum in the FPDU's CRC pass.
            let zero_copy = setup.tcp.checksum == tcp::ChecksumMode::Software;
            let mut e = crate::rdma::engine::Engine::new(r.clone(), diag, zero_copy);
            // Payload by reference only where the device takes chains and does not copy
            // frames with the CPU anyway (`[mpa] tx_payload`); otherwise a chain would be
            // copied before the device sees it: copy the payload at once.
            let by_ref = r.cfg.tx_payload.by_ref(q.info().is_virtual);
            e.set_copy_payload(!by_ref || !q.info().tx_multi_seg);
            ns.rdma = Some(e);
        }
        Lcore {
            setup: setup.clone(),
            q,
            pool: pool.clone(),
            ns,
            st: LcoreStats::default(),
            rx: Vec::with_capacity(MAX_BURST),
            tx: Vec::with_capacity(4 * MAX_BURST),
            scratch: vec![0u8; 16 * 1024],
            arp_in: Vec::new(),
            ping: setup.ping.map(|_| PingResult::default()),
            ping_started: false,
            next_link_check: Instant::ZERO,
            gate: TimerGate::default(),
            backoff: TxBackoff::new(setup.tx_backoff),
            busy_since: None,
        }
    }

    /// One iteration; returns whether it was idle (received and sent nothing).
    pub fn step(&mut self) -> bool {
        let now = self.setup.clock.now();
        self.step_at(now)
    }

    /// [`Lcore::step`] at `now`, a reading of this loop's clock taken just before by the
    /// caller that holds the loop (one that read the clock anyway saves a read:
    /// [`crate::pump::Pump::poll`]). Readings must not go backwards from step to step.
    pub fn step_at(&mut self, now: Instant) -> bool {
        let Lcore {
            setup,
            q,
            pool,
            ns,
            st,
            rx,
            tx,
            scratch,
            arp_in,
            ping,
            ping_started,
            next_link_check,
            gate,
            backoff,
            busy_since,
        } = self;
        let pool = &*pool;
        st.loops += 1;
        if let Some(t) = busy_since.take() {
            st.busy_ns += u64::try_from((now - t).as_nanos()).unwrap_or(u64::MAX);
        }

        // Start the diagnostic ping once the link is up (memif needs both ends attached).
        if let (Some(req), false) = (setup.ping, *ping_started)
            && now >= *next_link_check
        {
            *next_link_check = now + Duration::from_millis(100);
            if q.link_up() {
                tracing::info!(dst = ?req.dst, count = req.count, "link up, starting ping");
                ns.iface
                    .start_ping(now, req.dst, req.count, req.size, req.interval);
                *ping_started = true;
            }
        }

        // Drain RX before timers: after a pause (this thread descheduled on a shared core)
        // the queue may hold the very ACKs whose absence the timers would otherwise act on
        // (a spurious RTO, RFC 6298 §5, for data the peer already acknowledged).
        let mut n = 0;
        let mut full = false;
        for _ in 0..RX_BURSTS {
            let got = q.rx_burst(rx);
            n += got;
            st.rx_bursts += u64::from(got > 0);
            full = got == MAX_BURST;
            handle_rx(setup, ns, st, now, rx, scratch, pool, tx);
            if !full {
                break;
            }
        }
        st.rx_packets += n as u64;
        let run_timers = gate.timers_due(full);
        st.timers_deferred += u64::from(!run_timers);

        if setup.mode == LoopMode::Stack {
            if let Some(bus) = &setup.arp_bus {
                bus.take(setup.index, arp_in);
                for f in arp_in.drain(..) {
                    st.arp_observed += 1;
                    ns.iface.observe_arp(now, &f);
                }
            }
            // The iface has frames of its own (ARP requests and retries, ping requests) only
            // when one of its timers is due; a fresh resolution is due at once.
            if ns.iface.poll_timeout().is_some_and(|t| t <= now) {
                while let Some(len) = ns.iface.poll_transmit(now, scratch) {
                    match pool.alloc_copy(&scratch[..len]) {
                        Some(m) => tx.push(m),
                        None => st.drop_no_mbuf += 1,
                    }
                }
            }
            while let Some(ev) = ns.iface.poll_event() {
                handle_event(ev, ping, setup.ping.as_ref());
            }
            ns.poll_timers(now, pool, tx, run_timers);
            if setup.exit_when_sent && ns.send_done() {
                tracing::info!(report = ?ns.send_report, "sender done");
                signal::request_stop();
            }
        }

        let idle = n == 0 && tx.is_empty();
        st.idle_loops += u64::from(idle);
        if !idle {
            *busy_since = Some(now);
        }
        if !tx.is_empty() {
            if backoff.may_send(now) {
                let (sent, bytes) = q.tx_burst_counted(tx);
                st.tx_packets += sent as u64;
                st.tx_bytes += bytes;
                st.tx_bursts += 1;
                st.tx_short += u64::from(!tx.is_empty());
                st.tx_empty += u64::from(sent == 0);
                st.tx_backlog_sum += tx.len() as u64;
                backoff.sent(now, !tx.is_empty());
            } else {
                st.tx_held += 1;
            }
            // A full TX queue is back-pressure, not loss: keep the frames for the next
            // iteration, up to a bound; drop (and count) only beyond it.
            if tx.len() > TX_BACKLOG {
                st.drop_tx_full += (tx.len() - TX_BACKLOG) as u64;
                tx.truncate(TX_BACKLOG);
            }
        }

        idle
    }

    /// Publish the counters for readers, with a sample of the busiest TCP connection.
    pub fn publish(&mut self, shared: &SharedLcoreStats) {
        sample_tcp(&self.ns, &mut self.st);
        publish(&mut self.st, &self.q, shared);
    }

    /// The EAL this loop's pool belongs to.
    pub fn eal(&self) -> &crate::eal::Eal {
        self.pool.eal()
    }

    /// Whether this loop may yield when idle ([`LcoreSetup::idle_yield`]).
    pub fn idle_yield(&self) -> bool {
        self.setup.idle_yield
    }

    /// The loop stopped: publish the last counters and report.
    pub fn finish(self, shared: &SharedLcoreStats) -> LcoreReport {
        let Lcore {
            setup,
            mut q,
            pool,
            mut ns,
            mut st,
            mut tx,
            ping,
            ..
        } = self;
        if setup.mode == LoopMode::Stack {
            reset_on_stop(&mut ns, &setup.clock, &mut q, &pool, &mut tx);
        }
        publish(&mut st, &q, shared);
        if let Some(e) = &ns.rdma {
            e.publish();
        }
        LcoreReport {
            stats: st,
            iface: ns.iface.stats().clone(),
            ping,
            tcp: ns.tcp_stats(),
            netstack: ns.stats,
            send: setup.services.send.as_ref().map(|_| ns.send_report.clone()),
            rdma_diag: ns
                .rdma
                .as_ref()
                .and_then(|e| e.diag.as_ref())
                .map(|d| d.report.clone()),
        }
    }
}

/// How long a stopping thread keeps polling so its RSTs reach the wire.
const STOP_DRAIN: Duration = Duration::from_millis(50);

/// The loop stopped: reset every open connection (TCP and iWARP alike) and put the RSTs on
/// the wire, so peers' QPs go to ERROR at once (their applications see flushed completions
/// and a disconnect) instead of hanging until a keepalive or a retransmission timeout.
fn reset_on_stop(
    ns: &mut Netstack,
    clock: &TscClock,
    q: &mut Queue,
    pool: &Mempool,
    tx: &mut Vec<Mbuf>,
) {
    let open = ns.abort_all();
    if open == 0 {
        return;
    }
    tracing::info!(connections = open, "stopping: resetting open connections");
    let deadline = clock.now() + STOP_DRAIN;
    loop {
        let now = clock.now();
        ns.poll(now, pool, tx);
        if !tx.is_empty() {
            q.tx_burst(tx);
        }
        if (tx.is_empty() && !ns.has_pending_output()) || now >= deadline {
            break;
        }
        std::thread::yield_now();
    }
    if !tx.is_empty() {
        tracing::warn!(frames = tx.len(), "stopping: frames not sent");
    }
}

/// Handle the frames of one RX burst (all of `rx`).
#[allow(clippy::too_many_arguments)]
fn handle_rx(
    setup: &LcoreSetup,
    ns: &mut Netstack,
    st: &mut LcoreStats,
    now: Instant,
    rx: &mut Vec<Mbuf>,
    scratch: &mut [u8],
    pool: &Mempool,
    tx: &mut Vec<Mbuf>,
) {
    for m in rx.drain(..) {
        st.rx_bytes += m.pkt_len() as u64;
        let Some(mut m) = single_segment(m, pool, st) else {
            continue;
        };
        if let Some(bus) = &setup.arp_bus
            && ArpBus::is_arp(m.data())
        {
            st.arp_shared += bus.share(setup.index, m.data()) as u64;
        }
        match setup.mode {
            LoopMode::Echo => {
                if let Some(d) = m.data_mut()
                    && d.len() >= 12
                {
                    let (dst, src) = d.split_at_mut(6);
                    dst.swap_with_slice(&mut src[..6]);
                }
                st.echoed += 1;
                tx.push(m);
            }
            LoopMode::Stack => match ns.handle_frame(now, m, scratch, pool, tx) {
                RxAction::Tcp { .. } => st.tcp_segments += 1,
                RxAction::Dropped(_) => st.iface_drops += 1,
                RxAction::Reply(_) | RxAction::Consumed => {}
            },
        }
    }
}

/// Whether this iteration runs the stack's timers: not while the RX queue still holds frames
/// (the last burst was full even after [`RX_BURSTS`] bursts), since they may acknowledge the
/// data a retransmission timer is about to resend; but never for more than
/// [`MAX_TIMER_DEFER`] iterations in a row, so a flood cannot starve the timers.
#[derive(Debug, Default)]
struct TimerGate {
    deferred: u32,
}

impl TimerGate {
    fn timers_due(&mut self, rx_full: bool) -> bool {
        if rx_full && self.deferred < MAX_TIMER_DEFER {
            self.deferred += 1;
            return false;
        }
        self.deferred = 0;
        true
    }
}

/// After a TX burst the device took only part of (its ring full), the loop may hold its
/// frames for a while (`dataplane.tx_backoff_ns`) instead of offering them again at every
/// iteration; it receives and processes meanwhile, and the frames keep their order (new ones
/// queue behind them). A burst taken whole, or the hold running out, ends it: no frame waits
/// longer than the hold for the device, and a loop whose ring never fills (latency) never
/// holds. On net_memif it turns a sender's retries of a few slots each into bursts of ~60,
/// and its backlog behind the full ring shrinks ~10x, but the rate moved within the noise
/// (issue #8, BENCHMARKS.md §4): off by default.
#[derive(Debug)]
struct TxBackoff {
    hold: Duration,
    until: Option<Instant>,
}

impl TxBackoff {
    fn new(hold: Duration) -> Self {
        TxBackoff { hold, until: None }
    }

    /// Whether the frames may be offered to the device at `now`.
    #[inline]
    fn may_send(&mut self, now: Instant) -> bool {
        match self.until {
            Some(t) if now < t => false,
            _ => {
                self.until = None;
                true
            }
        }
    }

    /// A burst was offered at `now`; `short`: the device left some of it.
    #[inline]
    fn sent(&mut self, now: Instant, short: bool) {
        if short && self.hold > Duration::ZERO {
            self.until = Some(now + self.hold);
        }
    }
}

/// Add one sample of the connection with the most unacknowledged bytes to the `tcp_*`
/// gauges (where a bulk sender's time goes: RTT, window, what limits it).
fn sample_tcp(ns: &Netstack, st: &mut LcoreStats) {
    let tcp = ns.tcp();
    let busiest = tcp
        .handles()
        .into_iter()
        .filter_map(|h| tcp.conn(h))
        .map(|c| (c.queued_offset().saturating_sub(c.acked_offset()), c))
        .filter(|(unacked, _)| *unacked > 0)
        .max_by_key(|(unacked, _)| *unacked);
    let Some((unacked, c)) = busiest else {
        return;
    };
    let flight = c.bytes_in_flight();
    let mss = u64::from(c.emss());
    let srtt = c
        .srtt()
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    st.tcp_samples += 1;
    st.tcp_srtt_us_sum += srtt;
    st.tcp_srtt_over_1ms += u64::from(srtt > 1000);
    st.tcp_cwnd_sum += c.cwnd();
    st.tcp_flight_sum += flight;
    st.tcp_unsent_sum += unacked.saturating_sub(flight);
    st.tcp_cwnd_limited += u64::from(flight + mss > c.cwnd());
    st.tcp_rwnd_limited += u64::from(flight + mss > c.send_window());
}

fn publish(st: &mut LcoreStats, q: &Queue, shared: &SharedLcoreStats) {
    let qs = q.stats();
    st.tx_linearized = qs.tx_linearized;
    st.drop_tx_linearize = qs.tx_linearize_failed;
    shared.publish(st);
}

/// A received frame in one segment: a chain (jumbo frame on a small data room, scatter RX) is
/// copied into one buffer, so the stack can hold it as one contiguous frame; counted.
#[inline]
fn single_segment(m: Mbuf, pool: &Mempool, st: &mut LcoreStats) -> Option<Mbuf> {
    if m.nb_segs() == 1 {
        return Some(m);
    }
    match m.linearize(pool) {
        Some(flat) => {
            st.rx_linearized += 1;
            Some(flat)
        }
        None => {
            st.drop_rx_chain += 1;
            None
        }
    }
}

fn handle_event(ev: IfaceEvent, ping: &mut Option<PingResult>, req: Option<&PingRequest>) {
    match ev {
        IfaceEvent::EchoReply { from, seq, rtt, .. } => {
            tracing::info!(?from, seq, rtt_us = rtt.as_secs_f64() * 1e6, "echo reply");
            if let Some(p) = ping.as_mut() {
                p.received += 1;
                p.rtts.push(rtt);
            }
        }
        IfaceEvent::PingDone { sent, received, .. } => {
            tracing::info!(sent, received, "ping done");
            if let Some(p) = ping.as_mut() {
                p.sent = sent;
                p.received = received;
            }
            if req.is_some_and(|r| r.exit_when_done) {
                signal::request_stop();
            }
        }
        other => tracing::info!(event = ?other, "iface event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timers wait while RX bursts come back full (frames still queued may hold the ACKs an
    /// RTO would otherwise ignore), for at most MAX_TIMER_DEFER iterations in a row.
    #[test]
    fn timers_wait_for_a_full_rx_queue_but_not_forever() {
        let mut g = TimerGate::default();
        assert!(g.timers_due(false));
        for _ in 0..MAX_TIMER_DEFER {
            assert!(!g.timers_due(true));
        }
        assert!(g.timers_due(true), "a flood must not starve the timers");
        assert!(!g.timers_due(true));
        assert!(g.timers_due(false));
        assert!(!g.timers_due(true));
    }

    fn at(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    /// Without a hold the frames are offered at every iteration, full ring or not.
    #[test]
    fn no_hold_offers_at_every_iteration() {
        let mut b = TxBackoff::new(Duration::ZERO);
        for t in 0..10 {
            assert!(b.may_send(at(t)));
            b.sent(at(t), true);
        }
    }

    /// A short burst holds the frames until the hold has passed, not longer; a burst taken
    /// whole holds nothing, and each short burst starts a new hold from its own time.
    #[test]
    fn a_short_burst_holds_for_the_hold_only() {
        let mut b = TxBackoff::new(Duration::from_micros(5));
        assert!(b.may_send(at(0)));
        b.sent(at(0), false);
        assert!(b.may_send(at(0)), "a whole burst does not hold");
        b.sent(at(1), true);
        for t in 1..6 {
            assert!(!b.may_send(at(t)), "held at {t} us");
        }
        assert!(b.may_send(at(6)), "the hold ends");
        assert!(b.may_send(at(6)));
        b.sent(at(6), true);
        assert!(!b.may_send(at(10)));
        assert!(b.may_send(at(11)));
        b.sent(at(11), false);
        assert!(b.may_send(at(11)));
        // A clock jump far ahead (a descheduled thread) ends a hold at once.
        b.sent(at(12), true);
        assert!(b.may_send(at(1_000_000)));
    }
}
