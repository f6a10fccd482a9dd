//! RDMAP, the RDMA Protocol (RFC 5040) with the RFC 7306 extensions: headers, TERMINATE and
//! the queue pair.

pub mod terminate;
pub mod wire;

pub use terminate::{TermLayout, TerminateHdr};
pub use wire::{Header, HeaderError, Opcode, RdmapPart};
