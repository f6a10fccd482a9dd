//! Command-line tools on the `verbs` library. `iwarp-rping` mirrors rdma-core's `rping`; the
//! shared pieces live here so they are unit-tested.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod opcheck;
pub mod rping;
