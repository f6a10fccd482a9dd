//! Counters, per connection and aggregated by the [`crate::Endpoint`].

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// TCP counters. All monotonically increasing.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct TcpStats {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl TcpStats {
            /// Add `o` into `self` (aggregation).
            pub fn add(&mut self, o: &TcpStats) {
                $(self.$name += o.$name;)*
            }

            /// Every counter with its name, in declaration order (for reports).
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Segments accepted by the parser.
    segs_in,
    /// Segments emitted.
    segs_out,
    /// Data segments retransmitted (any cause).
    retransmissions,
    /// Fast retransmits (entries into loss recovery on duplicate ACKs / SACK).
    fast_retransmits,
    /// Retransmission timeouts.
    rtos,
    /// Retransmission timeouts found spurious afterwards (RFC 3522 Eifel detection, with
    /// timestamps): the ACK that followed acknowledged the original transmission.
    spurious_rtos,
    /// Spurious retransmission timeouts undone (RFC 4015: congestion state restored, no
    /// go-back-N).
    rto_undos,
    /// Tail loss probes sent (RFC 8985 §7).
    tlp_probes,
    /// Segments (or parts) marked lost by RACK (RFC 8985 §6.2), retransmissions included.
    rack_lost,
    /// Segments held out of order.
    ooo_held,
    /// Held out-of-order segments whose ACK was folded into a later one (SACK compression,
    /// [`crate::TcpConfig::sack_compress_segments`]).
    sack_compressed,
    /// Immediate ACKs requested by the application at a message end
    /// ([`crate::Connection::ack_now`]) that found an ACK owed and moved it forward.
    quick_acks,
    /// Delayed-ACK timeouts that found segments a stretch ACK held: the peer's flight was
    /// smaller than the stretch, which was halved ([`crate::TcpConfig::ack_stretch_segments`]).
    ack_stretch_cuts,
    /// Out-of-order segments dropped because the bound was hit.
    ooo_dropped,
    /// Segments dropped for a bad checksum.
    bad_checksum,
    /// Segments dropped as malformed.
    malformed,
    /// Challenge ACKs sent (RFC 5961).
    challenge_acks,
    /// RSTs sent.
    resets_sent,
    /// RSTs accepted.
    resets_received,
    /// Segments dropped by PAWS (RFC 7323 §5).
    paws_drops,
    /// Zero-window probes sent (RFC 9293 §3.8.6.1).
    window_probes,
    /// Keepalive probes sent (RFC 9293 §3.8.4).
    keepalive_probes,
    /// SYN-ACKs sent with a SYN cookie (RFC 4987 §3.6).
    syn_cookies_sent,
    /// Connections created from a valid cookie.
    syn_cookies_accepted,
    /// SYNs dropped: accept queue full, or half-open queue full with cookies off.
    syn_dropped,
    /// SYNs or connects refused: the per-endpoint connection limit.
    conn_limit_drops,
    /// SYNs refused: the per-listener connection limit.
    listener_limit_drops,
    /// Connections reset after the FIN-WAIT-2 timeout.
    fin_wait2_timeouts,
    /// Tiny out-of-order segments dropped: the per-connection bound on them.
    ooo_dropped_small,
    /// Out-of-order segments dropped: the per-endpoint bound on held segments.
    ooo_dropped_budget,
    /// Payload bytes delivered in order.
    bytes_in,
    /// Payload bytes first sent (not counting retransmissions).
    bytes_out,
    /// ACKs received that acknowledged new data (SND.UNA advanced); `segs_out / acks_in` is
    /// the segments acknowledged per ACK.
    acks_in,
    /// Pure ACKs sent (no data, SYN, FIN or RST).
    acks_out,
    /// Sender time (ns) with data queued or in flight (Linux `tcp_info.busy_time`); the
    /// `*_limited_ns` counters below are parts of it, the rest is time spent sending.
    busy_ns,
    /// Sender time (ns) with queued data held back by a full congestion window.
    cwnd_limited_ns,
    /// Sender time (ns) with queued data held back by the peer's receive window (Linux
    /// `tcp_info.rwnd_limited`).
    rwnd_limited_ns,
    /// Sender time (ns) with everything queued in flight and the send buffer full (Linux
    /// `tcp_info.sndbuf_limited`): the owner waits for ACKs to free room.
    sndbuf_limited_ns,
    /// Sender time (ns) with everything queued in flight and room in the send buffer: the
    /// owner had nothing more to send (application-limited).
    app_limited_ns,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_fields() {
        let mut a = TcpStats {
            rtos: 2,
            ..TcpStats::default()
        };
        a.add(&TcpStats {
            rtos: 3,
            segs_in: 1,
            ..TcpStats::default()
        });
        let f = a.fields();
        assert!(f.contains(&("rtos", 5)) && f.contains(&("segs_in", 1)));
        assert!(f.iter().all(|(k, _)| !k.is_empty()));
    }
}
