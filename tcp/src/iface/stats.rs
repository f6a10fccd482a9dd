//! Counters of the interface layer and the reasons a received frame is dropped.

/// Why [`Iface::handle_frame`](super::Iface::handle_frame) dropped a frame.
///
/// Every drop is also counted in [`IfaceStats::dropped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// The frame (or a header inside it) is shorter than its headers or length fields say.
    Truncated,
    /// The Ethernet destination is neither our MAC nor broadcast.
    NotOurMac,
    /// The Ethernet source is broadcast, multicast or all-zero.
    BadSrcMac,
    /// An EtherType other than ARP or IPv4 (VLAN tags included).
    UnsupportedEthertype,
    /// ARP with a hardware/protocol type or length other than Ethernet/IPv4, or an unknown opcode.
    BadArp,
    /// An ARP packet (or IPv4 datagram) whose target is not our IPv4 address.
    NotOurIp,
    /// Someone else uses our IPv4 address as ARP sender address (RFC 5227 section 2.4).
    AddressConflict,
    /// IPv4 version field is not 4.
    BadIpVersion,
    /// IPv4 IHL below 5, or total length below the header length.
    BadIpHeaderLen,
    /// IPv4 header checksum does not verify.
    BadIpChecksum,
    /// An IPv4 fragment (MF set or offset non-zero): reassembly is not supported.
    IpFragment,
    /// IPv4 source address that RFC 1122 section 3.2.1.3 forbids (0, broadcast, multicast,
    /// loopback, class E) or that is our own address.
    BadSrcIp,
    /// An IPv4 datagram addressed to us but received in a link-layer broadcast (RFC 1122 3.3.6).
    LinkBroadcastUnicastIp,
    /// An IP protocol other than TCP or ICMP.
    UnsupportedIpProto,
    /// ICMP checksum does not verify.
    BadIcmpChecksum,
    /// An ICMP message other than echo request/reply (or a non-zero code on those).
    UnsupportedIcmp,
    /// An ICMP echo reply matching no outstanding request of the diagnostic ping
    /// (unknown identifier/sender, too late, duplicate or altered payload).
    UnmatchedEchoReply,
    /// The reply did not fit in the caller's `tx` buffer or in the MTU.
    TxBufferTooSmall,
}

impl DropReason {
    /// Number of variants (size of [`IfaceStats::dropped`]).
    pub const COUNT: usize = 18;

    /// All reasons, in the order of their index.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Truncated,
        DropReason::NotOurMac,
        DropReason::BadSrcMac,
        DropReason::UnsupportedEthertype,
        DropReason::BadArp,
        DropReason::NotOurIp,
        DropReason::AddressConflict,
        DropReason::BadIpVersion,
        DropReason::BadIpHeaderLen,
        DropReason::BadIpChecksum,
        DropReason::IpFragment,
        DropReason::BadSrcIp,
        DropReason::LinkBroadcastUnicastIp,
        DropReason::UnsupportedIpProto,
        DropReason::BadIcmpChecksum,
        DropReason::UnsupportedIcmp,
        DropReason::UnmatchedEchoReply,
        DropReason::TxBufferTooSmall,
    ];

    /// Index of this reason in [`IfaceStats::dropped`].
    pub fn index(self) -> usize {
        // The enum is fieldless and ALL lists every variant in declaration order.
        self as usize
    }

    /// `drop_` + [`DropReason::name`], the key used by [`IfaceStats::fields`].
    pub fn drop_field_name(self) -> &'static str {
        match self {
            DropReason::Truncated => "drop_truncated",
            DropReason::NotOurMac => "drop_not_our_mac",
            DropReason::BadSrcMac => "drop_bad_src_mac",
            DropReason::UnsupportedEthertype => "drop_unsupported_ethertype",
            DropReason::BadArp => "drop_bad_arp",
            DropReason::NotOurIp => "drop_not_our_ip",
            DropReason::AddressConflict => "drop_address_conflict",
            DropReason::BadIpVersion => "drop_bad_ip_version",
            DropReason::BadIpHeaderLen => "drop_bad_ip_header_len",
            DropReason::BadIpChecksum => "drop_bad_ip_checksum",
            DropReason::IpFragment => "drop_ip_fragment",
            DropReason::BadSrcIp => "drop_bad_src_ip",
            DropReason::LinkBroadcastUnicastIp => "drop_link_broadcast_unicast_ip",
            DropReason::UnsupportedIpProto => "drop_unsupported_ip_proto",
            DropReason::BadIcmpChecksum => "drop_bad_icmp_checksum",
            DropReason::UnsupportedIcmp => "drop_unsupported_icmp",
            DropReason::UnmatchedEchoReply => "drop_unmatched_echo_reply",
            DropReason::TxBufferTooSmall => "drop_tx_buffer_too_small",
        }
    }

    /// A short stable name, for stats output.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotOurMac => "not_our_mac",
            DropReason::BadSrcMac => "bad_src_mac",
            DropReason::UnsupportedEthertype => "unsupported_ethertype",
            DropReason::BadArp => "bad_arp",
            DropReason::NotOurIp => "not_our_ip",
            DropReason::AddressConflict => "address_conflict",
            DropReason::BadIpVersion => "bad_ip_version",
            DropReason::BadIpHeaderLen => "bad_ip_header_len",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::IpFragment => "ip_fragment",
            DropReason::BadSrcIp => "bad_src_ip",
            DropReason::LinkBroadcastUnicastIp => "link_broadcast_unicast_ip",
            DropReason::UnsupportedIpProto => "unsupported_ip_proto",
            DropReason::BadIcmpChecksum => "bad_icmp_checksum",
            DropReason::UnsupportedIcmp => "unsupported_icmp",
            DropReason::UnmatchedEchoReply => "unmatched_echo_reply",
            DropReason::TxBufferTooSmall => "tx_buffer_too_small",
        }
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of one interface. All are monotonic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfaceStats {
    /// Frames given to `handle_frame`.
    pub rx_frames: u64,
    /// Received ARP packets (any opcode, before validation of the opcode).
    pub rx_arp: u64,
    /// Received IPv4 datagrams (before validation).
    pub rx_ipv4: u64,
    /// TCP segments handed to the caller.
    pub rx_tcp: u64,
    /// Received ICMP messages that passed the checksum.
    pub rx_icmp: u64,
    /// Frames dropped, indexed by [`DropReason::index`].
    pub dropped: [u64; DropReason::COUNT],
    /// ARP requests received (for any target).
    pub arp_request_rx: u64,
    /// ARP replies received.
    pub arp_reply_rx: u64,
    /// ARP requests sent (first tries and retries).
    pub arp_request_tx: u64,
    /// ARP replies sent.
    pub arp_reply_tx: u64,
    /// Neighbour entries created or refreshed from ARP.
    pub neighbor_learned: u64,
    /// Neighbour resolutions that ran out of retries.
    pub neighbor_failed: u64,
    /// Neighbour entries evicted because the cache was full.
    pub neighbor_evicted: u64,
    /// ICMP echo requests received for us.
    pub icmp_echo_request_rx: u64,
    /// ICMP echo replies sent.
    pub icmp_echo_reply_tx: u64,
    /// ICMP echo requests sent by the diagnostic ping.
    pub icmp_echo_request_tx: u64,
    /// ICMP echo replies matched to the diagnostic ping.
    pub icmp_echo_reply_rx: u64,
    /// Frames written by `handle_frame` replies and `poll_transmit`.
    pub tx_frames: u64,
    /// Events dropped because the event queue was full.
    pub events_lost: u64,
}

impl IfaceStats {
    /// How many frames were dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped.get(reason.index()).copied().unwrap_or(0)
    }

    /// Total frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Every counter with a stable name (drops as `drop_<reason>`), for stats output.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("rx_frames", self.rx_frames),
            ("rx_arp", self.rx_arp),
            ("rx_ipv4", self.rx_ipv4),
            ("rx_tcp", self.rx_tcp),
            ("rx_icmp", self.rx_icmp),
            ("arp_request_rx", self.arp_request_rx),
            ("arp_reply_rx", self.arp_reply_rx),
            ("arp_request_tx", self.arp_request_tx),
            ("arp_reply_tx", self.arp_reply_tx),
            ("neighbor_learned", self.neighbor_learned),
            ("neighbor_failed", self.neighbor_failed),
            ("neighbor_evicted", self.neighbor_evicted),
            ("icmp_echo_request_rx", self.icmp_echo_request_rx),
            ("icmp_echo_reply_tx", self.icmp_echo_reply_tx),
            ("icmp_echo_request_tx", self.icmp_echo_request_tx),
            ("icmp_echo_reply_rx", self.icmp_echo_reply_rx),
            ("tx_frames", self.tx_frames),
            ("events_lost", self.events_lost),
        ];
        for r in DropReason::ALL {
            v.push((r.drop_field_name(), self.dropped(r)));
        }
        v
    }

    pub(super) fn count_drop(&mut self, reason: DropReason) {
        if let Some(c) = self.dropped.get_mut(reason.index()) {
            *c += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_and_names_are_distinct() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for r in DropReason::ALL {
            assert_eq!(r.drop_field_name(), format!("drop_{}", r.name()));
        }
    }

    #[test]
    fn fields_cover_every_counter_once() {
        let mut s = IfaceStats::default();
        s.count_drop(DropReason::IpFragment);
        s.count_drop(DropReason::IpFragment);
        s.events_lost = 3;
        let f = s.fields();
        let mut keys: Vec<_> = f.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), f.len(), "duplicate keys");
        assert_eq!(f.len(), 18 + DropReason::COUNT);
        assert!(f.contains(&("drop_ip_fragment", 2)));
        assert!(f.contains(&("events_lost", 3)));
        assert_eq!(f.iter().map(|(_, v)| v).sum::<u64>(), 5);
    }
}
