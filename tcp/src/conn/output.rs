//! Segment generation: what to send next (RFC 9293 §3.8, RFC 6675 §5, RFC 6582).

use netcore::Instant;

use super::{Connection, Limit, SegBuf, SendSource, State, Transmit};
use crate::wire::OutHeader;

/// Largest TCP header (RFC 9293 §3.1: data offset of 15 words).
const MAX_HEADER: usize = 60;

#[cfg(test)]
thread_local! {
    /// Tests: turn off the short cut of [`Transmit::last`] and [`Connection::poll_nothing`]
    /// (the reference behaviour: every caller polls until `None`).
    pub(crate) static NO_SHORTCUT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What the next segment carries, in absolute send offsets.
struct Plan {
    start: u64,
    end: u64,
    syn: bool,
    fin: bool,
    retransmit: bool,
    /// The first record boundary past `start` where the plan computed it (data plans), else
    /// `u64::MAX`: PSH marks a segment that ends there, so it is not searched for again.
    bound: u64,
}

impl<B: SegBuf> Connection<B> {
    /// Write the next segment to send into `buf` (at least 60 bytes; 60 + `emss()` for
    /// full-sized segments), reading payload from `src`. Call until it returns `None` or a
    /// segment marked [`Transmit::last`].
    #[must_use]
    pub fn poll_transmit<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        src: &mut S,
    ) -> Option<Transmit> {
        if buf.len() < MAX_HEADER {
            return None;
        }
        let max_payload = buf.len().saturating_sub(MAX_HEADER) as u64;
        self.poll_common(now, buf, src, Some(max_payload))
    }

    /// Like [`Connection::poll_transmit`], but writes only the TCP header (`Transmit::len ==
    /// Transmit::header_len`): the payload, `Transmit::payload` in stream offsets, stays in the
    /// owner's memory and is attached by the caller (zero-copy TX, e.g. an external mbuf).
    /// In software checksum mode the checksum covers the payload via
    /// [`SendSource::checksum`]. `hdr` must hold at least 60 bytes.
    #[must_use]
    pub fn poll_transmit_header<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        hdr: &mut [u8],
        src: &mut S,
    ) -> Option<Transmit> {
        if hdr.len() < MAX_HEADER {
            return None;
        }
        self.poll_common(now, hdr, src, None)
    }

    fn poll_common<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        src: &mut S,
        inline: Option<u64>,
    ) -> Option<Transmit> {
        self.tx_limit = inline.unwrap_or(u64::MAX).max(1);
        self.tx_inline = inline.is_some();
        if self.arm_pending.is_some_and(|t| t != now) {
            // The last burst's arming: the arming below is at another time.
            self.settle_timers();
        }
        let mut t = self.transmit_inner(now, buf, src);
        match t.as_mut() {
            Some(t) => {
                self.chrono.set(now, Limit::Busy, &mut self.stats);
                let flight = self.snd_max - self.snd_una;
                self.cwnd_use
                    .on_transmit_poll(self.snd_una, self.snd_nxt, flight, false);
                self.stats.segs_out += 1;
                // The poll after this one, done here (same `now`) when it surely finds
                // nothing: the caller may skip it (its frame-building set-up costs more than
                // this test). Neither step reads what the other's timers change, so one
                // `arm_timers` below serves both.
                if self.surely_nothing() {
                    self.note_nothing(now);
                    t.last = true;
                }
            }
            None => self.note_nothing(now),
        }
        // One arming per burst (the polls at one `now`), not per segment: after a data
        // segment it is deferred, and the burst's last poll (`None`, or anything but data), a
        // poll at another time, any other mutating entry ([`Connection::settle_timers`]) or
        // `poll_timeout` (which computes it) does it. The same timers result as arming after
        // every poll. Let S be the state after a data segment's poll (deferred arming A, at
        // `now`) and P the next transmit poll at the same `now`; A∘P∘A = A∘P:
        // - S has data in flight and the retransmission timer running (`send_plan` starts it,
        //   RFC 6298 §5.1): A leaves `rtx_at` alone, and P, which reads no other timer A sets
        //   (`rtx_at` in `plan` and `send_plan`, never `persist_at`, `keepalive_at` or
        //   `tlp_at`), does the same either way. P never ends the flight (SND.UNA moves only
        //   on input), so the final A sets the persist timer (RFC 9293 §3.8.6.1) and the
        //   keepalive (§3.8.4) to None both ways: both need nothing in flight.
        // - The probe timeout (RFC 8985 §7.2), the one timer A computes: if P sends new data
        //   it clears `tlp_at` (§7.2: sending new data restarts the PTO) and the final A sets
        //   it from the same state both ways. Else P changes none of its inputs (SRTT,
        //   FlightSize = SND.MAX - SND.UNA, `rtx_at`: `plan` restarts that only for a segment
        //   RACK marked lost, which makes the PTO ineligible before P) except that a
        //   retransmission may clear the last lost mark, and then S was ineligible with
        //   `tlp_at` None (every arming with lost bytes clears it, polls never set it), as
        //   A(S) is; otherwise A(S) keeps `tlp_at` or computes the value the final A would.
        // So every `handle_timeout` and input sees the timers the per-poll arming had set,
        // with the same deadlines (RFC 6298 §5, RFC 8985 §7.2); `deferred_arming_*` tests
        // check it against arming per poll ([`ARM_EACH_SEGMENT`](super::ARM_EACH_SEGMENT)).
        #[cfg(test)]
        let each = super::ARM_EACH_SEGMENT.with(std::cell::Cell::get);
        #[cfg(not(test))]
        let each = false;
        if !each && t.as_ref().is_some_and(|t| t.payload.end > t.payload.start) {
            self.arm_pending = Some(now);
            // The state changed since `poll_timeout` last computed the deferred timers.
            self.arm_view.set(None);
        } else {
            self.arm_timers(now);
        }
        t
    }

    /// What a transmit poll that found nothing records: why nothing was sent (the chrono
    /// counters), the window use, and the application-limited mark.
    fn note_nothing(&mut self, now: Instant) {
        let limit = self.limit();
        self.chrono.set(now, limit, &mut self.stats);
        let flight = self.snd_max - self.snd_una;
        self.cwnd_use
            .on_transmit_poll(self.snd_una, self.snd_nxt, flight, limit == Limit::Cwnd);
        if self.log_on() && self.snd_nxt >= self.app_end && self.state.is_synchronized() {
            // Nothing more to send while the window has room: samples from here on are
            // application-limited (draft-cheng-iccrg-delivery-rate-estimation §3.4).
            let pipe = self.pipe();
            if pipe < self.cc.cwnd {
                self.rack.rate.on_app_limited(pipe);
            }
        }
    }

    /// Whether [`Connection::transmit_inner`] would now return `None` without changing any
    /// state: every branch that can produce a segment, or that has side effects on the way to
    /// `None` (pacing credit, a taken `sack_owed`, a TLP plan, NewReno's recovery flags), is
    /// ruled out. Conservative: false means "poll to know".
    fn surely_nothing(&self) -> bool {
        #[cfg(test)]
        if NO_SHORTCUT.with(std::cell::Cell::get) {
            return false;
        }
        // Unsent data first: it decides in bulk transfers, where the short cut never applies.
        self.snd_nxt >= self.app_end
            && self.ctl.is_empty()
            && self.dupacks_owed == 0
            && !self.sack_owed
            && !self.ack_now
            && !self.probe_due
            && !self.keepalive_due
            && !matches!(self.state, State::SynSent | State::SynReceived)
            && !self.tlp_due
            && !self.fin_queued
            && self.rack.lost_bytes() == 0
            && !(self.in_recovery && self.newreno_rtx)
            && self.cc.pacing_rate().is_none()
    }

    /// A transmit poll for a caller that has not built a frame yet: when it would surely find
    /// nothing, record what that poll records (same state, timers and counters afterwards)
    /// and return true, so the caller skips setting up a buffer; else false (poll).
    pub fn poll_nothing(&mut self, now: Instant) -> bool {
        if !self.surely_nothing() {
            return false;
        }
        self.settle_timers();
        self.note_nothing(now);
        self.arm_timers(now);
        true
    }

    fn transmit_inner<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        src: &mut S,
    ) -> Option<Transmit> {
        if let Some(mut h) = self.ctl.pop_front() {
            h.src_port = self.local.1;
            h.dst_port = self.remote.1;
            if h.rst {
                self.stats.resets_sent += 1;
            }
            return self.emit(now, h, buf, 0..0, src);
        }
        if self.state == State::Closed {
            return None;
        }
        if self.dupacks_owed > 0 && self.state != State::SynSent {
            // RFC 5681 §4.2: duplicate ACKs go out at once and without data.
            self.dupacks_owed -= 1;
            self.sack_owed = false;
            let h = self.base_header();
            return self.emit(now, h, buf, 0..0, src);
        }
        // Written only when set (as `ack_now` in `emit`): `surely_nothing` reads these flags
        // together, and a load over a store still in flight stalls (BENCHMARKS.md §4).
        if self.sack_owed {
            self.sack_owed = false;
            if self.state != State::SynSent && (self.rx.has_ooo() || self.dsack.is_some()) {
                let h = self.base_header();
                return self.emit(now, h, buf, 0..0, src);
            }
        }
        match self.pace_wait(now) {
            None => {
                if let Some(plan) = self.plan(now) {
                    return self.send_plan(now, plan, buf, src);
                }
            }
            Some(at) if self.wants_to_send() => self.pace_at = Some(at),
            Some(_) => {}
        }
        if self.probe_due {
            // RFC 9293 §3.8.6.1 zero-window probe. Like Linux, the probe is SND.UNA - 1 without
            // data: the peer answers with its window and nothing enters sequence space.
            self.probe_due = false;
            self.stats.window_probes += 1;
            let mut h = self.base_header();
            h.seq = self.wire_snd(self.snd_una) - 1;
            return self.emit(now, h, buf, 0..0, src);
        }
        if self.keepalive_due {
            // RFC 9293 §3.8.4: a probe with SEG.SEQ = SND.NXT - 1 and no data.
            self.keepalive_due = false;
            self.stats.keepalive_probes += 1;
            let mut h = self.base_header();
            h.seq = self.wire_snd(self.snd_max) - 1;
            return self.emit(now, h, buf, 0..0, src);
        }
        if self.ack_now && self.state != State::SynSent {
            let h = self.base_header();
            return self.emit(now, h, buf, 0..0, src);
        }
        None
    }

    /// Header with our ports, SEQ = the highest sequence sent and ACK = RCV.NXT.
    ///
    /// Segments without data carry SND.MAX rather than a rewound SND.NXT (after an RTO), as
    /// Linux's `tcp_acceptable_seq` does: an old SEQ would make the peer judge the ACK
    /// unacceptable (RFC 9293 §3.10.7.4) and answer with an ACK of its own, ping-pong forever.
    fn base_header(&self) -> OutHeader {
        OutHeader {
            src_port: self.local.1,
            dst_port: self.remote.1,
            seq: self.wire_snd(self.snd_max),
            ack: Some(self.wire_rcv(self.rcv_nxt)),
            ..Default::default()
        }
    }

    fn next_boundary(&self, from: u64) -> u64 {
        // Segments are planned front to back: the first boundary past `from` is usually the
        // one the last call found or the next (records_hint, counted from the stream's first
        // record so acknowledgements do not move it); else a binary search over thousands of
        // records in flight.
        let at = |i: usize| self.records.get(i).copied();
        let first_past = |i: usize| {
            at(i).is_some_and(|b| b > from) && (i == 0 || at(i - 1).is_some_and(|b| b <= from))
        };
        let i = match self.records_hint.get().checked_sub(self.records_popped) {
            Some(h) if first_past(h as usize) => h as usize,
            Some(h) if first_past(h as usize + 1) => h as usize + 1,
            _ => self.records.partition_point(|&b| b <= from),
        };
        self.records_hint.set(self.records_popped + i as u64);
        at(i).unwrap_or(u64::MAX)
    }

    /// Choose the next sequence-consuming segment, if any.
    fn plan(&mut self, now: Instant) -> Option<Plan> {
        if self.syn_needed
            && self.snd_nxt == 0
            && matches!(self.state, State::SynSent | State::SynReceived)
        {
            return Some(Plan {
                start: 0,
                end: 0,
                syn: true,
                fin: false,
                retransmit: self.snd_max > 0,
                bound: u64::MAX,
            });
        }
        if !matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::Closing
                | State::LastAck
        ) {
            return None;
        }
        let emss = u64::from(self.emss());
        let fin_at = self.app_end;
        if self.rack_on() {
            if self.tlp_due
                && let Some(p) = self.tlp_plan()
            {
                return Some(p);
            }
            // RFC 8985 §3.2 / RFC 6675 §5 NextSeg rule 1: segments RACK marked lost go first,
            // while pipe < cwnd (the head one regardless, as the fast retransmit).
            if let Some((s, e)) = self.rack.next_lost()
                && (s == self.snd_una || self.pipe() < self.cc.cwnd)
                && let Some(p) = self.resend_plan(s, e)
            {
                if s == self.snd_una {
                    // The head's timeout starts now (RFC 6298 §5.1, as Linux's tcp_rearm_rto).
                    self.rtx_at = Some(now.add_nanos(self.rto_ns()));
                }
                return Some(p);
            }
        }
        // Loss recovery retransmissions first (RFC 6675 §5 NextSeg rule 1 / RFC 6582).
        if !self.rack_on()
            && self.in_recovery
            && self.newreno_rtx
            && let Some(p) = self.newreno_plan(now, emss, fin_at)
        {
            return Some(p);
        }
        self.new_data_plan(emss, fin_at)
    }

    /// Without RACK, in fast recovery (RFC 6675 §5 NextSeg rule 1 with SACK, RFC 6582
    /// without): the next hole's retransmission, if cwnd allows. `None`: plan new data.
    #[cold]
    fn newreno_plan(&mut self, now: Instant, emss: u64, fin_at: u64) -> Option<Plan> {
        let cwnd_ok = self.pipe() < self.cc.cwnd || self.rtx_next == self.snd_una;
        let hole = if self.sack_ok && !self.sb.is_empty() {
            self.sb.next_hole(self.rtx_next.max(self.snd_una))
        } else if self.rtx_next == self.snd_una && self.snd_una < self.snd_max {
            Some((self.snd_una, self.snd_max))
        } else {
            None
        };
        match hole {
            Some((s, e)) if cwnd_ok => {
                let bound = self.next_boundary(s);
                let end = e.min(s + emss.min(self.tx_limit)).min(bound).min(fin_at);
                if !self.sack_ok {
                    self.newreno_rtx = false;
                }
                if end > s {
                    if s == self.snd_una {
                        self.una_rtx_mark = Some(self.snd_max);
                        // The oldest outstanding segment was just (re)sent: its timeout
                        // starts now (RFC 6298 §5.1 applied to the head, as Linux's
                        // tcp_rearm_rto does), or the RTO would cut recovery short whenever
                        // RTO < 2 RTT.
                        self.rtx_at = Some(now.add_nanos(self.rto_ns()));
                    }
                    self.rtx_next = end;
                    return Some(Plan {
                        start: s,
                        end,
                        syn: false,
                        fin: false,
                        retransmit: true,
                        bound,
                    });
                }
                if s == fin_at && self.fin_queued {
                    self.rtx_next = fin_at + 1;
                    return Some(Plan {
                        start: s,
                        end: s,
                        syn: false,
                        fin: true,
                        retransmit: true,
                        bound,
                    });
                }
            }
            None if self.sack_ok => self.newreno_rtx = self.sb.is_empty(),
            _ => {}
        }
        None
    }

    /// New data, or go-back-N after an RTO, within cwnd and the peer's window (RFC 9293
    /// §3.7.4 Nagle, §3.8.6.2.1 sender SWS avoidance), then the FIN.
    #[inline(always)]
    fn new_data_plan(&self, emss: u64, fin_at: u64) -> Option<Plan> {
        // (With RACK, go-back-N only happens in the fallback of `on_rto`: SND.NXT < SND.MAX.)
        let rack_pipe = self.rack_on() && self.snd_nxt >= self.snd_max;
        let in_flight = if rack_pipe || (self.in_recovery && self.sack_ok) {
            self.pipe()
        } else {
            self.snd_nxt - self.snd_una
        };
        // RFC 3042 limited transmit: the first two duplicate ACKs each release one new
        // segment beyond cwnd, so small windows still reach three duplicates.
        let limited = if self.in_recovery || self.rack_on() {
            // (With RACK, pipe already excludes SACKed data.)
            0
        } else {
            u64::from(self.dupacks.min(2)) * emss
        };
        let cwnd_room = (self.cc.cwnd + limited).saturating_sub(in_flight);
        let wnd_edge = self.snd_una + self.snd_wnd;
        let wnd_room = wnd_edge.saturating_sub(self.snd_nxt);
        let room = cwnd_room.min(wnd_room).min(self.tx_limit);
        if self.snd_nxt < fin_at {
            let avail = fin_at - self.snd_nxt;
            let bound = self.next_boundary(self.snd_nxt);
            let end = (self.snd_nxt + avail.min(emss).min(room)).min(bound);
            let len = end.saturating_sub(self.snd_nxt);
            if len > 0 {
                // A segment as large as this poll can carry counts as full, even when the
                // caller's buffer (60 + payload) is smaller than 60 + EMSS.
                let cap = emss.min(self.tx_limit);
                let full = len >= cap || end == bound || end == fin_at;
                let outstanding = self.snd_max > self.snd_una;
                // RFC 9293 §3.7.4 Nagle; §3.8.6.2.1 sender SWS avoidance.
                let nagle_ok = !self.cfg.nagle || len >= cap || !outstanding;
                let sws_ok = full || len * 2 >= self.max_snd_wnd || !outstanding;
                if nagle_ok && sws_ok {
                    let fin = self.fin_queued && end == fin_at;
                    return Some(Plan {
                        start: self.snd_nxt,
                        end,
                        syn: false,
                        fin,
                        retransmit: self.snd_nxt < self.snd_max,
                        bound,
                    });
                }
            }
            return None;
        }
        if self.fin_queued && self.snd_nxt == fin_at {
            return Some(Plan {
                start: fin_at,
                end: fin_at,
                syn: false,
                fin: true,
                retransmit: self.snd_max > fin_at,
                bound: u64::MAX,
            });
        }
        None
    }

    /// Pacing (BBR, draft-ietf-ccwg-bbr §5.6.2): `None` if a segment may leave now, else when
    /// the next may. Credit accrues at the pacing rate up to one send quantum, so bursts stay
    /// within a quantum and the caller's timer (coarser than a segment's time) suffices.
    fn pace_wait(&mut self, now: Instant) -> Option<Instant> {
        let rate = self.cc.pacing_rate()?;
        if rate <= 0.0 || !self.state.is_synchronized() {
            return None;
        }
        let dt = now.saturating_duration_since(self.pace_last).as_secs_f64();
        self.pace_last = now;
        let quantum = self.cc.send_quantum() as f64;
        self.pace_credit = (self.pace_credit + rate * dt).min(quantum);
        if self.pace_credit > 0.0 {
            self.pace_at = None;
            return None;
        }
        let wait = -self.pace_credit / rate;
        // At least a microsecond: the credit must be positive by then.
        Some(now + netcore::Duration::from_nanos((wait * 1e9) as u64 + 1000))
    }

    fn pace_spend(&mut self, bytes: f64) {
        if self.cc.pacing_rate().is_some() {
            self.pace_credit -= bytes;
        }
    }

    /// Whether sequence-consuming output is waiting (for the pacing timer).
    /// Why nothing more may be sent now (after a transmit poll found nothing): the state for
    /// the chrono counters. Mirrors the new-data room of [`Connection::plan`].
    fn limit(&self) -> Limit {
        if !self.state.is_synchronized() {
            return Limit::Idle;
        }
        if self.snd_nxt < self.app_end {
            // The next segment does not fit (sender SWS avoidance, RFC 9293 §3.8.6.2.1, holds
            // back a partial one while data is outstanding).
            let want = (self.app_end - self.snd_nxt).min(u64::from(self.emss()));
            let wnd_room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
            if wnd_room < want {
                return Limit::Rwnd;
            }
            let in_flight = if self.rack_on() || (self.in_recovery && self.sack_ok) {
                self.pipe()
            } else {
                self.snd_nxt - self.snd_una
            };
            if self.cc.cwnd.saturating_sub(in_flight) < want {
                return Limit::Cwnd;
            }
            return Limit::Busy;
        }
        if self.snd_max <= self.snd_una {
            Limit::Idle
        } else if self.send_capacity() < u64::from(self.emss()) {
            Limit::Sndbuf
        } else {
            Limit::App
        }
    }

    fn wants_to_send(&self) -> bool {
        self.snd_nxt < self.app_end
            || self.rack.lost_bytes() > 0
            || self.tlp_due
            || (self.in_recovery && self.newreno_rtx)
            || (self.fin_queued && self.snd_max <= self.app_end)
    }

    /// A retransmission of (the start of) the logged range `[s, e)`: at most one segment, not
    /// crossing a record boundary; the FIN goes along if the range holds it.
    fn resend_plan(&self, s: u64, e: u64) -> Option<Plan> {
        let fin_at = self.app_end;
        let emss = u64::from(self.emss());
        let bound = self.next_boundary(s);
        let end = e.min(s + emss.min(self.tx_limit)).min(bound).min(fin_at);
        let fin = self.fin_queued && e > fin_at && end == fin_at;
        if end > s || (fin && s == fin_at) {
            Some(Plan {
                start: s,
                end: end.max(s),
                syn: false,
                fin,
                retransmit: true,
                bound,
            })
        } else {
            None
        }
    }

    /// RFC 8985 §7.3: the tail loss probe. New data if the peer's window allows, else the
    /// highest segment not yet delivered. Either way outside cwnd.
    fn tlp_plan(&mut self) -> Option<Plan> {
        self.tlp_due = false;
        let emss = u64::from(self.emss());
        let fin_at = self.app_end;
        let wnd_edge = self.snd_una + self.snd_wnd;
        let p = if self.snd_nxt < fin_at && wnd_edge > self.snd_nxt {
            let bound = self.next_boundary(self.snd_nxt);
            let end = (self.snd_nxt + emss.min(self.tx_limit))
                .min(wnd_edge)
                .min(bound)
                .min(fin_at);
            Plan {
                start: self.snd_nxt,
                end,
                syn: false,
                fin: self.fin_queued && end == fin_at,
                retransmit: false,
                bound,
            }
        } else if self.fin_queued && self.snd_nxt == fin_at && self.snd_max <= fin_at {
            Plan {
                start: fin_at,
                end: fin_at,
                syn: false,
                fin: true,
                retransmit: false,
                bound: u64::MAX,
            }
        } else {
            let (s, e) = self.rack.last_undelivered()?;
            // The last segment's worth of the range.
            let data_end = e.min(fin_at);
            let s = s.max(data_end.saturating_sub(emss.min(self.tx_limit)));
            self.resend_plan(s, e)?
        };
        self.tlp_end = Some(self.snd_max.max(p.end + u64::from(p.fin)));
        self.tlp_rtx = p.retransmit;
        self.stats.tlp_probes += 1;
        Some(p)
    }

    fn send_plan<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        p: Plan,
        buf: &mut [u8],
        src: &mut S,
    ) -> Option<Transmit> {
        let mut h = self.base_header();
        h.seq = self.wire_snd(p.start);
        if p.syn {
            h.syn = true;
            h.mss = Some(self.cfg.mss);
            let offer_ws = self.state == State::SynSent || self.ws_ok;
            if let (Some(ws), true) = (self.cfg.window_scale, offer_ws) {
                h.wscale = Some(ws.min(14));
            }
            h.sack_permitted = self.cfg.sack && (self.state == State::SynSent || self.sack_ok);
            if self.state == State::SynSent {
                h.ack = None;
            }
        }
        h.fin = p.fin;
        // PSH on the last segment of a record or of the data queued (RFC 9293 §3.9.1.2).
        h.psh = p.end > p.start && (p.end == self.app_end || p.end == p.bound);
        let seq_end = p.end + u64::from(p.syn) + u64::from(p.fin);
        if p.retransmit {
            if p.end > p.start {
                self.stats.retransmissions += 1;
            }
        } else if self.rtt_probe.is_none() && seq_end > p.start {
            self.rtt_probe = Some((seq_end, now));
        }
        if seq_end > self.snd_max {
            self.stats.bytes_out += p.end.saturating_sub(self.snd_max.max(p.start).max(1));
        }
        // Advance SND.NXT only for in-order (non-hole) sends.
        if p.start == self.snd_nxt || p.syn {
            self.snd_nxt = seq_end;
        }
        if p.end > p.start {
            self.pace_spend((p.end - p.start) as f64);
            if self.in_recovery {
                // RFC 6937 §3: prr_out counts everything sent during recovery.
                self.prr_out += p.end - p.start;
            }
        }
        if self.log_on() && !p.syn {
            // RFC 8985 §6.1: per-segment transmission times (and delivery-rate state).
            self.rack.on_send(p.start, seq_end, now);
            if seq_end > self.snd_max {
                // RFC 8985 §7.2: sending new data restarts the probe timeout.
                self.tlp_at = None;
            }
        }
        let bulk = 2 * u64::from(self.emss());
        let lone_before = self.snd_max - self.snd_una < bulk;
        self.snd_max = self.snd_max.max(seq_end);
        if self.rtx_at.is_none() {
            self.rtx_at = Some(now.add_nanos(self.rto_ns()));
        } else if lone_before && self.snd_max - self.snd_una >= bulk {
            // The timer ran with a lone segment's bound (`rto_min`); a flight has the lower
            // `rto_min_bulk`: start it again with that (RFC 6298 §5.1 starts it on sending).
            let at = now.add_nanos(self.rto_ns());
            self.rtx_at = self.rtx_at.map(|t| t.min(at));
        }
        self.emit(now, h, buf, p.start..p.end, src)
    }

    /// Fill window, timestamps and SACK fields, write header + payload, update ACK state.
    fn emit<S: SendSource + ?Sized>(
        &mut self,
        now: Instant,
        mut h: OutHeader,
        buf: &mut [u8],
        data: std::ops::Range<u64>,
        src: &mut S,
    ) -> Option<Transmit> {
        if !h.rst {
            h.window = self.window_field(h.syn);
        }
        if self.ts_ok || (h.syn && self.cfg.timestamps && self.state == State::SynSent) {
            // RFC 7323 §3.2: TSecr echoes TS.Recent when ACK is set.
            let tsval = self.ts_offset.wrapping_add(now.as_millis() as u32);
            let tsecr = if h.ack.is_some() { self.ts_recent } else { 0 };
            h.timestamp = Some((tsval, tsecr));
        }
        let mut payload_len = (data.end - data.start) as usize;
        let mut sack_sent = false;
        if self.sack_ok
            && h.ack.is_some()
            && !h.syn
            && !h.rst
            && (self.rx.has_ooo() || self.dsack.is_some())
        {
            // RFC 2018 §3/§4: blocks must fit in the option space left under the MSS; payload
            // plus options never exceed the MSS the peer announced (RFC 9293 §3.7.1, RFC 6691),
            // i.e. the IP packet fits the path MTU.
            let used = if self.ts_ok { 12 } else { 0 };
            let mss = usize::from(self.peer_mss.min(self.cfg.mss));
            let space = (40usize - used).min(mss.saturating_sub(payload_len + used));
            let n = (space.saturating_sub(2) / 8).min(3);
            let mut blocks = [(0u64, 0u64); 3];
            let mut got = 0;
            if n > 0
                && let Some(d) = self.dsack.take()
            {
                // RFC 2883 §4: the D-SACK block goes first.
                blocks[0] = d;
                got = 1;
            }
            got += self.rx.sack_blocks(&mut blocks[got..n]);
            for (i, &(l, r)) in blocks[..got].iter().enumerate() {
                h.sack[i] = Some((self.wire_rcv(l).0, self.wire_rcv(r).0));
            }
            // A full-sized data segment has no room: if this ACK was owed for new receive
            // state (RFC 5681 §4.2), a pure ACK carries the blocks next.
            self.sack_owed = got == 0 && payload_len > 0 && self.ack_now;
            sack_sent = got > 0;
        }
        let hl = h.header_len();
        if hl > buf.len() {
            return None;
        }
        // Stream offset = absolute offset - 1 (the SYN).
        let so = data.start.saturating_sub(1);
        if self.tx_inline {
            // plan() already limited the payload to what fits.
            payload_len = payload_len.min(buf.len() - hl);
            if payload_len > 0 {
                src.read(so, &mut buf[hl..hl + payload_len]);
            }
            let seg = &mut buf[..hl + payload_len];
            h.emit(seg, self.local.0, self.remote.0, self.cfg.checksum);
        } else {
            let sum =
                if payload_len > 0 && self.cfg.checksum == crate::config::ChecksumMode::Software {
                    src.checksum(so, payload_len)
                } else {
                    0
                };
            h.emit_header(
                buf,
                hl + payload_len,
                sum,
                self.local.0,
                self.remote.0,
                self.cfg.checksum,
            );
        }
        if payload_len == 0 && !h.syn && !h.fin && !h.rst {
            self.stats.acks_out += 1;
        }
        if h.ack.is_some() && !h.rst {
            if self.ack_now {
                self.ack_now = false;
            }
            self.unacked_segs = 0;
            self.delack_at = None;
            self.last_ack_sent = self.rcv_nxt;
            self.on_ack_sent(sack_sent);
        }
        Some(Transmit {
            len: if self.tx_inline { hl + payload_len } else { hl },
            header_len: hl,
            payload: so..so + payload_len as u64,
            src: self.local.0,
            dst: self.remote.0,
            last: false,
        })
    }

    /// The window field to advertise; the right edge never moves left (RFC 9293 §3.8.6.2.2,
    /// RFC 7323 §2.4), and moves right only by at least min(RCV.BUFF/2, Eff.snd.MSS)
    /// (receiver SWS avoidance, RFC 9293 §3.8.6.2.2). So the window stays put while only a
    /// little was read, and a run of duplicate ACKs carries one window value (a sender counts
    /// an ACK that changes the window as a window update, not a duplicate: RFC 5681 §2 (e)).
    fn window_field(&mut self, syn: bool) -> u16 {
        let shift = if syn { 0 } else { self.rcv_wscale };
        let avail = self.rcv_window_avail();
        let cur = self.rcv_adv.saturating_sub(self.rcv_nxt);
        let step = u64::from(self.cfg.recv_window / 2)
            .min(u64::from(self.cfg.mss))
            .max(1);
        let want = if avail >= cur + step { avail } else { cur };
        let max = 0xffffu64 << shift;
        let w = want.min(max);
        // Round up so the scaled value never falls below the old right edge.
        let field = w.div_ceil(1u64 << shift).min(0xffff);
        let edge = self.rcv_nxt + (field << shift);
        if edge > self.rcv_adv {
            self.rcv_adv = edge;
        }
        // Truncation impossible: clamped to 0xffff above.
        field as u16
    }
}

#[cfg(test)]
mod tests {
    use crate::TcpConfig;
    use crate::conn::{NoData, State};
    use crate::testing::Pair;

    /// The hinted `next_boundary` answers as a binary search does, for offsets front to back,
    /// back to front, at random, and after acknowledged records are dropped from the front.
    #[test]
    fn next_boundary_with_hint_agrees_with_a_search() {
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 3);
        let mut src = |_: u64, dst: &mut [u8]| dst.fill(7);
        assert!(
            p.drive(&mut src, &mut NoData, 10_000, |p| p.client().state()
                == State::Established)
        );
        let c = p.client();
        for k in 0..400u64 {
            c.send_record(1 + (k * 37) % 1500).unwrap();
        }
        let search = |c: &crate::Connection<Vec<u8>>, from: u64| {
            let i = c.records.partition_point(|&b| b <= from);
            c.records.get(i).copied().unwrap_or(u64::MAX)
        };
        let mut x = 99u64;
        for round in 0..4 {
            let lo = c.records.front().copied().unwrap_or(0).saturating_sub(3);
            let hi = c.records.back().copied().unwrap_or(0) + 3;
            let mut froms: Vec<u64> = (lo..hi).collect();
            if round % 2 == 1 {
                froms.reverse();
            }
            for _ in 0..500 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                froms.push(lo + (x >> 33) % (hi - lo));
            }
            for from in froms {
                assert_eq!(
                    c.next_boundary(from),
                    search(c, from),
                    "round {round} from {from}"
                );
            }
            for _ in 0..60 {
                c.records.pop_front();
                c.records_popped += 1;
            }
        }
    }
}
