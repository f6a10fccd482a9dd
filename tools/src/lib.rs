//! Command-line tools on the `verbs` library. `iwarp-rping` mirrors rdma-core's `rping`,
//! `iwarp-rdma-client`/`iwarp-rdma-server` its `rdma_client`/`rdma_server` examples; the
//! shared pieces live here so they are unit-tested.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crc_arg;
pub mod opcheck;
pub mod rdmacs;
pub mod rping;
