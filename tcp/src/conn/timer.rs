//! Timers: retransmission (RFC 6298), persist (RFC 9293 §3.8.6.1), delayed ACK
//! (RFC 9293 §3.8.6.3), SACK compression (as Linux), keepalive (RFC 9293 §3.8.4), TIME-WAIT (RFC 9293 §3.3.2), FIN-WAIT-2, and
//! RACK-TLP's reordering timer and probe timeout (RFC 8985 §6.3, §7.2).

use netcore::Instant;

use super::{CloseReason, Connection, SegBuf, State};

#[cfg(test)]
thread_local! {
    /// Tests: arm the timers at the end of every transmit poll, as before the arming was
    /// deferred to the end of a burst (the reference behaviour).
    pub(crate) static ARM_EACH_SEGMENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What [`Connection::arm_timers`] sets.
struct Armed {
    rtx_at: Option<Instant>,
    persist_at: Option<Instant>,
    keepalive_at: Option<Instant>,
    tlp_at: Option<Instant>,
}

impl<B: SegBuf> Connection<B> {
    /// When `handle_timeout` must next be called, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A deferred arming counts as done (it would be, were this a mutating entry): its
        // timers computed once per deferral, kept until the next poll defers again.
        let armed = match self.arm_pending {
            Some(t) => self.arm_view.get().unwrap_or_else(|| {
                let a = self.armed(t);
                let m = [a.rtx_at, a.persist_at, a.keepalive_at, a.tlp_at]
                    .into_iter()
                    .flatten()
                    .min();
                self.arm_view.set(Some(m));
                m
            }),
            None => [self.rtx_at, self.persist_at, self.keepalive_at, self.tlp_at]
                .into_iter()
                .flatten()
                .min(),
        };
        [
            armed,
            self.delack_at,
            self.comp_at,
            self.timewait_at,
            self.fin_wait2_at,
            self.reo_at,
            self.pace_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Arm the timers that depend on the current state (called after every input and
    /// timeout, and after the output of a burst: see `poll_common`).
    pub(super) fn arm_timers(&mut self, now: Instant) {
        self.arm_pending = None;
        self.arm_view.set(None);
        let a = self.armed(now);
        self.rtx_at = a.rtx_at;
        self.persist_at = a.persist_at;
        self.keepalive_at = a.keepalive_at;
        self.tlp_at = a.tlp_at;
    }

    /// Apply an arming that a transmit poll deferred (a no-op without one). Every mutating
    /// entry except a transmit poll at the deferred time calls it first, when it reads a
    /// timer or changes what [`Connection::armed`] reads (input, timeouts, `close`, `abort`,
    /// `set_keepalive`, `poll_nothing`); `send` and `send_record` need not: they change only
    /// the data queued, read by the persist timer only while nothing is in flight, and a
    /// deferral leaves data in flight.
    pub(super) fn settle_timers(&mut self) {
        if let Some(t) = self.arm_pending {
            self.arm_timers(t);
        }
    }

    /// The timers [`Connection::arm_timers`] sets at `now`, given the current state (the rest
    /// are left as they are).
    fn armed(&self, now: Instant) -> Armed {
        let mut a = Armed {
            rtx_at: self.rtx_at,
            persist_at: self.persist_at,
            keepalive_at: self.keepalive_at,
            tlp_at: self.tlp_at,
        };
        if self.state == State::Closed {
            return a;
        }
        // RFC 6298 §5.1: the retransmission timer runs while data is outstanding.
        if self.snd_max > self.snd_una && a.rtx_at.is_none() && self.state != State::TimeWait {
            a.rtx_at = Some(now.add_nanos(self.rto_ns()));
        }
        // Persist: the peer's window is zero, data waits, nothing is in flight.
        let waiting = self.snd_nxt < self.app_end && self.snd_max == self.snd_una;
        if self.snd_wnd == 0 && waiting && self.state.is_synchronized() {
            if a.persist_at.is_none() && !self.probe_due {
                a.persist_at = Some(now.add_nanos(self.rto_ns()));
            }
        } else {
            a.persist_at = None;
        }
        // Keepalive: idle connection, nothing outstanding (RFC 9293 §3.8.4).
        a.keepalive_at = match self.cfg.keepalive {
            Some(k)
                if matches!(self.state, State::Established | State::CloseWait)
                    && self.snd_una == self.snd_max =>
            {
                Some(self.last_rx + k.idle + k.interval * self.keepalive_probes)
            }
            _ => None,
        };
        a.tlp_at = self.pto_at(now, a.rtx_at);
        a
    }

    /// RFC 8985 §7.2: schedule the probe timeout when the connection is sending normally, a
    /// SACK peer, with data outstanding, not in recovery and no probe unanswered. Deviation:
    /// SACKed data outstanding (RACK still waiting out reordering, or the tail beyond it lost)
    /// does not prevent the probe; in the simulator that condition cost ~20 % more RTOs. `tlp_at` is
    /// cleared wherever the PTO must restart (new data sent, new data acknowledged). Returns
    /// the probe timeout to keep or set, given the retransmission timer `rtx_at`.
    fn pto_at(&self, now: Instant, rtx_at: Option<Instant>) -> Option<Instant> {
        let eligible = self.rack_on()
            && matches!(
                self.state,
                State::Established
                    | State::CloseWait
                    | State::FinWait1
                    | State::Closing
                    | State::LastAck
            )
            && self.snd_max > self.snd_una
            && !self.in_recovery
            && self.rack.lost_bytes() == 0
            && self.tlp_end.is_none()
            && !self.tlp_due
            && self.snd_wnd > 0;
        if !eligible {
            return None;
        }
        if self.tlp_at.is_some() {
            return self.tlp_at;
        }
        // In nanoseconds (as the RTO).
        let pto = match self.rtt.srtt_ns() {
            Some(srtt) => {
                let flight = self.snd_max - self.snd_una;
                // RFC 8985 §7.2: with one segment in flight, allow for the peer's delayed ACK
                // (WCDelAckT = 200 ms); else 2 ms of slack (Linux's TCP_TIMEOUT_MIN).
                let extra = if flight <= u64::from(self.emss()) {
                    200_000_000
                } else {
                    2_000_000
                };
                srtt.saturating_mul(2).saturating_add(extra)
            }
            None => 1_000_000_000,
        };
        // RFC 8985 §7.2: never later than the RTO would fire.
        let at = now.add_nanos(pto);
        Some(rtx_at.map_or(at, |r| r.min(at)))
    }

    /// Run expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle_timers();
        if self.timewait_at.is_some_and(|t| t <= now) {
            // RFC 9293 §3.10.8: TIME-WAIT timeout, delete the TCB.
            self.timewait_at = None;
            self.finish(CloseReason::Normal);
            return;
        }
        if self.fin_wait2_at.is_some_and(|t| t <= now) {
            // FIN-WAIT-2 timeout (Linux's tcp_fin_timeout; RFC 9293 sets none): the peer never
            // closed. Reset it so it learns, and drop the connection.
            self.fin_wait2_at = None;
            self.stats.fin_wait2_timeouts += 1;
            let seq = self.wire_snd(self.snd_max);
            self.push_ctl(crate::wire::OutHeader {
                seq,
                rst: true,
                ..Default::default()
            });
            self.finish(CloseReason::Timeout);
            return;
        }
        if self.pace_at.is_some_and(|t| t <= now) {
            // Pacing released the next segment: the owner polls transmit after this.
            self.pace_at = None;
        }
        if self.delack_at.is_some_and(|t| t <= now) {
            self.delack_at = None;
            self.on_delack_timeout(now);
        }
        if self.comp_at.is_some_and(|t| t <= now) {
            // The SACK compression delay ran out: the held segments' ACK goes now.
            self.comp_at = None;
            self.owe_dupack();
        }
        if self.persist_at.is_some_and(|t| t <= now) {
            self.persist_at = None;
            self.probe_due = true;
            self.rtt.back_off();
        }
        if self.keepalive_at.is_some_and(|t| t <= now) {
            let k = self.cfg.keepalive.map_or(0, |k| k.count);
            if self.keepalive_probes >= k {
                self.finish(CloseReason::Timeout);
                return;
            }
            self.keepalive_probes += 1;
            self.keepalive_due = true;
        }
        if self.reo_at.is_some_and(|t| t <= now) {
            // RFC 8985 §6.3: the reordering window of some segment passed.
            self.reo_at = None;
            self.rack_detect(now);
        }
        if self.tlp_at.is_some_and(|t| t <= now) {
            self.tlp_at = None;
            if !self.in_recovery && self.rack.lost_bytes() == 0 && self.snd_max > self.snd_una {
                // RFC 8985 §7.3: send a probe, then run the RTO instead of another PTO.
                self.tlp_due = true;
                self.rtx_at = Some(now.add_nanos(self.rto_ns()));
            }
        }
        if self.rtx_at.is_some_and(|t| t <= now) {
            self.rtx_at = None;
            self.on_rto(now);
        }
        self.arm_timers(now);
    }

    /// RFC 6298 §5.4-§5.6 with RFC 5681 §3.1 (loss window) and RFC 6675 §5.1.
    fn on_rto(&mut self, now: Instant) {
        if self.snd_una >= self.snd_max {
            return;
        }
        self.retries += 1;
        let limit = if self.state.is_synchronized() {
            self.cfg.max_retries
        } else {
            self.cfg.max_retries.min(6)
        };
        if self.retries > limit {
            self.finish(CloseReason::Timeout);
            return;
        }
        self.stats.rtos += 1;
        tracing::trace!(
            remote = ?self.remote,
            una = self.snd_una,
            max = self.snd_max,
            rto = ?self.rto(),
            in_recovery = self.in_recovery,
            sacked = self.sb.sacked_bytes(),
            rack_lost = self.rack.lost_bytes(),
            tlp_outstanding = self.tlp_end.is_some(),
            cwnd = self.cc.cwnd,
            snd_wnd = self.snd_wnd,
            "tcp RTO"
        );
        let flight = self.snd_max - self.snd_una;
        // RFC 3522 §2 (Eifel detection): the first retransmission carries this TSval; an ACK
        // that echoes an older one acknowledges the original transmission instead. (A second
        // timeout before any ACK keeps the first: its retransmission may be what arrived.)
        if self.rto_tsval.is_none() && self.ts_ok {
            self.rto_tsval = Some(self.ts_offset.wrapping_add(now.as_millis() as u32));
            // RFC 4015 §2 step 0: what to restore if the timeout proves spurious.
            self.rto_undo = Some(self.cc.undo_point(flight));
        }
        self.cc.on_rto(flight);
        self.rto_recover = Some(self.snd_max);
        self.rtt.back_off();
        self.rtt_probe = None;
        self.tlp_due = false;
        self.tlp_end = None;
        self.tlp_at = None;
        self.reo_at = None;
        if self.rack_on() && self.snd_una >= 1 && self.rack.starts_at(self.snd_una) {
            // RFC 8985 §6.3 / RFC 6298 §5.4: everything not SACKed is lost; retransmission
            // starts at SND.UNA and skips what the receiver holds. If the receiver SACKed the
            // segment at SND.UNA yet times out on it, it reneged (RFC 2018 §8): forget SACKs.
            let reneged = self.rack.is_delivered(self.snd_una);
            if reneged {
                self.sb.clear();
            }
            self.rack
                .on_rto(now, self.snd_una, reneged, self.rtt.srtt());
            self.in_recovery = false;
            self.newreno_rtx = false;
            self.dupacks = 0;
            self.recover = self.snd_max;
            self.rtx_next = self.snd_una;
            self.una_rtx_mark = None;
            return;
        }
        self.rack.clear();
        // Go back N: resend from SND.UNA; forget SACK state (the receiver may renege, RFC 2018 §8).
        self.snd_nxt = self.snd_una;
        self.sb.clear();
        self.in_recovery = false;
        self.newreno_rtx = false;
        self.dupacks = 0;
        // RFC 6582 §3.2 step 4 analogue: no fast recovery for losses from before the timeout.
        self.recover = self.snd_max;
        self.rtx_next = self.snd_una;
        self.una_rtx_mark = None;
        if self.snd_una == 0 {
            self.syn_needed = true;
        }
    }
}
