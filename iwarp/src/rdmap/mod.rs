//! RDMAP, the RDMA Protocol (RFC 5040) with the RFC 7306 extensions: headers, TERMINATE and
//! the queue pair.

pub mod qp;
mod rx;
pub mod terminate;
pub mod tx;
pub mod wire;

pub use qp::{
    Completion, CqOpcode, Memory, PostError, Qp, QpConfig, QpState, RecvRequest, Sge, WcStatus,
    WorkRequest, WrFlags, WrOpcode,
};
pub use terminate::{TermLayout, TerminateHdr};
pub use tx::{Piece, TxSegment};
pub use wire::{Header, HeaderError, Opcode, RdmapPart};
