//! Benchmark tools. `l2bench` drives a device under test (iwarpd in echo mode, or
//! `dpdk-testpmd --forward-mode=macswap`) over a DPDK virtual wire and measures frames/s and
//! round-trip latency.
#![forbid(unsafe_code)]

pub mod fixtures;
pub mod perf;
