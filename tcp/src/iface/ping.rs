//! The diagnostic ping: echo requests sent at an interval, replies matched, RTTs reported.

use netcore::{Duration, Instant};

use super::icmp::ECHO_HEADER_LEN;
use super::{
    ETH_HEADER_LEN, IP_PROTO_ICMP, IPV4_HEADER_LEN, Iface, IfaceEvent, MIN_FRAME_LEN, Resolve,
    pad_frame, write_eth,
};
use smoltcp::wire::EthernetProtocol;

/// Outstanding requests remembered (by sequence number modulo this); older replies are
/// unmatched.
const SLOTS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Empty,
    Outstanding,
    Answered,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u16,
    sent_at: Instant,
    state: SlotState,
}

/// One ping session.
#[derive(Debug)]
pub(super) struct Ping {
    dst: [u8; 4],
    ident: u16,
    count: u32,
    size: usize,
    interval: Duration,
    reply_timeout: Duration,
    sent: u32,
    received: u32,
    next_send: Instant,
    last_send: Option<Instant>,
    slots: Vec<Slot>,
}

/// Byte `i` of the payload of request `seq` (so altered replies can be recognised).
fn payload_byte(seq: u16, i: usize) -> u8 {
    (i as u8).wrapping_add(seq as u8).wrapping_add(0x10)
}

impl Ping {
    pub(super) fn dst(&self) -> [u8; 4] {
        self.dst
    }

    fn due(&self, now: Instant) -> bool {
        self.sent < self.count && now >= self.next_send
    }

    /// All requests sent, and all answered or the reply wait is over.
    pub(super) fn finished(&self, now: Instant) -> bool {
        self.sent >= self.count
            && (self.received >= self.sent
                || self.last_send.is_none_or(|t| now >= t + self.reply_timeout))
    }

    /// When the ping next needs `poll_transmit`. `resolving`: its next hop is being resolved,
    /// so the ARP timers drive progress instead.
    pub(super) fn timeout(&self, resolving: bool) -> Option<Instant> {
        if self.sent < self.count {
            (!resolving).then_some(self.next_send)
        } else {
            self.last_send.map(|t| t + self.reply_timeout)
        }
    }

    /// Record a request sent at `now`; returns its sequence number.
    fn on_sent(&mut self, now: Instant) -> u16 {
        let seq = self.sent as u16; // wraps after 65536 requests, like ping(8)
        if let Some(s) = self.slots.get_mut(usize::from(seq) % SLOTS) {
            *s = Slot {
                seq,
                sent_at: now,
                state: SlotState::Outstanding,
            };
        }
        self.sent += 1;
        self.last_send = Some(now);
        self.next_send = now + self.interval;
        seq
    }

    /// Match a reply; returns the RTT when it answers an outstanding request of ours with
    /// the payload we sent.
    fn on_reply(
        &mut self,
        now: Instant,
        from: [u8; 4],
        ident: u16,
        seq: u16,
        data: &[u8],
    ) -> Option<Duration> {
        if from != self.dst || ident != self.ident || data.len() != self.size {
            return None;
        }
        if !data
            .iter()
            .enumerate()
            .all(|(i, b)| *b == payload_byte(seq, i))
        {
            return None;
        }
        let slot = self.slots.get_mut(usize::from(seq) % SLOTS)?;
        if slot.seq != seq || slot.state != SlotState::Outstanding {
            return None;
        }
        slot.state = SlotState::Answered;
        self.received += 1;
        Some(now - slot.sent_at)
    }
}

impl Iface {
    /// Start the diagnostic ping: `count` echo requests with `size` payload bytes (clamped to
    /// the MTU) to `dst`, one every `interval`, the first at once (through `poll_transmit`).
    /// Replies come as [`IfaceEvent::EchoReply`], the end as [`IfaceEvent::PingDone`]. A ping
    /// already running is finished first.
    pub fn start_ping(
        &mut self,
        now: Instant,
        dst: [u8; 4],
        count: u32,
        size: usize,
        interval: Duration,
    ) {
        if self.ping.is_some() {
            self.finish_ping();
        }
        let ident = self.next_ping_ident;
        self.next_ping_ident = ident.wrapping_add(1);
        let slot = Slot {
            seq: 0,
            sent_at: now,
            state: SlotState::Empty,
        };
        self.ping = Some(Ping {
            dst,
            ident,
            count,
            size: size.min(self.max_ping_payload()),
            interval,
            reply_timeout: self.cfg.ping_reply_timeout,
            sent: 0,
            received: 0,
            next_send: now,
            last_send: None,
            slots: vec![slot; SLOTS.min(count as usize)],
        });
        if count == 0 {
            self.finish_ping();
        }
    }

    /// End the ping, reporting its totals.
    pub(super) fn finish_ping(&mut self) {
        if let Some(p) = self.ping.take() {
            self.push_event(IfaceEvent::PingDone {
                dst: p.dst,
                sent: p.sent,
                received: p.received,
            });
        }
    }

    /// Write the next echo request if one is due and its next hop is resolved.
    pub(super) fn ping_transmit(&mut self, now: Instant, tx: &mut [u8]) -> Option<usize> {
        let p = self.ping.as_ref()?;
        if !p.due(now) {
            return None;
        }
        let (dst, size) = (p.dst, p.size);
        let icmp_len = ECHO_HEADER_LEN + size;
        let ip_end = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        let end = ip_end + icmp_len;
        if tx.len() < end.max(MIN_FRAME_LEN) {
            return None;
        }
        let mac = match self.resolve(now, dst) {
            Resolve::Known(mac) => mac,
            Resolve::Pending => return None,
            Resolve::Failed | Resolve::NoRoute => {
                self.finish_ping();
                return None;
            }
        };
        let p = self.ping.as_mut()?;
        let ident = p.ident;
        let seq = p.on_sent(now);
        write_eth(tx, mac, self.cfg.mac, EthernetProtocol::Ipv4);
        self.write_ipv4(
            tx.get_mut(ETH_HEADER_LEN..ip_end)?,
            dst,
            IP_PROTO_ICMP,
            icmp_len,
        );
        let icmp = tx.get_mut(ip_end..end)?;
        for (i, b) in icmp.iter_mut().skip(ECHO_HEADER_LEN).enumerate() {
            *b = payload_byte(seq, i);
        }
        super::icmp::write_echo_header(icmp, true, ident, seq);
        Some(pad_frame(tx, end))
    }

    /// Handle an echo reply: report it when it matches the running ping.
    pub(super) fn rx_echo_reply(
        &mut self,
        now: Instant,
        from: [u8; 4],
        ttl: u8,
        ident: u16,
        seq: u16,
        data: &[u8],
    ) -> bool {
        let Some(p) = self.ping.as_mut() else {
            return false;
        };
        let Some(rtt) = p.on_reply(now, from, ident, seq, data) else {
            return false;
        };
        let finished = p.finished(now);
        self.stats.icmp_echo_reply_rx += 1;
        self.push_event(IfaceEvent::EchoReply {
            from,
            seq,
            rtt,
            bytes: data.len(),
            ttl,
        });
        if finished {
            self.finish_ping();
        }
        true
    }
}
