//! Connection management: listen, connect with private data, accept, reject, disconnect, and
//! the events that tell how it went (in the shape of librdmacm's `rdma_cm_id`).
//!
//! A connection is a TCP connection on which the daemon runs the MPA startup (RFC 5044 §7.1,
//! with the RFC 6581 enhancements) and then the QP. Events arrive on the device's control
//! connection; [`CmId::get_event`] waits for those of one id (others stay queued for their
//! own ids), [`crate::Device::get_cm_event`] takes them in order.

use crate::device::{Device, unexpected};
use crate::error::{Error, Result};
use crate::qp::Qp;
use abi::ctl::{self, Event, MpaOverride, QpId, Request, Response};
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The daemon's handle of a CM id (what events name).
pub type CmHandle = ctl::CmId;

/// CRC choice for one connection (RFC 5044 §7.1: CRC is used if either side asks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrcMode {
    /// The daemon's `[mpa] crc`.
    #[default]
    Default,
    /// Ask for CRC32c.
    On,
    /// Do not ask (the peer may still ask, then CRC is on).
    Off,
    /// Refuse a peer that does not use CRC.
    Require,
}

/// Ready-to-receive message of RFC 6581 for peer-to-peer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rtr {
    /// The daemon's `[mpa] rtr`.
    #[default]
    Default,
    /// No RTR.
    None,
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send.
    Send,
}

/// Connection parameters of `connect` and `accept`.
///
/// ```
/// use verbs::{ConnParam, CrcMode};
/// let p = ConnParam::new().private_data(b"hello").ird(1).ord(1).crc(CrcMode::On);
/// assert_eq!(p.private_data, b"hello");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data carried in the MPA Request or Reply (at most the device's
    /// `max_private_data` bytes).
    pub private_data: Vec<u8>,
    /// Inbound Read/atomic requests we accept at once (responder resources).
    pub ird: u32,
    /// Outbound Read/atomic requests we issue at once (initiator depth).
    pub ord: u32,
    /// Per-connection MPA choices.
    pub mpa: MpaOverride,
}

impl Default for ConnParam {
    fn default() -> Self {
        ConnParam {
            private_data: Vec::new(),
            ird: 16,
            ord: 16,
            mpa: MpaOverride::default(),
        }
    }
}

impl ConnParam {
    /// Defaults: no private data, IRD and ORD 16, the daemon's MPA settings.
    pub fn new() -> ConnParam {
        ConnParam::default()
    }
    /// Set the private data.
    pub fn private_data(mut self, pd: &[u8]) -> Self {
        self.private_data = pd.to_vec();
        self
    }
    /// Set IRD.
    pub fn ird(mut self, n: u32) -> Self {
        self.ird = n;
        self
    }
    /// Set ORD.
    pub fn ord(mut self, n: u32) -> Self {
        self.ord = n;
        self
    }
    /// Set the CRC choice.
    pub fn crc(mut self, c: CrcMode) -> Self {
        self.mpa.crc = match c {
            CrcMode::Default => 0,
            CrcMode::On => 1,
            CrcMode::Off => 2,
            CrcMode::Require => 3,
        };
        self
    }
    /// Ask for markers (RFC 5044 §5) or not.
    pub fn markers(mut self, on: bool) -> Self {
        self.mpa.markers = if on { 1 } else { 2 };
        self
    }
    /// MPA revision (1 or 2; 0: the daemon's default).
    pub fn revision(mut self, rev: u8) -> Self {
        self.mpa.revision = rev;
        self
    }
    /// RTR type for peer-to-peer mode.
    pub fn rtr(mut self, r: Rtr) -> Self {
        self.mpa.rtr = match r {
            Rtr::Default => 0,
            Rtr::None => 1,
            Rtr::Write => 2,
            Rtr::Read => 3,
            Rtr::Send => 4,
        };
        self
    }
}

/// A connect request waiting for [`CmId::accept`] or [`CmId::reject`].
#[derive(Debug)]
pub struct ConnectRequest {
    /// The listener it arrived on.
    pub listener: CmHandle,
    /// The new CM id of this connection (owned: dropping it refuses or closes it).
    pub id: CmId,
    /// Our address.
    pub local: SocketAddrV4,
    /// The peer's address.
    pub remote: SocketAddrV4,
    /// The peer's private data (without the RFC 6581 IRD/ORD words).
    pub private_data: Vec<u8>,
    /// The peer's IRD.
    pub ird: u32,
    /// The peer's ORD.
    pub ord: u32,
    /// The RTR types the peer offers (0: none).
    pub rtr: u8,
}

/// A connection that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Established {
    /// The CM id.
    pub id: CmHandle,
    /// The QP now in RTS.
    pub qp: QpId,
    /// Our address.
    pub local: SocketAddrV4,
    /// The peer's address.
    pub remote: SocketAddrV4,
    /// The peer's private data (its MPA Reply's for an active open, its Request's for a
    /// passive one).
    pub private_data: Vec<u8>,
    /// Negotiated IRD.
    pub ird: u32,
    /// Negotiated ORD.
    pub ord: u32,
    /// CRC in use.
    pub crc: bool,
    /// Markers in use.
    pub markers: bool,
    /// MPA revision.
    pub revision: u8,
}

/// A connection-manager event.
#[derive(Debug)]
#[non_exhaustive]
pub enum CmEvent {
    /// A peer connected to one of our listeners.
    ConnectRequest(ConnectRequest),
    /// The connection is established.
    Established(Established),
    /// The peer rejected our connect, with its private data.
    Rejected {
        /// The CM id.
        id: CmHandle,
        /// The peer's private data.
        private_data: Vec<u8>,
    },
    /// The active open failed (`abi::ctl::connect_failure`).
    ConnectFailed {
        /// The CM id.
        id: CmHandle,
        /// One of `abi::ctl::connect_failure`.
        reason: u8,
    },
    /// The connection closed.
    Disconnected {
        /// The CM id.
        id: CmHandle,
    },
    /// The peer sent a TERMINATE (RFC 5040 §4.8).
    TerminateReceived {
        /// The CM id.
        id: CmHandle,
        /// Layer (0 RDMAP, 1 DDP, 2 LLP/MPA).
        layer: u8,
        /// Error type.
        etype: u8,
        /// Error code.
        ecode: u8,
    },
    /// The QP went to ERROR locally: `reason` is one of `abi::ctl::qp_error`; with
    /// `TERMINATE_SENT`, layer/etype/ecode are the TERMINATE we sent.
    QpError {
        /// The CM id.
        id: CmHandle,
        /// The QP.
        qp: QpId,
        /// One of `abi::ctl::qp_error`.
        reason: u8,
        /// Layer.
        layer: u8,
        /// Error type.
        etype: u8,
        /// Error code.
        ecode: u8,
    },
}

impl CmEvent {
    pub(crate) fn from_abi(dev: &Device, e: Event) -> CmEvent {
        match e {
            Event::ConnectRequest {
                listener,
                id,
                local,
                remote,
                private_data,
                ird,
                ord,
                rtr,
            } => CmEvent::ConnectRequest(ConnectRequest {
                listener,
                id: CmId::adopt(dev, id),
                local,
                remote,
                private_data,
                ird,
                ord,
                rtr,
            }),
            Event::Established {
                id,
                qp,
                local,
                remote,
                private_data,
                ird,
                ord,
                crc,
                markers,
                revision,
            } => CmEvent::Established(Established {
                id,
                qp,
                local,
                remote,
                private_data,
                ird,
                ord,
                crc,
                markers,
                revision,
            }),
            Event::Rejected { id, private_data } => CmEvent::Rejected { id, private_data },
            Event::ConnectFailed { id, reason } => CmEvent::ConnectFailed { id, reason },
            Event::Disconnected { id } => CmEvent::Disconnected { id },
            Event::TerminateReceived {
                id,
                layer,
                etype,
                ecode,
            } => CmEvent::TerminateReceived {
                id,
                layer,
                etype,
                ecode,
            },
            Event::QpError {
                id,
                qp,
                reason,
                layer,
                etype,
                ecode,
            } => CmEvent::QpError {
                id,
                qp,
                reason,
                layer,
                etype,
                ecode,
            },
            // `Event` is non-exhaustive: a newer daemon's event this library cannot name.
            other => CmEvent::QpError {
                id: event_id(&other),
                qp: QpId(0),
                reason: 0,
                layer: 0xff,
                etype: 0xff,
                ecode: 0xff,
            },
        }
    }

    /// The CM id the event is for (the listener for a connect request).
    pub fn id(&self) -> CmHandle {
        match self {
            CmEvent::ConnectRequest(r) => r.listener,
            CmEvent::Established(e) => e.id,
            CmEvent::Rejected { id, .. }
            | CmEvent::ConnectFailed { id, .. }
            | CmEvent::Disconnected { id }
            | CmEvent::TerminateReceived { id, .. }
            | CmEvent::QpError { id, .. } => *id,
        }
    }

    /// A short name (librdmacm's event names where they exist).
    pub fn name(&self) -> &'static str {
        match self {
            CmEvent::ConnectRequest(_) => "CONNECT_REQUEST",
            CmEvent::Established(_) => "ESTABLISHED",
            CmEvent::Rejected { .. } => "REJECTED",
            CmEvent::ConnectFailed { .. } => "CONNECT_ERROR",
            CmEvent::Disconnected { .. } => "DISCONNECTED",
            CmEvent::TerminateReceived { .. } => "TERMINATE_RECEIVED",
            CmEvent::QpError { .. } => "QP_ERROR",
        }
    }
}

/// The id an event is addressed to (the listener for a connect request).
pub(crate) fn event_id(e: &Event) -> CmHandle {
    match e {
        Event::ConnectRequest { listener, .. } => *listener,
        Event::Established { id, .. }
        | Event::Rejected { id, .. }
        | Event::ConnectFailed { id, .. }
        | Event::Disconnected { id }
        | Event::TerminateReceived { id, .. }
        | Event::QpError { id, .. } => *id,
        _ => CmHandle::default(),
    }
}

#[derive(Debug)]
struct CmInner {
    id: CmHandle,
    dev: Device,
    /// The QP bound by connect/accept, kept alive as long as the id (as `rdma_create_qp`).
    qp: Mutex<Option<Qp>>,
}

impl Drop for CmInner {
    fn drop(&mut self) {
        if let Err(e) = self.dev.call(&Request::DestroyCmId { id: self.id }) {
            tracing::debug!(id = %self.id, "destroy cm id: {e}");
        }
    }
}

/// A connection-manager id: a listener or one connection. Destroyed (its connection
/// closed) when the last handle goes.
///
/// ```no_run
/// use verbs::{ConnParam, Device, CmEvent};
/// use std::time::Duration;
/// let dev = Device::open_default()?;
/// let pd = dev.alloc_pd()?;
/// let cq = dev.create_cq(64, None)?;
/// let qp = pd.create_qp(&cq, &cq).build()?;
/// let id = dev.create_cm_id()?;
/// id.connect(&qp, "10.77.0.1:7174".parse().unwrap(), &ConnParam::new())?;
/// let est = id.wait_established(Duration::from_secs(5))?;
/// println!("connected to {}, CRC {}", est.remote, est.crc);
/// # Ok::<(), verbs::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CmId {
    inner: Arc<CmInner>,
}

impl CmId {
    pub(crate) fn create(dev: &Device) -> Result<CmId> {
        match dev.call(&Request::CreateCmId {})? {
            Response::CmId { id } => Ok(CmId::adopt(dev, id)),
            r => Err(unexpected("CreateCmId", &r)),
        }
    }

    fn adopt(dev: &Device, id: CmHandle) -> CmId {
        CmId {
            inner: Arc::new(CmInner {
                id,
                dev: dev.clone(),
                qp: Mutex::new(None),
            }),
        }
    }

    /// The daemon's handle (what events name).
    pub fn handle(&self) -> CmHandle {
        self.inner.id
    }

    /// The device.
    pub fn dev(&self) -> &Device {
        &self.inner.dev
    }

    /// The QP bound by connect or accept.
    pub fn qp(&self) -> Option<Qp> {
        self.inner
            .qp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn done(&self, what: &str, r: Response) -> Result<()> {
        match r {
            Response::Done {} => Ok(()),
            r => Err(unexpected(what, &r)),
        }
    }

    fn check_pd(&self, pd: &[u8]) -> Result<()> {
        let max = self.dev().attrs().max_private_data as usize;
        if pd.len() > max.min(ctl::MAX_PRIVATE_DATA) {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of private data: at most {max} allowed",
                pd.len()
            )));
        }
        Ok(())
    }

    /// Listen on `addr` (`0.0.0.0` = the device's address). Connect requests arrive as
    /// [`CmEvent::ConnectRequest`] on this id.
    pub fn listen(&self, addr: SocketAddrV4, backlog: u32) -> Result<()> {
        let r = self.dev().call(&Request::Listen {
            id: self.handle(),
            addr,
            backlog,
        })?;
        self.done("Listen", r)
    }

    fn bind(&self, qp: &Qp) {
        *self.inner.qp.lock().unwrap_or_else(|e| e.into_inner()) = Some(qp.clone());
    }

    /// Open a connection to `remote` with `qp`. Completion arrives as
    /// [`CmEvent::Established`] (or `Rejected` / `ConnectFailed`).
    pub fn connect(&self, qp: &Qp, remote: SocketAddrV4, param: &ConnParam) -> Result<()> {
        self.check_pd(&param.private_data)?;
        let r = self.dev().call(&Request::Connect {
            id: self.handle(),
            qp: qp.id(),
            remote,
            private_data: param.private_data.clone(),
            ird: param.ird,
            ord: param.ord,
            mpa: param.mpa,
        })?;
        self.done("Connect", r)?;
        self.bind(qp);
        Ok(())
    }

    /// Accept the connect request this id was created for, with `qp`.
    pub fn accept(&self, qp: &Qp, param: &ConnParam) -> Result<()> {
        self.check_pd(&param.private_data)?;
        let r = self.dev().call(&Request::Accept {
            id: self.handle(),
            qp: qp.id(),
            private_data: param.private_data.clone(),
            ird: param.ird,
            ord: param.ord,
            mpa: param.mpa,
        })?;
        self.done("Accept", r)?;
        self.bind(qp);
        Ok(())
    }

    /// Reject the connect request with `private_data` (an MPA Reply with the Rejected bit).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.check_pd(private_data)?;
        let r = self.dev().call(&Request::Reject {
            id: self.handle(),
            private_data: private_data.to_vec(),
        })?;
        self.done("Reject", r)
    }

    /// Close the connection gracefully (a [`CmEvent::Disconnected`] follows).
    pub fn disconnect(&self) -> Result<()> {
        let r = self
            .dev()
            .call(&Request::Disconnect { id: self.handle() })?;
        self.done("Disconnect", r)
    }

    /// The next event for this id, waiting at most `timeout` (`None`: forever).
    pub fn get_event(&self, timeout: Option<Duration>) -> Result<Option<CmEvent>> {
        let me = self.handle();
        let e = self
            .dev()
            .inner
            .session
            .next_event(timeout, |e| event_id(e) == me)?;
        Ok(e.map(|e| CmEvent::from_abi(self.dev(), e)))
    }

    /// The next connect request on this listener, waiting at most `timeout`.
    pub fn get_request(&self, timeout: Duration) -> Result<ConnectRequest> {
        match self.get_event(Some(timeout))? {
            Some(CmEvent::ConnectRequest(r)) => Ok(r),
            Some(e) => Err(Error::UnexpectedEvent(format!(
                "expected CONNECT_REQUEST on the listener, got {}",
                e.name()
            ))),
            None => Err(Error::NoEvent(timeout)),
        }
    }

    /// Wait for [`CmEvent::Established`]; a rejection, a failed connect or an error event is
    /// returned as an error naming it.
    pub fn wait_established(&self, timeout: Duration) -> Result<Established> {
        match self.get_event(Some(timeout))? {
            Some(CmEvent::Established(e)) => Ok(e),
            Some(CmEvent::Rejected { private_data, .. }) => Err(Error::Rejected { private_data }),
            Some(CmEvent::ConnectFailed { reason, .. }) => Err(Error::ConnectFailed { reason }),
            Some(e) => Err(Error::UnexpectedEvent(format!(
                "expected ESTABLISHED, got {}: {e:?}",
                e.name()
            ))),
            None => Err(Error::NoEvent(timeout)),
        }
    }
}
