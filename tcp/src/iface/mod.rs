//! Ethernet, ARP, IPv4 and ICMP for one interface, sans-IO.
//!
//! Heads up! Before editing, read RFC 826 (ARP), RFC 791 (IPv4), RFC 792 (ICMP), RFC 1071
//! (checksum) and RFC 1122 sections 2.3.2 (ARP cache), 3.2.1 (IP receive checks) and 3.2.2.6
//! (echo). Header formats come from `smoltcp::wire`; the logic here decides what to accept.
//!
//! # What it consumes and emits
//! - In: received Ethernet frames ([`Iface::handle_frame`]), the time as [`Instant`], and
//!   commands ([`Iface::resolve`], [`Iface::start_ping`]).
//! - Out: replies written into the caller's buffer ([`RxAction::Reply`]), TCP segments located
//!   inside the received frame ([`RxAction::Tcp`]), frames of its own
//!   ([`Iface::poll_transmit`]: ARP requests, ping echo requests), events
//!   ([`Iface::poll_event`]) and counters ([`Iface::stats`]).
//!
//! # Call order (one dataplane iteration)
//! 1. `handle_frame` for each received frame; send `tx` when it returns `Reply(len)`.
//! 2. `poll_transmit` until `None`, sending each frame.
//! 3. `poll_timeout` to know when step 2 must run again even without traffic.
//! 4. `poll_event` until `None`.
//!
//! Frames this module writes are padded to the 60-byte Ethernet minimum; the headers written
//! by [`Iface::emit_ipv4_header`] are not (the caller pads short TCP frames if its NIC does
//! not).

mod arp;
mod icmp;
mod ipv4;
mod neighbor;
mod ping;
mod stats;

use core::ops::Range;
use std::collections::VecDeque;

use netcore::{Duration, Instant};
pub use smoltcp::phy::{Checksum, ChecksumCapabilities};

pub use neighbor::NeighborState;
pub use stats::{DropReason, IfaceStats};

use neighbor::{Lookup, NeighborCache};
use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol};

/// Length of an Ethernet II header (no VLAN tag).
pub const ETH_HEADER_LEN: usize = 14;
/// Length of the IPv4 header this module emits (no options).
pub const IPV4_HEADER_LEN: usize = 20;
/// Minimum Ethernet frame length without FCS; shorter frames are zero-padded.
pub const MIN_FRAME_LEN: usize = 60;
/// Default IPv4 TTL of emitted datagrams (RFC 1700 / Linux default).
pub const DEFAULT_TTL: u8 = 64;
/// IP protocol number of ICMP.
pub const IP_PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const IP_PROTO_TCP: u8 = 6;
/// Bound of the event queue; further events are counted in `events_lost`.
const EVENT_QUEUE_CAP: usize = 1024;
const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// Configuration of one interface.
#[derive(Debug, Clone)]
pub struct IfaceConfig {
    /// Our MAC address.
    pub mac: [u8; 6],
    /// Our IPv4 address.
    pub ip: [u8; 4],
    /// Prefix length of our subnet (0..=32): destinations inside it are on-link.
    pub prefix_len: u8,
    /// Next hop for destinations outside the subnet.
    pub gateway: Option<[u8; 4]>,
    /// IP MTU (largest IPv4 datagram, without the Ethernet header).
    pub mtu: u16,
    /// How long a learned neighbour stays valid before it is revalidated.
    pub arp_timeout: Duration,
    /// Interval between ARP requests for one neighbour.
    pub arp_retry: Duration,
    /// ARP requests sent after the first one before the neighbour is declared failed
    /// (`1 + arp_max_retries` requests in all; failure `arp_retry` after the last).
    pub arp_max_retries: u32,
    /// How long a failed resolution is remembered (lookups answer `Failed` meanwhile).
    pub arp_failed_hold: Duration,
    /// Maximum number of neighbour entries (least recently learned evicted first).
    pub neighbor_capacity: usize,
    /// TTL of emitted datagrams.
    pub ttl: u8,
    /// Checksum offloads. Only `ipv4` is honoured: `rx()` false means the NIC verified the
    /// header checksum (the caller drops frames it flagged bad), `tx()` false means the NIC
    /// fills it (we write 0). ICMP checksums are always done in software.
    pub checksum_caps: ChecksumCapabilities,
    /// How long the diagnostic ping waits for replies after its last request.
    pub ping_reply_timeout: Duration,
}

impl IfaceConfig {
    /// A configuration with the usual defaults: MTU 1500, ARP entries valid 60 s, retry every
    /// 1 s, 3 retries, failures held 3 s, 256 neighbours, TTL 64, checksums in software,
    /// ping replies awaited 1 s.
    pub fn new(mac: [u8; 6], ip: [u8; 4], prefix_len: u8) -> Self {
        IfaceConfig {
            mac,
            ip,
            prefix_len,
            gateway: None,
            mtu: 1500,
            arp_timeout: Duration::from_secs(60),
            arp_retry: Duration::from_secs(1),
            arp_max_retries: 3,
            arp_failed_hold: Duration::from_secs(3),
            neighbor_capacity: 256,
            ttl: DEFAULT_TTL,
            checksum_caps: ChecksumCapabilities::default(),
            ping_reply_timeout: Duration::from_secs(1),
        }
    }
}

/// What [`Iface::handle_frame`] did with a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxAction {
    /// Handled here; nothing to send (e.g. an ARP reply was learned, an echo reply matched).
    Consumed,
    /// A reply of this many bytes was written at the start of `tx`: send it.
    Reply(usize),
    /// A TCP segment for us: `payload` is the byte range of the TCP header+data within the
    /// frame (IP padding and Ethernet trailer excluded). Not validated beyond IPv4.
    Tcp {
        /// IPv4 source address.
        src: [u8; 4],
        /// IPv4 destination address (ours).
        dst: [u8; 4],
        /// TCP segment position within the frame.
        payload: Range<usize>,
    },
    /// Dropped (and counted in [`IfaceStats::dropped`]).
    Dropped(DropReason),
}

/// Result of [`Iface::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// The next-hop MAC address.
    Known([u8; 6]),
    /// An ARP request is on its way (or a retry pending); ask again later.
    Pending,
    /// Resolution ran out of retries recently ([`IfaceConfig::arp_failed_hold`]).
    Failed,
    /// The destination is off-link and no gateway is configured, or it is 0.0.0.0,
    /// loopback or our own address.
    NoRoute,
}

/// Something the caller may want to report.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IfaceEvent {
    /// A reply to the diagnostic ping.
    EchoReply {
        /// Who answered.
        from: [u8; 4],
        /// Echo sequence number (0 for the first request of a ping).
        seq: u16,
        /// Round-trip time.
        rtt: Duration,
        /// ICMP payload bytes (without the 8-byte ICMP header).
        bytes: usize,
        /// TTL of the reply datagram.
        ttl: u8,
    },
    /// The diagnostic ping finished (all sent and answered, or the reply wait expired, or
    /// the destination could not be resolved).
    PingDone {
        /// Pinged address.
        dst: [u8; 4],
        /// Requests sent.
        sent: u32,
        /// Distinct requests answered.
        received: u32,
    },
    /// Neighbour resolution of this next hop ran out of retries.
    NeighborFailed([u8; 4]),
    /// Another host (this MAC) claims our IPv4 address in ARP (RFC 5227 section 2.4).
    AddressConflict {
        /// The conflicting host's MAC.
        mac: [u8; 6],
    },
}

/// One interface: our addresses, the neighbour cache, the diagnostic ping and counters.
///
/// Polling order (quinn style): `handle_frame`* -> `poll_transmit`* -> `poll_timeout` ->
/// `poll_event`*.
#[derive(Debug)]
pub struct Iface {
    cfg: IfaceConfig,
    neighbors: NeighborCache,
    ping: Option<ping::Ping>,
    next_ping_ident: u16,
    next_ip_ident: u16,
    events: VecDeque<IfaceEvent>,
    stats: IfaceStats,
}

impl Iface {
    /// Create an interface.
    ///
    /// # Panics
    /// If `prefix_len > 32` or `mtu < 68` (RFC 791: every host must accept 68-byte
    /// datagrams): configuration is validated by the caller.
    pub fn new(cfg: IfaceConfig) -> Self {
        assert!(cfg.prefix_len <= 32, "prefix_len {} > 32", cfg.prefix_len);
        assert!(cfg.mtu >= 68, "mtu {} < 68", cfg.mtu);
        let timers = neighbor::Timers {
            timeout: cfg.arp_timeout,
            retry: cfg.arp_retry,
            max_retries: cfg.arp_max_retries,
            failed_hold: cfg.arp_failed_hold,
        };
        Iface {
            neighbors: NeighborCache::new(cfg.neighbor_capacity, timers),
            cfg,
            ping: None,
            next_ping_ident: 0x4957, // "IW"; incremented per ping
            next_ip_ident: 0,
            events: VecDeque::new(),
            stats: IfaceStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IfaceConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &IfaceStats {
        &self.stats
    }

    /// What the neighbour cache holds for `ip`.
    pub fn neighbor(&self, ip: [u8; 4]) -> Option<NeighborState> {
        self.neighbors.state(ip)
    }

    /// Every neighbour entry (for a stats endpoint).
    pub fn neighbors(&self) -> impl Iterator<Item = ([u8; 4], NeighborState)> + '_ {
        self.neighbors.iter()
    }

    /// Handle one received Ethernet frame (without FCS). Replies (ARP reply, ICMP echo
    /// reply) are written into `tx`, which should hold at least `mtu + 14` bytes; TCP
    /// segments are located, not handled.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8], tx: &mut [u8]) -> RxAction {
        self.stats.rx_frames += 1;
        let action = self.rx_frame(now, frame, tx);
        match &action {
            RxAction::Dropped(r) => {
                tracing::trace!(reason = %r, len = frame.len(), "iface: frame dropped");
                self.stats.count_drop(*r);
            }
            RxAction::Reply(_) => self.stats.tx_frames += 1,
            RxAction::Tcp { .. } => self.stats.rx_tcp += 1,
            RxAction::Consumed => {}
        }
        action
    }

    fn rx_frame(&mut self, now: Instant, frame: &[u8], tx: &mut [u8]) -> RxAction {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return RxAction::Dropped(DropReason::Truncated);
        };
        let dst = eth.dst_addr();
        let src = eth.src_addr();
        let link_broadcast = dst.is_broadcast();
        if dst.0 != self.cfg.mac && !link_broadcast {
            return RxAction::Dropped(DropReason::NotOurMac);
        }
        if !valid_unicast_mac(src.0) || src.0 == self.cfg.mac {
            return RxAction::Dropped(DropReason::BadSrcMac);
        }
        match eth.ethertype() {
            EthernetProtocol::Arp => self.rx_arp(now, eth.payload(), tx),
            EthernetProtocol::Ipv4 => self.rx_ipv4(now, link_broadcast, src.0, frame, tx),
            _ => RxAction::Dropped(DropReason::UnsupportedEthertype),
        }
    }

    /// Frames the interface wants to send on its own: ARP requests (first tries, retries,
    /// revalidations) and echo requests of the diagnostic ping once its next hop is resolved.
    /// Writes one frame into `tx` (at least `mtu + 14` bytes) and returns its length; call
    /// until `None`. Also runs [`Iface::handle_timeout`].
    pub fn poll_transmit(&mut self, now: Instant, tx: &mut [u8]) -> Option<usize> {
        self.handle_timeout(now);
        // ARP first (few frames, and they unblock everything else), then the ping, then ARP
        // again in case the ping has just started resolving its next hop.
        if let Some(len) = self.arp_transmit(now, tx) {
            return Some(len);
        }
        if let Some(len) = self.ping_transmit(now, tx) {
            self.stats.tx_frames += 1;
            self.stats.icmp_echo_request_tx += 1;
            return Some(len);
        }
        self.arp_transmit(now, tx)
    }

    fn arp_transmit(&mut self, now: Instant, tx: &mut [u8]) -> Option<usize> {
        if tx.len() < MIN_FRAME_LEN {
            return None;
        }
        let solicit = self.neighbors.poll(now)?;
        let len = self.write_arp_request(solicit, tx);
        self.stats.tx_frames += 1;
        self.stats.arp_request_tx += 1;
        Some(len)
    }

    /// Run timers that produce no frame: neighbour failures (a [`IfaceEvent::NeighborFailed`]
    /// each) and the end of the diagnostic ping.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(ip) = self.neighbors.expire(now) {
            self.stats.neighbor_failed += 1;
            tracing::debug!(?ip, "neighbour resolution failed");
            self.push_event(IfaceEvent::NeighborFailed(ip));
            let ping_hop = self.ping.as_ref().and_then(|p| self.next_hop(p.dst()));
            if ping_hop == Some(ip) {
                self.finish_ping();
            }
        }
        if self.ping.as_ref().is_some_and(|p| p.finished(now)) {
            self.finish_ping();
        }
    }

    /// Earliest time at which `poll_transmit` has work (ARP retry or failure, next ping
    /// request, end of the ping's reply wait), or `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let arp = self.neighbors.poll_timeout();
        let ping = self.ping.as_ref().and_then(|p| {
            // While the ping's next hop is being resolved, the ARP timers drive progress.
            let hop = self.next_hop(p.dst());
            let resolving = hop.is_some_and(|h| {
                matches!(self.neighbors.state(h), Some(NeighborState::Incomplete))
            });
            p.timeout(resolving)
        });
        match (arp, ping) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<IfaceEvent> {
        self.events.pop_front()
    }

    fn push_event(&mut self, ev: IfaceEvent) {
        if self.events.len() >= EVENT_QUEUE_CAP {
            self.stats.events_lost += 1;
        } else {
            self.events.push_back(ev);
        }
    }

    /// Next hop for `dst`: itself when on-link, the gateway otherwise. None for 0.0.0.0,
    /// loopback and our own address (there is no loopback path here).
    fn next_hop(&self, dst: [u8; 4]) -> Option<[u8; 4]> {
        if dst == [0; 4] || dst[0] == 127 || dst == self.cfg.ip {
            None
        } else if self.on_link(dst) {
            Some(dst)
        } else {
            self.cfg.gateway
        }
    }

    fn on_link(&self, ip: [u8; 4]) -> bool {
        let mask = netmask(self.cfg.prefix_len);
        u32::from_be_bytes(ip) & mask == u32::from_be_bytes(self.cfg.ip) & mask
    }

    /// The directed broadcast address of our subnet, if the prefix has one (RFC 919/922).
    fn subnet_broadcast(&self) -> Option<[u8; 4]> {
        if self.cfg.prefix_len >= 31 {
            return None;
        }
        let mask = netmask(self.cfg.prefix_len);
        Some((u32::from_be_bytes(self.cfg.ip) | !mask).to_be_bytes())
    }

    /// Resolve the next-hop MAC for `dst` (itself if on-link, else the gateway). On a miss an
    /// ARP request is queued for `poll_transmit` and `Pending` returned: the caller holds or
    /// drops its packet (TCP retransmits) and asks again later; after the retries run out
    /// it gets `Failed` (and an [`IfaceEvent::NeighborFailed`]). Broadcast destinations map
    /// to the broadcast MAC, multicast ones per RFC 1112 6.4. Our own address, loopback and
    /// 0.0.0.0 give `NoRoute` (no loopback path).
    pub fn resolve(&mut self, now: Instant, dst: [u8; 4]) -> Resolve {
        if dst == [255; 4] || Some(dst) == self.subnet_broadcast() {
            return Resolve::Known(BROADCAST_MAC);
        }
        if dst[0] & 0xf0 == 0xe0 {
            // RFC 1112 6.4: 01-00-5E plus the low 23 bits of the group address.
            return Resolve::Known([0x01, 0x00, 0x5e, dst[1] & 0x7f, dst[2], dst[3]]);
        }
        let Some(hop) = self.next_hop(dst) else {
            return Resolve::NoRoute;
        };
        let (res, evicted) = self.neighbors.lookup(now, hop);
        if evicted {
            self.stats.neighbor_evicted += 1;
        }
        match res {
            Lookup::Known(mac) => Resolve::Known(mac),
            Lookup::Pending => Resolve::Pending,
            Lookup::Failed => Resolve::Failed,
        }
    }

    /// Write Ethernet + IPv4 headers (34 bytes) for a payload of `payload_len` bytes of IP
    /// protocol `proto` to `dst` via `dst_mac` at the start of `buf`, and return 34; the
    /// caller appends the payload. The IPv4 checksum is computed unless offloaded
    /// ([`IfaceConfig::checksum_caps`]); DF is set and TTL is [`IfaceConfig::ttl`].
    ///
    /// # Panics
    /// If `buf` is shorter than 34 bytes or `payload_len` exceeds `65535 - 20` (caller bugs).
    pub fn emit_ipv4_header(
        &mut self,
        dst_mac: [u8; 6],
        dst: [u8; 4],
        proto: u8,
        payload_len: usize,
        buf: &mut [u8],
    ) -> usize {
        let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        assert!(
            buf.len() >= hdr,
            "emit_ipv4_header: buffer of {} < 34 bytes",
            buf.len()
        );
        assert!(
            payload_len <= usize::from(u16::MAX) - IPV4_HEADER_LEN,
            "emit_ipv4_header: payload_len {payload_len} too large"
        );
        write_eth(buf, dst_mac, self.cfg.mac, EthernetProtocol::Ipv4);
        self.write_ipv4(&mut buf[ETH_HEADER_LEN..hdr], dst, proto, payload_len);
        hdr
    }

    /// Write a 20-byte IPv4 header from us to `dst` into `buf` (exactly 20 bytes).
    fn write_ipv4(&mut self, buf: &mut [u8], dst: [u8; 4], proto: u8, payload_len: usize) {
        let ident = self.next_ip_ident;
        self.next_ip_ident = ident.wrapping_add(1);
        ipv4::write_header(
            buf,
            &ipv4::HeaderFields {
                src: self.cfg.ip,
                dst,
                proto,
                payload_len,
                ident,
                ttl: self.cfg.ttl,
            },
            self.cfg.checksum_caps.ipv4.tx(),
        );
    }

    /// Largest ICMP payload a ping may carry (MTU minus IPv4 and ICMP headers).
    fn max_ping_payload(&self) -> usize {
        usize::from(self.cfg.mtu).saturating_sub(IPV4_HEADER_LEN + icmp::ECHO_HEADER_LEN)
    }
}

/// True for an address usable as a unicast source: not multicast/broadcast, not all-zero.
fn valid_unicast_mac(mac: [u8; 6]) -> bool {
    EthernetAddress(mac).is_unicast() && mac != [0; 6]
}

fn netmask(prefix_len: u8) -> u32 {
    match prefix_len {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

/// Write an Ethernet II header (destination, source, EtherType; IEEE 802.3 §3.1.1) at the
/// start of `buf` (at least 14 bytes), as one array.
fn write_eth(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: EthernetProtocol) {
    let Some(out) = buf.first_chunk_mut::<ETH_HEADER_LEN>() else {
        return;
    };
    let [d0, d1, d2, d3, d4, d5] = dst;
    let [s0, s1, s2, s3, s4, s5] = src;
    let [t0, t1] = u16::from(ethertype).to_be_bytes();
    *out = [d0, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5, t0, t1];
}

/// Zero-pad a frame of `len` bytes in `buf` to [`MIN_FRAME_LEN`]; returns the padded length.
fn pad_frame(buf: &mut [u8], len: usize) -> usize {
    if len >= MIN_FRAME_LEN {
        return len;
    }
    if let Some(pad) = buf.get_mut(len..MIN_FRAME_LEN) {
        pad.fill(0);
        MIN_FRAME_LEN
    } else {
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Ethernet header as smoltcp's setters write it, for IPv4 and ARP frames.
    #[test]
    fn write_eth_matches_smoltcp() {
        let (dst, src) = ([0x02, 1, 2, 3, 4, 5], [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54]);
        for ty in [EthernetProtocol::Ipv4, EthernetProtocol::Arp] {
            let mut want = [0u8; 14];
            let mut f = EthernetFrame::new_unchecked(&mut want[..]);
            f.set_dst_addr(EthernetAddress(dst));
            f.set_src_addr(EthernetAddress(src));
            f.set_ethertype(ty);
            let mut got = [0x77u8; 15];
            write_eth(&mut got, dst, src, ty);
            assert_eq!(got[..14], want);
            assert_eq!(got[14], 0x77);
        }
    }
}
