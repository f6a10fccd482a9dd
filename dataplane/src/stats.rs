//! Per-thread counters: counted locally on the hot path, published to atomics now and then so
//! the control thread can read them while the loop runs.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($(#[$m:meta])* $name:ident, $shared:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fm])* pub $f: u64,)* }

        /// Atomic mirror of the counters, written by one dataplane thread, read by anyone.
        #[derive(Debug, Default)]
        pub struct $shared { $($f: AtomicU64,)* }

        impl $shared {
            /// Publish a snapshot (single writer: plain relaxed stores).
            pub fn publish(&self, s: &$name) {
                $(self.$f.store(s.$f, Ordering::Relaxed);)*
            }
            /// Read the last published snapshot.
            pub fn snapshot(&self) -> $name {
                $name { $($f: self.$f.load(Ordering::Relaxed),)* }
            }
        }

        impl $name {
            /// `name=value` pairs, one per counter.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($f), self.$f),)*]
            }
            /// Sum of two snapshots (aggregate over threads).
            pub fn add(&mut self, o: &$name) {
                $(self.$f += o.$f;)*
            }
        }
    };
}

counters!(
    /// Counters of one dataplane thread.
    LcoreStats, SharedLcoreStats {
        /// Poll-loop iterations.
        loops,
        /// Packets received.
        rx_packets,
        /// Bytes received.
        rx_bytes,
        /// Packets sent.
        tx_packets,
        /// Bytes sent.
        tx_bytes,
        /// Packets dropped because the TX queue stayed full (beyond the TX backlog; TCP connections are held back before that).
        drop_tx_full,
        /// Packets dropped: mbuf pool empty when a reply was needed.
        drop_no_mbuf,
        /// Received chains (frames spread over several mbufs) copied into one mbuf.
        rx_linearized,
        /// Received chains dropped: no mbuf for the copy, or longer than one mbuf.
        drop_rx_chain,
        /// Chained TX packets copied into one mbuf (device without multi-segment TX).
        tx_linearized,
        /// Chained TX packets dropped for want of an mbuf to copy them into.
        drop_tx_linearize,
        /// TCP segments received (handed to the TCP layer).
        tcp_segments,
        /// Frames the L2/L3 layer dropped (reasons in the iface counters).
        iface_drops,
        /// Frames echoed back in `echo` mode.
        echoed,
        /// ARP frames copied to other threads' inboxes (multi-queue, see `arpbus`).
        arp_shared,
        /// ARP frames other threads shared with this one, fed to its neighbour cache.
        arp_observed,
        /// Iterations whose timers waited because the RX queue was still full (the frames
        /// queued may hold the ACKs a retransmission timeout would ignore).
        timers_deferred,
        /// Iterations that received and sent nothing (a `sched_yield` each when yielding).
        idle_loops,
        /// Nanoseconds from the start of each busy iteration to the start of the next one
        /// (its work, and any preemption in between; idle iterations and their yields are
        /// not counted).
        busy_ns,
        /// RX polls that returned frames (`rx_packets` / `rx_bursts`: frames found per poll;
        /// a receive queue the loop drains as they come gives small bursts).
        rx_bursts,
        /// TX bursts handed to the device (on net_af_xdp, one kick `sendto` each).
        tx_bursts,
        /// TX bursts the device took only part of (a full TX ring).
        tx_short,
        /// TX bursts the device took nothing of (included in `tx_short`).
        tx_empty,
        /// Frames left waiting after each TX burst, summed (mean backlog behind a full ring =
        /// this / `tx_bursts`).
        tx_backlog_sum,
        /// Iterations that held their frames after a short burst instead of offering them
        /// (`dataplane.tx_backoff_ns`).
        tx_held,
        /// Samples of the busiest TCP connection (the one with the most unacknowledged bytes),
        /// one per counter publication (every 1024 iterations) that found one with any; the
        /// `tcp_*_sum` fields below add over these samples (mean = sum / `tcp_samples`).
        tcp_samples,
        /// Its smoothed RTT (RFC 6298), in microseconds.
        tcp_srtt_us_sum,
        /// Samples whose smoothed RTT was over 1 ms.
        tcp_srtt_over_1ms,
        /// Its congestion window, bytes.
        tcp_cwnd_sum,
        /// Its bytes in flight (sent, not acknowledged).
        tcp_flight_sum,
        /// Its bytes queued by the application and not sent yet.
        tcp_unsent_sum,
        /// Samples where the congestion window was full (in flight + one MSS > cwnd).
        tcp_cwnd_limited,
        /// Samples where the peer's window was full (in flight + one MSS > its window).
        tcp_rwnd_limited,
    }
);

/// Render `[section]` then `key = value` lines (TOML-like) for a stats file or the exit report.
pub fn render(section: &str, fields: &[(&str, u64)], out: &mut String) {
    let _ = writeln!(out, "[{section}]");
    for (k, v) in fields {
        let _ = writeln!(out, "{k} = {v}");
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_snapshot_roundtrip() {
        let shared = SharedLcoreStats::default();
        let s = LcoreStats {
            rx_packets: 3,
            drop_rx_chain: 1,
            ..Default::default()
        };
        shared.publish(&s);
        assert_eq!(shared.snapshot(), s);
        let mut total = LcoreStats::default();
        total.add(&s);
        total.add(&s);
        assert_eq!(total.rx_packets, 6);
        let mut out = String::new();
        render("lcore.0", &total.fields(), &mut out);
        assert!(out.contains("[lcore.0]\n"));
        assert!(out.contains("drop_rx_chain = 2\n"));
    }
}
