//! The only crate that touches DPDK: EAL, ports, mempools, mbufs, the per-core poll loop and the
//! glue between NIC queues and the sans-IO protocol crates.
//!
//! `unsafe` is denied crate-wide and allowed only in the FFI modules (`eal`, `port`, `mempool`,
//! `mbuf`, `extbuf`, `signal`, `clock`, `error`) and in `rdma::memory` (copies into and out of
//! registered shared memory), every block with a `// SAFETY:` comment.
#![deny(unsafe_code)]

pub mod arpbus;
pub mod clock;
pub mod diag;
pub mod eal;
pub mod error;
pub mod extbuf;
pub mod lcore;
pub mod mbuf;
pub mod mempool;
pub mod netstack;
pub mod port;
pub mod pump;
pub mod rdma;
pub mod rss;
pub mod signal;
pub mod stats;
pub mod timers;

pub use error::DpdkError;
