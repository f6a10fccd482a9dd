//! Segment arrival (RFC 9293 §3.10.7), with RFC 5961, RFC 7323 and RFC 2018/6675 additions.

use netcore::{Duration, Instant, Seq32};

use super::{CloseReason, Connection, Event, SegBuf, Segment, State};
use crate::bbr::BbrAck;
use crate::reasm::{Bound, Insert};
use crate::wire::{OutHeader, SegmentHeader};

/// The RST answering `h` when there is no (matching) connection (RFC 9293 §3.10.7.1):
/// `<SEQ=SEG.ACK><CTL=RST>` if ACK is set, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
/// `None` for an incoming RST (never answer a reset).
pub(crate) fn rst_for(h: &SegmentHeader) -> Option<OutHeader> {
    if h.rst {
        return None;
    }
    let mut o = OutHeader {
        src_port: h.dst_port,
        dst_port: h.src_port,
        rst: true,
        ..Default::default()
    };
    match h.ack {
        Some(a) => o.seq = a,
        None => {
            o.seq = Seq32(0);
            o.ack = Some(h.seq + h.seq_len());
        }
    }
    Some(o)
}

impl<B: SegBuf> Connection<B> {
    /// Process one received segment addressed to this connection.
    pub fn handle_segment(&mut self, now: Instant, seg: Segment<B>) {
        let Segment { header, buf } = seg;
        self.handle_parsed(now, &header, buf);
    }

    /// [`Connection::handle_segment`] with the header by reference: the endpoint's receive
    /// path hands over the header that `parse_segment_into` has just written field by field,
    /// without copying it into a [`Segment`] first (a copy in 16-byte words right after those
    /// narrower stores waits for them to reach the cache: store forwarding fails, ~6 ns a
    /// segment, issue #8). Its fields are read one by one here.
    pub fn handle_parsed(&mut self, now: Instant, h: &SegmentHeader, buf: B) {
        self.settle_timers();
        self.stats.segs_in += 1;
        self.last_rx = now;
        if self.state == State::FinWait2 {
            // The peer is alive: the FIN-WAIT-2 timeout restarts.
            self.fin_wait2_at = self.cfg.fin_wait2_timeout.map(|d| now + d);
        }
        self.keepalive_probes = 0;
        match self.state {
            State::Closed => {
                // RFC 9293 §3.10.7.1: CLOSED answers with a reset.
                if let Some(r) = rst_for(h) {
                    self.push_ctl(r);
                }
            }
            State::SynSent => self.rx_syn_sent(now, h),
            _ => self.rx_synchronized(now, h, buf),
        }
        self.arm_timers(now);
    }

    /// Absolute send offset of a wire ACK value, relative to SND.UNA.
    fn ack_rel(&self, ack: Seq32) -> i64 {
        i64::from(ack.diff(self.wire_snd(self.snd_una)))
    }

    /// RFC 9293 §3.10.7.3 SYN-SENT.
    fn rx_syn_sent(&mut self, now: Instant, h: &SegmentHeader) {
        let mut ack_ok = false;
        if let Some(ack) = h.ack {
            // Acceptable iff ISS < SEG.ACK <= SND.NXT.
            let rel = i64::from(ack.diff(self.iss));
            if rel <= 0 || rel > self.snd_max as i64 {
                if !h.rst {
                    self.push_ctl(OutHeader {
                        seq: ack,
                        rst: true,
                        ..Default::default()
                    });
                }
                return;
            }
            ack_ok = true;
        }
        if h.rst {
            // RFC 9293 §3.10.7.3 second check; RFC 5961 §3.2 allows this only with an
            // acceptable ACK.
            if ack_ok {
                self.stats.resets_received += 1;
                self.finish(CloseReason::Reset);
            }
            return;
        }
        if !h.syn {
            return;
        }
        self.irs = h.seq;
        self.rcv_nxt = 1;
        self.take_syn_options(h);
        if let Some((tsval, _)) = h.timestamp {
            self.ts_recent = tsval;
        }
        // RFC 7323 §2.2: the window in a SYN is never scaled.
        self.snd_wnd = u64::from(h.window);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = h.seq;
        if ack_ok {
            self.snd_wl2 = h.ack.unwrap_or(self.iss);
            self.on_new_ack(now, 1);
            self.state = State::Established;
            self.events.push_back(Event::Connected);
            self.ack_now = true;
        } else {
            // Simultaneous open: SYN-RECEIVED, resend our SYN as SYN-ACK (RFC 9293 §3.5 fig. 8).
            self.state = State::SynReceived;
            self.snd_nxt = 0;
            self.syn_needed = true;
            self.rtx_at = None;
        }
    }

    /// RFC 5961 §7: rate-limited challenge ACK.
    fn challenge_ack(&mut self, now: Instant) {
        let (start, _) = self.challenge_window;
        if now.saturating_duration_since(start) >= Duration::from_secs(1) {
            self.challenge_window = (now, 0);
        }
        if self.challenge_window.1 < self.cfg.challenge_ack_limit {
            self.challenge_window.1 += 1;
            self.stats.challenge_acks += 1;
            self.ack_now = true;
        }
    }

    /// Window used to judge acceptability: what we advertised, or more if we have room.
    fn rcv_wnd_accept(&self) -> u64 {
        self.rcv_adv
            .saturating_sub(self.rcv_nxt)
            .max(self.rcv_window_avail())
    }

    /// RFC 9293 §3.10.7.4: SYN-RECEIVED and the synchronized states.
    fn rx_synchronized(&mut self, now: Instant, h: &SegmentHeader, buf: B) {
        let without_syn;
        let h = if self.state == State::SynReceived && h.syn && h.seq == self.irs && !h.rst {
            if h.ack.is_none() {
                // A retransmitted SYN: our SYN-ACK was lost, send it again.
                self.snd_nxt = 0;
                self.syn_needed = true;
                return;
            }
            // Simultaneous open (RFC 9293 §3.5 figure 8): the peer's SYN-ACK repeats the SYN
            // we already have; drop the SYN and process the rest as the handshake's ACK.
            without_syn = SegmentHeader {
                syn: false,
                seq: h.seq + 1u32,
                ..h.clone()
            };
            &without_syn
        } else {
            h
        };
        // The FIN, unless the text it follows is trimmed to the window (below).
        let mut fin = h.fin;
        // RFC 7323 §5.3 R1: PAWS.
        if self.ts_ok
            && !h.rst
            && let Some((tsval, _)) = h.timestamp
            && (tsval.wrapping_sub(self.ts_recent) as i32) < 0
        {
            self.stats.paws_drops += 1;
            self.ack_now = true;
            return;
        }
        // First: sequence number acceptability (RFC 9293 §3.10.7.4 table).
        let off = i64::from(h.seq.diff(self.wire_rcv(self.rcv_nxt)));
        let len = h.seq_len() as i64;
        let wnd = self.rcv_wnd_accept() as i64;
        let acceptable = match (len, wnd) {
            (0, 0) => off == 0,
            (0, _) => 0 <= off && off < wnd,
            // RFC 9293 §3.10.7.4: with a zero window "special allowance should be made to
            // accept valid ACKs": a segment at RCV.NXT is processed for its ACK, and its text
            // is trimmed away below (as Linux's tcp_sequence does).
            (_, 0) => off == 0,
            _ => (0 <= off && off < wnd) || (0 < off + len && off + len - 1 < wnd),
        };
        if !acceptable {
            if !h.rst {
                // RFC 9293 §3.10.7.4: an unacceptable segment draws <SEQ=SND.NXT><ACK=RCV.NXT>,
                // a pure ACK (a duplicate one for the sender, RFC 5681 §4.2).
                self.owe_dupack();
                let plen = h.payload_len() as i64;
                if plen > 0 && off < 0 {
                    // RFC 2883 §4.1.1: report the duplicate in a D-SACK block.
                    let s = (self.rcv_nxt as i64 + off).max(0) as u64;
                    let e = (self.rcv_nxt as i64 + off + plen).max(0) as u64;
                    self.note_dsack(s, e.min(self.rcv_nxt));
                }
                if self.state == State::TimeWait && fin {
                    // RFC 9293 §3.10.7.4 eighth: a retransmitted FIN restarts the 2 MSL wait.
                    self.timewait_at = Some(now + self.cfg.time_wait);
                }
            }
            return;
        }
        // Second: RST (RFC 5961 §3.2).
        if h.rst {
            if off == 0 {
                self.stats.resets_received += 1;
                self.finish(CloseReason::Reset);
            } else {
                self.challenge_ack(now);
            }
            return;
        }
        // Fourth: SYN (RFC 5961 §4.2; RFC 9293 §3.10.7.4).
        if h.syn {
            self.challenge_ack(now);
            return;
        }
        // Fifth: ACK.
        let Some(ack) = h.ack else { return };
        let rel = self.ack_rel(ack);
        if self.state == State::SynReceived {
            if rel > 0 && self.snd_una as i64 + rel <= self.snd_max as i64 {
                // A CLOSE issued in SYN-RECEIVED takes effect now (RFC 9293 §3.10.4).
                self.state = if self.fin_queued {
                    State::FinWait1
                } else {
                    State::Established
                };
                self.events.push_back(Event::Connected);
                // RFC 9293 §3.10.7.4: SND.WND <- SEG.WND, SND.WL1 <- SEG.SEQ, SND.WL2 <- SEG.ACK.
                self.snd_wnd = u64::from(h.window) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = h.seq;
                self.snd_wl2 = ack;
            } else {
                self.push_ctl(OutHeader {
                    seq: ack,
                    rst: true,
                    ..Default::default()
                });
                return;
            }
        }
        let ack_abs = self.snd_una as i64 + rel;
        if ack_abs > self.snd_max as i64 {
            // RFC 9293 §3.10.7.4 / RFC 5961 §5.2: ACK of unsent data: send an ACK, drop.
            self.challenge_ack(now);
            return;
        }
        if rel < -(self.max_snd_wnd as i64) || ack_abs < 0 {
            // RFC 5961 §5.2: too old to be a plausible ACK.
            self.challenge_ack(now);
            return;
        }
        // RFC 7323 §4.3: update TS.Recent from an acceptable segment covering Last.ACK.sent.
        if let Some((tsval, _)) = h.timestamp
            && self.ts_ok
            && off <= (self.last_ack_sent as i64 - self.rcv_nxt as i64)
        {
            self.ts_recent = tsval;
        }
        self.process_ack(now, ack_abs as u64, h);
        if self.state == State::Closed {
            return;
        }
        // Sixth (URG) is ignored. Seventh: segment text.
        let plen = h.payload_len();
        let seg_start = self.rcv_nxt as i64 + off;
        if plen > 0 {
            if matches!(
                self.state,
                State::Established | State::FinWait1 | State::FinWait2
            ) {
                let start = seg_start;
                let end_limit = self.rcv_nxt as i64 + wnd;
                let mut range = h.payload.clone();
                if start + plen as i64 > end_limit {
                    // Trim to the window; a FIN past the window is not accepted.
                    let excess = (start + plen as i64 - end_limit) as usize;
                    range.end -= excess.min(range.len());
                    fin = false;
                }
                self.process_text(now, start, buf, range);
            } else {
                fin = false;
            }
        }
        // Eighth: FIN.
        if fin {
            let fin_at = seg_start + plen as i64;
            if fin_at >= self.rcv_nxt as i64 && self.rcv_fin.is_none() {
                self.rcv_fin = Some(fin_at as u64);
            }
            if fin_at > self.rcv_nxt as i64 {
                // Out of order: an immediate duplicate ACK (RFC 5681 §4.2).
                self.owe_dupack();
            }
        }
        self.check_fin(now);
    }

    fn process_text(&mut self, now: Instant, start: i64, buf: B, range: std::ops::Range<usize>) {
        if range.is_empty() {
            self.ack_now = true;
            return;
        }
        if start < self.rcv_nxt as i64 {
            // Partly old: RFC 2883 §4.1.2, D-SACK the duplicated part.
            let e = (start + range.len() as i64).min(self.rcv_nxt as i64);
            self.note_dsack(start.max(0) as u64, e.max(0) as u64);
        }
        let (start, range) = if start < 0 {
            let skip = (-start) as usize;
            if skip >= range.len() {
                self.ack_now = true;
                return;
            }
            (0u64, (range.start + skip)..range.end)
        } else {
            (start as u64, range)
        };
        let before = self.rcv_nxt;
        let range_len = range.len();
        match self
            .rx
            .insert(&mut self.rcv_nxt, start, buf, range, self.ooo_budget)
        {
            Insert::InOrder { filled } => {
                self.stats.bytes_in += self.rcv_nxt - before;
                // RFC 5681 §4.2: ACK at once when filling a gap or while a gap remains.
                if filled || self.rx.has_ooo() || self.cfg.delayed_ack.is_none() {
                    self.ack_now = true;
                    if filled {
                        self.quick_after_loss();
                    }
                } else if self.ack_now || self.ack_due() {
                    // RFC 9293 §3.8.6.3: every second full-sized segment, stretched once the
                    // peer's flight allows (`ack_due`; counted once an ACK is owed anyway).
                    self.ack_now = true;
                } else if self.delack_at.is_none() {
                    self.delack_at = self.cfg.delayed_ack.map(|d| now + d);
                }
            }
            // RFC 5681 §4.2 / RFC 9293 §3.10.7.4: an out-of-order segment draws an immediate
            // duplicate ACK, a pure one whatever data we have waiting (RFC 5681 §2: a sender
            // without SACK counts only ACKs without data).
            // With SACK, compressed after the first few (`owe_sack`, as Linux).
            Insert::Held => {
                self.stats.ooo_held += 1;
                self.owe_sack(now);
            }
            Insert::Duplicate => {
                // Old data, or a held segment received twice (RFC 2883 §4.1.3).
                let e = start + (range_len as u64);
                self.note_dsack(start, e);
                self.owe_dupack();
            }
            Insert::Dropped(why) => {
                match why {
                    Bound::Connection => self.stats.ooo_dropped += 1,
                    Bound::Small => self.stats.ooo_dropped_small += 1,
                    Bound::Budget => self.stats.ooo_dropped_budget += 1,
                }
                self.owe_dupack();
            }
        }
    }

    /// Remember a duplicate range to report once in a D-SACK block (RFC 2883), if SACK is on.
    fn note_dsack(&mut self, s: u64, e: u64) {
        if self.sack_ok && s < e {
            self.dsack = Some((s, e));
        }
    }

    /// Consume the peer's FIN once everything before it arrived (RFC 9293 §3.10.7.4 eighth).
    fn check_fin(&mut self, now: Instant) {
        let Some(fin_at) = self.rcv_fin else { return };
        if self.fin_delivered || self.rcv_nxt != fin_at {
            return;
        }
        self.rcv_nxt += 1;
        self.fin_delivered = true;
        self.ack_now = true;
        self.events.push_back(Event::PeerClosed);
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.our_fin_acked() {
                    self.enter_time_wait(now);
                } else {
                    self.state = State::Closing;
                }
            }
            State::FinWait2 => self.enter_time_wait(now),
            State::TimeWait => self.timewait_at = Some(now + self.cfg.time_wait),
            _ => {}
        }
    }

    pub(super) fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.fin_wait2_at = None;
        self.rtx_at = None;
        self.persist_at = None;
        self.keepalive_at = None;
        self.timewait_at = Some(now + self.cfg.time_wait);
    }

    pub(super) fn our_fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una > self.app_end
    }

    /// New data acknowledged up to `ack_abs` (common to handshake and data transfer).
    fn on_new_ack(&mut self, now: Instant, ack_abs: u64) {
        // RFC 6298 §3 + Karn: sample only segments never retransmitted.
        if let Some((end, t)) = self.rtt_probe
            && ack_abs >= end
        {
            self.rtt.sample_ns(now.nanos_since(t));
            self.rtt_probe = None;
        }
        self.rtt.backoff = 0;
        self.retries = 0;
        let old_data = self.snd_una.saturating_sub(1).min(self.app_end - 1);
        self.snd_una = ack_abs;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        if self.rtx_next < self.snd_una {
            self.rtx_next = self.snd_una;
        }
        self.una_rtx_mark = None;
        if self.rto_recover.is_some_and(|r| self.snd_una >= r) {
            self.rto_recover = None;
            self.cc.on_rto_repaired();
        }
        self.sb.advance(self.snd_una);
        self.rack.advance(self.snd_una);
        // RFC 8985 §7.2: an ACK of new data restarts the probe timeout.
        self.tlp_at = None;
        while self.records.front().is_some_and(|&b| b <= self.snd_una) {
            self.records.pop_front();
            self.records_popped += 1;
        }
        if self.acked_offset() > old_data {
            self.acked_event = true;
        }
        // RFC 6298 §5.2/§5.3: stop the timer when all is acked, else restart it.
        self.rtx_at = if self.snd_una >= self.snd_max {
            None
        } else {
            Some(now.add_nanos(self.rto_ns()))
        };
    }

    /// RFC 9293 §3.10.7.4 fifth, plus SACK (RFC 2018/6675) and NewReno (RFC 6582).
    fn process_ack(&mut self, now: Instant, ack_abs: u64, h: &SegmentHeader) {
        let wnd_changed = self.update_send_window(ack_abs, h);
        let delivered_before = self.rack.rate.delivered;
        let (una_before, sacked_before) = (self.snd_una, self.sb.sacked_bytes());
        let rack = self.rack_on();
        // RFC 8985 §7.4.2: a duplicate ACK without SACK information (before SND.UNA moves).
        let plain_dupack = ack_abs == self.snd_una && h.sack[0].is_none();
        // RFC 8985 §6.2 step 2 tells a retransmission's ACK from the original's by the echo.
        self.rack.ack_echo_ms = h
            .timestamp
            .filter(|_| self.ts_ok)
            .map(|(_, ecr)| ecr.wrapping_sub(self.ts_offset));
        let (sack_new, dsack) = self.process_sack(now, ack_abs, h);
        if !rack && self.log_on() {
            // BBR without RACK: the log still records cumulative deliveries (delivery rate).
            self.rack
                .on_ack(now, ack_abs, &[], &mut self.sb, self.snd_una, self.snd_max);
        }
        self.check_lost_retransmission(ack_abs);
        let flight = self.snd_max - self.snd_una;
        if ack_abs > self.snd_una {
            self.eifel_detect(ack_abs, h);
            self.on_ack_advance(now, ack_abs);
        } else if ack_abs == self.snd_una
            && flight > 0
            && h.payload_len() == 0
            && !h.fin
            && (!wnd_changed || sack_new)
        {
            self.on_duplicate_ack();
        }
        if rack {
            self.tlp_on_ack(ack_abs, dsack, plain_dupack);
            self.rack_detect(now);
        }
        self.prr_on_ack(una_before, sacked_before);
        if self.cc.is_bbr() {
            self.bbr_on_ack(now, delivered_before);
        } else if self.log_on() {
            // Keep the per-ACK sample state fresh even when nobody reads it.
            let _ = self.rack.rate.take_sample();
        }
        // FIN acknowledged?
        if self.our_fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.fin_wait2_at = self.cfg.fin_wait2_timeout.map(|d| now + d);
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => self.finish(CloseReason::Normal),
                _ => {}
            }
        }
    }

    /// The SND.WL1/SND.WL2 window update (RFC 9293 §3.10.7.4 fifth); whether it changed.
    fn update_send_window(&mut self, ack_abs: u64, h: &SegmentHeader) -> bool {
        let ack = h.ack.unwrap_or_default();
        if ack_abs >= self.snd_una
            && (self.snd_wl1 < h.seq || (self.snd_wl1 == h.seq && self.snd_wl2 <= ack))
        {
            let w = u64::from(h.window) << self.snd_wscale;
            let changed = w != self.snd_wnd;
            let was_zero = self.snd_wnd == 0;
            self.snd_wnd = w;
            self.max_snd_wnd = self.max_snd_wnd.max(w);
            self.snd_wl1 = h.seq;
            self.snd_wl2 = ack;
            if w > 0 {
                if self.persist_at.is_some() || was_zero {
                    // The window reopened: persist backoff no longer applies.
                    self.rtt.backoff = 0;
                }
                self.persist_at = None;
            }
            return changed;
        }
        false
    }

    /// SACK blocks (RFC 2018) into the scoreboard, and with RACK into the transmission log
    /// (RFC 8985 §6.2 steps 1-3); D-SACK detection (RFC 2883 §4). Returns (new SACK
    /// information, D-SACK).
    fn process_sack(&mut self, now: Instant, ack_abs: u64, h: &SegmentHeader) -> (bool, bool) {
        if !self.sack_ok {
            return (false, false);
        }
        let rack = self.rack_on();
        let mut sack_new = false;
        let mut dsack = false;
        let base = self.wire_snd(self.snd_una);
        let ack_rel = ack_abs as i64 - self.snd_una as i64;
        let mut blocks = [(0u64, 0u64); 4];
        let mut nb = 0;
        let mut first: Option<(i64, i64)> = None;
        for (i, (l, r)) in h.sack.iter().flatten().enumerate() {
            let (lr, rr) = (i64::from(l.diff(base)), i64::from(r.diff(base)));
            if i == 0 {
                first = Some((lr, rr));
                // RFC 2883 §4: a first block at or below the cumulative ACK is a D-SACK.
                dsack = lr < rr && rr <= ack_rel;
            } else if i == 1
                && let Some((fl, fr)) = first
                && fl < fr
                && lr <= fl
                && fr <= rr
            {
                // RFC 2883 §4: ... or one inside the second block.
                dsack = true;
            }
            if lr < rr && rr > 0 && self.snd_una as i64 + rr <= self.snd_max as i64 {
                let la = (self.snd_una as i64 + lr.max(0)) as u64;
                let ra = (self.snd_una as i64 + rr) as u64;
                if rack {
                    if nb < blocks.len() {
                        blocks[nb] = (la, ra);
                        nb += 1;
                    }
                } else {
                    sack_new |= self.sb.add(la, ra, ack_abs.max(self.snd_una), self.snd_max);
                }
            }
        }
        if rack {
            // RFC 8985 §6.2 steps 1-3 for every newly delivered segment.
            sack_new = self.rack.on_ack(
                now,
                ack_abs,
                &blocks[..nb],
                &mut self.sb,
                self.snd_una,
                self.snd_max,
            );
            if dsack {
                self.rack.on_dsack(self.snd_una, self.snd_max);
            }
        }
        (sack_new, dsack)
    }

    /// Lost retransmission without RACK: data sent after our retransmission of the hole at
    /// SND.UNA is SACKed DupThresh segments beyond it while the hole stays open, so that copy
    /// was lost too (the idea of RFC 8985 RACK, reduced to the first hole). Resend it instead
    /// of waiting for the RTO.
    fn check_lost_retransmission(&mut self, ack_abs: u64) {
        let mss = u64::from(self.emss());
        if !self.rack_on()
            && self.in_recovery
            && ack_abs == self.snd_una
            && let (Some(mark), Some(high)) = (self.una_rtx_mark, self.sb.high())
            && high >= mark + 3 * mss
            && self
                .sb
                .next_hole(self.snd_una)
                .is_some_and(|(s, _)| s == self.snd_una)
        {
            self.una_rtx_mark = None;
            self.rtx_next = self.snd_una;
            self.newreno_rtx = true;
        }
    }

    /// RFC 3522 §2: the first ACK of new data after a retransmission timeout echoes a TSval
    /// older than the retransmission's, so it acknowledges the original transmission and the
    /// timeout was spurious (`spurious_rtos`): undone (RFC 4015). Timestamps tick in
    /// milliseconds: a spurious timeout answered within the same millisecond is not
    /// recognised (never a false positive).
    fn eifel_detect(&mut self, ack_abs: u64, h: &SegmentHeader) {
        let undo = self.rto_undo.take();
        if let Some(rtx) = self.rto_tsval.take()
            && let Some((_, ecr)) = h.timestamp
            && (ecr.wrapping_sub(rtx) as i32) < 0
        {
            self.stats.spurious_rtos += 1;
            if let Some(u) = undo.filter(|_| self.cfg.rto_undo) {
                self.undo_rto(ack_abs, &u);
            }
        }
    }

    /// The Eifel response (RFC 4015 §2) to a spurious timeout, before SND.UNA moves to
    /// `ack_abs`: the congestion state comes back (steps 5-6), sending resumes at SND.MAX
    /// instead of going back N (step 4), and the timeout's loss marks and recovery point are
    /// dropped, so RACK (RFC 8985 §6.2) and fast recovery act on the ACKs that follow as if
    /// the timeout had not fired. The RTO backoff collapses with the new ACK (RFC 6298 §5.7).
    fn undo_rto(&mut self, ack_abs: u64, u: &crate::cc::CcUndo) {
        let emss = u64::from(self.emss());
        let iw = emss * u64::from(self.cfg.initial_cwnd_segments.max(1));
        let flight = self.snd_max - ack_abs;
        self.cc.undo_rto(u, flight, ack_abs - self.snd_una, iw);
        self.stats.rto_undos += 1;
        self.rto_recover = None;
        self.recover = ack_abs;
        self.rack.undo_rto_marks();
        self.snd_nxt = self.snd_max;
        self.rtx_next = ack_abs;
        tracing::trace!(remote = ?self.remote, una = ack_abs, cwnd = self.cc.cwnd,
            ssthresh = self.cc.ssthresh, "tcp RTO undone (spurious)");
    }

    /// SND.UNA advances (RFC 5681 §3.1, RFC 6582 §3.2 steps 3-4).
    fn on_ack_advance(&mut self, now: Instant, ack_abs: u64) {
        let mss = u64::from(self.emss());
        let acked = ack_abs - self.snd_una;
        self.stats.acks_in += 1;
        self.on_new_ack(now, ack_abs);
        self.dupacks = 0;
        if self.in_recovery {
            if self.snd_una >= self.recover {
                // RFC 6582 §3.2 step 3: full acknowledgment ends recovery.
                self.in_recovery = false;
                self.newreno_rtx = false;
                self.rack.on_recovery_exit();
                self.cc.on_recovery_exit(self.snd_max - self.snd_una);
                if self.prr_on() {
                    // RFC 6937 §3: at the end of recovery cwnd = ssthresh (PRR already
                    // brought the data in flight there).
                    self.cc.cwnd = self.cc.ssthresh.max(mss);
                }
            } else {
                // RFC 6582 §3.2 step 4: partial ACK, resend the next unacked segment.
                self.newreno_rtx = true;
                self.rtx_next = self.rtx_next.max(self.snd_una);
                if !self.sack_ok {
                    self.rtx_next = self.snd_una;
                    if !self.cc.is_bbr() {
                        // Partial window deflation (RFC 6582 §3.2 step 4).
                        self.cc.cwnd = self.cc.cwnd.saturating_sub(acked).max(mss) + mss;
                    }
                }
            }
        } else {
            // HyStart++ (RFC 9406) reads the RTT of this ACK's newest delivered segment
            // (BBR takes that sample itself, later in the ACK).
            let rtt = if self.cc.is_bbr() {
                None
            } else {
                self.rack.last_rtt.take()
            };
            self.cc.hystart_ack(self.snd_una, self.snd_max, rtt);
            // RFC 7661 / RFC 9438 §5.8: no growth for a window the sender did not use.
            let slow_start = self.cc.cwnd < self.cc.ssthresh;
            if self.cwnd_use.may_grow(self.cc.cwnd, slow_start) {
                self.cc.on_ack(now, acked, self.rtt.srtt());
            }
        }
    }

    /// RFC 5681 §2 duplicate ACK (RFC 6675 §5: with SACK, new SACK info counts).
    fn on_duplicate_ack(&mut self) {
        let mss = u64::from(self.emss());
        let flight = self.snd_max - self.snd_una;
        self.dupacks += 1;
        // RFC 5827 early retransmit: with fewer than four segments outstanding and nothing
        // new to send, three duplicates can never come; lower the threshold to oseg - 1.
        let oseg = flight.div_ceil(mss.max(1));
        let dupthresh = if oseg < 4 && self.snd_max >= self.app_end {
            (oseg - 1).max(1)
        } else {
            3
        };
        let sack_lost = self.sack_ok && self.sb.sacked_bytes() >= dupthresh * mss;
        if self.rack_on() {
            // RACK decides about loss; duplicate ACKs only feed its inputs.
        } else if !self.in_recovery
            && (u64::from(self.dupacks) >= dupthresh || sack_lost)
            && self.snd_una >= self.recover
        {
            // RFC 6582 §3.2 step 2 / RFC 6675 §5 step 4: enter loss recovery.
            self.in_recovery = true;
            self.recover = self.snd_max;
            let base = self.pipe().max(2 * mss).min(flight);
            self.cc.enter_recovery(base, self.rack.rate.delivered);
            self.prr_start();
            self.stats.fast_retransmits += 1;
            self.rtx_next = self.snd_una;
            self.newreno_rtx = true;
            self.rtt_probe = None;
            if !self.sack_ok && !self.cc.is_bbr() {
                self.cc.cwnd = self.cc.ssthresh + 3 * mss;
            }
        } else if self.in_recovery && !self.sack_ok && !self.cc.is_bbr() {
            // RFC 6582 §3.2 step 3: inflate by one segment per further duplicate.
            self.cc.cwnd += mss;
        }
    }

    /// BBR's per-ACK update (draft-ietf-ccwg-bbr §5.1): what this ACK delivered and lost, its
    /// rate and RTT samples, and what stays in flight.
    fn bbr_on_ack(&mut self, now: Instant, delivered_before: u64) {
        let delivered = self.rack.rate.delivered;
        let a = BbrAck {
            now,
            newly_acked: delivered - delivered_before,
            newly_lost: self.bbr_newly_lost.take().unwrap_or(0),
            delivered,
            rate: self.rack.rate.take_sample(),
            rtt: self.rack.last_rtt.take(),
            inflight: self.pipe(),
        };
        self.cc.on_bbr_ack(&a);
    }

    /// RFC 8985 §6.2 step 5 (after an ACK or when the reordering timer fires): mark losses,
    /// arm the reordering timer, and enter loss recovery on a new loss (RFC 8985 §3.2 with
    /// RFC 6675 §5: one cwnd reduction per window of data).
    pub(super) fn rack_detect(&mut self, now: Instant) {
        if !self.rack_on() {
            return;
        }
        if !self.rack.has_outstanding() {
            // Nothing sent is unacknowledged (a receiver's ACK of nothing new, on every data
            // segment it gets): no segment to mark lost, no reordering timer (RFC 8985 §6.2
            // step 5, §6.3), what `detect_loss` would find, without its window arithmetic.
            self.reo_at = None;
            return;
        }
        let mss = u64::from(self.emss()).max(1);
        let pipe_before = self.pipe();
        let sacked_segs = self.sb.sacked_bytes() / mss;
        let d = self
            .rack
            .detect_loss(now, self.in_recovery, sacked_segs, self.rtt.srtt());
        self.reo_at = d.timer;
        if d.bytes == 0 {
            return;
        }
        self.stats.rack_lost += d.segs;
        *self.bbr_newly_lost.get_or_insert(0) += d.bytes;
        self.tlp_at = None;
        if !self.in_recovery && self.snd_una >= self.recover {
            let flight = self.snd_max - self.snd_una;
            self.in_recovery = true;
            self.recover = self.snd_max;
            let base = if self.cc.is_bbr() {
                // BBR conserves what is still in flight (Linux: packets_in_flight).
                self.pipe()
            } else {
                pipe_before.max(2 * mss).min(flight.max(2 * mss))
            };
            self.cc.enter_recovery(base, self.rack.rate.delivered);
            self.prr_start();
            self.stats.fast_retransmits += 1;
            self.rtt_probe = None;
        }
    }

    /// RFC 6937 §3, on entering recovery: `prr_delivered = prr_out = 0`, `RecoverFS =
    /// snd.nxt - snd.una` (the highest sent, SND.MAX here).
    fn prr_start(&mut self) {
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.recover_fs = self.snd_max - self.snd_una;
    }

    /// RFC 6937 §3, on every ACK in recovery: `DeliveredData` = the change of SND.UNA plus the
    /// change of SACKed bytes; while pipe > ssthresh, send in proportion to what was delivered
    /// (`prr_delivered * ssthresh / RecoverFS - prr_out`), else grow back towards ssthresh no
    /// faster than slow start (PRR-SSRB: what was delivered, plus one MSS). The result is
    /// the window for this ACK: cwnd = pipe + sndcnt.
    fn prr_on_ack(&mut self, una_before: u64, sacked_before: u64) {
        if !self.in_recovery || !self.prr_on() {
            return;
        }
        let mss = u64::from(self.emss());
        let dd = (self.snd_una - una_before + self.sb.sacked_bytes()).saturating_sub(sacked_before);
        self.prr_delivered += dd;
        let pipe = self.pipe();
        let ssthresh = self.cc.ssthresh;
        let sndcnt = if pipe > ssthresh {
            let want = (u128::from(self.prr_delivered) * u128::from(ssthresh))
                .div_ceil(u128::from(self.recover_fs.max(1)));
            u64::try_from(want)
                .unwrap_or(u64::MAX)
                .saturating_sub(self.prr_out)
        } else {
            let limit = self.prr_delivered.saturating_sub(self.prr_out).max(dd) + mss;
            (ssthresh - pipe).min(limit)
        };
        self.cc.cwnd = pipe + sndcnt;
    }

    /// RFC 8985 §7.4: was the tail loss probe's segment lost? A probe of new data, or one
    /// reported duplicate by D-SACK, says nothing; a retransmitted probe acknowledged beyond
    /// it repaired a loss, which gets the congestion response of a fast recovery.
    fn tlp_on_ack(&mut self, ack_abs: u64, dsack: bool, plain_dupack: bool) {
        let Some(end) = self.tlp_end else { return };
        if ack_abs < end {
            return;
        }
        if !self.tlp_rtx || dsack {
            self.tlp_end = None;
        } else if ack_abs > end {
            self.tlp_end = None;
            if !self.in_recovery {
                self.cc.on_tlp_loss();
            }
        } else if plain_dupack {
            self.tlp_end = None;
        }
    }
}
