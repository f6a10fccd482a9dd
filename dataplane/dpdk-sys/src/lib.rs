//! Raw FFI bindings to DPDK 22.11 as packaged by Debian (`libdpdk-dev`).
//!
//! Generated at build time by bindgen from an allowlist; DPDK's static-inline functions are
//! reached through the `shim_*` wrappers compiled from `shim.c`. Everything here is `unsafe`
//! to call; the safe layer is the `dataplane` crate.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all, unreachable_pub, unsafe_op_in_unsafe_fn)]
#![allow(clippy::undocumented_unsafe_blocks)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
