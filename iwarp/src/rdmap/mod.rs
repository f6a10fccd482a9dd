//! RDMAP, the RDMA Protocol (RFC 5040) with the RFC 7306 extensions (atomics, Immediate Data):
//! headers, TERMINATE and the queue pair.
//!
//! - [`wire`]: RDMAP control field, opcodes, Read Request / atomic / Immediate Data headers and
//!   the whole DDP+RDMAP segment header ([`Header`]).
//! - [`terminate`]: the Terminate header, emitted per RFC 5040 §4.8 and decoded in both the
//!   RFC layout and Linux siw's nibble-swapped one.
//! - [`qp`]: the sans-IO queue pair ([`Qp`]): `handle_stream` -> placements through the
//!   [`Placer`](crate::stag::Placer), `poll_fpdu`/`poll_segment` -> FPDUs,
//!   `poll_completion` -> CQEs. The receive and transmit paths live in `rx` and [`tx`].
//! - [`rtr`]: the RFC 6581 peer-to-peer ready-to-receive message in both roles
//!   ([`QpConfig::rtr`], [`QpConfig::from_established`]).
//!
//! Queue numbers: Send/Immediate Data on QN 0, Read Request and Atomic Request on QN 1 (both
//! consume IRD), Terminate on QN 2, Atomic Response on QN 3 (see [`wire::qn`]).

pub mod qp;
pub mod rtr;
mod rx;
pub mod terminate;
pub mod tx;
pub mod wire;

pub use qp::{
    Completion, CqOpcode, Memory, PostError, Qp, QpConfig, QpState, RecvRequest, Sge, WcStatus,
    WorkRequest, WrFlags, WrOpcode, recv_flush, sq_flush,
};
pub use rtr::Rtr;
pub use terminate::{TermLayout, TerminateHdr};
pub use tx::{Piece, SqToken, TxRun, TxSegment};
pub use wire::{Header, HeaderError, Opcode, RdmapPart};
