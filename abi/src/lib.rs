//! The ABI shared by `iwarpd` and its clients (docs/rdma-seams.md).
//!
//! - [`wqe`], [`cqe`]: the `#[repr(C)]` entries of the send, receive and completion rings, with
//!   compile-time size and offset checks. Every field is a plain integer, so any bit pattern a
//!   client writes is a valid value; the daemon validates opcodes, flags and SGE counts when it
//!   decodes an entry ([`Wqe::decode`]).
//! - [`ring`]: the single-producer single-consumer ring over shared memory (the only `unsafe`
//!   of this crate), and the CQ made of one sub-ring per dataplane thread plus an armed flag.
//! - [`ctl`]: the versioned control messages (requests, responses, CM events) and their
//!   hand-written byte codec, which never panics on truncated or unknown input.
//!
//! The crate is sans-IO: no sockets, no threads, no clock; `std` only.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cqe;
pub mod ctl;
pub mod ring;
pub mod wqe;

pub use cqe::{Cqe, CqeOpcode, CqeStatus};
pub use wqe::{RecvWqe, Sge, Wqe, WqeOpcode};

/// Version of the client/daemon ABI (entry layouts, ring layout, control messages). A client
/// announcing another version in its `Hello` is refused with `ErrorCode::AbiVersion`.
pub const ABI_VERSION: u32 = 2;

/// [`ABI_VERSION`] as text (for `--version` lines).
pub const ABI_VERSION_STR: &str = "2";

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}
const _: () = assert!(parse_u32(ABI_VERSION_STR) == ABI_VERSION);
