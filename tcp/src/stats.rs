//! Counters, per connection and aggregated by the [`crate::Endpoint`].

/// TCP counters. All monotonically increasing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments accepted by the parser.
    pub segs_in: u64,
    /// Segments emitted.
    pub segs_out: u64,
    /// Data segments retransmitted (any cause).
    pub retransmissions: u64,
    /// Fast retransmits (entries into loss recovery on duplicate ACKs / SACK).
    pub fast_retransmits: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tlp_probes: u64,
    /// Segments (or parts) marked lost by RACK (RFC 8985 §6.2), retransmissions included.
    pub rack_lost: u64,
    /// Segments held out of order.
    pub ooo_held: u64,
    /// Out-of-order segments dropped because the bound was hit.
    pub ooo_dropped: u64,
    /// Segments dropped for a bad checksum.
    pub bad_checksum: u64,
    /// Segments dropped as malformed.
    pub malformed: u64,
    /// Challenge ACKs sent (RFC 5961).
    pub challenge_acks: u64,
    /// RSTs sent.
    pub resets_sent: u64,
    /// RSTs accepted.
    pub resets_received: u64,
    /// Segments dropped by PAWS (RFC 7323 §5).
    pub paws_drops: u64,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    pub window_probes: u64,
    /// Keepalive probes sent (RFC 9293 §3.8.4).
    pub keepalive_probes: u64,
    /// Payload bytes delivered in order.
    pub bytes_in: u64,
    /// Payload bytes first sent (not counting retransmissions).
    pub bytes_out: u64,
}

impl TcpStats {
    /// Add `o` into `self` (aggregation).
    pub fn add(&mut self, o: &TcpStats) {
        self.segs_in += o.segs_in;
        self.segs_out += o.segs_out;
        self.retransmissions += o.retransmissions;
        self.fast_retransmits += o.fast_retransmits;
        self.rtos += o.rtos;
        self.tlp_probes += o.tlp_probes;
        self.rack_lost += o.rack_lost;
        self.ooo_held += o.ooo_held;
        self.ooo_dropped += o.ooo_dropped;
        self.bad_checksum += o.bad_checksum;
        self.malformed += o.malformed;
        self.challenge_acks += o.challenge_acks;
        self.resets_sent += o.resets_sent;
        self.resets_received += o.resets_received;
        self.paws_drops += o.paws_drops;
        self.window_probes += o.window_probes;
        self.keepalive_probes += o.keepalive_probes;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
    }
}
