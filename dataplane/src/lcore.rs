//! The run-to-completion poll loop of one dataplane thread.
//!
//! One iteration: `rx_burst` (up to 32 frames) -> Ethernet/ARP/IPv4/ICMP handled in place by the
//! sans-IO [`tcp::iface::Iface`] -> replies and the iface's own frames (ARP requests, pings)
//! batched -> `tx_burst`. Time is read once per iteration from the TSC ([`crate::clock`]).

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

/// Frames kept for the next iteration when the TX queue is full.
const TX_BACKLOG: usize = 4096;

/// How often counters are published for readers.
const PUBLISH_EVERY: u64 = 1024;

/// Run the loop on `q` (owned: no other thread can poll it) until a stop is requested.
/// `shared` is updated every few iterations.
pub fn run(
    setup: &LcoreSetup,
    mut q: Queue,
    pool: &Mempool,
    shared: &SharedLcoreStats,
) -> LcoreReport {
    let clock = setup.clock;
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
        ns.rdma = Some(crate::rdma::engine::Engine::new(r.clone(), diag, zero_copy));
    }
    let mut st = LcoreStats::default();
    let mut rx: Vec<Mbuf> = Vec::with_capacity(MAX_BURST);
    let mut tx: Vec<Mbuf> = Vec::with_capacity(4 * MAX_BURST);
    let mut scratch = vec![0u8; 16 * 1024];
    let mut ping = setup.ping.map(|_| PingResult::default());
    let mut ping_started = false;
    let mut next_link_check = Instant::ZERO;

    while !signal::stop_requested() {
        st.loops += 1;
        let now = clock.now();

        // Start the diagnostic ping once the link is up (memif needs both ends attached).
        if let (Some(req), false) = (setup.ping, ping_started)
            && now >= next_link_check
        {
            next_link_check = now + Duration::from_millis(100);
            if q.link_up() {
                tracing::info!(dst = ?req.dst, count = req.count, "link up, starting ping");
                ns.iface
                    .start_ping(now, req.dst, req.count, req.size, req.interval);
                ping_started = true;
            }
        }

        let n = q.rx_burst(&mut rx);
        st.rx_packets += n as u64;
        for m in rx.drain(..) {
            st.rx_bytes += m.pkt_len() as u64;
            let Some(mut m) = single_segment(m, pool, &mut st) else {
                continue;
            };
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
                LoopMode::Stack => match ns.handle_frame(now, m, &mut scratch, pool, &mut tx) {
                    RxAction::Tcp { .. } => st.tcp_segments += 1,
                    RxAction::Dropped(_) => st.iface_drops += 1,
                    RxAction::Reply(_) | RxAction::Consumed => {}
                },
            }
        }

        if setup.mode == LoopMode::Stack {
            // The iface has frames of its own (ARP requests and retries, ping requests) only
            // when one of its timers is due; a fresh resolution is due at once.
            if ns.iface.poll_timeout().is_some_and(|t| t <= now) {
                while let Some(len) = ns.iface.poll_transmit(now, &mut scratch) {
                    match pool.alloc_copy(&scratch[..len]) {
                        Some(m) => tx.push(m),
                        None => st.drop_no_mbuf += 1,
                    }
                }
            }
            while let Some(ev) = ns.iface.poll_event() {
                handle_event(ev, &mut ping, setup.ping.as_ref());
            }
            ns.poll(now, pool, &mut tx);
            if setup.exit_when_sent && ns.send_done() {
                tracing::info!(report = ?ns.send_report, "sender done");
                signal::request_stop();
            }
        }

        if !tx.is_empty() {
            let before: u64 = tx.iter().map(|m| m.pkt_len() as u64).sum();
            let sent = q.tx_burst(&mut tx);
            st.tx_packets += sent as u64;
            st.tx_bytes += before - tx.iter().map(|m| m.pkt_len() as u64).sum::<u64>();
            // A full TX queue is back-pressure, not loss: keep the frames for the next
            // iteration, up to a bound; drop (and count) only beyond it.
            if tx.len() > TX_BACKLOG {
                st.drop_tx_full += (tx.len() - TX_BACKLOG) as u64;
                tx.truncate(TX_BACKLOG);
            }
        }

        if st.loops % PUBLISH_EVERY == 0 {
            publish(&mut st, &q, shared);
        }
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
