//! DDP, the Direct Data Placement protocol (RFC 5041): segment headers.
//!
//! Placement decisions (tagged STag checks, untagged QN/MSN/MO checks) are made by the queue
//! pair in [`crate::rdmap`], which owns the per-stream state; this module holds the wire format.

pub mod wire;

pub use wire::{DdpBuf, Packet as DdpPacket, Repr as DdpRepr};
