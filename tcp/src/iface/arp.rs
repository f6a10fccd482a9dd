//! ARP receive (RFC 826 packet reception, with anti-poisoning limits) and emission.

use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetProtocol, Ipv4Address,
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

    /// Handle the payload of an ARP frame.
    ///
    /// RFC 826 "Packet Reception": if the sender is already in the table, update its hardware
    /// address ("merge"); if we are the target, add it, and answer a request. To limit cache
    /// poisoning, only requests addressed to us create entries: replies and gratuitous ARP
    /// update existing entries (including ones being resolved) and never create new ones.
    pub(super) fn rx_arp(&mut self, now: Instant, payload: &[u8], tx: &mut [u8]) -> RxAction {
        self.stats.rx_arp += 1;
        let Ok(pkt) = ArpPacket::new_checked(payload) else {
            return RxAction::Dropped(DropReason::Truncated);
        };
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: sha,
            source_protocol_addr: spa,
            target_protocol_addr: tpa,
            ..
        }) = ArpRepr::parse(&pkt)
        else {
            return RxAction::Dropped(DropReason::BadArp);
        };
        let (sha, spa, tpa) = (sha.0, spa.octets(), tpa.octets());
        let is_request = match operation {
            ArpOperation::Request => {
                self.stats.arp_request_rx += 1;
                true
            }
            ArpOperation::Reply => {
                self.stats.arp_reply_rx += 1;
                false
            }
            _ => return RxAction::Dropped(DropReason::BadArp),
        };
        if !valid_unicast_mac(sha) || sha == self.cfg.mac {
            return RxAction::Dropped(DropReason::BadSrcMac);
        }
        if spa == self.cfg.ip {
            // RFC 5227 section 2.4: a packet with our address as sender from another MAC is a
            // conflict. We report it and never learn it.
            tracing::warn!(mac = ?sha, "ARP: another host uses our IPv4 address");
            self.push_event(IfaceEvent::AddressConflict { mac: sha });
            return RxAction::Dropped(DropReason::AddressConflict);
        }
        // Sender 0.0.0.0 is an RFC 5227 probe: nothing to learn, but answer it if it asks
        // for us (that is how the prober detects the conflict).
        let probe = spa == [0; 4];
        if !probe && !self.valid_src_ip(spa) {
            return RxAction::Dropped(DropReason::BadSrcIp);
        }
        let for_us = tpa == self.cfg.ip;
        let mut changed = false;
        if !probe {
            let (c, evicted) = self.neighbors.learn(now, spa, sha, for_us && is_request);
            changed = c;
            if c {
                self.stats.neighbor_learned += 1;
            }
            if evicted {
                self.stats.neighbor_evicted += 1;
            }
        }
        if !for_us {
            return if changed {
                RxAction::Consumed
            } else {
                RxAction::Dropped(DropReason::NotOurIp)
            };
        }
        if !is_request {
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
            target_hardware_addr: EthernetAddress(sha),
            target_protocol_addr: Ipv4Address::from(spa),
        };
        let len = write_arp_frame(tx, sha, &reply, self.cfg.mac);
        self.stats.arp_reply_tx += 1;
        RxAction::Reply(len)
    }
}
