//! The `iwarpd` daemon: configuration, EAL/port bring-up, dataplane threads, stats.
#![forbid(unsafe_code)]

pub mod config;
pub mod daemon;
pub mod eal_args;
pub mod server;
pub mod service;
