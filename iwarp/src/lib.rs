//! Sans-IO iWARP: MPA framing and negotiation, DDP placement decisions, RDMAP queue pairs.
//!
//! Consumes TCP stream bytes, emits placements ("copy these bytes to region R at offset o"),
//! completions and FPDUs to send. Never touches application memory, never does I/O.
//!
//! Layers and their seam:
//! - [`mpa`] (RFC 5044, RFC 6581): MPA Request/Reply/Reject, negotiation, the FPDU
//!   deframer (stream bytes -> ULPDU bytes, markers removed, CRC checked) and framer
//!   (ULPDU -> FPDU no larger than the EMSS).
//! - [`ddp`] (RFC 5041) and [`rdmap`] (RFC 5040, RFC 7306): headers, tagged/untagged
//!   placement decisions, the queue pair, TERMINATE.
//! - [`stag`]: STag allocation and the memory-table trait (RFC 5042 checks).
//! - [`error`]: protocol errors and their TERMINATE (layer, etype, ecode) triples.
#![forbid(unsafe_code)]

pub mod ddp;
pub mod error;
pub mod mpa;
pub mod rdmap;
pub mod stag;
pub mod testing;
