//! Protection domains.

use crate::cq::Cq;
use crate::device::{Device, unexpected};
use crate::error::{Error, Result};
use crate::mem::{Access, Mr, Segment};
use crate::qp::QpBuilder;
use abi::ctl::{PdId, Request, Response};
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct PdInner {
    id: PdId,
    dev: Device,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if let Err(e) = self.dev.call(&Request::DeallocPd { pd: self.id }) {
            tracing::debug!(pd = %self.id, "dealloc: {e}");
        }
    }
}

/// A protection domain: memory regions and QPs of one PD can be used together only (the
/// daemon checks every lkey and STag against the QP's PD, RFC 5042 §5.1).
///
/// Deallocated when the last handle, region and QP using it are dropped.
#[derive(Debug, Clone)]
pub struct Pd {
    inner: Arc<PdInner>,
}

impl Pd {
    pub(crate) fn alloc(dev: &Device) -> Result<Pd> {
        let r = dev.call(&Request::AllocPd {})?;
        let Response::Pd { pd } = r else {
            return Err(unexpected("AllocPd", &r));
        };
        Ok(Pd {
            inner: Arc::new(PdInner {
                id: pd,
                dev: dev.clone(),
            }),
        })
    }

    /// The daemon's handle.
    pub fn id(&self) -> PdId {
        self.inner.id
    }

    /// The device.
    pub fn dev(&self) -> &Device {
        &self.inner.dev
    }

    /// A new region of `len` bytes (zeroed) in its own shared segment, registered with
    /// `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        let seg = Segment::alloc(self.dev(), len.max(1), shm::HugepagePolicy::Off)?;
        Mr::register(self, &seg, 0, len, access)
    }

    /// Like [`Pd::alloc_mr`], on 2 MiB hugepages when enough are free.
    pub fn alloc_mr_huge(&self, len: usize, access: Access) -> Result<Mr> {
        let seg = Segment::alloc(self.dev(), len.max(1), shm::HugepagePolicy::Auto)?;
        Mr::register(self, &seg, 0, len, access)
    }

    /// Register `len` bytes at `offset` of `seg`.
    pub fn reg_mr(&self, seg: &Segment, offset: usize, len: usize, access: Access) -> Result<Mr> {
        Mr::register(self, seg, offset, len, access)
    }

    /// Register memory given by address: it must lie inside one of this device's live
    /// segments, otherwise [`Error::NotShared`] (the daemon could not reach it, and this
    /// library never copies behind the application's back).
    pub fn reg_ptr(&self, addr: *const u8, len: usize, access: Access) -> Result<Mr> {
        let a = addr as usize;
        match Segment::find(self.dev(), a, len) {
            Some((seg, off)) => Mr::register(self, &seg, off, len, access),
            None => Err(Error::NotShared { addr: a, len }),
        }
    }

    /// Register a slice (see [`Pd::reg_ptr`]): only memory of this device's segments works.
    pub fn reg_slice(&self, buf: &[u8], access: Access) -> Result<Mr> {
        self.reg_ptr(buf.as_ptr(), buf.len(), access)
    }

    /// Start building an RC queue pair whose sends complete on `send_cq` and receives on
    /// `recv_cq` (they may be the same CQ).
    pub fn create_qp<'a>(&'a self, send_cq: &'a Cq, recv_cq: &'a Cq) -> QpBuilder<'a> {
        QpBuilder::new(self, send_cq, recv_cq)
    }
}
