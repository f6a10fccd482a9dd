//! ARP receive (RFC 826 packet reception, with anti-poisoning limits) and emission.

use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Ipv4Address,
};

use super::neighbor::ArpSolicit;
use super::{
    BROADCAST_MAC, DropReason, ETH_HEADER_LEN, Iface, IfaceEvent, Instant, RxAction, pad_frame,
    valid_unicast_mac, write_eth,
};

/// Length of an Ethernet/IPv4 ARP packet.
pub(super) const ARP_LEN: usize = 28;

/// Write an Ethernet frame carrying one Ethernet/IPv4 ARP packet into `buf` (at least
/// [`super::MIN_FRAME_LEN`] bytes), padded to the minimum frame size. Returns its length.
fn write_arp_frame(buf: &mut [u8], eth_dst: [u8; 6], repr: &ArpRepr, our_mac: [u8; 6]) -> usize {
    write_eth(buf, eth_dst, our_mac, EthernetProtocol::Arp);
    let end = ETH_HEADER_LEN + ARP_LEN;
    if let Some(body) = buf.get_mut(ETH_HEADER_LEN..end) {
        repr.emit(&mut ArpPacket::new_unchecked(body));
    }
    pad_frame(buf, end)
}

impl Iface {
    /// An ARP request for `s.target_ip`, broadcast or unicast (revalidation).
    pub(super) fn write_arp_request(&self, s: ArpSolicit, tx: &mut [u8]) -> usize {
        let repr = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(self.cfg.mac),
            source_protocol_addr: Ipv4Address::from(self.cfg.ip),
            // RFC 826: the target hardware address is what we want to know; zeros.
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Address::from(s.target_ip),
        };
        write_arp_frame(tx, s.unicast.unwrap_or(BROADCAST_MAC), &repr, self.cfg.mac)
    }

    /// Checks on the sender of a well-formed ARP packet. `Ok(true)` for an RFC 5227 probe
    /// (sender 0.0.0.0: nothing to learn).
    fn check_arp_sender(&self, a: &ArpIn) -> Result<bool, DropReason> {
        if !valid_unicast_mac(a.sha) || a.sha == self.cfg.mac {
            return Err(DropReason::BadSrcMac);
        }
        if a.spa == self.cfg.ip {
            // RFC 5227 section 2.4: a packet with our address as sender from another MAC is a
            // conflict. It is reported and never learned.
            return Err(DropReason::AddressConflict);
        }
        let probe = a.spa == [0; 4];
        if !probe && !self.valid_src_ip(a.spa) {
            return Err(DropReason::BadSrcIp);
        }
        Ok(probe)
    }

    /// RFC 826 merge: update the sender if known; add it if the packet is a request for us.
    /// Returns whether the cache changed.
    fn learn_arp_sender(&mut self, now: Instant, a: &ArpIn) -> bool {
        let create = a.is_request && a.tpa == self.cfg.ip;
        let (changed, evicted) = self.neighbors.learn(now, a.spa, a.sha, create);
        if changed {
            self.stats.neighbor_learned += 1;
        }
        if evicted {
            self.stats.neighbor_evicted += 1;
        }
        changed
    }

    /// Learn from an ARP frame that another interface instance with the same addresses
    /// received and answered (multi-queue: ARP lands on one queue, but every lcore's cache
    /// needs the replies to its own requests). Applies the same rules as `handle_frame` but
    /// never replies, raises no event and counts only `neighbor_learned`/`neighbor_evicted`.
    /// Returns whether the cache changed; non-ARP or invalid frames are ignored.
    pub fn observe_arp(&mut self, now: Instant, frame: &[u8]) -> bool {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return false;
        };
        if eth.ethertype() != EthernetProtocol::Arp {
            return false;
        }
        let Ok(a) = parse_arp(eth.payload()) else {
            return false;
        };
        match self.check_arp_sender(&a) {
            Ok(false) => self.learn_arp_sender(now, &a),
            _ => false,
        }
    }

    /// Handle the payload of an ARP frame.
    ///
    /// RFC 826 "Packet Reception": if the sender is already in the table, update its hardware
    /// address ("merge"); if we are the target, add it, and answer a request. To limit cache
    /// poisoning, only requests addressed to us create entries: replies and gratuitous ARP
    /// update existing entries (including ones being resolved) and never create new ones.
    pub(super) fn rx_arp(&mut self, now: Instant, payload: &[u8], tx: &mut [u8]) -> RxAction {
        self.stats.rx_arp += 1;
        let a = match parse_arp(payload) {
            Ok(a) => a,
            Err(r) => return RxAction::Dropped(r),
        };
        if a.is_request {
            self.stats.arp_request_rx += 1;
        } else {
            self.stats.arp_reply_rx += 1;
        }
        // A probe (sender 0.0.0.0) asking for us is answered: that is how the prober
        // detects the conflict (RFC 5227 section 2.1.1).
        let probe = match self.check_arp_sender(&a) {
            Ok(p) => p,
            Err(DropReason::AddressConflict) => {
                tracing::warn!(mac = ?a.sha, "ARP: another host uses our IPv4 address");
                self.push_event(IfaceEvent::AddressConflict { mac: a.sha });
                return RxAction::Dropped(DropReason::AddressConflict);
            }
            Err(r) => return RxAction::Dropped(r),
        };
        let changed = !probe && self.learn_arp_sender(now, &a);
        if a.tpa != self.cfg.ip {
            return if changed {
                RxAction::Consumed
            } else {
                RxAction::Dropped(DropReason::NotOurIp)
            };
        }
        if !a.is_request {
            return RxAction::Consumed;
        }
        if tx.len() < super::MIN_FRAME_LEN {
            return RxAction::Dropped(DropReason::TxBufferTooSmall);
        }
        // RFC 826: swap the fields, put ours as sender, opcode reply, send it to the
        // requester's hardware address.
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress(self.cfg.mac),
            source_protocol_addr: Ipv4Address::from(self.cfg.ip),
            target_hardware_addr: EthernetAddress(a.sha),
            target_protocol_addr: Ipv4Address::from(a.spa),
        };
        let len = write_arp_frame(tx, a.sha, &reply, self.cfg.mac);
        self.stats.arp_reply_tx += 1;
        RxAction::Reply(len)
    }
}

/// The fields of a well-formed Ethernet/IPv4 ARP request or reply.
#[derive(Debug, Clone, Copy)]
struct ArpIn {
    is_request: bool,
    sha: [u8; 6],
    spa: [u8; 4],
    tpa: [u8; 4],
}

/// Parse an ARP packet: `Truncated` if shorter than its own length fields say, `BadArp` for
/// other hardware/protocol types or lengths and for opcodes other than request/reply.
fn parse_arp(payload: &[u8]) -> Result<ArpIn, DropReason> {
    let pkt = ArpPacket::new_checked(payload).map_err(|_| DropReason::Truncated)?;
    let Ok(ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sha,
        source_protocol_addr: spa,
        target_protocol_addr: tpa,
        ..
    }) = ArpRepr::parse(&pkt)
    else {
        return Err(DropReason::BadArp);
    };
    let is_request = match operation {
        ArpOperation::Request => true,
        ArpOperation::Reply => false,
        _ => return Err(DropReason::BadArp),
    };
    Ok(ArpIn {
        is_request,
        sha: sha.0,
        spa: spa.octets(),
        tpa: tpa.octets(),
    })
}
