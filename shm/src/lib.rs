//! Shared memory between `iwarpd` and its clients (docs/rdma-seams.md, "Memory"):
//!
//! - [`Segment`]: a memfd (hugepage-backed when hugepages are free) mapped `MAP_SHARED`,
//!   created by the client, sealed against shrinking, passed to the daemon which maps it too
//!   ([`Segment::from_fd`]). Rings (`abi::ring`) and MR memory live in segments.
//! - [`SeqPacket`] / [`SeqPacketListener`]: the control socket (`SOCK_SEQPACKET`: one control
//!   message per datagram) with file descriptors passed by `SCM_RIGHTS`.
//! - [`EventFd`]: the completion channel of a CQ.
//!
//! This crate is the FFI edge of the control path: every `unsafe` block has a `// SAFETY:`
//! comment and the types are sound to use from safe code.

mod eventfd;
mod segment;
mod seqpacket;

pub use eventfd::EventFd;
pub use segment::{
    Backing, HUGEPAGE, HugepagePolicy, MAX_SEGMENT, Segment, SegmentError, free_hugepage_bytes,
};
pub use seqpacket::{Credentials, MAX_FDS, RecvMsg, SeqPacket, SeqPacketListener, wait_readable};

/// The last OS error as an `io::Error`.
fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Turn a `-1` return into the OS error.
fn cvt(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r == -1 { Err(last_err()) } else { Ok(r) }
}
