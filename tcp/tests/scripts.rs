//! Segment-level scripted scenarios (packetdrill-like), each citing the RFC rule it checks.
//! The interpreter is in `script/mod.rs`.
#![allow(clippy::collapsible_if)]

#[path = "script/mod.rs"]
mod script;

#[path = "script/handshake.rs"]
mod handshake;
