//! The per-thread RDMA engine: iWARP over the dataplane's TCP (docs/rdma-seams.md).
//!
//! Heads up: read docs/rdma-seams.md (the contract with `control` and `verbs`), DESIGN.md §2
//! (the data path) and `../shared/siw-peer/README.md` §5, §9, §10 (what a real peer does)
//! before editing.
//!
//! - [`api`]: the engine API: [`EngineCmd`] in, [`EngineEvent`] out, [`QpBinding`],
//!   [`MpaPolicy`], and the queues between the control thread and the dataplane threads.
//! - [`ids`]: generational (never reused) connection, listener and QP identifiers.
//! - [`memory`]: the memory table shared by every thread, [`MappedMemory`], and the per-QP
//!   view that does the fused copy + CRC32c of the receive path.

pub mod api;
pub(crate) mod conn;
pub mod diag;
pub mod engine;
pub(crate) mod glue;
pub mod ids;
pub mod memory;
pub mod queues;
pub mod stats;
pub mod txlog;

pub use api::{
    CmdQueue, ConnectFailure, CqBinding, CrcMode, EngineCmd, EngineConfig, EngineError,
    EngineEvent, EngineHandle, LocalQueues, MpaPolicy, Negotiated, QpBinding, QpErrorReason,
    QpQueues, RdmaSetup, RingBinding, RingLocation, RtrMode, TxFault, TxPayload, engine_channels,
};
pub use ids::{ClientId, ConnId, IdGen, ListenerId, QpNum, QpNumAllocator};
pub use memory::{
    HeapMemory, MappedMemory, MemError, MemTable, MrKeys, MrRequest, QpMemory, Region,
};

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
