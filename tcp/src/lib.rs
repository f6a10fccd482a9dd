//! Sans-IO network protocols for the dataplane: Ethernet/ARP/IPv4/ICMP (`iface`) and TCP.
//!
//! Nothing here reads a clock, does I/O or spawns a thread: time comes in as
//! [`netcore::Instant`], frames come in and go out as byte slices owned by the caller.
//!
//! TCP: [`Endpoint`] demultiplexes segments to [`Connection`]s (see the `conn` module docs for
//! the call order, the zero-copy receive/transmit interfaces and record boundaries).
#![forbid(unsafe_code)]

pub mod iface;

mod cc;
pub mod config;
pub mod conn;
pub mod endpoint;
pub mod isn;
mod reasm;
mod rtt;
mod sack;
pub mod stats;
pub mod wire;

pub use config::{ChecksumMode, ConfigError, CongestionControl, Keepalive, TcpConfig};
pub use conn::{
    CloseReason, Connection, Event, NoData, SegBuf, Segment, SendError, SendSource, SockAddr,
    State, Transmit,
};
pub use endpoint::{ConnHandle, ConnectError, Dispatch, Endpoint};
pub use isn::IsnGenerator;
pub use stats::TcpStats;
pub use wire::{SegError, SegmentHeader, parse_segment};
