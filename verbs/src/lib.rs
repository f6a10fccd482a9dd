//! `verbs`: the client library of `iwarpd`, the DPDK iWARP stack (RFC 5040 RDMAP, RFC 5041
//! DDP, RFC 5044 MPA, RFC 6581, RFC 7306).
//!
//! Shaped like the `ibverbs`/`sideway` crates and librdmacm: open a [`Device`], allocate a
//! protection domain ([`Pd`]), memory regions ([`Mr`]) in shared segments, completion queues
//! ([`Cq`], optionally with a [`CompChannel`] for blocking waits) and RC queue pairs ([`Qp`]);
//! connect them with a connection-manager id ([`CmId`]); then post work requests
//! ([`SendWr`], [`RecvWr`]) and poll completions ([`Wc`]). Every object is released when
//! dropped (the daemon frees it); objects keep what they use alive (a QP its PD and CQs, a
//! region its segment).
//!
//! # Devices
//!
//! [`Device::open`] takes a spec: the path of a running `iwarpd`'s control socket (daemon
//! mode: setup calls go over the socket, work requests and completions through rings in
//! shared memory that the daemon's dataplane polls), or an `iwarpd` config file (embedded
//! mode, feature `embedded`: the same engine and service run inside this process, on their
//! own pinned dataplane thread). [`Device::open_default`] reads the spec from `IWARP_DEVICE`
//! (default `/run/iwarpd.sock`).
//!
//! # Memory
//!
//! The daemon reads and writes registered memory directly, so it must be shared memory: a
//! region is allocated in a shared segment ([`Pd::alloc_mr`], or [`Device::alloc_segment`]
//! and [`Pd::reg_mr`]). Registering other memory ([`Pd::reg_slice`]) is an error
//! ([`Error::NotShared`]), never a hidden copy.
//!
//! # Example: an RDMA Write to a peer
//!
//! ```no_run
//! use verbs::{Access, ConnParam, Device, RemoteMr, SendWr};
//! use std::time::Duration;
//!
//! let dev = Device::open("/run/iwarpd-b.sock")?;
//! let pd = dev.alloc_pd()?;
//! let cq = dev.create_cq(64, None)?;
//! let qp = pd.create_qp(&cq, &cq).sq_depth(16).rq_depth(16).build()?;
//! let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
//! mr.write(0, b"hello, iWARP")?;
//!
//! let id = dev.create_cm_id()?;
//! id.connect(&qp, "10.77.0.1:7471".parse().unwrap(), &ConnParam::new())?;
//! let est = id.wait_established(Duration::from_secs(5))?;
//! // The peer put its region's tagged offset, STag and length in its private data.
//! let peer = RemoteMr::from_bytes(est.private_data[..16].try_into().unwrap());
//!
//! qp.post_send(&SendWr::write(1, &[mr.sge(0, 12)?], peer.addr, peer.rkey))?;
//! let wc = cq.wait_one(Duration::from_secs(5))?.expect("a completion");
//! assert!(wc.is_ok(), "{wc}");
//! # Ok::<(), verbs::Error>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod cm;
mod cq;
mod device;
mod embedded;
mod error;
mod mem;
mod pd;
mod qp;
mod session;

pub use abi::ctl::{DeviceAttrs, MpaOverride, QpAttrs, qp_state, tx_fault};
pub use abi::{CqeOpcode as WcOpcode, CqeStatus as WcStatus, Sge};
pub use cm::{CmEvent, CmHandle, CmId, ConnParam, ConnectRequest, CrcMode, Established, Rtr};
pub use cq::{CompChannel, Cq, Wc};
pub use device::{DEFAULT_SOCKET, DEVICE_ENV, Device, DeviceSpec};
pub use error::{Error, Result, connect_failure_name};
pub use mem::{Access, Mr, RemoteMr, Segment};
pub use pd::Pd;
pub use qp::{Qp, QpBuilder, RecvWr, SendWr};
