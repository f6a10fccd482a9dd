//! Shared vocabulary for the protocol crates (`tcp`, `iwarp`) and the dataplane.
//!
//! Sans-IO: nothing here reads a clock, does I/O, spawns a thread or uses `unsafe`.
//! Time comes in as [`Instant`] values made by the caller (the dataplane converts the TSC
//! in exactly one place), randomness through the [`Rng`] trait.
#![forbid(unsafe_code)]

pub mod crc;
pub mod csum;
pub mod rng;
pub mod seq;
pub mod time;

pub use rng::Rng;
pub use seq::Seq32;
pub use time::{Duration, Instant};
