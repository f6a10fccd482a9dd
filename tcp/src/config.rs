//! Per-connection TCP configuration.

use netcore::Duration;

/// Congestion controller, chosen per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionControl {
    /// NewReno (RFC 5681 + RFC 6582), with SACK-based recovery (RFC 6675) when SACK is negotiated.
    NewReno,
    /// CUBIC (RFC 9438).
    Cubic,
    /// BBR (draft-ietf-ccwg-bbr; Linux's loss response), with pacing.
    Bbr,
}

/// How TCP checksums are handled (the dataplane sets this from the NIC's offload capabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumMode {
    /// Verify received checksums and compute transmitted ones in software.
    Software,
    /// The NIC verified received checksums and will fill transmitted ones: do neither here.
    Offloaded,
}

/// Keepalive parameters (RFC 9293 §3.8.4; RFC 1122 §4.2.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes after which the connection is closed with a timeout.
    pub count: u32,
}

/// TCP configuration. Defaults suit 10/40GbE: large windows, window scaling, SACK, timestamps.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// MSS we announce (RFC 9293 §3.7.1): MTU minus 40 for IPv4 without options.
    pub mss: u16,
    /// Receive window in bytes (what we can hold of in-order, unread payload).
    pub recv_window: u32,
    /// Send buffer limit in bytes (how much un-acknowledged data `send` accepts).
    pub send_window: u32,
    /// Window scale shift we offer (RFC 7323 §2); `None` disables the option. Clamped to 14.
    pub window_scale: Option<u8>,
    /// Offer/accept SACK (RFC 2018).
    pub sack: bool,
    /// Offer/accept timestamps (RFC 7323 §3).
    pub timestamps: bool,
    /// Congestion controller.
    pub cc: CongestionControl,
    /// Delayed ACK timeout (RFC 9293 §3.8.6.3, at most 500 ms); `None` acknowledges every segment at once.
    pub delayed_ack: Option<Duration>,
    /// Stretch ACKs: in-order segments received before the ACK for them goes out at once, once
    /// the peer's flight has shown it can go that far without one. RFC 9293 §3.8.6.3 and RFC
    /// 5681 §4.2 say SHOULD acknowledge every second full-sized segment (2 here); a receiver
    /// that ACKs per receive batch (Linux with GRO, this stack before: once per poll) sends
    /// fewer, as many as it has batches, so its ACK rate follows how fast it polls. With a
    /// count the rate follows the data: one ACK per this many segments, or per a quarter of
    /// the window last advertised, whichever comes first (a sender is never window-starved).
    /// Immediate ACKs stay immediate: a gap filled or remaining, out-of-order data (RFC 5681
    /// §4.2), the FIN (RFC 9293 §3.10.7.4), a window update (§3.8.6.2.2), the upper layer's
    /// message end ([`crate::Connection::request_ack`]); `delayed_ack` bounds the wait. The
    /// first 2 x this many segments of a connection are acknowledged every second segment
    /// ("quick" ACKs, as Linux's `tcp_enter_quickack_mode`: a sender in slow start grows its
    /// window past the stretch first). A delayed-ACK timeout that finds segments the RFCs'
    /// rule would have acknowledged (the peer's flight is smaller than the stretch: a small
    /// window, an application-limited sender; or the peer paused) cuts the stretch to half
    /// those segments; it doubles back after 16 ACKs at the stretch, twice as many after each
    /// further cut, so a peer whose flight stays below the stretch waits for the timer ever
    /// more rarely. After a filled hole (the peer lost data and cut its window) quick ACKs again
    /// for 2 x this many segments. 2..=4096; 2 (the default) turns stretching off. Only with
    /// `delayed_ack`.
    pub ack_stretch_segments: u32,
    /// Nagle's algorithm (RFC 9293 §3.7.4). Off by default: iWARP sends whole FPDUs.
    pub nagle: bool,
    /// Keepalive; `None` disables it.
    pub keepalive: Option<Keepalive>,
    /// How long TIME-WAIT lasts (2*MSL in RFC 9293 §3.3.2).
    pub time_wait: Duration,
    /// Initial RTO (RFC 6298 §2.1: 1 s).
    pub rto_initial: Duration,
    /// Lower bound on the RTO (RFC 6298 §2.4 says 1 s; Linux uses 200 ms, the default here:
    /// a peer's delayed ACK, up to 40 ms on Linux and 500 ms by RFC 9293 §3.8.6.3, must not
    /// trigger spurious timeouts. Lower it only for peers that ACK promptly).
    pub rto_min: Duration,
    /// Lower bound on the RTO while at least two full segments are outstanding (at most
    /// `rto_min`). A receiver acknowledges every second full segment at once (RFC 9293
    /// §3.8.6.3, RFC 5681 §4.2), so the delayed-ACK allowance `rto_min` carries is only needed
    /// for a lone segment; on a path whose RTT is microseconds a timeout then costs
    /// milliseconds instead of 200 ms. Equal to `rto_min`: one bound for all.
    pub rto_min_bulk: Duration,
    /// Upper bound on the RTO (RFC 6298 §2.5: at least 60 s).
    pub rto_max: Duration,
    /// Consecutive retransmission timeouts after which the connection is dropped (RFC 9293 §3.8.3 R2).
    pub max_retries: u32,
    /// Bound on the bytes held out of order; segments beyond it are dropped (and counted).
    pub max_ooo_bytes: usize,
    /// Bound on the number of segments held out of order.
    pub max_ooo_segments: usize,
    /// Challenge ACKs allowed per second (RFC 5961 §7).
    pub challenge_ack_limit: u32,
    /// Checksum handling.
    pub checksum: ChecksumMode,
    /// Initial congestion window in segments (RFC 6928 allows 10).
    pub initial_cwnd_segments: u32,
    /// SYN cookies (RFC 4987 §3.6) once `syn_backlog` half-open connections wait on a
    /// listener; off: such SYNs are dropped.
    pub syn_cookies: bool,
    /// Half-open (SYN-RECEIVED) connections per listening port before SYN cookies take over.
    pub syn_backlog: usize,
    /// Connections per endpoint (one dataplane thread), any state until reaped; beyond it SYNs
    /// are dropped and `connect` fails (counted: `conn_limit_drops`).
    pub max_connections: usize,
    /// Connections per listening port (counted: `listener_limit_drops`).
    pub max_listener_connections: usize,
    /// FIN-WAIT-2 timeout: a connection whose FIN was acknowledged and whose peer stays silent
    /// this long is reset (as Linux's `tcp_fin_timeout`); each segment from the peer restarts
    /// it. `None`: wait for the peer's FIN forever.
    pub fin_wait2_timeout: Option<Duration>,
    /// Out-of-order segments held over all connections of an endpoint: each pins one receive
    /// buffer (an mbuf), whatever its size. Beyond it out-of-order segments are dropped (the
    /// peer retransmits; counted: `ooo_dropped_budget`).
    pub max_ooo_segments_total: usize,
    /// Out-of-order segments smaller than a quarter of the MSS held per connection: a peer
    /// sending tiny segments out of order would pin one buffer per byte or two.
    pub max_ooo_small_segments: usize,
    /// RACK-TLP loss detection (RFC 8985) when SACK is negotiated: time-based loss marking,
    /// lost-retransmission detection and tail loss probes. Off: RFC 6675 DupThresh recovery.
    /// Peers without SACK always use NewReno (RFC 6582).
    pub rack_tlp: bool,
    /// Proportional Rate Reduction (RFC 6937) during SACK loss recovery with a loss-based
    /// congestion control: the window comes down to ssthresh in step with the data delivered,
    /// instead of dropping at once (silence until pipe falls below it, then a burst).
    pub prr: bool,
    /// HyStart++ (RFC 9406) in the initial slow start of CUBIC and NewReno (needs RACK's
    /// per-ACK RTT samples): slow start ends when the RTT rises, before the queue overflows.
    pub hystart: bool,
    /// Undo a retransmission timeout found spurious (RFC 3522 detection with timestamps,
    /// RFC 4015 response): the congestion state comes back, no go-back-N.
    pub rto_undo: bool,
    /// SACK compression, as Linux's `tcp_comp_sack_nr`: while out-of-order data is held and
    /// only the SACK blocks would change (RCV.NXT unchanged, three SACK-bearing ACKs already
    /// sent for it, at least `sack_compress_min_held` segments held), the ACK for a newly held segment waits for the compression timer, up to
    /// this many segments. 0: every receive burst that holds a new segment is acknowledged
    /// at once. Only with SACK: a peer without it counts duplicate ACKs (RFC 5681 §3.2), so
    /// each out-of-order segment still draws one.
    pub sack_compress_segments: u32,
    /// Upper bound on the SACK compression delay (Linux's `tcp_comp_sack_delay_ns`); the
    /// delay is a twentieth of the smoothed RTT within [100 us, this].
    pub sack_compress_delay: Duration,
    /// Out-of-order segments held before SACK compression starts. With a small window (a
    /// loss-based sender at several percent loss keeps a few segments in flight) each ACK is
    /// one of few per flight and, with ACKs lost too, compressing them turns tail losses into
    /// the sender's retransmission timeouts (Linux CUBIC at 5 % loss: 2-3x the RTOs,
    /// BENCHMARKS.md §2; at 1 % loss too with 16); a flight that leaves this many segments
    /// held can spare ACKs.
    pub sack_compress_min_held: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_errors_name_fields() {
        assert_eq!(TcpConfig::default().validate(), Ok(()));
        let bad = TcpConfig {
            window_scale: Some(15),
            ..TcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "window_scale");
        let bad = TcpConfig {
            window_scale: None,
            ..TcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "recv_window");
        let bad = TcpConfig {
            delayed_ack: Some(Duration::from_secs(1)),
            ..TcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "delayed_ack");
        for n in [0, 1, 4097] {
            let bad = TcpConfig {
                ack_stretch_segments: n,
                ..TcpConfig::default()
            };
            assert_eq!(
                bad.validate().unwrap_err().field,
                "ack_stretch_segments",
                "{n}"
            );
        }
    }
}

/// Default of [`TcpConfig::ack_stretch_segments`]: 2, no stretch. 128 measured +1.7 % on
/// `write_bw` over memif (within that guest's noise) but made a Linux sender over a veth
/// burstier (drops and retransmissions, -4 %): BENCHMARKS.md §4, twelfth session, `ack`.
pub const DEFAULT_ACK_STRETCH: u32 = 2;

/// Upper bound of [`TcpConfig::ack_stretch_segments`].
pub const MAX_ACK_STRETCH: u32 = 4096;

/// A configuration value out of range; names the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending field of [`TcpConfig`].
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "tcp config `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl TcpConfig {
    /// Check ranges: MSS 88..=65495 (RFC 9293 §3.7.1 minimum of 576-byte datagrams gives 536;
    /// we require room for 12 option bytes plus data), window scale ≤ 14 (RFC 7323 §2.3),
    /// windows > 0, delayed ACK ≤ 500 ms (RFC 9293 §3.8.6.3), ACK stretch 2..=4096, rto_min ≤ rto_initial ≤ rto_max.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, reason| Err(ConfigError { field, reason });
        if self.mss < 88 || self.mss > 65495 {
            return err("mss", "must be within 88..=65495");
        }
        if self.window_scale.is_some_and(|w| w > 14) {
            return err("window_scale", "must be at most 14 (RFC 7323 §2.3)");
        }
        if self.recv_window == 0 {
            return err("recv_window", "must be positive");
        }
        if self.window_scale.is_none() && self.recv_window > 65535 {
            return err("recv_window", "above 65535 needs window_scale");
        }
        if self.send_window == 0 {
            return err("send_window", "must be positive");
        }
        if self
            .delayed_ack
            .is_some_and(|d| d > Duration::from_millis(500))
        {
            return err("delayed_ack", "must be at most 500 ms (RFC 9293 §3.8.6.3)");
        }
        if !(2..=MAX_ACK_STRETCH).contains(&self.ack_stretch_segments) {
            return err(
                "ack_stretch_segments",
                "must be within 2..=4096 (2: every second segment, RFC 9293 §3.8.6.3)",
            );
        }
        if self.rto_min > self.rto_initial
            || self.rto_initial > self.rto_max
            || self.rto_min.is_zero()
        {
            return err(
                "rto_min/rto_initial/rto_max",
                "need 0 < rto_min <= rto_initial <= rto_max",
            );
        }
        if self.rto_min_bulk.is_zero() || self.rto_min_bulk > self.rto_min {
            return err("rto_min_bulk", "need 0 < rto_min_bulk <= rto_min");
        }
        if self.max_retries == 0 {
            return err("max_retries", "must be positive");
        }
        if self.syn_backlog == 0 {
            return err("syn_backlog", "must be positive");
        }
        if self.max_connections == 0 || self.max_listener_connections == 0 {
            return err("max_connections", "must be positive");
        }
        if self.fin_wait2_timeout.is_some_and(|d| d.is_zero()) {
            return err("fin_wait2_timeout", "must be positive (None: no timeout)");
        }
        if self.sack_compress_delay.is_zero()
            || self.sack_compress_delay > Duration::from_millis(500)
        {
            return err("sack_compress_delay", "must be within (0, 500 ms]");
        }
        if self.initial_cwnd_segments == 0 {
            return err("initial_cwnd_segments", "must be positive");
        }
        if self
            .keepalive
            .is_some_and(|k| k.idle.is_zero() || k.interval.is_zero())
        {
            return err("keepalive", "idle and interval must be positive");
        }
        Ok(())
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            recv_window: 4 << 20,
            send_window: 4 << 20,
            window_scale: Some(7),
            sack: true,
            timestamps: true,
            cc: CongestionControl::Cubic,
            delayed_ack: Some(Duration::from_millis(1)),
            ack_stretch_segments: DEFAULT_ACK_STRETCH,
            nagle: false,
            keepalive: None,
            time_wait: Duration::from_secs(60),
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_min_bulk: Duration::from_millis(20),
            rto_max: Duration::from_secs(60),
            max_retries: 15,
            max_ooo_bytes: 4 << 20,
            max_ooo_segments: 4096,
            challenge_ack_limit: 1000,
            checksum: ChecksumMode::Software,
            initial_cwnd_segments: 10,
            syn_cookies: true,
            syn_backlog: 256,
            max_connections: 65536,
            max_listener_connections: 65536,
            fin_wait2_timeout: Some(Duration::from_secs(60)),
            max_ooo_segments_total: 16384,
            max_ooo_small_segments: 64,
            rack_tlp: true,
            prr: true,
            hystart: true,
            rto_undo: true,
            sack_compress_segments: 44,
            sack_compress_delay: Duration::from_millis(1),
            sack_compress_min_held: 64,
        }
    }
}
