//! `iwarp-perf`: perftest's tests over our verbs library, perftest's `-R` wire protocol and
//! output, and kernel-TCP baselines measured the same way.

pub mod cli;
pub mod clock;
pub mod cpu;
pub mod idle;
pub mod json;
pub mod outliers;
pub mod pace;
pub mod params;
pub mod plot;
pub mod rdma;
pub mod report;
pub mod session;
pub mod stats;
pub mod tcp;
pub mod wire;
