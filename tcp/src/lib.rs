//! Sans-IO network protocols for the dataplane: Ethernet/ARP/IPv4/ICMP (`iface`) and TCP.
//!
//! Nothing here reads a clock, does I/O or spawns a thread: time comes in as
//! [`netcore::Instant`], frames come in and go out as byte slices owned by the caller.
#![forbid(unsafe_code)]

pub mod iface;
