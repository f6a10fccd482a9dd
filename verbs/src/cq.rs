//! Completion queues and completion channels.
//!
//! A CQ lives in a shared segment as one single-producer ring per dataplane thread
//! (docs/rdma-seams.md, "Rings"); [`Cq::poll`] takes them in turn. Polling is a few atomic
//! loads: no system call, no allocation. For blocking waits, arm the CQ with
//! [`Cq::req_notify`] and wait on its [`CompChannel`].

use crate::device::{Device, unexpected};
use crate::error::{Error, Result};
use crate::mem::Segment;
use abi::ctl::{CqId, Request, Response};
use abi::ring::{CqConsumer, CqLayout, CqProbe};
use abi::{Cqe, CqeOpcode, CqeStatus};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A work completion (the CQE as the daemon wrote it, with typed accessors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wc(pub Cqe);

impl Wc {
    /// The work request's id.
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }
    /// The status (`Fatal` for a status byte this library does not know).
    pub fn status(&self) -> CqeStatus {
        self.0.status().unwrap_or(CqeStatus::Fatal)
    }
    /// True for [`CqeStatus::Success`].
    pub fn is_ok(&self) -> bool {
        self.0.status == CqeStatus::Success as u8
    }
    /// What completed (`None` for an opcode byte this library does not know).
    pub fn opcode(&self) -> Option<CqeOpcode> {
        self.0.opcode()
    }
    /// Bytes transferred (received bytes for a receive).
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }
    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }
    /// Immediate data (Write with Immediate received).
    pub fn imm(&self) -> Option<u64> {
        self.0.imm()
    }
    /// The STag a received Send with Invalidate invalidated.
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.0.invalidated()
    }
    /// The TERMINATE `(layer, etype, ecode)` behind an error completion.
    pub fn terminate(&self) -> Option<(u8, u8, u8)> {
        self.0.terminate()
    }
    /// The Solicited Event flag of a received message.
    pub fn solicited(&self) -> bool {
        self.0.solicited()
    }
    /// Implementation-specific detail of a local error (0 if none).
    pub fn detail(&self) -> u32 {
        self.0.detail
    }
}

impl std::fmt::Display for Wc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "wr_id {} qp {} {:?} {:?} {} bytes",
            self.wr_id(),
            self.qp_num(),
            self.opcode(),
            self.status(),
            self.byte_len()
        )?;
        if let Some((l, t, c)) = self.terminate() {
            write!(f, " TERMINATE layer {l} etype {t} ecode {c:#04x}")?;
        }
        Ok(())
    }
}

/// A completion channel: an eventfd the dataplane writes when an armed CQ gets a
/// completion. One channel may serve several CQs.
#[derive(Debug, Clone)]
pub struct CompChannel {
    efd: Arc<shm::EventFd>,
}

impl CompChannel {
    pub(crate) fn new() -> Result<CompChannel> {
        let efd = shm::EventFd::new(true).map_err(Error::io("eventfd"))?;
        Ok(CompChannel { efd: Arc::new(efd) })
    }

    /// The file descriptor (readable after a notification), for `poll`/`epoll`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.efd.as_fd()
    }

    /// Wait up to `timeout` for a notification and consume it. `Ok(false)` on timeout.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.efd.read() {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    return Err(Error::Io {
                        what: "read completion channel",
                        source: e,
                    });
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.efd
                .wait_readable(left)
                .map_err(Error::io("poll completion channel"))?;
        }
    }
}

type Consumer = CqConsumer<Arc<shm::Segment>>;

#[derive(Debug)]
pub(crate) struct CqInner {
    id: CqId,
    entries: u32,
    /// Looked at before taking `consumer`'s lock: an empty poll takes no lock.
    probe: CqProbe<Arc<shm::Segment>>,
    consumer: Mutex<Consumer>,
    channel: Option<CompChannel>,
    dev: Device,
    _seg: Segment,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if let Err(e) = self.dev.call(&Request::DestroyCq { cq: self.id }) {
            tracing::debug!(cq = %self.id, "destroy: {e}");
        }
    }
}

/// A completion queue. Cheap to clone; destroyed when the last handle and QP using it go.
///
/// ```no_run
/// # let dev = verbs::Device::open_default()?;
/// let cq = dev.create_cq(256, None)?;
/// let mut wcs = [verbs::Wc::default(); 16];
/// loop {
///     let n = cq.poll(&mut wcs)?;
///     for wc in &wcs[..n] {
///         assert!(wc.is_ok(), "{wc}");
///     }
///     if n > 0 { break; }
/// }
/// # Ok::<(), verbs::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl Cq {
    pub(crate) fn create(dev: &Device, entries: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        let max = dev.attrs().max_cqe.max(1);
        if entries == 0 || entries > max {
            return Err(Error::InvalidArgument(format!(
                "CQ of {entries} entries: allowed 1..={max} (the device's max_cqe)"
            )));
        }
        let entries = entries.next_power_of_two().min(abi::ring::MAX_ENTRIES);
        let subs = dev.attrs().cq_subs.max(1);
        let layout = CqLayout {
            offset: 0,
            subs,
            entries,
        };
        let seg = Segment::alloc(dev, layout.bytes(), shm::HugepagePolicy::Off)?;
        abi::ring::init_cq(&seg.inner.shm, &layout)?;
        let req = Request::CreateCq {
            segment: seg.inner.id,
            offset: 0,
            entries,
            subs,
            channel: channel.is_some(),
        };
        let r = match channel {
            Some(ch) => dev.call_fd(&req, ch.fd())?,
            None => dev.call(&req)?,
        };
        let Response::Cq { cq } = r else {
            return Err(unexpected("CreateCq", &r));
        };
        let consumer = CqConsumer::attach(seg.inner.shm.clone(), &layout)?;
        Ok(Cq {
            inner: Arc::new(CqInner {
                id: cq,
                entries,
                probe: consumer.probe(),
                consumer: Mutex::new(consumer),
                channel: channel.cloned(),
                dev: dev.clone(),
                _seg: seg,
            }),
        })
    }

    /// The daemon's handle.
    pub fn id(&self) -> CqId {
        self.inner.id
    }

    /// Entries per dataplane thread (a power of two).
    pub fn entries(&self) -> u32 {
        self.inner.entries
    }

    /// Its completion channel, if any.
    pub fn channel(&self) -> Option<&CompChannel> {
        self.inner.channel.as_ref()
    }

    fn consumer(&self) -> std::sync::MutexGuard<'_, Consumer> {
        self.inner
            .consumer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Take up to `wcs.len()` completions; returns how many. Never blocks, and takes no lock
    /// when the CQ is empty (a few atomic loads).
    pub fn poll(&self, wcs: &mut [Wc]) -> Result<usize> {
        if wcs.is_empty() || !self.inner.probe.ready() {
            return Ok(0);
        }
        let mut c = self.consumer();
        let mut n = 0;
        for wc in wcs.iter_mut() {
            if c.poll(std::slice::from_mut(&mut wc.0))? == 0 {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// One completion, if any.
    pub fn poll_one(&self) -> Result<Option<Wc>> {
        let mut wc = Wc::default();
        Ok((self.poll(std::slice::from_mut(&mut wc))? == 1).then_some(wc))
    }

    /// Arm the CQ: the next completion signals the completion channel (once). Returns
    /// `true` if completions are already waiting (poll them: their notification may have
    /// been missed).
    pub fn req_notify(&self) -> Result<bool> {
        Ok(self.consumer().arm()?)
    }

    /// Wait up to `timeout` for one completion: busy-polls when the CQ has no channel,
    /// otherwise arms it and sleeps on the channel.
    pub fn wait_one(&self, timeout: Duration) -> Result<Option<Wc>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(wc) = self.poll_one()? {
                return Ok(Some(wc));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match &self.inner.channel {
                Some(ch) => {
                    if !self.req_notify()? {
                        // The engine must run to complete anything: not this thread now.
                        self.inner.dev.release_engine();
                        ch.wait(left)?;
                    }
                }
                None => std::hint::spin_loop(),
            }
        }
    }
}
