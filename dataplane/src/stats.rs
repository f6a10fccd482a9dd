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
        /// Iterations that found nothing to receive or send (the loop may yield after them).
        idle_loops,
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
