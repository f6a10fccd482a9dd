//! Sans-IO network protocols for the dataplane: Ethernet/ARP/IPv4/ICMP (`iface`) and TCP.
//!
//! Nothing here reads a clock, does I/O or spawns a thread: time comes in as
//! [`netcore::Instant`], frames come in and go out as byte slices owned by the caller.
//!
//! TCP: [`Endpoint`] demultiplexes segments to [`Connection`]s (see the [`conn`] module docs
//! for the call order, the zero-copy receive/transmit interfaces and record boundaries).
//!
//! # Integration notes (dataplane, MPA)
//! * **Input**: parse Ethernet/IPv4 in `iface`, then hand the whole frame buffer (the mbuf)
//!   and the TCP byte range to [`Endpoint::handle_segment`]. The buffer moves into the
//!   connection only if it carries in-order or held out-of-order payload.
//! * **Receive**: [`Connection::poll_readable`] yields `(B, Range<usize>)`; or parse in place
//!   with [`Connection::peek_readable`] + [`Connection::consume_readable`] (a partial FPDU
//!   stays in TCP, and the window reflects it).
//! * **Transmit**: [`Connection::poll_transmit`] writes header + payload into one buffer;
//!   [`Connection::poll_transmit_header`] writes only the header and reports the payload as
//!   stream offsets, to attach the application's memory as an external buffer. Either way
//!   the bytes come from a [`SendSource`], read again on every retransmission, so the owner
//!   must keep stream bytes until [`Event::Acked`] says they are acknowledged.
//! * **Records**: [`Connection::send_record`] + [`Connection::emss`]: one FPDU per segment.
//! * **Checksums**: [`ChecksumMode::Offloaded`] skips verification and leaves the pseudo-header
//!   sum in the checksum field (DPDK `RTE_MBUF_F_TX_TCP_CKSUM` convention).
//! * **Time**: call [`Endpoint::handle_timeout`] when [`Endpoint::poll_timeout`] is due
//!   (a linear scan; a timer wheel belongs to the dataplane for many connections).
//! * **Lifecycle**: after [`Event::Closed`], [`Endpoint::reap_closed`] frees the slot; stats
//!   move into [`Endpoint::stats`].
//! * **Tests** above TCP: feature `testing` exports `testing::Pair`.
//!
//! ```
//! use netcore::Instant;
//! use smoltcp::wire::Ipv4Address;
//! use tcp::{Dispatch, Endpoint, Event, TcpConfig};
//!
//! let (a_ip, b_ip) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
//! let mut a: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), a_ip, [1; 16]);
//! let mut b: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), b_ip, [2; 16]);
//! b.listen(80);
//! let now = Instant::from_millis(1);
//! let ca = a.connect(now, 0, (b_ip, 80)).unwrap();
//! let message = b"hello over a userspace TCP";
//! // The owner keeps the bytes; the connection reads them when it (re)transmits.
//! let mut src = |off: u64, dst: &mut [u8]| {
//!     dst.copy_from_slice(&message[off as usize..off as usize + dst.len()])
//! };
//! let mut buf = vec![0u8; 1600];
//! let mut got = Vec::new();
//! let mut queued = false;
//! for _ in 0..10 {
//!     // Segments a -> b: the TCP bytes are handed over as owned buffers (mbufs in DPDK).
//!     while let Some((_, t)) = a.poll_transmit_all(now, &mut buf, &mut src) {
//!         let seg = buf[..t.len].to_vec();
//!         if let Dispatch::NewConn(h) | Dispatch::Conn(h) = b.handle_segment(now, a_ip, b_ip, seg, 0..t.len) {
//!             // In-order payload: (the caller's buffer, the byte range in it), no copy.
//!             while let Some((seg, range)) = b.conn_mut(h).unwrap().poll_readable() {
//!                 got.extend_from_slice(&seg[range]);
//!             }
//!         }
//!     }
//!     while let Some((_, t)) = b.poll_transmit_all(now, &mut buf, &mut tcp::NoData) {
//!         let seg = buf[..t.len].to_vec();
//!         a.handle_segment(now, b_ip, a_ip, seg, 0..t.len);
//!     }
//!     let c = a.conn_mut(ca).unwrap();
//!     while let Some(ev) = c.poll_event() {
//!         if ev == Event::Connected && !queued {
//!             // One record: never coalesced with other records (one FPDU per segment).
//!             c.send_record(message.len() as u64).unwrap();
//!             queued = true;
//!         }
//!     }
//! }
//! assert_eq!(got, message);
//! assert_eq!(a.conn(ca).unwrap().acked_offset(), message.len() as u64);
//! ```
#![forbid(unsafe_code)]

pub mod iface;

mod bbr;
mod cc;
mod chrono;
pub mod config;
pub mod conn;
mod cookie;
mod cwv;
pub mod endpoint;
mod hystart;
pub mod isn;
mod rack;
mod rate;
mod reasm;
mod rtt;
mod sack;
pub mod stats;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wire;

pub use config::{
    ChecksumMode, ConfigError, CongestionControl, DEFAULT_ACK_STRETCH, Keepalive, MAX_ACK_STRETCH,
    TcpConfig,
};
pub use conn::{
    CloseReason, Connection, Event, NoData, SegBuf, Segment, SendError, SendSource, SockAddr,
    State, Transmit,
};
pub use endpoint::{ConnHandle, ConnectError, Dispatch, Endpoint};
pub use isn::IsnGenerator;
pub use stats::TcpStats;
pub use wire::{SegError, SegmentHeader, parse_segment};
