//! Control messages between a client and `iwarpd`: requests, responses and CM events.
//!
//! Transport: one message per `SOCK_SEQPACKET` datagram on the daemon's Unix socket (file
//! descriptors ride along with `SCM_RIGHTS`), or an in-process channel in embedded mode.
//! Every message is a 20-byte header followed by its body:
//!
//! ```text
//!  0 magic    u32  MAGIC ("IWRP")
//!  4 version  u32  ABI_VERSION of the sender
//!  8 kind     u16  0x00xx request, 0x01xx response, 0x02xx event
//! 10 rsvd     u16  zero
//! 12 id       u32  request id, echoed by its response; 0 for events
//! 16 len      u32  body bytes (header excluded), at most MAX_MESSAGE - 20
//! 20 body          the fields in order, little-endian; byte strings as u16 length + bytes
//! ```
//!
//! The first request is [`Request::Hello`]; the daemon refuses anything else first, and a
//! message whose header carries another ABI version, with [`ErrorCode::AbiVersion`].
//! Decoding never panics: truncated input, unknown kinds, bad values and trailing bytes are
//! [`DecodeError`]s, which the daemon answers with [`ErrorCode::BadMessage`] and keeps
//! serving. Unknown kinds are errors rather than skipped, so a client never believes a
//! request it sent was understood.

pub mod codec;

use crate::ABI_VERSION;
pub use codec::DecodeError;
use codec::{Reader, Wire, Writer, wire_struct};
use std::net::SocketAddrV4;

/// First bytes of every message ("IWRP" little-endian).
pub const MAGIC: u32 = u32::from_le_bytes(*b"IWRP");
/// Header bytes.
pub const HEADER_LEN: usize = 20;
/// Largest message (header included); larger datagrams are refused.
pub const MAX_MESSAGE: usize = 4096;
/// Most private-data bytes in a CM message (RFC 5044 §7.1: at most 512 in an MPA frame).
pub const MAX_PRIVATE_DATA: usize = 512;

macro_rules! handle {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u32);
        impl Wire for $name {
            fn put(&self, w: &mut Writer) {
                self.0.put(w);
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok($name(u32::get(r)?))
            }
        }
        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}#{}", stringify!($name), self.0)
            }
        }
    )*};
}

handle!(
    /// A client's shared segment, as attached by `AttachSegment`.
    SegmentId,
    /// A protection domain.
    PdId,
    /// A completion queue.
    CqId,
    /// A queue pair (the handle; `qp_num` is the number reported in CQEs).
    QpId,
    /// A connection-manager id (listener or connection).
    CmId,
);

/// Access flags of `RegMr` (the same bits as `iwarp::stag::Access`).
pub mod access {
    /// Local read (always implied).
    pub const LOCAL_READ: u32 = 0x01;
    /// Local write (receive buffers, Read sinks).
    pub const LOCAL_WRITE: u32 = 0x02;
    /// Remote read.
    pub const REMOTE_READ: u32 = 0x04;
    /// Remote write.
    pub const REMOTE_WRITE: u32 = 0x08;
    /// Remote atomic (RFC 7306).
    pub const REMOTE_ATOMIC: u32 = 0x10;
    /// The peer may invalidate the STag with Send with Invalidate (RFC 5040 §6.4).
    pub const REMOTE_INVALIDATE: u32 = 0x20;
    /// Every defined bit.
    pub const ALL: u32 = 0x3f;
}

/// Per-connection MPA choices; `0` in a field means "the daemon's `[mpa]` default".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MpaOverride {
    /// 0 default, 1 on, 2 off, 3 require (refuse a peer without CRC).
    pub crc: u8,
    /// 0 default, 1 on, 2 off.
    pub markers: u8,
    /// 0 default, else the MPA revision (1 or 2).
    pub revision: u8,
    /// 0 default, 1 none, 2 write, 3 read, 4 send (RFC 6581 RTR type).
    pub rtr: u8,
}
wire_struct!(MpaOverride {
    crc,
    markers,
    revision,
    rtr
});

/// What the device (this daemon) offers; answered to `Hello` and `QueryDevice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttrs {
    /// Daemon version string.
    pub version: String,
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// The port's IPv4 address (port 0).
    pub ip: SocketAddrV4,
    /// Dataplane threads = sub-rings every CQ must have.
    pub cq_subs: u32,
    /// Most QPs per client.
    pub max_qp: u32,
    /// Most entries in an SQ or RQ ring.
    pub max_qp_wr: u32,
    /// Most SGEs in a send WQE.
    pub max_send_sge: u32,
    /// Most SGEs in a receive WQE.
    pub max_recv_sge: u32,
    /// Most CQs per client.
    pub max_cq: u32,
    /// Most entries in one CQ sub-ring.
    pub max_cqe: u32,
    /// Most MRs per client.
    pub max_mr: u32,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Most PDs per client.
    pub max_pd: u32,
    /// Most segments per client.
    pub max_segments: u32,
    /// Largest IRD (inbound Read/atomic requests).
    pub max_ird: u32,
    /// Largest ORD (outbound Read/atomic requests).
    pub max_ord: u32,
    /// Most private-data bytes in connect/accept/reject.
    pub max_private_data: u32,
}
wire_struct!(DeviceAttrs {
    version,
    mac,
    ip,
    cq_subs,
    max_qp,
    max_qp_wr,
    max_send_sge,
    max_recv_sge,
    max_cq,
    max_cqe,
    max_mr,
    max_mr_size,
    max_pd,
    max_segments,
    max_ird,
    max_ord,
    max_private_data,
});

/// QP states reported by `QueryQp`.
pub mod qp_state {
    /// Created, not connected.
    pub const IDLE: u8 = 0;
    /// Connecting (TCP or MPA startup).
    pub const CONNECTING: u8 = 1;
    /// Established: RTS.
    pub const RTS: u8 = 2;
    /// Closing (graceful).
    pub const CLOSING: u8 = 3;
    /// TERMINATE sent or received.
    pub const TERMINATE: u8 = 4;
    /// ERROR: work requests are flushed.
    pub const ERROR: u8 = 5;
}

/// A QP's attributes (`QueryQp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpAttrs {
    /// Number reported in CQEs.
    pub qp_num: u32,
    /// One of [`qp_state`].
    pub state: u8,
    /// The connection, once bound (`CmId(0)` if none).
    pub cm_id: CmId,
    /// SQ entries.
    pub sq_entries: u32,
    /// RQ entries.
    pub rq_entries: u32,
    /// Negotiated IRD.
    pub ird: u32,
    /// Negotiated ORD.
    pub ord: u32,
    /// CRC in use.
    pub crc: bool,
    /// Markers in use.
    pub markers: bool,
    /// MPA revision negotiated (0 before).
    pub revision: u8,
    /// Local address (0.0.0.0:0 before connecting).
    pub local: SocketAddrV4,
    /// Remote address.
    pub remote: SocketAddrV4,
}
wire_struct!(QpAttrs {
    qp_num,
    state,
    cm_id,
    sq_entries,
    rq_entries,
    ird,
    ord,
    crc,
    markers,
    revision,
    local,
    remote,
});

/// What went wrong with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The message could not be decoded (truncated, unknown kind, bad field).
    BadMessage = 1,
    /// The client's ABI version is not the daemon's.
    AbiVersion = 2,
    /// A request before `Hello`, or a second `Hello`.
    NotHello = 3,
    /// A handle, lkey or STag that is unknown or belongs to another client.
    UnknownHandle = 4,
    /// A request that needs a file descriptor came without one.
    MissingFd = 5,
    /// The file descriptor is unusable (not a memfd of the stated size, cannot be mapped).
    BadFd = 6,
    /// A range outside its segment or region, or a misaligned ring.
    OutOfRange = 7,
    /// A per-client or daemon limit is reached.
    NoResources = 8,
    /// A value is invalid (ring size, access bits, private data too long...).
    InvalidArgument = 9,
    /// The object is still in use (a PD with MRs, a CQ with QPs, a segment with MRs).
    Busy = 10,
    /// The address/port is already listened on.
    AddressInUse = 11,
    /// The request does not fit the object's state (accept on a non-request, connect twice).
    InvalidState = 12,
    /// Valid but not supported by this daemon.
    Unsupported = 13,
    /// The daemon failed internally (the message says how); the client may retry.
    Internal = 14,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::BadMessage,
        ErrorCode::AbiVersion,
        ErrorCode::NotHello,
        ErrorCode::UnknownHandle,
        ErrorCode::MissingFd,
        ErrorCode::BadFd,
        ErrorCode::OutOfRange,
        ErrorCode::NoResources,
        ErrorCode::InvalidArgument,
        ErrorCode::Busy,
        ErrorCode::AddressInUse,
        ErrorCode::InvalidState,
        ErrorCode::Unsupported,
        ErrorCode::Internal,
    ];
}

impl Wire for ErrorCode {
    fn put(&self, w: &mut Writer) {
        (*self as u16).put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let v = u16::get(r)?;
        ErrorCode::ALL
            .into_iter()
            .find(|c| *c as u16 == v)
            .ok_or(DecodeError::BadValue("error code"))
    }
}

/// Why an active open failed (`Event::ConnectFailed`).
pub mod connect_failure {
    /// No ARP answer / no route.
    pub const UNREACHABLE: u8 = 1;
    /// The peer answered the SYN with a RST.
    pub const REFUSED: u8 = 2;
    /// TCP or MPA startup timed out.
    pub const TIMEOUT: u8 = 3;
    /// MPA negotiation failed (bad reply, CRC required but refused, revision mismatch).
    pub const MPA: u8 = 4;
    /// The connection was reset during startup.
    pub const RESET: u8 = 5;
    /// Local failure (no resources).
    pub const LOCAL: u8 = 6;
}

/// Why a QP went to ERROR (`Event::QpError`).
pub mod qp_error {
    /// We detected a protocol error and sent a TERMINATE (codes in the event).
    pub const TERMINATE_SENT: u8 = 1;
    /// The stream ended (FIN or RST) inside an FPDU.
    pub const STREAM_BROKEN: u8 = 2;
    /// An FPDU stayed half-received past the receive timeout (a TERMINATE was sent).
    pub const RX_TIMEOUT: u8 = 3;
    /// The TCP connection was reset or timed out.
    pub const STREAM_LOST: u8 = 4;
    /// The client's rings are corrupt (indices or entries out of range).
    pub const CORRUPT_RING: u8 = 5;
}

macro_rules! messages {
    ($(#[$m:meta])* $name:ident {
        $( $(#[$vm:meta])* $var:ident = $kind:literal { $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)? } ),* $(,)?
    }) => {
        $(#[$m])*
        ///
        /// Fields are described in the variant's documentation.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        #[allow(missing_docs)]
        pub enum $name {
            $( $(#[$vm])* $var { $( $(#[$fm])* $f: $t ),* } ),*
        }

        impl $name {
            /// The header kind.
            pub fn kind(&self) -> u16 {
                match self { $( $name::$var { .. } => $kind ),* }
            }
            /// The variant name (for logs).
            pub fn name(&self) -> &'static str {
                match self { $( $name::$var { .. } => stringify!($var) ),* }
            }
            /// Every kind of this direction.
            pub const KINDS: &'static [u16] = &[$($kind),*];
            #[allow(unused_variables)]
            fn put_body(&self, w: &mut Writer) {
                match self { $( $name::$var { $($f),* } => { $( Wire::put($f, w); )* } ),* }
            }
            #[allow(unused_variables)]
            fn get_body(kind: u16, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                match kind {
                    $( $kind => Ok($name::$var { $( $f: <$t as Wire>::get(r)? ),* }), )*
                    k => Err(DecodeError::UnknownKind(k)),
                }
            }
        }
    };
}

messages!(
    /// Client -> daemon. Requests marked "+ fd" carry one file descriptor (`SCM_RIGHTS`).
    Request {
        /// First message: the client's ABI version, pid and a name for logs.
        Hello = 0x0001 { abi_version: u32, pid: u32, name: String },
        /// The device attributes.
        QueryDevice = 0x0002 {},
        /// + fd (a memfd of `len` bytes, created and mapped by the client): map it too.
        AttachSegment = 0x0003 { len: u64 },
        /// Unmap a segment (refused while MRs or rings use it).
        DetachSegment = 0x0004 { segment: SegmentId },
        /// A new protection domain.
        AllocPd = 0x0005 {},
        /// Free a PD (refused while MRs or QPs use it).
        DeallocPd = 0x0006 { pd: PdId },
        /// Register `len` bytes at `offset` of `segment` in `pd` with `access` bits; `iova`
        /// is the tagged offset of the first byte (verbs: the client's virtual address of it).
        RegMr = 0x0007 {
            pd: PdId, segment: SegmentId, offset: u64, len: u64, iova: u64, access: u32,
        },
        /// Deregister the MR with this local key (its STag becomes invalid at once).
        DeregMr = 0x0008 { lkey: u32 },
        /// A CQ at `offset` of `segment` laid out as `abi::ring::CqLayout` with `subs`
        /// sub-rings (the device's `cq_subs`) of `entries`; + fd (an eventfd) when `channel`.
        CreateCq = 0x0009 { segment: SegmentId, offset: u64, entries: u32, subs: u32, channel: bool },
        /// Destroy a CQ (refused while QPs use it).
        DestroyCq = 0x000a { cq: CqId },
        /// An RC QP whose SQ (`Wqe`) and RQ (`RecvWqe`) rings are at the given offsets of
        /// `segment`; `sq_sig_all` makes every WQE signaled.
        CreateQp = 0x000b {
            pd: PdId, send_cq: CqId, recv_cq: CqId, segment: SegmentId,
            sq_offset: u64, sq_entries: u32, rq_offset: u64, rq_entries: u32, sq_sig_all: bool,
        },
        /// Destroy a QP: its connection ends (TERMINATE or close), its rings are released.
        DestroyQp = 0x000c { qp: QpId },
        /// The QP's attributes.
        QueryQp = 0x000d { qp: QpId },
        /// Move the QP to ERROR: outstanding WRs complete as flushed.
        ModifyQpError = 0x000e { qp: QpId },
        /// A new CM id.
        CreateCmId = 0x000f {},
        /// Destroy a CM id (a connection on it is closed).
        DestroyCmId = 0x0010 { id: CmId },
        /// Listen on `addr` (0.0.0.0 = the port's address); connect requests arrive as events.
        Listen = 0x0011 { id: CmId, addr: SocketAddrV4, backlog: u32 },
        /// Active open to `remote` with `qp`, MPA startup with `private_data`.
        Connect = 0x0012 {
            id: CmId, qp: QpId, remote: SocketAddrV4, private_data: Vec<u8>,
            ird: u32, ord: u32, mpa: MpaOverride,
        },
        /// Accept a connect request (the `id` of its event) with `qp`; `mpa.crc` may override
        /// the listener's CRC choice for this connection's Reply (ABI 2).
        Accept = 0x0013 { id: CmId, qp: QpId, private_data: Vec<u8>, ird: u32, ord: u32, mpa: MpaOverride },
        /// Reject a connect request with private data (MPA reply with the Rejected bit).
        Reject = 0x0014 { id: CmId, private_data: Vec<u8> },
        /// Close the connection gracefully (QP to CLOSING, then the TCP close).
        Disconnect = 0x0015 { id: CmId },
        /// Test only (`[control] allow_faults`): break the QP's next outgoing FPDU;
        /// `fault` is one of [`tx_fault`] (docs/rdma-seams.md "Fault switches").
        InjectFault = 0x0016 { qp: QpId, fault: u8 },
    }
);

/// Values of `Request::InjectFault::fault`.
pub mod tx_fault {
    /// The FPDU with its MPA CRC inverted.
    pub const BAD_CRC: u8 = 1;
    /// Its first half, then nothing more on the stream.
    pub const TRUNCATE: u8 = 2;
    /// Its first half, then FIN.
    pub const FIN: u8 = 3;
    /// Its first half, then RST.
    pub const RST: u8 = 4;
}

messages!(
    /// Daemon -> client, answering the request with the same id.
    Response {
        /// Hello accepted.
        Hello = 0x0101 { client: u32, abi_version: u32, device: DeviceAttrs },
        /// Device attributes.
        Device = 0x0102 { device: DeviceAttrs },
        /// Segment attached.
        Segment = 0x0103 { segment: SegmentId },
        /// PD allocated.
        Pd = 0x0104 { pd: PdId },
        /// MR registered: `lkey` for SGEs, `rkey` (the STag) for the peer.
        Mr = 0x0105 { lkey: u32, rkey: u32 },
        /// CQ created.
        Cq = 0x0106 { cq: CqId },
        /// QP created.
        Qp = 0x0107 { qp: QpId, qp_num: u32 },
        /// QP attributes.
        QpAttrs = 0x0108 { attrs: QpAttrs },
        /// CM id created.
        CmId = 0x0109 { id: CmId },
        /// The request was carried out.
        Done = 0x010a {},
        /// The request failed; nothing changed. `message` says why, naming the field.
        Error = 0x010b { code: ErrorCode, message: String },
    }
);

messages!(
    /// Daemon -> client, unsolicited (header id 0): connection-manager events.
    Event {
        /// A peer connected to `listener`; answer on the new `id` with Accept or Reject.
        ConnectRequest = 0x0201 {
            listener: CmId, id: CmId, local: SocketAddrV4, remote: SocketAddrV4,
            private_data: Vec<u8>, ird: u32, ord: u32, rtr: u8,
        },
        /// The connection is up; the QP is in RTS.
        Established = 0x0202 {
            id: CmId, qp: QpId, local: SocketAddrV4, remote: SocketAddrV4, private_data: Vec<u8>,
            ird: u32, ord: u32, crc: bool, markers: bool, revision: u8,
        },
        /// The peer rejected our connect, with its private data.
        Rejected = 0x0203 { id: CmId, private_data: Vec<u8> },
        /// The active open failed (one of [`connect_failure`]).
        ConnectFailed = 0x0204 { id: CmId, reason: u8 },
        /// The connection closed (graceful close, or after an error).
        Disconnected = 0x0205 { id: CmId },
        /// The peer sent a TERMINATE (RFC 5040 §4.8): layer, error type, error code.
        TerminateReceived = 0x0206 { id: CmId, layer: u8, etype: u8, ecode: u8 },
        /// The QP went to ERROR locally: `reason` is one of [`qp_error`]; with
        /// `qp_error::TERMINATE_SENT`, layer/etype/ecode are the TERMINATE we sent.
        QpError = 0x0207 { id: CmId, qp: QpId, reason: u8, layer: u8, etype: u8, ecode: u8 },
    }
);

/// A message body in either direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Client -> daemon.
    Request(Request),
    /// Daemon -> client, answering.
    Response(Response),
    /// Daemon -> client, unsolicited.
    Event(Event),
}

/// A decoded message: header id plus body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Request id (0 for events).
    pub id: u32,
    /// The body.
    pub body: Body,
}

/// The fixed header, as far as it could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Sender's ABI version.
    pub version: u32,
    /// Message kind.
    pub kind: u16,
    /// Request id.
    pub id: u32,
    /// Body length.
    pub len: u32,
}

impl Header {
    /// Parse the header of `buf` (magic and lengths checked, version not).
    pub fn parse(buf: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(buf);
        if u32::get(&mut r)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = u32::get(&mut r)?;
        let kind = u16::get(&mut r)?;
        if u16::get(&mut r)? != 0 {
            return Err(DecodeError::BadValue("header rsvd"));
        }
        let id = u32::get(&mut r)?;
        let len = u32::get(&mut r)?;
        if len as usize > MAX_MESSAGE - HEADER_LEN {
            return Err(DecodeError::BadLength(len));
        }
        Ok(Header {
            version,
            kind,
            id,
            len,
        })
    }
}

fn encode(kind: u16, id: u32, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    MAGIC.put(&mut w);
    ABI_VERSION.put(&mut w);
    kind.put(&mut w);
    0u16.put(&mut w);
    id.put(&mut w);
    0u32.put(&mut w);
    body(&mut w);
    let len = (w.buf.len() - HEADER_LEN) as u32;
    w.buf[16..20].copy_from_slice(&len.to_le_bytes());
    w.buf
}

impl Request {
    /// Encode with request id `id`.
    pub fn encode(&self, id: u32) -> Vec<u8> {
        encode(self.kind(), id, |w| self.put_body(w))
    }
}
impl Response {
    /// Encode as the answer to request `id`.
    pub fn encode(&self, id: u32) -> Vec<u8> {
        encode(self.kind(), id, |w| self.put_body(w))
    }
    /// An error response.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
        Response::Error {
            code,
            message: message.into(),
        }
    }
}
impl Event {
    /// Encode (id 0).
    pub fn encode(&self) -> Vec<u8> {
        encode(self.kind(), 0, |w| self.put_body(w))
    }
}

/// Decode one whole message (one datagram). Checks magic, version, length, kind and every
/// field; never panics.
pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
    let h = Header::parse(buf)?;
    if h.version != ABI_VERSION {
        return Err(DecodeError::Version(h.version));
    }
    let body_bytes = &buf[HEADER_LEN.min(buf.len())..];
    if body_bytes.len() != h.len as usize {
        return Err(if body_bytes.len() < h.len as usize {
            DecodeError::Truncated
        } else {
            DecodeError::BadLength(h.len)
        });
    }
    let mut r = Reader::new(body_bytes);
    let body = match h.kind >> 8 {
        0x00 => Body::Request(Request::get_body(h.kind, &mut r)?),
        0x01 => Body::Response(Response::get_body(h.kind, &mut r)?),
        0x02 if h.id != 0 => return Err(DecodeError::BadValue("event id (must be 0)")),
        0x02 => Body::Event(Event::get_body(h.kind, &mut r)?),
        _ => return Err(DecodeError::UnknownKind(h.kind)),
    };
    r.finish()?;
    check_lengths(&body)?;
    Ok(Message { id: h.id, body })
}

/// Decode a message that must be a request (what the daemon reads).
pub fn decode_request(buf: &[u8]) -> Result<(u32, Request), DecodeError> {
    match decode(buf)? {
        Message {
            id,
            body: Body::Request(r),
        } => Ok((id, r)),
        _ => Err(DecodeError::UnknownKind(
            Header::parse(buf).map(|h| h.kind).unwrap_or(0),
        )),
    }
}

fn check_lengths(body: &Body) -> Result<(), DecodeError> {
    let pd = match body {
        Body::Request(Request::Connect { private_data, .. })
        | Body::Request(Request::Accept { private_data, .. })
        | Body::Request(Request::Reject { private_data, .. })
        | Body::Event(Event::ConnectRequest { private_data, .. })
        | Body::Event(Event::Established { private_data, .. })
        | Body::Event(Event::Rejected { private_data, .. }) => private_data.len(),
        _ => 0,
    };
    if pd > MAX_PRIVATE_DATA {
        return Err(DecodeError::BadValue("private_data"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
