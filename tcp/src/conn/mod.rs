//! One TCP connection as a sans-IO state machine.
//!
//! Heads up! Before editing this module read at least RFC 9293 §3.10 (event processing),
//! RFC 5961 (blind in-window attacks), RFC 7323 (window scale, timestamps, PAWS), RFC 2018 and
//! RFC 6675 (SACK), RFC 8985 (RACK-TLP), RFC 6298 (RTO), RFC 5681 and RFC 6582 (congestion
//! control, NewReno).
//!
//! # API shape (quinn-proto style)
//! * inputs: [`Connection::handle_segment`], [`Connection::handle_timeout`];
//! * mutators: [`Connection::send`], [`Connection::send_record`], [`Connection::close`],
//!   [`Connection::abort`];
//! * outputs, polled in this order after every input: [`Connection::poll_transmit`] (until
//!   `None`, or a segment marked [`Transmit::last`]; [`Connection::poll_nothing`] answers a
//!   poll that would surely find nothing without a buffer), [`Connection::poll_timeout`],
//!   [`Connection::poll_event`], [`Connection::poll_readable`].
//!
//! # Zero copy
//! Received in-order payload is handed out as `(B, Range<usize>)`: the caller's own segment
//! buffer (an mbuf in the dataplane, `Vec<u8>` in tests) and the payload's byte range in it.
//! On the send side the connection only tracks stream offsets; whenever it (re)transmits it
//! asks the owner's [`SendSource`] for the bytes, so a retransmission re-reads the application
//! memory and no private copy exists.
//!
//! # Records (one FPDU per segment)
//! [`Connection::send_record`] marks a record boundary after the bytes it queues; a segment
//! never straddles a boundary. A record longer than [`Connection::emss`] is cut into EMSS-sized
//! segments. MPA should size FPDUs to `emss()` so each FPDU travels in exactly one segment.
//!
//! # Conformance notes (deliberate choices and deviations)
//! * Zero-window probes are `SND.UNA - 1` without data (as Linux), not one byte of data
//!   (RFC 9293 §3.8.6.1 allows either in effect: the peer must answer with its window).
//! * Segments without data carry SEQ = SND.MAX even after an RTO rewound SND.NXT, so the peer
//!   never sees an old, unacceptable SEQ on an ACK (Linux `tcp_acceptable_seq`).
//! * A RST in TIME-WAIT closes the connection (RFC 9293 §3.10.7.4; RFC 1337 discusses the
//!   hazard).
//! * PAWS (RFC 7323 §5.3) without the 24-day idle exception; TSval ticks in milliseconds from
//!   a per-connection offset (RFC 7323 §5.4).
//! * RTT is sampled once per flight with Karn's rule (RFC 6298 §3), nanosecond resolution,
//!   rather than from TSecr (RFC 7323 §4 makes that optional).
//! * With SACK, loss detection is RACK-TLP (RFC 8985, [`crate::TcpConfig::rack_tlp`]): a
//!   per-segment transmission log marks segments lost by time (including lost
//!   retransmissions), a reordering timer waits out `reo_wnd`, tail loss probes replace most
//!   tail RTOs, and an RTO marks everything unSACKed lost instead of going back N (SACK state
//!   is dropped only if the receiver reneged, RFC 2018 §8). Retransmission is limited by
//!   RFC 6675 pipe < cwnd, with cwnd set per ACK by PRR (RFC 6937, [`crate::TcpConfig::prr`])
//!   for loss-based congestion control; BBR conserves packets itself. The PTO adds 2 ms when more than one segment is in flight
//!   (as Linux), so a peer's ACK scheduling jitter does not fire it, and it is also armed
//!   while SACKed data is outstanding outside recovery (RFC 8985 §7.2 says not to).
//! * Without RACK-TLP, SACK loss recovery follows RFC 6675 with IsLost() simplified to "a hole
//!   below the highest SACKed byte", plus limited transmit (RFC 3042), early retransmit
//!   (RFC 5827) and detection of a lost retransmission of the head hole. D-SACK generation
//!   (RFC 2883) either way; received D-SACKs widen RACK's reordering window.
//! * ACK policy: the ACK decision is taken when the owner polls (once per receive burst in the
//!   dataplane, as Linux acknowledges a GRO batch): an ACK for every second segment of a
//!   burst, at once for out-of-order data and hole fills, else the delayed-ACK timer (RFC
//!   5681 §4.2, RFC 9293 §3.8.6.3). With SACK, ACKs that would only change the SACK blocks
//!   are compressed as Linux does (`tcp_comp_sack_nr`, [`crate::TcpConfig::sack_compress_segments`]):
//!   three at once per RCV.NXT, then one per compression delay or per so many held segments.
//!   Without SACK every out-of-order segment draws its pure duplicate ACK.
//! * The acceptability test uses max(advertised window, current free space).
//! * Urgent data is ignored (RFC 9293 §3.8.5 / RFC 6093 recommend not using it).
//! * SYN cookies (RFC 4987 §3.6) once `syn_backlog` half-open connections wait on a listener;
//!   the accept queue is bounded by [`crate::Endpoint::set_backlog`].
//!
//! # Sequence space
//! Internally sequence numbers are 64-bit offsets from the ISS (send side: SYN = 0, stream byte
//! `k` = `1 + k`, FIN = `1 + stream length`) and from the IRS (receive side), converted to and
//! from the 32-bit wire values at the edges. This removes wrap-around reasoning from the core.

pub(crate) mod input;
mod output;
#[cfg(test)]
pub(crate) use output::NO_SHORTCUT;
#[cfg(test)]
pub(crate) use timer::ARM_EACH_SEGMENT;
mod timer;

use std::collections::VecDeque;
use std::ops::Range;

use netcore::{Duration, Instant, Seq32};
use smoltcp::wire::Ipv4Address;

use crate::cc::Congestion;
use crate::chrono::{Chrono, Limit};
use crate::config::TcpConfig;
use crate::cwv::CwndUse;
use crate::rack::Rack;
use crate::reasm::RecvQueue;
use crate::rtt::RttEstimator;
use crate::sack::Scoreboard;
use crate::stats::TcpStats;
use crate::wire::{OutHeader, SegError, SegmentHeader, parse_segment};

/// The receive buffer type: the caller's segment buffer (mbuf, `Vec<u8>`...).
pub trait SegBuf: AsRef<[u8]> {}
impl<T: AsRef<[u8]>> SegBuf for T {}

/// Where the bytes of the send stream live. The connection calls `read` each time it emits
/// payload (first transmission and every retransmission).
pub trait SendSource {
    /// Fill `dst` with the stream bytes starting at `stream_offset` (0 = first byte sent).
    /// The connection only asks for bytes queued with `send`/`send_record` and not yet acked.
    fn read(&mut self, stream_offset: u64, dst: &mut [u8]);

    /// [`crate::wire::ones_complement_sum`] of `len` stream bytes at `stream_offset`, for the
    /// software TCP checksum of [`Connection::poll_transmit_header`]. The default reads the
    /// bytes through `read` in chunks; an owner with direct access to the memory should sum in
    /// place instead.
    fn checksum(&mut self, stream_offset: u64, len: usize) -> u16 {
        checksum_by_read(self, stream_offset, len)
    }
}

/// [`SendSource::checksum`] computed from [`SendSource::read`]: `len` bytes at
/// `stream_offset` read in chunks and summed (the default; also for an owner whose bytes
/// exist only once read, such as CRCs computed over the copy).
pub fn checksum_by_read<S: SendSource + ?Sized>(
    src: &mut S,
    stream_offset: u64,
    len: usize,
) -> u16 {
    let mut chunk = [0u8; 2048];
    let mut sum = 0u16;
    let mut done = 0usize;
    while done < len {
        let n = (len - done).min(chunk.len());
        src.read(stream_offset + done as u64, &mut chunk[..n]);
        // Chunks are even-sized except the last, so word alignment is kept (RFC 1071 §2(B)).
        sum = crate::wire::combine(sum, crate::wire::ones_complement_sum(&chunk[..n]));
        done += n;
    }
    sum
}

impl<F: FnMut(u64, &mut [u8])> SendSource for F {
    fn read(&mut self, stream_offset: u64, dst: &mut [u8]) {
        self(stream_offset, dst)
    }
}

/// A source with no bytes, for connections that never send payload.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoData;

impl SendSource for NoData {
    fn read(&mut self, _: u64, dst: &mut [u8]) {
        dst.fill(0);
    }
}

/// A received segment: parsed header plus the buffer that holds it.
#[derive(Debug)]
pub struct Segment<B> {
    /// Parsed header; `header.payload` indexes `buf`.
    pub header: SegmentHeader,
    /// The caller's buffer.
    pub buf: B,
}

impl<B: SegBuf> Segment<B> {
    /// Parse the TCP segment at `buf[range]` from `src` to `dst`. On error the buffer is
    /// handed back.
    pub fn parse(
        buf: B,
        range: Range<usize>,
        src: Ipv4Address,
        dst: Ipv4Address,
        mode: crate::config::ChecksumMode,
    ) -> Result<Self, (SegError, B)> {
        match parse_segment(buf.as_ref(), range, src, dst, mode) {
            Ok(header) => Ok(Segment { header, buf }),
            Err(e) => Err((e, buf)),
        }
    }
}

/// RFC 9293 §3.3.2 connection states (LISTEN lives in [`crate::Endpoint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No connection (initial for nothing; final after close, reset or timeout).
    Closed,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received and SYN-ACK sent.
    SynReceived,
    /// Data transfer.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed simultaneously; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Waiting out old duplicates (2*MSL).
    TimeWait,
}

impl State {
    /// Whether the handshake completed (RFC 9293 "synchronized states").
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::SynSent | State::SynReceived)
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close, both FINs exchanged (or TIME-WAIT expired).
    Normal,
    /// The peer reset the connection.
    Reset,
    /// Retransmission or keepalive limit reached.
    Timeout,
    /// We aborted (RST sent).
    Aborted,
}

/// Something the owner should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// Stream bytes below `upto` (stream offset) are acknowledged: their memory may be reused.
    Acked {
        /// Stream offset up to which everything is acknowledged.
        upto: u64,
    },
    /// The peer sent FIN: no more data will arrive after what is readable.
    PeerClosed,
    /// The connection is gone.
    Closed(CloseReason),
}

/// Errors from the send API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The connection cannot send (closing or closed).
    InvalidState,
    /// Not enough send buffer space for the whole record.
    NoSpace,
}

/// A segment written by [`Connection::poll_transmit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written at the start of the caller's buffer (TCP header + payload).
    pub len: usize,
    /// TCP header length within those bytes.
    pub header_len: usize,
    /// Stream offsets of the payload (empty if none).
    pub payload: Range<u64>,
    /// IPv4 source address for the IP header.
    pub src: Ipv4Address,
    /// IPv4 destination address for the IP header.
    pub dst: Ipv4Address,
    /// Nothing follows now: the next poll would return `None`, and what it records (the
    /// chrono state, window use, the application-limited mark, timers) was recorded with this
    /// segment, at the same `now`. The caller may stop polling (polling again is harmless).
    /// False when unsure.
    pub last: bool,
}

/// A 4-tuple side: address and port.
pub type SockAddr = (Ipv4Address, u16);

/// One TCP connection. `B` is the caller's receive buffer type.
#[derive(Debug)]
pub struct Connection<B> {
    cfg: TcpConfig,
    state: State,
    local: SockAddr,
    remote: SockAddr,
    passive: bool,

    // Send sequence space (absolute offsets from ISS).
    iss: Seq32,
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    snd_wnd: u64,
    max_snd_wnd: u64,
    snd_wl1: Seq32,
    snd_wl2: Seq32,
    snd_wscale: u8,
    ws_ok: bool,
    app_end: u64,
    fin_queued: bool,
    records: VecDeque<u64>,
    /// Records dropped from the front since the connection began (see `next_boundary`).
    records_popped: u64,
    /// The index (counted like `records_popped`) `next_boundary` last found.
    records_hint: std::cell::Cell<u64>,
    syn_needed: bool,

    // Receive sequence space (absolute offsets from IRS).
    irs: Seq32,
    rcv_nxt: u64,
    rcv_adv: u64,
    rcv_wscale: u8,
    rcv_fin: Option<u64>,
    /// A duplicate range to report as the first SACK block of the next ACK (RFC 2883).
    dsack: Option<(u64, u64)>,
    fin_delivered: bool,
    rx: RecvQueue<B>,
    /// More segments the owner lets this connection hold out of order (the endpoint's
    /// per-thread budget; unlimited for a connection used on its own).
    ooo_budget: usize,
    last_ack_sent: u64,

    // Negotiated options.
    peer_mss: u16,
    sack_ok: bool,
    ts_ok: bool,
    ts_recent: u32,
    ts_offset: u32,

    // Loss recovery and congestion control.
    rtt: RttEstimator,
    rtt_probe: Option<(u64, Instant)>,
    cc: Congestion,
    sb: Scoreboard,
    dupacks: u32,
    in_recovery: bool,
    recover: u64,
    rtx_next: u64,
    newreno_rtx: bool,
    /// SND.MAX when the hole at SND.UNA was last retransmitted in recovery.
    una_rtx_mark: Option<u64>,
    retries: u32,
    // RACK-TLP (RFC 8985), used when `cfg.rack_tlp` and SACK is negotiated.
    rack: Rack,
    /// Bytes RACK newly marked lost since the last BBR update.
    bbr_newly_lost: Option<u64>,
    /// PRR (RFC 6937 §3): `prr_delivered`, `prr_out` and `RecoverFS` of the current recovery.
    prr_delivered: u64,
    prr_out: u64,
    recover_fs: u64,
    /// The TSval of the retransmission of the last RTO, until the first ACK of new data
    /// (Eifel detection, RFC 3522).
    rto_tsval: Option<u32>,
    /// The congestion state before that timeout, restored if it proves spurious (RFC 4015).
    rto_undo: Option<crate::cc::CcUndo>,
    /// SND.MAX at the last retransmission timeout, until it is acknowledged.
    rto_recover: Option<u64>,
    /// Pacing (BBR): byte credit, its last refill, and when sending may resume.
    pace_credit: f64,
    pace_last: Instant,
    pace_at: Option<Instant>,
    /// RACK reordering timer (RFC 8985 §6.3).
    reo_at: Option<Instant>,
    /// Probe timeout (RFC 8985 §7.2).
    tlp_at: Option<Instant>,
    /// A transmit poll at this time sent data and left [`Connection::arm_timers`] for later
    /// (once per burst, see `poll_common`); applied before anything else reads or changes the
    /// timers' inputs, and seen by [`Connection::poll_timeout`] meanwhile.
    arm_pending: Option<Instant>,
    /// While `arm_pending`: the earliest of the timers that arming sets, once
    /// [`Connection::poll_timeout`] computed it (an owner may ask after every poll).
    arm_view: std::cell::Cell<Option<Option<Instant>>>,
    /// The PTO fired: the next output is a probe (RFC 8985 §7.3).
    tlp_due: bool,
    /// `TLP.end_seq` and `TLP.is_retrans` (RFC 8985 §7.1).
    tlp_end: Option<u64>,
    tlp_rtx: bool,

    // Pending output.
    ack_now: bool,
    /// Pure ACKs owed for segments that arrived out of order or unacceptable (RFC 5681 §4.2,
    /// RFC 9293 §3.10.7.4): one each, without data, so a sender counts them as duplicate ACKs
    /// (RFC 5681 §2 counts only ACKs that carry no data) even when we have data waiting.
    dupacks_owed: u32,
    /// SACK compression (Linux's `tcp_comp_sack_*`, [`TcpConfig::sack_compress_segments`]):
    /// RCV.NXT when SACK-bearing ACKs were last counted, how many went out for it, held
    /// segments whose ACK waits, and when that ACK goes out at the latest.
    comp_rcv_nxt: u64,
    comp_acks: u32,
    comp_segs: u32,
    comp_at: Option<Instant>,
    /// SACK information did not fit in the last data segment: send it in a pure ACK.
    sack_owed: bool,
    /// In-order segments received since our last ACK (the delayed-ACK count).
    unacked_segs: u32,
    /// Quick ACKs (every second segment, RFC 9293 §3.8.6.3) until RCV.NXT reaches this; the
    /// ACK is stretched to `ack_stretch` from there ([`Connection::ack_due`]).
    quick_until: u64,
    /// In-order segments per ACK past the quick start: [`TcpConfig::ack_stretch_segments`],
    /// cut by a delayed ACK that found the peer's flight smaller
    /// ([`Connection::on_delack_timeout`]), doubled back after `stretch_regrow` ACKs at it
    /// (`stretch_clean` counts them).
    ack_stretch: u32,
    stretch_clean: u32,
    stretch_regrow: u32,
    ctl: VecDeque<OutHeader>,
    probe_due: bool,
    keepalive_due: bool,
    challenge_window: (Instant, u32),

    // Timers.
    rtx_at: Option<Instant>,
    persist_at: Option<Instant>,
    delack_at: Option<Instant>,
    keepalive_at: Option<Instant>,
    keepalive_probes: u32,
    timewait_at: Option<Instant>,
    fin_wait2_at: Option<Instant>,
    last_rx: Instant,

    events: VecDeque<Event>,
    acked_event: bool,
    // Per-poll output mode: payload bytes allowed per segment, and whether they go inline.
    tx_limit: u64,
    tx_inline: bool,
    /// What limits the sender, by time (the `*_limited_ns` counters).
    chrono: Chrono,
    /// Whether the sender used its window this round (cwnd grows only then).
    cwnd_use: CwndUse,
    stats: TcpStats,
}

/// RFC 7323 §5.4: a per-connection random offset for TSval; the keyed ISN serves.
pub(crate) fn ts_offset(iss: Seq32) -> u32 {
    iss.0.rotate_left(13)
}

/// Bound on the pure duplicate ACKs owed between two polls.
const MAX_DUPACKS_OWED: u32 = 64;

/// SACK-bearing ACKs sent at once for each new RCV.NXT before compression starts (Linux's
/// `TCP_FASTRETRANS_THRESH`): a sender counting duplicate ACKs sees its three (RFC 5681 §3.2).
const COMP_IMMEDIATE_ACKS: u32 = 3;

/// Floor of the SACK compression delay: Linux's `tcp_comp_sack_slack_ns` (its timer fires up
/// to this late); on a path of tens of microseconds RTT/20 alone would compress nothing.
const COMP_MIN_DELAY: Duration = Duration::from_micros(100);

/// Bytes of quick ACKs ([`Connection::ack_due`]): twice the stretch, in segments of our MSS. A
/// sender in slow start (RFC 5681 §3.1) gets one window's worth per acknowledged segment, so after
/// these its window holds twice the stretch and never waits for the ACK a stretch withholds.
fn quick_span(cfg: &TcpConfig) -> u64 {
    2 * u64::from(cfg.ack_stretch_segments) * u64::from(cfg.mss)
}

/// ACKs at a cut stretch before it doubles again, after the first cut; twice as many after
/// each further one ([`Connection::on_delack_timeout`]).
const STRETCH_REGROW: u32 = 16;

/// Default MSS when the peer sends none (RFC 9293 §3.7.1).
const DEFAULT_MSS: u16 = 536;
/// Timestamp option length with its two NOPs (RFC 7323 Appendix A).
const TS_LEN: u16 = 12;

impl<B: SegBuf> Connection<B> {
    fn new(
        cfg: TcpConfig,
        now: Instant,
        local: SockAddr,
        remote: SockAddr,
        iss: Seq32,
        passive: bool,
    ) -> Self {
        let rtt = RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max);
        let mut cc = Congestion::new(
            cfg.cc,
            cfg.mss,
            cfg.initial_cwnd_segments,
            now,
            u64::from(iss.0).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        if cfg.hystart {
            cc.enable_hystart();
        }
        let rx = RecvQueue::new(
            cfg.max_ooo_bytes,
            cfg.max_ooo_segments,
            cfg.max_ooo_small_segments,
        );
        Connection {
            state: State::Closed,
            local,
            remote,
            passive,
            iss,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: Seq32(0),
            snd_wl2: Seq32(0),
            snd_wscale: 0,
            ws_ok: false,
            app_end: 1,
            fin_queued: false,
            records: VecDeque::new(),
            records_popped: 0,
            records_hint: std::cell::Cell::new(0),
            syn_needed: true,
            irs: Seq32(0),
            rcv_nxt: 0,
            rcv_adv: 0,
            rcv_wscale: 0,
            rcv_fin: None,
            dsack: None,
            fin_delivered: false,
            rx,
            ooo_budget: usize::MAX,
            last_ack_sent: 0,
            peer_mss: DEFAULT_MSS,
            sack_ok: false,
            ts_ok: false,
            ts_recent: 0,
            ts_offset: ts_offset(iss),
            rtt,
            rtt_probe: None,
            cc,
            sb: Scoreboard::default(),
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            rtx_next: 0,
            newreno_rtx: false,
            una_rtx_mark: None,
            retries: 0,
            rack: Rack::default(),
            bbr_newly_lost: None,
            prr_delivered: 0,
            prr_out: 0,
            recover_fs: 0,
            rto_recover: None,
            rto_tsval: None,
            rto_undo: None,
            pace_credit: 0.0,
            pace_last: now,
            pace_at: None,
            reo_at: None,
            tlp_at: None,
            arm_pending: None,
            arm_view: std::cell::Cell::new(None),
            tlp_due: false,
            tlp_end: None,
            tlp_rtx: false,
            ack_now: false,
            dupacks_owed: 0,
            comp_rcv_nxt: 0,
            comp_acks: 0,
            comp_segs: 0,
            comp_at: None,
            sack_owed: false,
            unacked_segs: 0,
            // RCV.NXT starts at 1 (after the SYN): the first segments are quick ones.
            quick_until: 1 + quick_span(&cfg),
            ack_stretch: cfg.ack_stretch_segments,
            stretch_clean: 0,
            stretch_regrow: STRETCH_REGROW / 2,
            ctl: VecDeque::new(),
            probe_due: false,
            keepalive_due: false,
            challenge_window: (now, 0),
            rtx_at: None,
            persist_at: None,
            delack_at: None,
            keepalive_at: None,
            keepalive_probes: 0,
            timewait_at: None,
            fin_wait2_at: None,
            last_rx: now,
            events: VecDeque::new(),
            acked_event: false,
            tx_limit: u64::MAX,
            tx_inline: true,
            chrono: Chrono::default(),
            cwnd_use: CwndUse::default(),
            stats: TcpStats::default(),
            cfg,
        }
    }

    /// Active open (RFC 9293 §3.10.1): the connection starts in SYN-SENT and its SYN is
    /// emitted by the next `poll_transmit`. `iss` should come from [`crate::IsnGenerator`].
    pub fn connect(
        cfg: TcpConfig,
        now: Instant,
        local: SockAddr,
        remote: SockAddr,
        iss: Seq32,
    ) -> Self {
        let mut c = Self::new(cfg, now, local, remote, iss, false);
        c.state = State::SynSent;
        c
    }

    /// Passive open from a SYN received by a listener (RFC 9293 §3.10.7.2): the connection
    /// starts in SYN-RECEIVED and its SYN-ACK is emitted by the next `poll_transmit`.
    /// Returns `None` if `syn` is not a plain SYN.
    pub fn accept(
        cfg: TcpConfig,
        now: Instant,
        local: SockAddr,
        remote: SockAddr,
        iss: Seq32,
        syn: &SegmentHeader,
    ) -> Option<Self> {
        if !syn.syn || syn.ack.is_some() || syn.rst {
            return None;
        }
        let mut c = Self::new(cfg, now, local, remote, iss, true);
        c.state = State::SynReceived;
        c.stats.segs_in += 1;
        c.take_syn_options(syn);
        c.irs = syn.seq;
        c.rcv_nxt = 1;
        c.snd_wnd = u64::from(syn.window);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq;
        Some(c)
    }

    /// Passive open from a SYN cookie (RFC 4987 §3.6): `ack` is the handshake's ACK whose
    /// SEG.ACK - 1 = `iss` carried a valid cookie, `opts` what the cookie remembered of the SYN.
    /// The connection starts in SYN-RECEIVED with its SYN-ACK already sent; process `ack`
    /// next (it completes the handshake and may carry data).
    pub(crate) fn accept_cookie(
        cfg: TcpConfig,
        now: Instant,
        local: SockAddr,
        remote: SockAddr,
        iss: Seq32,
        ack: &SegmentHeader,
        opts: crate::cookie::CookieOpts,
    ) -> Option<Self> {
        let syn = SegmentHeader {
            src_port: remote.1,
            dst_port: local.1,
            seq: ack.seq - 1,
            ack: None,
            syn: true,
            fin: false,
            rst: false,
            window: ack.window,
            mss: Some(opts.mss),
            wscale: opts.wscale,
            sack_permitted: opts.sack,
            sack: [None; 3],
            timestamp: ack.timestamp.map(|(v, _)| (v, 0)),
            payload: 0..0,
        };
        let mut c = Self::accept(cfg, now, local, remote, iss, &syn)?;
        // The endpoint sent the SYN-ACK: SND.NXT = SND.MAX = ISS + 1, and the window it
        // offered (unscaled, RFC 7323 §2.2) is the right edge.
        c.syn_needed = false;
        c.snd_nxt = 1;
        c.snd_max = 1;
        c.rcv_adv = 1 + u64::from(c.cfg.recv_window.min(0xffff));
        Some(c)
    }

    /// RFC 9293 §3.7.1 MSS, RFC 7323 §2.2/§3.2 window scale and timestamps, RFC 2018 §2 SACK.
    fn take_syn_options(&mut self, h: &SegmentHeader) {
        self.peer_mss = h.mss.unwrap_or(DEFAULT_MSS).max(64);
        match (self.cfg.window_scale, h.wscale) {
            (Some(ours), Some(theirs)) => {
                self.ws_ok = true;
                self.rcv_wscale = ours.min(14);
                self.snd_wscale = theirs.min(14);
            }
            _ => {
                self.ws_ok = false;
                self.rcv_wscale = 0;
                self.snd_wscale = 0;
            }
        }
        self.sack_ok = self.cfg.sack && h.sack_permitted;
        if let (true, Some((tsval, _))) = (self.cfg.timestamps, h.timestamp) {
            self.ts_ok = true;
            self.ts_recent = tsval;
        } else {
            self.ts_ok = false;
        }
        self.cc.set_mss(self.emss(), self.cfg.initial_cwnd_segments);
        // Out-of-order segments below a quarter of the MSS count as small.
        self.rx
            .set_small_len(usize::from(self.cfg.mss.min(self.peer_mss) / 4));
    }

    /// Let this connection hold at most `n` more out-of-order segments (set by the endpoint
    /// before each segment from its per-thread budget).
    pub(crate) fn set_ooo_budget(&mut self, n: usize) {
        self.ooo_budget = n;
    }

    // ---- getters ----

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Local address and port.
    pub fn local(&self) -> SockAddr {
        self.local
    }
    /// Remote address and port.
    pub fn remote(&self) -> SockAddr {
        self.remote
    }
    /// Whether the connection is gone (safe to drop).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// Counters.
    pub fn stats(&self) -> &TcpStats {
        &self.stats
    }
    /// Effective send MSS: payload bytes in a full-sized segment, after the fixed options
    /// (RFC 9293 §3.7.1; timestamps take 12 bytes). Size FPDUs to this.
    pub fn emss(&self) -> u16 {
        let base = self.peer_mss.min(self.cfg.mss);
        if self.ts_ok {
            base - TS_LEN.min(base / 2)
        } else {
            base
        }
    }
    /// The peer's advertised send window in bytes (scaled).
    pub fn send_window(&self) -> u64 {
        self.snd_wnd
    }
    /// Congestion window in bytes.
    pub fn cwnd(&self) -> u64 {
        self.cc.cwnd
    }
    /// Current retransmission timeout: RFC 6298 with the lower bound `rto_min` while less
    /// than two full segments are outstanding (a lone segment may wait for the peer's delayed
    /// ACK, RFC 9293 §3.8.6.3), else `rto_min_bulk` (the peer ACKs every second segment at
    /// once; RFC 6298 §2.4's "SHOULD be rounded up to 1 s" is relaxed as RFC 8961 allows).
    pub fn rto(&self) -> Duration {
        Duration::from_nanos(self.rto_ns())
    }

    /// [`Connection::rto`] in nanoseconds (the timers' arithmetic).
    pub(crate) fn rto_ns(&self) -> u64 {
        let flight = self.snd_max - self.snd_una;
        if flight >= 2 * u64::from(self.emss()) {
            self.rtt
                .rto_with_floor_ns(crate::rtt::ns(self.cfg.rto_min_bulk.min(self.cfg.rto_min)))
        } else {
            self.rtt.rto_ns()
        }
    }
    /// Bytes sent and not yet acknowledged (SND.MAX - SND.UNA, RFC 9293 §3.3.1).
    pub fn bytes_in_flight(&self) -> u64 {
        self.snd_max.saturating_sub(self.snd_una)
    }
    /// Smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// Whether SACK, timestamps were negotiated, and the send/receive window shifts.
    pub fn negotiated(&self) -> (bool, bool, u8, u8) {
        (self.sack_ok, self.ts_ok, self.snd_wscale, self.rcv_wscale)
    }
    /// Stream offset up to which our data is acknowledged.
    pub fn acked_offset(&self) -> u64 {
        self.snd_una.saturating_sub(1).min(self.app_end - 1)
    }
    /// Stream bytes queued by the owner (acked or not).
    pub fn queued_offset(&self) -> u64 {
        self.app_end - 1
    }
    /// Bytes `send` would accept now.
    pub fn send_capacity(&self) -> u64 {
        let in_buf = self.app_end - self.snd_una.clamp(1, self.app_end);
        u64::from(self.cfg.send_window).saturating_sub(in_buf)
    }
    /// In-order bytes waiting in `poll_readable`.
    pub fn readable_bytes(&self) -> usize {
        self.rx.readable_bytes()
    }
    /// Bytes held out of order.
    pub fn ooo_bytes(&self) -> usize {
        self.rx.ooo_bytes()
    }
    /// Segments (receive buffers) held out of order.
    pub fn ooo_segments(&self) -> usize {
        self.rx.ooo_segments()
    }
    /// Whether the peer's FIN arrived and everything before it was read.
    pub fn is_recv_finished(&self) -> bool {
        self.fin_delivered && self.rx.readable_bytes() == 0
    }
    /// The ISS (wire value).
    pub fn iss(&self) -> Seq32 {
        self.iss
    }

    /// The configuration in force.
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    // ---- mutators ----

    /// Turn Nagle's algorithm on or off (RFC 9293 §3.7.4).
    pub fn set_nagle(&mut self, on: bool) {
        self.cfg.nagle = on;
    }

    /// Change the delayed-ACK timeout (`None`: acknowledge every segment at once).
    pub fn set_delayed_ack(&mut self, d: Option<Duration>) {
        self.cfg.delayed_ack = d;
        if d.is_none() && self.delack_at.take().is_some() {
            self.ack_now = true;
        }
    }

    /// Acknowledge at the next poll if received data is still unacknowledged, instead of
    /// waiting for the delayed-ACK timer (RFC 9293 §3.8.6.3 only bounds the delay). For an
    /// upper layer that knows a message ended: its peer completes the message only when TCP
    /// acknowledges the last byte (iWARP with completion on ACK), so a lone message of one
    /// segment would otherwise wait out the timer. Returns whether this moved an ACK forward
    /// (counted as `quick_acks`); false when none was owed or one was going out anyway.
    pub fn request_ack(&mut self) -> bool {
        if !self.state.is_synchronized() || self.ack_now || self.rcv_nxt <= self.last_ack_sent {
            return false;
        }
        self.ack_now = true;
        self.stats.quick_acks += 1;
        true
    }

    /// An in-order segment advanced RCV.NXT with no gap before or after it: whether its ACK
    /// goes out now (else the delayed-ACK timer bounds the wait). RFC 9293 §3.8.6.3 / RFC 5681
    /// §4.2: every second full-sized segment while quick ([`Connection::quick_until`]); then
    /// every `ack_stretch` segments ([`TcpConfig::ack_stretch_segments`]: a stretch ACK, RFC
    /// 5681 §4.2's SHOULD relaxed as Linux's GRO receiver does), or once a quarter of the
    /// window we last advertised is used, whichever comes first: the sender's window opens in
    /// steps of at most a quarter (RFC 9293 §3.8.6.2.2 asks a receiver not to hold back window
    /// it has).
    #[inline(always)]
    pub(crate) fn ack_due(&mut self) -> bool {
        self.unacked_segs += 1;
        if self.unacked_segs < 2 {
            return false;
        }
        if self.rcv_nxt < self.quick_until {
            return true;
        }
        if self.unacked_segs >= self.ack_stretch {
            self.stretch_acked();
            return true;
        }
        let unacked = self.rcv_nxt - self.last_ack_sent;
        unacked * 4 >= self.rcv_adv.saturating_sub(self.last_ack_sent)
    }

    /// A hole was filled: the peer lost data and cut its window (RFC 5681 §3.2, RFC 9438
    /// §4.6), likely below the stretch. Quick ACKs for the next 2 x stretch segments, as
    /// Linux enters its quick-ACK mode on out-of-order data (`tcp_enter_quickack_mode`), so
    /// the recovering sender is not held until the delayed-ACK timer (a Linux sender at 1 %
    /// loss ran at 0.6 x without this: BENCHMARKS.md §4, twelfth session, `ack`).
    #[cold]
    fn quick_after_loss(&mut self) {
        self.quick_until = self.quick_until.max(self.rcv_nxt + quick_span(&self.cfg));
    }

    /// The stretch was reached without a stall: after `stretch_regrow` such ACKs in a row a
    /// stretch that a stall cut doubles again (up to the configured one), so a cut that a
    /// paused sender caused (not a small flight) heals.
    #[cold]
    fn stretch_acked(&mut self) {
        if self.ack_stretch >= self.cfg.ack_stretch_segments {
            return;
        }
        self.stretch_clean += 1;
        if self.stretch_clean >= self.stretch_regrow {
            self.stretch_clean = 0;
            self.ack_stretch = (self.ack_stretch * 2).min(self.cfg.ack_stretch_segments);
        }
    }

    /// The delayed-ACK timer fired. When segments were waiting that the RFCs' every-second-
    /// segment rule would have acknowledged, and none arrived in this poll (a receiver that
    /// was descheduled finds its timer due with the stream still flowing), the stretch held
    /// them: the peer's whole flight is in, it is smaller than the stretch, and the peer waits
    /// for us (or it paused). The stretch comes down to half those segments (at least 2, RFC
    /// 9293 §3.8.6.3's every second segment), so a flight that size is acknowledged twice; it
    /// doubles back only after [`STRETCH_REGROW`] ACKs at the stretch, twice as many after each
    /// cut: a peer whose flight stays below the stretch waits for the timer ever more rarely,
    /// not once per flight.
    pub(crate) fn on_delack_timeout(&mut self, now: Instant) {
        self.ack_now = true;
        if self.unacked_segs >= 2 && self.last_rx < now {
            self.ack_stretch = (self.unacked_segs.min(self.ack_stretch) / 2).max(2);
            self.stretch_clean = 0;
            self.stretch_regrow = self.stretch_regrow.saturating_mul(2);
            self.stats.ack_stretch_cuts += 1;
        }
    }

    /// Change keepalive (RFC 9293 §3.8.4); takes effect at the next input or output.
    pub fn set_keepalive(&mut self, k: Option<crate::config::Keepalive>) {
        self.settle_timers();
        self.cfg.keepalive = k;
    }

    fn can_send(&self) -> bool {
        !self.fin_queued
            && matches!(
                self.state,
                State::SynSent | State::SynReceived | State::Established | State::CloseWait
            )
    }

    /// Queue up to `len` more stream bytes (the owner keeps them until acked); returns how
    /// many were accepted.
    pub fn send(&mut self, len: u64) -> Result<u64, SendError> {
        if !self.can_send() {
            return Err(SendError::InvalidState);
        }
        let n = len.min(self.send_capacity());
        self.app_end += n;
        Ok(n)
    }

    /// Queue a record of `len` bytes, all or nothing, with a boundary after it: no segment
    /// will carry bytes of two records.
    pub fn send_record(&mut self, len: u64) -> Result<(), SendError> {
        if !self.can_send() {
            return Err(SendError::InvalidState);
        }
        if len > self.send_capacity() {
            return Err(SendError::NoSpace);
        }
        if len == 0 {
            return Ok(());
        }
        if self.records.back() != Some(&self.app_end) && self.app_end > self.snd_una.max(1) {
            // Data queued with plain `send` before this record ends a "record" too.
            self.records.push_back(self.app_end);
        }
        self.app_end += len;
        self.records.push_back(self.app_end);
        Ok(())
    }

    /// Graceful close (RFC 9293 §3.10.4): a FIN follows the queued data.
    pub fn close(&mut self) {
        self.settle_timers();
        match self.state {
            State::SynSent => self.finish(CloseReason::Normal),
            State::SynReceived => {
                // RFC 9293 §3.10.4: the FIN waits until the handshake completes.
                self.fin_queued = true;
            }
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Abort (RFC 9293 §3.10.5): send RST in synchronized states, then CLOSED.
    pub fn abort(&mut self) {
        self.settle_timers();
        if matches!(self.state, State::Closed) {
            return;
        }
        if self.state != State::SynSent && self.state != State::TimeWait {
            let seq = self.wire_snd(self.snd_nxt);
            self.ctl.push_back(OutHeader {
                seq,
                rst: true,
                ..Default::default()
            });
        }
        self.finish(CloseReason::Aborted);
    }

    // ---- outputs ----

    /// Whether `poll_event` has something.
    pub fn has_events(&self) -> bool {
        self.acked_event || !self.events.is_empty()
    }

    /// Next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.acked_event {
            self.acked_event = false;
            return Some(Event::Acked {
                upto: self.acked_offset(),
            });
        }
        self.events.pop_front()
    }

    /// The next chunk of in-order payload without taking it: for a consumer that parses in
    /// place and may stop mid-chunk (an MPA deframer holding back a partial FPDU), followed by
    /// [`Connection::consume_readable`].
    pub fn peek_readable(&self) -> Option<(&B, Range<usize>)> {
        self.rx.front()
    }

    /// Release `n` bytes of in-order payload (possibly spanning chunks, possibly part of one);
    /// returns how many were released. Buffers fully consumed are dropped.
    pub fn consume_readable(&mut self, n: usize) -> usize {
        let done = self.rx.consume(n);
        self.after_read();
        done
    }

    /// Next chunk of in-order payload: the caller's buffer and the payload range in it.
    #[must_use]
    pub fn poll_readable(&mut self) -> Option<(B, Range<usize>)> {
        let out = self.rx.pop()?;
        self.after_read();
        Some(out)
    }

    fn after_read(&mut self) {
        // RFC 9293 §3.8.6.2.2: announce a reopened window once it grew by enough
        // (min(RCV.BUFF/2, Eff.snd.MSS)).
        let wnd_now = self.rcv_adv.saturating_sub(self.rcv_nxt);
        let can = self.rcv_window_avail();
        let step = u64::from(self.cfg.recv_window / 2).min(u64::from(self.cfg.mss));
        if can >= wnd_now + step.max(1) && (wnd_now < step * 4 || can >= wnd_now * 2) {
            self.ack_now = true;
        }
    }

    // ---- helpers ----

    pub(crate) fn wire_snd(&self, abs: u64) -> Seq32 {
        // Truncation is the point: wire sequence numbers are modulo 2^32.
        self.iss + (abs as u32)
    }
    pub(crate) fn wire_rcv(&self, abs: u64) -> Seq32 {
        self.irs + (abs as u32)
    }

    /// Receive capacity left (bytes the application has room for).
    fn rcv_window_avail(&self) -> u64 {
        u64::from(self.cfg.recv_window).saturating_sub(self.rx.readable_bytes() as u64)
    }

    /// An out-of-order or unacceptable segment arrived: owe an immediate pure ACK for it.
    /// Without SACK, one per segment (the peer counts duplicates, RFC 5681 §3.2; bounded: a
    /// burst beyond the bound between two polls gets fewer). With SACK, one per poll: the
    /// sender counts SACKed segments, not ACKs (RFC 6675 §5, RFC 8985), and identical ACKs
    /// back to back only cost both ends (a receive burst gets one ACK, as with GRO).
    pub(crate) fn owe_dupack(&mut self) {
        self.ack_now = true;
        self.dupacks_owed = if self.sack_ok {
            1
        } else {
            (self.dupacks_owed + 1).min(MAX_DUPACKS_OWED)
        };
    }

    /// A segment was held out of order (RCV.NXT unchanged): owe an ACK carrying its SACK
    /// block. RFC 5681 §4.2 and RFC 9293 §3.10.7.4 ask for an immediate duplicate ACK; with
    /// SACK, like Linux (`__tcp_ack_snd_check`, `tcp_comp_sack_nr`), only the first
    /// [`COMP_IMMEDIATE_ACKS`] for each RCV.NXT go at once, and while fewer than
    /// [`TcpConfig::sack_compress_min_held`] segments are held every one does; later ones wait for the compression
    /// timer or [`TcpConfig::sack_compress_segments`] held segments, whichever comes first
    /// (the sender counts SACKed bytes, RFC 6675 §5 / RFC 8985, not ACKs, and a dense stream
    /// of SACK-only ACKs only costs it processing). Without SACK nothing changes: one pure
    /// duplicate ACK per segment, which is what such a sender counts (RFC 5681 §3.2).
    pub(crate) fn owe_sack(&mut self, now: Instant) {
        let nr = self.cfg.sack_compress_segments;
        if !self.sack_ok || nr == 0 {
            return self.owe_dupack();
        }
        let acks = if self.comp_rcv_nxt == self.rcv_nxt {
            self.comp_acks
        } else {
            0
        };
        if acks < COMP_IMMEDIATE_ACKS
            || self.rx.ooo_segments() < self.cfg.sack_compress_min_held
            || self.dupacks_owed > 0
            || self.ack_now
        {
            // Still among the first ACKs for this RCV.NXT, a small flight, or an ACK goes
            // out anyway.
            return self.owe_dupack();
        }
        self.comp_segs += 1;
        if self.comp_segs >= nr {
            return self.owe_dupack();
        }
        self.stats.sack_compressed += 1;
        if self.comp_at.is_none() {
            self.comp_at = Some(now + self.comp_delay());
        }
    }

    /// Linux's `tcp_comp_sack_delay_ns` rule: RTT/20, here within [100 us, the configured
    /// bound].
    fn comp_delay(&self) -> Duration {
        let max = self.cfg.sack_compress_delay;
        match self.rtt.srtt() {
            Some(srtt) => (srtt / 20).max(COMP_MIN_DELAY).min(max),
            None => max,
        }
    }

    /// An ACK is going out: count it for SACK compression and clear what it settles.
    pub(crate) fn on_ack_sent(&mut self, sack_blocks: bool) {
        if sack_blocks {
            if self.comp_rcv_nxt != self.rcv_nxt {
                self.comp_rcv_nxt = self.rcv_nxt;
                self.comp_acks = 0;
            }
            self.comp_acks = self.comp_acks.saturating_add(1);
        }
        self.comp_segs = 0;
        self.comp_at = None;
    }

    /// Queue a control segment (a reset); bounded so a flood of bad segments between polls
    /// cannot grow memory.
    pub(crate) fn push_ctl(&mut self, h: OutHeader) {
        if self.ctl.len() < 16 {
            self.ctl.push_back(h);
        }
    }

    fn finish(&mut self, why: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        tracing::debug!(local = ?self.local, remote = ?self.remote, from = ?self.state, ?why, "tcp connection closed");
        self.state = State::Closed;
        self.rtx_at = None;
        self.persist_at = None;
        self.delack_at = None;
        self.comp_at = None;
        self.keepalive_at = None;
        self.timewait_at = None;
        self.fin_wait2_at = None;
        self.reo_at = None;
        self.tlp_at = None;
        self.pace_at = None;
        self.events.push_back(Event::Closed(why));
    }

    /// Bytes in flight per RFC 6675 §4 "pipe" (simplified): outstanding minus SACKed minus
    /// presumed lost, plus what we resent of the lost.
    fn pipe(&self) -> u64 {
        let out = self.snd_max - self.snd_una;
        if self.rack_on() && self.snd_nxt >= self.snd_max {
            // RFC 8985 with RFC 6675 §4: outstanding minus SACKed minus marked lost (a lost
            // segment counts again once retransmitted, as its mark is cleared then).
            return out
                .saturating_sub(self.sb.sacked_bytes())
                .saturating_sub(self.rack.lost_bytes());
        }
        if !self.sack_ok || self.sb.is_empty() {
            return out;
        }
        let (lost, resent) = self.sb.hole_bytes(self.snd_una, self.rtx_next);
        (out - self.sb.sacked_bytes().min(out)).saturating_sub(lost) + resent
    }

    /// Whether RACK-TLP (RFC 8985) drives loss detection: configured and SACK negotiated.
    fn rack_on(&self) -> bool {
        self.cfg.rack_tlp && self.sack_ok
    }

    /// Whether loss recovery runs PRR (RFC 6937): configured, SACK negotiated (RFC 6675 pipe),
    /// and a loss-based congestion control (BBR conserves packets its own way).
    fn prr_on(&self) -> bool {
        self.cfg.prr && self.sack_ok && !self.cc.is_bbr()
    }

    /// Whether the per-segment transmission log is kept: for RACK, and for BBR's delivery
    /// rate estimation.
    fn log_on(&self) -> bool {
        self.rack_on() || self.cc.is_bbr()
    }

    /// BBR's state name, bandwidth estimate (bytes/s), min RTT and pacing rate (bytes/s), for
    /// traces and tests; `None` for other congestion controls.
    pub fn bbr_state(&self) -> Option<(&'static str, f64, Option<Duration>, f64)> {
        let b = self.cc.bbr()?;
        Some((b.mode().name(), b.max_bw(), b.min_rtt(), b.pacing_rate()))
    }

    /// Whether we are the passive side.
    pub fn is_passive(&self) -> bool {
        self.passive
    }
}
