//! BBR congestion control, after the IETF CCWG draft (draft-ietf-ccwg-bbr, "BBR Congestion
//! Control") with Linux's `tcp_bbr.c` as the reference behaviour.
//!
//! The model: `max_bw` (windowed maximum of delivery-rate samples over the last two ProbeBW
//! cycles, draft §5.5.5) and `min_rtt` (windowed minimum over 10 s, refreshed by ProbeRTT every
//! 5 s, draft §5.6). From them: pacing rate = gain × max_bw (draft §5.6.2) and
//! cwnd = gain × BDP + quantization budget + ACK-aggregation allowance (draft §5.6.4).
//! States (draft §4.3): Startup (gain 2.77, exits when the bandwidth stops growing by 25 % for
//! three rounds), Drain, ProbeBW (DOWN 0.9, CRUISE 1.0, REFILL 1.0, UP 1.25, with the
//! Reno-coexistence and wall-clock timers for the next probe) and ProbeRTT (cwnd at half the
//! BDP for 200 ms and a round).
//!
//! Deviation from the draft, following Linux (the stated reference): the response to loss is
//! BBRv1's: packet conservation for the first round of a fast recovery and the previous cwnd
//! restored when it ends, cwnd reduced by the bytes newly marked lost, one segment after a
//! retransmission timeout and the previous cwnd once it is repaired. The draft's loss-based
//! bounds (`inflight_hi`, `bw_lo`, `inflight_lo`, 2 % loss threshold in Startup and ProbeBW_UP)
//! are not applied: under random (non-congestive) loss of several percent they would hold the
//! flow far below the path's capacity, which is what a user picks BBR to avoid, and Linux's BBR,
//! the baseline we are measured against, does not apply them either.

use netcore::{Duration, Instant};

use crate::rate::RateSample;

/// Draft §5.2 constants.
const STARTUP_PACING_GAIN: f64 = 2.77;
const STARTUP_CWND_GAIN: f64 = 2.0;
const DRAIN_PACING_GAIN: f64 = 0.35;
const DEFAULT_CWND_GAIN: f64 = 2.0;
const PROBE_UP_CWND_GAIN: f64 = 2.25;
const PROBE_DOWN_PACING_GAIN: f64 = 0.90;
const PROBE_UP_PACING_GAIN: f64 = 1.25;
const PACING_MARGIN: f64 = 0.01;
const MIN_PIPE_CWND_SEGS: u64 = 4;
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_COUNT: u32 = 3;
const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
const PROBE_RTT_CWND_GAIN: f64 = 0.5;
/// Rounds per slot of the two-slot ACK-aggregation filter (Linux: 5, so 5-10 rounds).
const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
/// Cap on the ACK-aggregation allowance (Linux `bbr_extra_acked_max_us`).
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);
/// Send quantum bounds (draft §5.6.3): the pacing rate over 1 ms, at most 64 KiB.
const QUANTUM_TIME: Duration = Duration::from_millis(1);
const QUANTUM_MAX: u64 = 64 * 1024;

/// BBR states (draft §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Startup,
    Drain,
    ProbeBwDown,
    ProbeBwCruise,
    ProbeBwRefill,
    ProbeBwUp,
    ProbeRtt,
}

impl Mode {
    /// The draft's name for the state.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Startup => "Startup",
            Mode::Drain => "Drain",
            Mode::ProbeBwDown => "ProbeBW_DOWN",
            Mode::ProbeBwCruise => "ProbeBW_CRUISE",
            Mode::ProbeBwRefill => "ProbeBW_REFILL",
            Mode::ProbeBwUp => "ProbeBW_UP",
            Mode::ProbeRtt => "ProbeRTT",
        }
    }
}

/// Where the bandwidth-probing feedback stands (draft §5.3.3 `BBR.ack_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// What one ACK told the connection, for BBR.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BbrAck {
    pub(crate) now: Instant,
    /// Bytes newly delivered (cumulatively or by SACK) by this ACK.
    pub(crate) newly_acked: u64,
    /// Bytes newly marked lost while processing this ACK.
    pub(crate) newly_lost: u64,
    /// Total bytes delivered so far (`C.delivered`).
    pub(crate) delivered: u64,
    /// The delivery-rate sample of this ACK.
    pub(crate) rate: Option<RateSample>,
    /// An RTT sample taken from this ACK.
    pub(crate) rtt: Option<Duration>,
    /// Bytes in flight after this ACK.
    pub(crate) inflight: u64,
}

/// BBR state (draft §5.1).
#[derive(Debug, Clone)]
pub(crate) struct Bbr {
    mode: Mode,
    pacing_gain: f64,
    cwnd_gain: f64,
    mss: u64,
    init_cwnd: u64,
    /// Bytes per second.
    pacing_rate: f64,
    has_rtt: bool,
    // Model.
    bw_hi: [f64; 2],
    cycle_count: u64,
    max_bw: f64,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Instant,
    extra_acked: [u64; 2],
    extra_acked_idx: usize,
    extra_acked_win_rounds: u32,
    extra_acked_start: Option<Instant>,
    extra_acked_delivered: u64,
    // Rounds.
    next_round_delivered: u64,
    round_start: bool,
    rounds_since_bw_probe: u64,
    // Startup.
    filled_pipe: bool,
    full_bw: f64,
    full_bw_count: u32,
    // ProbeBW.
    cycle_stamp: Instant,
    bw_probe_wait: Duration,
    ack_phase: AckPhase,
    // ProbeRTT.
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    // Loss response (Linux).
    prior_cwnd: u64,
    conservation: bool,
    in_loss: bool,
    rng: u64,
}

impl Bbr {
    /// A BBR instance for a connection with `mss`-byte segments and an initial window of
    /// `init_cwnd` bytes; `seed` varies the probing schedule between connections.
    pub(crate) fn new(now: Instant, mss: u64, init_cwnd: u64, seed: u64) -> Self {
        let mut b = Bbr {
            mode: Mode::Startup,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: STARTUP_CWND_GAIN,
            mss: mss.max(1),
            init_cwnd,
            pacing_rate: 0.0,
            has_rtt: false,
            bw_hi: [0.0; 2],
            cycle_count: 0,
            max_bw: 0.0,
            min_rtt: None,
            min_rtt_stamp: now,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: now,
            extra_acked: [0; 2],
            extra_acked_idx: 0,
            extra_acked_win_rounds: 0,
            extra_acked_start: None,
            extra_acked_delivered: 0,
            next_round_delivered: 0,
            round_start: false,
            rounds_since_bw_probe: 0,
            filled_pipe: false,
            full_bw: 0.0,
            full_bw_count: 0,
            cycle_stamp: now,
            bw_probe_wait: Duration::from_secs(2),
            ack_phase: AckPhase::Init,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0,
            conservation: false,
            in_loss: false,
            rng: seed | 1,
        };
        b.init_pacing_rate(None);
        b
    }

    /// The MSS changed (option negotiation).
    pub(crate) fn set_mss(&mut self, mss: u64, init_cwnd: u64) {
        self.mss = mss.max(1);
        self.init_cwnd = init_cwnd;
        self.init_pacing_rate(None);
    }

    /// Pacing rate in bytes per second.
    pub(crate) fn pacing_rate(&self) -> f64 {
        self.pacing_rate
    }

    /// Current state.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The bandwidth estimate in bytes per second.
    pub(crate) fn max_bw(&self) -> f64 {
        self.max_bw
    }

    /// The min-RTT estimate.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The send quantum (draft §5.6.3): what may leave back to back.
    pub(crate) fn send_quantum(&self) -> u64 {
        let q = self.pacing_rate * QUANTUM_TIME.as_secs_f64();
        // Truncation intended.
        (q as u64).clamp(2 * self.mss, QUANTUM_MAX.max(2 * self.mss))
    }

    fn random(&mut self) -> u64 {
        // xorshift64: a schedule varied per connection, no cryptographic need.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Draft §5.6.2 BBRInitPacingRate: startup gain × initial window / RTT (1 ms without one).
    fn init_pacing_rate(&mut self, rtt: Option<Duration>) {
        let rtt = rtt
            .unwrap_or(Duration::from_millis(1))
            .as_secs_f64()
            .max(1e-6);
        self.pacing_rate = STARTUP_PACING_GAIN * self.init_cwnd as f64 / rtt;
    }

    /// Process one ACK (draft §5.1 BBRUpdateOnACK); `cwnd` is the connection's window.
    pub(crate) fn on_ack(&mut self, a: &BbrAck, cwnd: &mut u64) {
        if !self.has_rtt
            && let Some(r) = a.rtt
        {
            // Linux: the pacing rate follows the first RTT sample.
            self.has_rtt = true;
            self.init_pacing_rate(Some(r));
        }
        self.update_round(a);
        self.update_max_bw(a);
        self.update_ack_aggregation(a, *cwnd);
        self.check_full_bw_reached(a);
        self.check_startup_done();
        self.check_drain(a);
        self.update_probe_bw_phase(a);
        self.update_min_rtt(a);
        self.check_probe_rtt(a, cwnd);
        self.set_pacing_rate();
        self.set_cwnd(a, cwnd);
    }

    /// Draft §5.5.1 BBRUpdateRound: a round ends when data sent after its start is delivered.
    fn update_round(&mut self, a: &BbrAck) {
        self.round_start = false;
        if let Some(rs) = a.rate
            && rs.prior_delivered >= self.next_round_delivered
        {
            self.start_round(a.delivered);
            self.round_start = true;
            self.rounds_since_bw_probe += 1;
            // Linux: packet conservation lasts one round.
            self.conservation = false;
        }
    }

    fn start_round(&mut self, delivered: u64) {
        self.next_round_delivered = delivered;
    }

    /// Draft §5.5.5 BBRUpdateMaxBw: windowed max over two ProbeBW cycles.
    fn update_max_bw(&mut self, a: &BbrAck) {
        let Some(rs) = a.rate else { return };
        if rs.interval.is_zero() || self.min_rtt.is_some_and(|m| rs.interval < m) {
            return;
        }
        let rate = rs.rate();
        if rate >= self.max_bw || !rs.app_limited {
            let slot = (self.cycle_count % 2) as usize;
            self.bw_hi[slot] = self.bw_hi[slot].max(rate);
            self.max_bw = self.bw_hi[0].max(self.bw_hi[1]);
        }
    }

    /// Draft §5.5.5 BBRAdvanceMaxBwFilter.
    fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
        let slot = (self.cycle_count % 2) as usize;
        self.bw_hi[slot] = 0.0;
    }

    /// Draft §5.5.9 BBRUpdateACKAggregation: how much more than the bandwidth predicts ACKs
    /// deliver at once (ACK batching by the receiver or the NIC), over 5-10 rounds.
    fn update_ack_aggregation(&mut self, a: &BbrAck, cwnd: u64) {
        if self.round_start {
            self.extra_acked_win_rounds += 1;
            if self.extra_acked_win_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.extra_acked_win_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[self.extra_acked_idx] = 0;
            }
        }
        let start = *self.extra_acked_start.get_or_insert(a.now);
        let interval = a.now.saturating_duration_since(start).as_secs_f64();
        let mut expected = (self.max_bw * interval) as u64;
        if self.extra_acked_delivered <= expected {
            self.extra_acked_delivered = 0;
            self.extra_acked_start = Some(a.now);
            expected = 0;
        }
        self.extra_acked_delivered += a.newly_acked;
        let cap = ((self.max_bw * EXTRA_ACKED_MAX.as_secs_f64()) as u64).min(cwnd);
        let extra = self.extra_acked_delivered.saturating_sub(expected).min(cap);
        let i = self.extra_acked_idx;
        self.extra_acked[i] = self.extra_acked[i].max(extra);
    }

    fn extra_acked(&self) -> u64 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    /// Draft §5.3.1.2 BBRCheckFullBWReached (Linux v1: bandwidth only).
    fn check_full_bw_reached(&mut self, a: &BbrAck) {
        if self.filled_pipe || !self.round_start || a.rate.is_some_and(|r| r.app_limited) {
            return;
        }
        if self.max_bw >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = self.max_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.filled_pipe = self.full_bw_count >= FULL_BW_COUNT;
    }

    fn check_startup_done(&mut self) {
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
            self.pacing_gain = DRAIN_PACING_GAIN;
            self.cwnd_gain = STARTUP_CWND_GAIN;
        }
    }

    /// Draft §5.3.2: Drain ends when the queue Startup built is gone.
    fn check_drain(&mut self, a: &BbrAck) {
        if self.mode == Mode::Drain && a.inflight <= self.bdp(1.0) {
            self.start_probe_bw_down(a);
        }
    }

    /// The bandwidth-delay product times `gain`, in bytes (the initial window until a
    /// min_rtt is known; draft §5.6.4.2 BBRBDPMultiple).
    fn bdp(&self, gain: f64) -> u64 {
        match self.min_rtt {
            Some(rtt) if self.max_bw > 0.0 => (gain * self.max_bw * rtt.as_secs_f64()) as u64,
            _ => (gain * self.init_cwnd as f64) as u64,
        }
    }

    /// Draft §5.6.4.2 BBRInflight: BDP × gain plus the quantization budget (three send
    /// quanta, two segments more in ProbeBW_UP).
    fn inflight(&self, gain: f64) -> u64 {
        let mut v = self.bdp(gain) + 3 * self.send_quantum();
        if self.mode == Mode::ProbeBwUp {
            v += 2 * self.mss;
        }
        v
    }

    fn pick_probe_wait(&mut self) {
        // Draft §5.3.3.6: 0 or 1 rounds already counted, and 2-3 s of wall clock.
        self.rounds_since_bw_probe = self.random() % 2;
        let ms = 2000 + self.random() % 1000;
        self.bw_probe_wait = Duration::from_millis(ms);
    }

    fn start_probe_bw_down(&mut self, a: &BbrAck) {
        self.pick_probe_wait();
        self.cycle_stamp = a.now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round(a.delivered);
        self.mode = Mode::ProbeBwDown;
        self.pacing_gain = PROBE_DOWN_PACING_GAIN;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_cruise(&mut self) {
        self.mode = Mode::ProbeBwCruise;
        self.pacing_gain = 1.0;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_refill(&mut self, a: &BbrAck) {
        self.rounds_since_bw_probe = 0;
        self.ack_phase = AckPhase::Refilling;
        self.start_round(a.delivered);
        self.mode = Mode::ProbeBwRefill;
        self.pacing_gain = 1.0;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_up(&mut self, a: &BbrAck) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round(a.delivered);
        self.cycle_stamp = a.now;
        self.mode = Mode::ProbeBwUp;
        self.pacing_gain = PROBE_UP_PACING_GAIN;
        self.cwnd_gain = PROBE_UP_CWND_GAIN;
    }

    fn in_probe_bw(&self) -> bool {
        matches!(
            self.mode,
            Mode::ProbeBwDown | Mode::ProbeBwCruise | Mode::ProbeBwRefill | Mode::ProbeBwUp
        )
    }

    /// Draft §5.3.3.6 BBRIsTimeToProbeBW: after the wall-clock wait, or after as many rounds
    /// as a Reno flow would take to grow by one BDP (at most 63).
    fn time_to_probe_bw(&mut self, a: &BbrAck) -> bool {
        let reno_rounds = (self.bdp(1.0) / self.mss).min(63);
        if a.now.saturating_duration_since(self.cycle_stamp) > self.bw_probe_wait
            || self.rounds_since_bw_probe >= reno_rounds
        {
            self.start_probe_bw_refill(a);
            return true;
        }
        false
    }

    /// Draft §5.3.3 BBRUpdateProbeBWCyclePhase (without the loss-based upper bounds).
    fn update_probe_bw_phase(&mut self, a: &BbrAck) {
        if !self.filled_pipe || !self.in_probe_bw() {
            return;
        }
        if self.round_start {
            match self.ack_phase {
                AckPhase::ProbeStarting => self.ack_phase = AckPhase::ProbeFeedback,
                AckPhase::ProbeStopping => {
                    // The samples of the last probe are in: a new filter slot (§5.5.5).
                    if !a.rate.is_some_and(|r| r.app_limited) {
                        self.advance_max_bw_filter();
                    }
                    self.ack_phase = AckPhase::Init;
                }
                _ => {}
            }
        }
        match self.mode {
            Mode::ProbeBwDown => {
                if self.time_to_probe_bw(a) {
                    return;
                }
                if a.inflight <= self.bdp(1.0) {
                    self.start_probe_bw_cruise();
                }
            }
            Mode::ProbeBwCruise => {
                self.time_to_probe_bw(a);
            }
            Mode::ProbeBwRefill if self.round_start => self.start_probe_bw_up(a),
            Mode::ProbeBwUp => {
                // After at least a min_rtt, once the probe's inflight target is reached or the
                // probe caused loss (draft §5.3.3.5 with the v1/Linux loss condition of
                // bbr_is_next_cycle_phase in place of the inflight_hi machinery).
                let elapsed = a.now.saturating_duration_since(self.cycle_stamp);
                if self.min_rtt.is_some_and(|m| elapsed > m)
                    && (a.inflight > self.inflight(PROBE_UP_PACING_GAIN) || a.newly_lost > 0)
                {
                    self.start_probe_bw_down(a);
                }
            }
            _ => {}
        }
    }

    /// Draft §5.6.1 BBRUpdateMinRTT.
    fn update_min_rtt(&mut self, a: &BbrAck) {
        let expired =
            a.now.saturating_duration_since(self.probe_rtt_min_stamp) > PROBE_RTT_INTERVAL;
        if let Some(rtt) = a.rtt
            && (self.probe_rtt_min_delay.is_none_or(|d| rtt < d) || expired)
        {
            self.probe_rtt_min_delay = Some(rtt);
            self.probe_rtt_min_stamp = a.now;
        }
        let min_expired = a.now.saturating_duration_since(self.min_rtt_stamp) > MIN_RTT_FILTER_LEN;
        if let Some(d) = self.probe_rtt_min_delay
            && (self.min_rtt.is_none_or(|m| d < m) || min_expired)
        {
            self.min_rtt = Some(d);
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
    }

    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp(PROBE_RTT_CWND_GAIN)
            .max(MIN_PIPE_CWND_SEGS * self.mss)
    }

    /// Draft §5.3.4: ProbeRTT every 5 s, cwnd at half the BDP until inflight drains to it,
    /// then 200 ms and a round.
    fn check_probe_rtt(&mut self, a: &BbrAck, cwnd: &mut u64) {
        let expired =
            a.now.saturating_duration_since(self.probe_rtt_min_stamp) > PROBE_RTT_INTERVAL;
        if self.mode != Mode::ProbeRtt && expired && self.min_rtt.is_some() {
            self.save_cwnd(*cwnd);
            self.mode = Mode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = PROBE_RTT_CWND_GAIN;
            self.probe_rtt_done = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round(a.delivered);
        }
        if self.mode != Mode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done {
            None => {
                if a.inflight <= self.probe_rtt_cwnd() {
                    self.probe_rtt_done = Some(a.now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.start_round(a.delivered);
                }
            }
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && a.now >= done {
                    self.probe_rtt_min_stamp = a.now;
                    self.exit_probe_rtt(a);
                    // Draft §5.3.4.4 BBRRestoreCwnd.
                    *cwnd = (*cwnd).max(self.prior_cwnd);
                    self.prior_cwnd = 0;
                }
            }
        }
    }

    fn exit_probe_rtt(&mut self, a: &BbrAck) {
        if self.filled_pipe {
            self.start_probe_bw_down(a);
            self.start_probe_bw_cruise();
        } else {
            self.mode = Mode::Startup;
            self.pacing_gain = STARTUP_PACING_GAIN;
            self.cwnd_gain = STARTUP_CWND_GAIN;
        }
    }

    /// Draft §5.6.2 BBRSetPacingRate (with the 1 % margin).
    fn set_pacing_rate(&mut self) {
        if self.max_bw <= 0.0 {
            return;
        }
        let rate = self.pacing_gain * self.max_bw * (1.0 - PACING_MARGIN);
        if self.filled_pipe || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// Draft §5.6.4.4 BBRSetCwnd with Linux's recovery handling.
    fn set_cwnd(&mut self, a: &BbrAck, cwnd: &mut u64) {
        let min = MIN_PIPE_CWND_SEGS * self.mss;
        if a.newly_lost > 0 {
            // Linux: the window shrinks by what was newly found lost.
            *cwnd = cwnd.saturating_sub(a.newly_lost).max(self.mss);
        }
        if self.conservation {
            *cwnd = (*cwnd).max(a.inflight + a.newly_acked);
        } else if a.newly_acked > 0 {
            let target = self.inflight(self.cwnd_gain) + self.extra_acked();
            if self.filled_pipe {
                *cwnd = (*cwnd + a.newly_acked).min(target);
            } else if *cwnd < target || a.delivered < self.init_cwnd {
                *cwnd += a.newly_acked;
            }
            *cwnd = (*cwnd).max(min);
        }
        if self.mode == Mode::ProbeRtt {
            *cwnd = (*cwnd).min(self.probe_rtt_cwnd());
        }
    }

    /// Entering fast recovery (Linux `bbr_set_cwnd_to_recover_or_restore`): remember the
    /// window, conserve packets for one round (cwnd = what is in flight).
    pub(crate) fn on_enter_recovery(&mut self, inflight: u64, delivered: u64, cwnd: &mut u64) {
        self.save_cwnd(*cwnd);
        self.conservation = true;
        self.start_round(delivered);
        *cwnd = inflight.max(self.mss);
    }

    /// Fast recovery ended: the window before it comes back.
    pub(crate) fn on_exit_recovery(&mut self, cwnd: &mut u64) {
        self.conservation = false;
        *cwnd = (*cwnd).max(self.prior_cwnd);
        self.prior_cwnd = 0;
    }

    /// Retransmission timeout (Linux: the Loss state): remember the window, one segment now,
    /// restart the full-bandwidth check; the window comes back when the loss is repaired.
    pub(crate) fn on_rto(&mut self, cwnd: &mut u64) {
        self.save_cwnd(*cwnd);
        self.in_loss = true;
        self.conservation = false;
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        *cwnd = self.mss;
    }

    /// Everything outstanding at the timeout is acknowledged.
    pub(crate) fn on_rto_repaired(&mut self, cwnd: &mut u64) {
        if self.in_loss {
            self.in_loss = false;
            *cwnd = (*cwnd).max(self.prior_cwnd);
            self.prior_cwnd = 0;
        }
    }

    fn save_cwnd(&mut self, cwnd: u64) {
        // Linux bbr_save_cwnd: the larger of the saved one and the current, when a loss
        // episode is already in progress.
        if self.conservation || self.in_loss || self.mode == Mode::ProbeRtt {
            self.prior_cwnd = self.prior_cwnd.max(cwnd);
        } else {
            self.prior_cwnd = cwnd;
        }
    }
}
