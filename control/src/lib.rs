//! The `iwarpd` daemon: configuration, EAL/port bring-up, dataplane threads, stats.
#![forbid(unsafe_code)]

pub mod config;
pub mod config_env;
pub mod crc_choice;
pub mod daemon;
pub mod eal_args;
pub mod embedded;
pub mod server;
pub mod service;
