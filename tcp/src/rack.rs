//! RACK: time-based loss detection (RFC 8985 §6), over a per-segment transmission log.
//!
//! The log holds one entry per transmitted piece of sequence space in `[SND.UNA, SND.MAX)`,
//! in sequence order, with the time of its latest (re)transmission and whether it is
//! delivered (cumulatively acknowledged or SACKed) or marked lost. A segment is lost when a
//! segment sent *after* it was delivered and more than `RACK.rtt + RACK.reo_wnd` has passed
//! since it was sent (RFC 8985 §6.2 step 5). A retransmission gets a new transmission time,
//! so a lost retransmission is detected the same way as a lost original (RFC 8985 §6.2).
//! The tail-loss-probe state (RFC 8985 §7) lives in the connection.

use std::collections::VecDeque;

use netcore::{Duration, Instant};

use crate::rate::{DeliveryRate, TxState};
use crate::rtt::WindowedMin;
use crate::sack::Scoreboard;

/// One transmitted range of sequence space (absolute offsets).
#[derive(Debug, Clone, Copy)]
struct Sent {
    start: u64,
    end: u64,
    /// Time of the latest transmission (RFC 8985 §6.1 `Segment.xmit_ts`).
    at: Instant,
    /// Retransmitted at least once (RFC 8985 §6.1 `Segment.retransmitted`).
    rtx: bool,
    /// Marked lost and not retransmitted since (RFC 8985 §6.1 `Segment.lost`).
    lost: bool,
    /// Cumulatively acknowledged or SACKed.
    delivered: bool,
    /// The delivery state at the latest transmission (delivery-rate estimation).
    tx: TxState,
}

/// RFC 8985 §6.2 step 4: SACKed segments beyond which reordering is no longer waited for
/// while no reordering has been seen (DupThresh, RFC 6675).
const DUP_THRESH: u64 = 3;

/// The window of RACK's minimum RTT: as BBR's min-RTT filter (draft-ietf-ccwg-bbr §5.6.1;
/// Linux's `tcp_min_rtt_wlen` is 300 s), so a rise of the path's RTT is followed.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

/// Bound on the log length: beyond it new transmissions are merged into the last entry (the
/// loss detection gets coarser, never wrong about delivery).
const MAX_ENTRIES: usize = 1 << 16;

/// RACK state (RFC 8985 §6.1) and the transmission log.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rack {
    segs: VecDeque<Sent>,
    /// Bytes marked lost and not yet retransmitted.
    lost_bytes: u64,
    /// `RACK.xmit_ts` / `RACK.end_seq`: the most recently sent delivered segment.
    xmit_ts: Option<Instant>,
    end_seq: u64,
    /// `RACK.rtt`: RTT of that segment.
    rtt: Duration,
    /// `RACK.fack`: highest delivered end.
    fack: u64,
    /// RACK's minimum RTT over the last [`MIN_RTT_WINDOW`] (RFC 8985 §6.2 step 2).
    min_rtt: WindowedMin,
    reordering_seen: bool,
    /// `RACK.reo_wnd_mult`, `RACK.reo_wnd_persist`, `RACK.dsack_round` (§6.2 step 4).
    reo_wnd_mult: u32,
    reo_wnd_persist: u32,
    dsack_round: Option<u64>,
    /// Delivery-rate estimation over the same log (for BBR).
    pub(crate) rate: DeliveryRate,
    /// The RTT of the latest delivered segment never retransmitted (taken by the caller).
    pub(crate) last_rtt: Option<Duration>,
    /// The TSval the ACK being processed echoes, on our millisecond clock (the connection's
    /// offset removed); set by the caller before [`Rack::on_ack`].
    pub(crate) ack_echo_ms: Option<u32>,
}

/// What one run of the RACK loss detection found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Detected {
    /// Bytes newly marked lost.
    pub(crate) bytes: u64,
    /// Entries newly marked lost.
    pub(crate) segs: u64,
    /// When to run the detection again (RFC 8985 §6.3 reordering timer).
    pub(crate) timer: Option<Instant>,
}

/// Whether transmission `(t1, s1)` happened after `(t2, s2)` (RFC 8985 §6.2
/// `RACK_sent_after`: ties broken by sequence).
fn sent_after(t1: Instant, s1: u64, t2: Instant, s2: u64) -> bool {
    t1 > t2 || (t1 == t2 && s1 > s2)
}

impl Rack {
    /// Bytes marked lost and not yet retransmitted.
    pub(crate) fn lost_bytes(&self) -> u64 {
        self.lost_bytes
    }

    /// Record a transmission of `[start, end)` at `now` (first or retransmission).
    pub(crate) fn on_send(&mut self, start: u64, end: u64, now: Instant) {
        if start >= end {
            return;
        }
        // Nothing in flight: every entry delivered. The front is looked at first: while data
        // is outstanding it is almost always undelivered (it is SND.UNA's).
        let idle =
            self.segs.front().is_none_or(|s| s.delivered) && self.segs.iter().all(|s| s.delivered);
        let tx = self.rate.on_send(now, idle);
        let tail = self.segs.back().map_or(start, |s| s.end);
        if start < tail {
            self.split_at(start);
            self.split_at(end.min(tail));
            let i = self.segs.partition_point(|s| s.end <= start);
            for s in self.segs.range_mut(i..) {
                if s.start >= end {
                    break;
                }
                s.at = now;
                s.rtx = true;
                s.tx = tx;
                if s.lost {
                    s.lost = false;
                    self.lost_bytes -= s.end - s.start;
                }
                // A resent range counts as outstanding again until it is delivered anew
                // (after an RTO the scoreboard may have been cleared).
                s.delivered = false;
            }
        }
        let from = start.max(tail);
        if from < end {
            let full = self.segs.len() >= MAX_ENTRIES;
            match self.segs.back_mut() {
                Some(last) if full && !last.lost && !last.delivered => {
                    last.end = end;
                    last.at = now;
                    last.tx = tx;
                }
                _ => self.segs.push_back(Sent {
                    start: from,
                    end,
                    at: now,
                    rtx: false,
                    lost: false,
                    delivered: false,
                    tx,
                }),
            }
        }
    }

    /// Split the entry containing `at` so that an entry starts at `at`.
    fn split_at(&mut self, at: u64) {
        let i = self.segs.partition_point(|s| s.end <= at);
        if let Some(s) = self.segs.get_mut(i)
            && s.start < at
            && at < s.end
        {
            let mut right = *s;
            s.end = at;
            right.start = at;
            self.segs.insert(i + 1, right);
        }
    }

    /// Forget everything below the cumulative ACK (RFC 8985 §6.1: the log covers
    /// `[SND.UNA, SND.MAX)`). The entries are in sequence order and disjoint, so those wholly
    /// below `una` are a prefix: counted, then dropped in one step (a bulk transfer's ACK
    /// covers several). Their lost bytes are summed only while some are marked.
    pub(crate) fn advance(&mut self, una: u64) {
        let n = self.segs.iter().take_while(|s| s.end <= una).count();
        if self.lost_bytes > 0 {
            let gone: u64 = self
                .segs
                .range(..n)
                .filter(|s| s.lost)
                .map(|s| s.end - s.start)
                .sum();
            self.lost_bytes -= gone;
        }
        self.segs.drain(..n);
        if let Some(s) = self.segs.front_mut()
            && s.start < una
        {
            if s.lost {
                self.lost_bytes -= una - s.start;
            }
            s.start = una;
        }
    }

    /// One segment delivered (RFC 8985 §6.2 steps 2 and 3).
    fn deliver(&mut self, i: usize, now: Instant) {
        let Some(s) = self.segs.get_mut(i) else {
            return;
        };
        if s.delivered {
            return;
        }
        s.delivered = true;
        if s.lost {
            // It arrived after all (reordering, or a late copy): no longer missing.
            s.lost = false;
            self.lost_bytes -= s.end - s.start;
        }
        let s = *s;
        self.rate.on_delivered(now, s.end - s.start, s.at, &s.tx);
        let rtt = now.saturating_duration_since(s.at);
        if !s.rtx {
            self.last_rtt = Some(rtt);
        }
        // Step 2: an ACK for a retransmitted segment that echoes a TSval older than the
        // retransmission, or comes sooner than min RTT, is for the original; skip it. (Asked
        // of retransmitted segments only: the rest, nearly all, skip the division.)
        if !(s.rtx && self.for_original(&s, rtt)) {
            if !s.rtx {
                self.min_rtt.update(now, rtt, MIN_RTT_WINDOW);
            }
            let newer = self
                .xmit_ts
                .is_none_or(|t| sent_after(s.at, s.end, t, self.end_seq));
            if newer {
                self.xmit_ts = Some(s.at);
                self.end_seq = s.end;
                self.rtt = rtt;
            }
        }
        // Step 3: a never-retransmitted segment delivered below the highest delivered one
        // means the network reordered it.
        if s.end < self.fack && !s.rtx {
            self.reordering_seen = true;
        } else {
            self.fack = self.fack.max(s.end);
        }
    }

    /// [`Rack::deliver`] for the entries below `ack` from the log's front, as long as each is
    /// delivered already or a first transmission sent no earlier than the one before it
    /// (never retransmitted, not marked lost: the cumulative ACK of a bulk transfer).
    /// Returns the index of the first entry not handled. Same outcome as delivering them one
    /// by one, with the per-segment state written once for the run:
    /// - the rate sample and `RACK.xmit_ts`/`RACK.end_seq`/`RACK.rtt` come from the last
    ///   one: it was sent last, and later sends carry no less delivered data (the sample's
    ///   rule, draft-cheng-iccrg-delivery-rate-estimation §3.3, and `RACK_sent_after`);
    /// - step 3's reordering test can hold only for the first (the ends grow);
    /// - the min-RTT filter ([`WindowedMin`]) takes every sample: it is not idempotent. But
    ///   a sample repeated at the same time changes it at most twice, and a burst's entries
    ///   share one send time, so a run of equal samples is fed twice.
    fn deliver_run(&mut self, now: Instant, ack: u64) -> usize {
        let mut n = 0;
        let mut bytes = 0;
        let mut first_end = None;
        // The previous first transmission of the run: send time, delivered-data stamp, and
        // how many times in a row its RTT was fed to the filter.
        let mut prev: Option<(Instant, u64)> = None;
        let mut fed = 0u32;
        let mut last = None;
        for (i, s) in self.segs.iter_mut().enumerate() {
            if s.end > ack {
                break;
            }
            if !s.delivered {
                if s.rtx || s.lost || prev.is_some_and(|(at, d)| s.at < at || s.tx.delivered < d) {
                    break;
                }
                s.delivered = true;
                bytes += s.end - s.start;
                first_end.get_or_insert(s.end);
                fed = if prev.is_some_and(|(at, _)| at == s.at) {
                    fed + 1
                } else {
                    0
                };
                if fed < 2 {
                    let rtt = now.saturating_duration_since(s.at);
                    self.min_rtt.update(now, rtt, MIN_RTT_WINDOW);
                }
                prev = Some((s.at, s.tx.delivered));
                last = Some(i);
            }
            n = i + 1;
        }
        let (Some(k), Some(first_end)) = (last, first_end) else {
            return n;
        };
        let s = self.segs[k];
        self.rate.on_delivered(now, bytes, s.at, &s.tx);
        let rtt = now.saturating_duration_since(s.at);
        self.last_rtt = Some(rtt);
        if self
            .xmit_ts
            .is_none_or(|t| sent_after(s.at, s.end, t, self.end_seq))
        {
            self.xmit_ts = Some(s.at);
            self.end_seq = s.end;
            self.rtt = rtt;
        }
        if first_end < self.fack {
            self.reordering_seen = true;
        }
        self.fack = self.fack.max(s.end);
        n
    }

    /// RFC 8985 §6.2 step 2: whether the ACK delivering the retransmitted `s` (after `rtt`)
    /// was for its original transmission: it echoes a TSval older than the retransmission,
    /// or it came sooner than the minimum RTT.
    fn for_original(&self, s: &Sent, rtt: Duration) -> bool {
        self.ack_echo_ms
            .is_some_and(|e| (e.wrapping_sub(s.at.as_millis() as u32) as i32) < 0)
            || self.min_rtt.get().is_some_and(|m| rtt < m)
    }

    /// Process the deliveries of one ACK: cumulative up to `ack` and the SACK blocks `blocks`
    /// (absolute, clipped), adding the blocks to `sb` on the way.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ack: u64,
        blocks: &[(u64, u64)],
        sb: &mut Scoreboard,
        una: u64,
        max: u64,
    ) -> bool {
        let mut sack_new = false;
        // Cumulatively acknowledged entries not delivered before: the leading run of first
        // transmissions in one step, then (a retransmission or a lost entry met) one by one.
        let mut i = self.deliver_run(now, ack);
        while i < self.segs.len() && self.segs[i].end <= ack {
            self.deliver(i, now);
            i += 1;
        }
        for &(l, r) in blocks {
            let (l, r) = (l.max(ack.max(una)), r.min(max));
            if l >= r {
                continue;
            }
            // Only the parts not SACKed before can hold newly delivered entries.
            let mut gaps = [(0u64, 0u64); 8];
            let n = sb.gaps(l, r, &mut gaps);
            sack_new |= sb.add(l, r, ack.max(una), max);
            for &(gl, gr) in &gaps[..n] {
                let mut j = self.segs.partition_point(|s| s.end <= gl);
                while j < self.segs.len() && self.segs[j].start < gr {
                    let s = self.segs[j];
                    if !s.delivered && sb.covers(s.start, s.end) {
                        self.deliver(j, now);
                    }
                    j += 1;
                }
            }
        }
        sack_new
    }

    /// A D-SACK arrived (RFC 8985 §6.2 step 4): widen the reordering window, once per round.
    pub(crate) fn on_dsack(&mut self, una: u64, max: u64) {
        if self.dsack_round.is_none_or(|r| una >= r) {
            self.dsack_round = Some(max);
            self.reo_wnd_mult = self.reo_wnd_mult.max(1).saturating_add(1);
            self.reo_wnd_persist = 16;
        }
    }

    /// Loss recovery ended (RFC 8985 §6.2 step 4: the widened window decays after 16
    /// recoveries without D-SACK).
    pub(crate) fn on_recovery_exit(&mut self) {
        if self.reo_wnd_persist > 0 {
            self.reo_wnd_persist -= 1;
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// `RACK.reo_wnd` (RFC 8985 §6.2 step 4).
    fn reo_wnd(&self, in_recovery: bool, sacked_segs: u64, srtt: Option<Duration>) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked_segs >= DUP_THRESH) {
            return Duration::ZERO;
        }
        let Some(min_rtt) = self.min_rtt.get() else {
            return Duration::ZERO;
        };
        let w = (min_rtt / 4).saturating_mul(self.reo_wnd_mult.max(1));
        srtt.map_or(w, |s| w.min(s))
    }

    /// Whether some sent segment is still logged (not yet cumulatively acknowledged): without
    /// one [`Rack::detect_loss`] has nothing to mark and no timer to set.
    pub(crate) fn has_outstanding(&self) -> bool {
        !self.segs.is_empty()
    }

    /// RFC 8985 §6.2 step 5: mark lost every undelivered segment sent before the most recently
    /// sent delivered one and older than `RACK.rtt + RACK.reo_wnd`. Returns the bytes newly
    /// marked lost and, if some segments may still turn out lost, when to look again (the
    /// reordering timer, RFC 8985 §6.3). `sacked_segs`: segments SACKed above SND.UNA.
    pub(crate) fn detect_loss(
        &mut self,
        now: Instant,
        in_recovery: bool,
        sacked_segs: u64,
        srtt: Option<Duration>,
    ) -> Detected {
        let mut d = Detected::default();
        let Some(rack_ts) = self.xmit_ts else {
            return d;
        };
        let reo_wnd = self.reo_wnd(in_recovery, sacked_segs, srtt);
        let (rack_end, rack_rtt) = (self.end_seq, self.rtt);
        for s in self.segs.iter_mut() {
            if !sent_after(rack_ts, rack_end, s.at, s.end) {
                if !s.rtx {
                    // First transmissions are in sequence order, and retransmissions beyond
                    // this point are later still: nothing further was sent before RACK's one.
                    break;
                }
                continue;
            }
            if s.delivered || s.lost {
                continue;
            }
            let deadline = s.at + rack_rtt + reo_wnd;
            if deadline <= now {
                s.lost = true;
                self.lost_bytes += s.end - s.start;
                d.bytes += s.end - s.start;
                d.segs += 1;
            } else {
                d.timer = Some(d.timer.map_or(deadline, |t: Instant| t.min(deadline)));
            }
        }
        d
    }

    /// The lowest range marked lost and not yet retransmitted.
    pub(crate) fn next_lost(&self) -> Option<(u64, u64)> {
        if self.lost_bytes == 0 {
            return None;
        }
        self.segs.iter().find(|s| s.lost).map(|s| (s.start, s.end))
    }

    /// The highest undelivered range (what a tail loss probe resends, RFC 8985 §7.3).
    pub(crate) fn last_undelivered(&self) -> Option<(u64, u64)> {
        self.segs
            .iter()
            .rev()
            .find(|s| !s.delivered)
            .map(|s| (s.start, s.end))
    }

    /// Whether the entry holding `seq` is delivered.
    pub(crate) fn is_delivered(&self, seq: u64) -> bool {
        let i = self.segs.partition_point(|s| s.end <= seq);
        self.segs
            .get(i)
            .is_some_and(|s| s.start <= seq && s.delivered)
    }

    /// Whether the log starts exactly at `una` (it covers everything outstanding).
    pub(crate) fn starts_at(&self, una: u64) -> bool {
        self.segs.front().is_some_and(|s| s.start == una)
    }

    /// Forget the log (fallback to go-back-N).
    pub(crate) fn clear(&mut self) {
        self.segs.clear();
        self.lost_bytes = 0;
    }

    /// Retransmission timeout (RFC 8985 §6.3 `RACK_mark_losses_on_RTO`): the undelivered
    /// segment at `una`, and every undelivered one whose `xmit_ts + RACK.rtt + RACK.reo_wnd`
    /// has passed, is lost; one sent more recently (a probe, a retransmission within the last
    /// round trip) may still be on its way and keeps its chance. With `forget_sacks` (the
    /// receiver reneged, RFC 2018 §8) SACKed ones count as undelivered.
    pub(crate) fn on_rto(
        &mut self,
        now: Instant,
        una: u64,
        forget_sacks: bool,
        srtt: Option<Duration>,
    ) {
        let window = self.rtt + self.reo_wnd(true, 0, srtt);
        self.lost_bytes = 0;
        for s in self.segs.iter_mut() {
            if forget_sacks {
                s.delivered = false;
            }
            s.lost = !s.delivered && (s.start <= una || s.at + window <= now);
            if s.lost {
                self.lost_bytes += s.end - s.start;
            }
        }
    }

    /// The retransmission timeout was spurious (RFC 4015 §2 step 4: no go-back-N): forget
    /// its loss marks on what was not resent yet; RACK marks the real holes again from the
    /// ACKs that follow (RFC 8985 §6.2).
    pub(crate) fn undo_rto_marks(&mut self) {
        for s in self.segs.iter_mut() {
            s.lost = false;
        }
        self.lost_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn later_delivery_marks_earlier_lost_after_rtt() {
        let mut r = Rack::default();
        let mut sb = Scoreboard::default();
        for k in 0..5u64 {
            r.on_send(1 + k * 100, 101 + k * 100, ms(k));
        }
        // Segment 2 (201..301, sent at 2 ms) SACKed at 12 ms: RACK.rtt = 10 ms.
        assert!(r.on_ack(ms(12), 1, &[(201, 301)], &mut sb, 1, 501));
        // min_rtt = 10 ms, no reordering seen, one SACKed segment: reo_wnd = 2.5 ms.
        let d = r.detect_loss(ms(12), false, 1, None);
        assert_eq!(d.bytes, 0);
        // Segment 0 (sent at 0) deadline 0 + 10 + 2.5; segment 1 at 13.5.
        assert_eq!(d.timer, Some(ms(12) + Duration::from_micros(500)));
        let d = r.detect_loss(ms(14), false, 1, None);
        assert_eq!((d.bytes, d.segs, d.timer), (200, 2, None));
        assert_eq!(r.next_lost(), Some((1, 101)));
        // Retransmit the first: no longer lost, it has a new time.
        r.on_send(1, 101, ms(14));
        assert_eq!(r.lost_bytes(), 100);
        assert_eq!(r.next_lost(), Some((101, 201)));
    }

    /// Once everything sent is cumulatively acknowledged nothing is outstanding, and loss
    /// detection (which `rack_detect` then skips) finds nothing and sets no timer.
    #[test]
    fn nothing_outstanding_after_the_cumulative_ack() {
        let mut r = Rack::default();
        let mut sb = Scoreboard::default();
        assert!(!r.has_outstanding());
        r.on_send(1, 101, ms(0));
        r.on_send(101, 201, ms(1));
        assert!(r.has_outstanding());
        r.on_ack(ms(10), 201, &[], &mut sb, 201, 201);
        r.advance(201);
        assert!(!r.has_outstanding());
        let d = r.detect_loss(ms(100), false, 0, None);
        assert_eq!((d.bytes, d.segs, d.timer), (0, 0, None));
    }

    /// The cumulative ACK's run delivered in one step ([`Rack::deliver_run`]) leaves RACK,
    /// the rate sample and the min-RTT filter exactly as delivering entry by entry does, over
    /// random transfers: bursts at one time and segments spaced out, retransmissions (after
    /// an RTO and of single ranges), SACK blocks, reordered ACKs, and the log's advance.
    #[test]
    fn the_cumulative_run_in_one_step_equals_one_by_one() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        for _ in 0..1000 {
            let (mut a, mut b) = (Rack::default(), Rack::default());
            let (mut sa, mut sb) = (Scoreboard::default(), Scoreboard::default());
            let (mut una, mut max, mut t) = (1u64, 1u64, 0u64);
            for _ in 0..60 {
                // Steps of microseconds to seconds: the min-RTT filter's window (10 s) ages.
                t += [0, 1_000, 300_000, 3_000_000_000][rnd(4) as usize] * rnd(4);
                let now = Instant::from_nanos(t);
                match rnd(10) {
                    0..=5 => {
                        for _ in 0..=rnd(40) {
                            let len = 1 + rnd(1448);
                            a.on_send(max, max + len, now);
                            b.on_send(max, max + len, now);
                            max += len;
                            if rnd(4) == 0 {
                                t += rnd(20_000);
                            }
                        }
                    }
                    6 if max > una => {
                        let s = una + rnd(max - una);
                        let e = (s + 1 + rnd(3000)).min(max);
                        a.on_send(s, e, now);
                        b.on_send(s, e, now);
                    }
                    7 => {
                        let forget = rnd(5) == 0;
                        a.on_rto(now, una, forget, None);
                        b.on_rto(now, una, forget, None);
                    }
                    _ => {}
                }
                if max == una {
                    continue;
                }
                // Sometimes an old ACK (below SND.UNA), sometimes with a SACK block above.
                let ack = if rnd(6) == 0 {
                    una.saturating_sub(rnd(10))
                } else {
                    una + rnd(max - una + 1)
                };
                let mut blocks = Vec::new();
                if rnd(3) == 0 && max > ack.max(una) + 2 {
                    let l = ack.max(una) + 1 + rnd(max - ack.max(una) - 1);
                    blocks.push((l, (l + 1 + rnd(5000)).min(max)));
                }
                let now = Instant::from_nanos(t + [0, 50_000, 2_000_000][rnd(3) as usize] * rnd(3));
                a.ack_echo_ms = Some((t / 1_000_000) as u32);
                b.ack_echo_ms = a.ack_echo_ms;
                let na = a.on_ack(now, ack, &blocks, &mut sa, una, max);
                // One by one first: `on_ack` then finds the run delivered.
                let mut i = 0;
                while i < b.segs.len() && b.segs[i].end <= ack {
                    b.deliver(i, now);
                    i += 1;
                }
                let nb = b.on_ack(now, ack, &blocks, &mut sb, una, max);
                assert_eq!(na, nb);
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
                assert_eq!(a.rate.take_sample(), b.rate.take_sample());
                una = una.max(ack);
                a.advance(una);
                b.advance(una);
                sa.advance(una);
                sb.advance(una);
            }
        }
    }

    /// The entry-by-entry [`Rack::advance`] the bulk one replaced: the reference.
    fn advance_one_by_one(r: &mut Rack, una: u64) {
        while let Some(s) = r.segs.front_mut() {
            if s.end <= una {
                if s.lost {
                    r.lost_bytes -= s.end - s.start;
                }
                r.segs.pop_front();
            } else {
                if s.start < una {
                    if s.lost {
                        r.lost_bytes -= una - s.start;
                    }
                    s.start = una;
                }
                break;
            }
        }
    }

    /// [`Rack::advance`] drops the delivered prefix in one step and leaves the log and its
    /// lost bytes as popping entry by entry does: random logs (bursts, partial resends that
    /// split entries, RTO marks of every undelivered entry, SACKs), cumulative ACKs anywhere
    /// from below the log to past its end, entry edges and inside entries.
    #[test]
    fn bulk_advance_equals_one_by_one() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        for _ in 0..3000 {
            let mut r = Rack::default();
            let mut sb = Scoreboard::default();
            let (mut una, mut max, mut t) = (1u64, 1u64, 0u64);
            for _ in 0..30 {
                t += rnd(3) * 1_000_000;
                let now = Instant::from_nanos(t);
                for _ in 0..rnd(20) {
                    let len = 1 + rnd(1448);
                    r.on_send(max, max + len, now);
                    max += len;
                }
                if max > una && rnd(3) == 0 {
                    let s = una + rnd(max - una);
                    r.on_send(s, (s + 1 + rnd(2000)).min(max), now);
                }
                if max > una && rnd(3) == 0 {
                    let l = una + rnd(max - una);
                    let e = (l + 1 + rnd(4000)).min(max);
                    r.on_ack(now, una, &[(l, e)], &mut sb, una, max);
                }
                if rnd(4) == 0 {
                    r.on_rto(now + Duration::from_secs(1), una, rnd(3) == 0, None);
                }
                // Below the log, at an entry's edge, inside an entry, or the whole log.
                let target = match rnd(4) {
                    0 => una.saturating_sub(rnd(5)),
                    1 => r
                        .segs
                        .get(rnd(r.segs.len() as u64 + 1) as usize)
                        .map_or(max, |s| s.end),
                    2 => una + rnd(max - una + 1),
                    _ => max,
                };
                let mut reference = r.clone();
                r.advance(target);
                advance_one_by_one(&mut reference, target);
                assert_eq!(format!("{r:?}"), format!("{reference:?}"));
                let marked: u64 = r
                    .segs
                    .iter()
                    .filter(|s| s.lost)
                    .map(|s| s.end - s.start)
                    .sum();
                assert_eq!(r.lost_bytes(), marked);
                una = una.max(target);
                sb.advance(una);
            }
        }
    }

    #[test]
    fn lost_retransmission_detected() {
        let mut r = Rack::default();
        let mut sb = Scoreboard::default();
        r.on_send(1, 101, ms(0));
        r.on_send(101, 201, ms(0));
        r.on_send(201, 301, ms(0));
        r.on_send(301, 401, ms(0));
        r.on_ack(ms(10), 1, &[(101, 401)], &mut sb, 1, 401);
        assert_eq!(r.detect_loss(ms(10), false, 3, None).bytes, 100);
        r.on_send(1, 101, ms(10));
        r.on_send(401, 501, ms(11));
        // New data sent after the retransmission is SACKed: the retransmission is lost.
        r.on_ack(ms(21), 1, &[(101, 501)], &mut sb, 1, 501);
        let d = r.detect_loss(ms(21), true, 4, None);
        assert_eq!((d.bytes, d.timer), (100, None));
        assert_eq!(r.next_lost(), Some((1, 101)));
    }

    #[test]
    fn reordering_widens_nothing_lost_within_window() {
        let mut r = Rack::default();
        let mut sb = Scoreboard::default();
        r.on_send(1, 101, ms(0));
        r.on_send(101, 201, ms(0));
        r.on_ack(ms(10), 1, &[(101, 201)], &mut sb, 1, 201);
        // Deadline 0 + 10 + 2.5 ms: not yet.
        let d = r.detect_loss(ms(10), false, 1, None);
        assert_eq!(d.bytes, 0);
        assert!(d.timer.is_some());
        // The first arrives late: reordering, nothing was lost.
        r.on_ack(ms(11), 201, &[], &mut sb, 1, 201);
        assert!(r.reordering_seen);
        r.advance(201);
        assert_eq!(r.detect_loss(ms(20), false, 0, None), Detected::default());
    }

    #[test]
    fn split_and_advance_keep_lost_bytes() {
        let mut r = Rack::default();
        r.on_send(1, 1001, ms(0));
        r.on_rto(ms(300), 1, false, None);
        assert_eq!(r.lost_bytes(), 1000);
        r.on_send(1, 501, ms(1));
        assert_eq!(r.lost_bytes(), 500);
        r.advance(701);
        assert_eq!(r.lost_bytes(), 300);
        assert_eq!(r.next_lost(), Some((701, 1001)));
    }

    /// RFC 8985 §6.3: on a timeout, the segment at SND.UNA and those older than RACK.rtt +
    /// RACK.reo_wnd are lost; one sent within that window is not (yet).
    #[test]
    fn rto_marks_head_and_old_segments_only() {
        let mut r = Rack::default();
        let mut sb = Scoreboard::default();
        for k in 0..4u64 {
            r.on_send(1 + k * 100, 101 + k * 100, ms(k));
        }
        // 101..201 SACKed at 11 ms: RACK.rtt 10 ms (sent at 1 ms).
        r.on_ack(ms(11), 1, &[(101, 201)], &mut sb, 1, 401);
        // A probe of the tail resent at 205 ms; the timeout fires at 210 ms.
        r.on_send(301, 401, ms(205));
        r.on_rto(ms(210), 1, false, None);
        // Head (1..101) and 201..301 (sent at 2 ms) lost; the probe (205 + 10 > 210) not.
        assert_eq!(r.lost_bytes(), 200);
        assert_eq!(r.next_lost(), Some((1, 101)));
        r.undo_rto_marks();
        assert_eq!((r.lost_bytes(), r.next_lost()), (0, None));
    }
}
