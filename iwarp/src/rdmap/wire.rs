//! RDMAP headers (RFC 5040 §4, RFC 7306 §4): control field, opcodes, Read Request, atomics,
//! Immediate Data, and the whole message header (DDP header + RDMAP part) of one DDP segment.
//!
//! Wire contract (smoltcp `wire` style): parsing untrusted bytes never panics and returns a
//! typed error that maps onto a TERMINATE triple; [`Header::emit`] never panics on a buffer of
//! at least [`Header::buffer_len`] bytes.
//!
//! RDMAP control field (RFC 5040 §4.2), the first RsvdULP byte of the DDP header:
//! ```text
//!  0 1 2 3 4 5 6 7
//! +-+-+-+-+-+-+-+-+
//! |RV |Rsv|OpCode |
//! +-+-+-+-+-+-+-+-+
//! ```
//! RDMA Read Request header (RFC 5040 §4.4), after the untagged DDP header:
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Data Sink STag                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Data Sink Tagged Offset (64)                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  RDMA Read Message Size                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                         Data Source STag                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Data Source Tagged Offset (64)               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! Atomic Request header (RFC 7306), 52 bytes after the untagged DDP header (QN 1): Reserved
//! (28 bits) | AOpCode (4 bits), Request Identifier, Remote STag, Remote Tagged Offset (64),
//! Add or Swap Data (64), Add or Swap Mask (64), Compare Data (64), Compare Mask (64). All
//! three operations carry all fields (unused ones zero); Wireshark's dissector reads the same
//! order and widths.
//! Atomic Response header (RFC 7306), 12 bytes after the untagged DDP header (QN 3): Original
//! Request Identifier, Original Remote Data Value (64).
//! Immediate Data (RFC 7306): exactly 8 bytes after the untagged DDP header (QN 0), a
//! single-segment message that consumes a posted receive; the 8 bytes are reported in the
//! receive completion, nothing is placed.

use core::fmt;

use crate::ddp::wire::{self as ddp, DdpBuf};
use crate::error::{DdpError, RdmapError, TermCode};
use crate::rdmap::terminate::TerminateHdr;
use crate::stag::Stag;

/// The only RDMAP version (RFC 5040 §4.2).
pub const RDMAP_VERSION: u8 = 1;
/// Read Request header length after the DDP header.
pub const READ_REQ_LEN: usize = 28;
/// Atomic Request header length after the DDP header.
pub const ATOMIC_REQ_LEN: usize = 52;
/// Atomic Response header length after the DDP header.
pub const ATOMIC_RESP_LEN: usize = 12;
/// Immediate Data length.
pub const IMM_LEN: usize = 8;
/// Largest header this module parses (untagged + atomic request).
pub const MAX_HDR_LEN: usize = ddp::UNTAGGED_HDR_LEN + ATOMIC_REQ_LEN;

/// Untagged queue numbers (RFC 5040 §5.1 for 0-2; RFC 7306 for 3). The IANA "RDMAP DDP
/// Untagged Queue Numbers" registry (RFC 6580, extended by RFC 7306) lists 0 Send variants,
/// 1 RDMA Read Requests, 2 Terminates, 3 Atomic Responses. Atomic Requests travel on QN 1
/// with the Read Requests: they are ordered with them and share IRD/ORD (RFC 7306 message
/// table; the requester's ORD and the responder's IRD count both kinds).
pub mod qn {
    /// Send, Send with Invalidate/SE/SE+Invalidate, Immediate Data (with SE); each message
    /// consumes one posted receive (RFC 5040 §5.3, RFC 7306).
    pub const SEND: u32 = 0;
    /// RDMA Read Request and RFC 7306 Atomic Request.
    pub const READ_REQ: u32 = 1;
    /// Terminate (RFC 5040 §4.8).
    pub const TERMINATE: u32 = 2;
    /// RFC 7306 Atomic Response.
    pub const ATOMIC_RESP: u32 = 3;
    /// Number of untagged queues this implementation tracks.
    pub const COUNT: usize = 4;
}

/// RDMAP opcodes (RFC 5040 §4.2 for 0x0-0x7; RFC 7306 for 0x8-0xB, IANA "RDMAP Message
/// Operation Codes"). Cross-checked with Wireshark's `packet-iwarp-ddp-rdmap.c` (0xA Atomic
/// Request, 0xB Atomic Response; `tests/rdmap_tshark.rs` decodes ours) and Chelsio's firmware
/// API `t4fw_ri_api.h` (Chelsio co-authored RFC 7306: SEND_IMMEDIATE 0x8, SEND_IMMEDIATE_WITH_SE
/// 0x9, ATOMIC_REQUEST 0xA, ATOMIC_RESPONSE 0xB). Linux siw implements only 0x0-0x7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write (tagged).
    Write = 0x0,
    /// RDMA Read Request (untagged QN 1).
    ReadRequest = 0x1,
    /// RDMA Read Response (tagged).
    ReadResponse = 0x2,
    /// Send (QN 0).
    Send = 0x3,
    /// Send with Invalidate (QN 0).
    SendInvalidate = 0x4,
    /// Send with Solicited Event (QN 0).
    SendSe = 0x5,
    /// Send with Solicited Event and Invalidate (QN 0).
    SendSeInvalidate = 0x6,
    /// Terminate (QN 2).
    Terminate = 0x7,
    /// Immediate Data (RFC 7306, QN 0).
    ImmediateData = 0x8,
    /// Immediate Data with Solicited Event (RFC 7306, QN 0).
    ImmediateDataSe = 0x9,
    /// Atomic Request (RFC 7306).
    AtomicRequest = 0xa,
    /// Atomic Response (RFC 7306).
    AtomicResponse = 0xb,
}

impl Opcode {
    /// The opcode for a nibble, `None` for reserved values.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        use Opcode::*;
        Some(match v {
            0x0 => Write,
            0x1 => ReadRequest,
            0x2 => ReadResponse,
            0x3 => Send,
            0x4 => SendInvalidate,
            0x5 => SendSe,
            0x6 => SendSeInvalidate,
            0x7 => Terminate,
            0x8 => ImmediateData,
            0x9 => ImmediateDataSe,
            0xa => AtomicRequest,
            0xb => AtomicResponse,
            _ => return None,
        })
    }

    /// True for the tagged messages (Write, Read Response).
    pub fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The untagged queue the message travels on, `None` for tagged messages.
    pub fn queue(self) -> Option<u32> {
        use Opcode::*;
        match self {
            Write | ReadResponse => None,
            Send | SendInvalidate | SendSe | SendSeInvalidate | ImmediateData | ImmediateDataSe => {
                Some(qn::SEND)
            }
            ReadRequest | AtomicRequest => Some(qn::READ_REQ),
            Terminate => Some(qn::TERMINATE),
            AtomicResponse => Some(qn::ATOMIC_RESP),
        }
    }

    /// RDMAP header bytes after the DDP header, `None` when the message is variable (Terminate).
    pub fn extra_len(self) -> Option<usize> {
        match self {
            Opcode::ReadRequest => Some(READ_REQ_LEN),
            Opcode::AtomicRequest => Some(ATOMIC_REQ_LEN),
            Opcode::AtomicResponse => Some(ATOMIC_RESP_LEN),
            Opcode::ImmediateData | Opcode::ImmediateDataSe => Some(IMM_LEN),
            Opcode::Terminate => None,
            _ => Some(0),
        }
    }

    /// The RDMAP control byte for this opcode.
    pub fn ctrl(self) -> u8 {
        RDMAP_VERSION << 6 | self as u8
    }
}

/// Read Request fields (RFC 5040 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// Data sink STag (requester's buffer).
    pub sink_stag: Stag,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// RDMA Read message size.
    pub size: u32,
    /// Data source STag (responder's buffer).
    pub src_stag: Stag,
    /// Data source tagged offset.
    pub src_to: u64,
}

/// RFC 7306 Atomic Operation Codes (the low 4 bits of the first word of the Atomic Request
/// header; IANA "RDMAP Atomic Operation Codes"). Chelsio's `enum fw_ri_atomic_op` has the same
/// values (FETCHADD 0, SWAP 1, CMPSWAP 2) and its atomic WR carries the header fields in our
/// order; Wireshark names 0 FetchAdd and 2 CmpSwap.
pub mod aopcode {
    /// FetchAdd.
    pub const FETCH_ADD: u8 = 0x0;
    /// Swap.
    pub const SWAP: u8 = 0x1;
    /// CompareSwap.
    pub const CMP_SWAP: u8 = 0x2;
}

/// Atomic Request fields (RFC 7306 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicRequest {
    /// AOpCode ([`aopcode`]).
    pub aopcode: u8,
    /// Request identifier, echoed in the response.
    pub req_id: u32,
    /// Remote STag.
    pub stag: Stag,
    /// Remote tagged offset (8-byte aligned).
    pub to: u64,
    /// Add or swap data.
    pub add_swap: u64,
    /// Add or swap mask.
    pub add_swap_mask: u64,
    /// Compare data.
    pub compare: u64,
    /// Compare mask.
    pub compare_mask: u64,
}

/// Atomic Response fields (RFC 7306 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicResponse {
    /// Original request identifier.
    pub req_id: u32,
    /// Original remote data value.
    pub orig: u64,
}

/// The RDMAP part of a message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmapPart {
    /// No RDMAP fields beyond the control byte (Write, Read Response, Sends).
    None,
    /// Read Request.
    ReadRequest(ReadRequest),
    /// Atomic Request.
    AtomicRequest(AtomicRequest),
    /// Atomic Response.
    AtomicResponse(AtomicResponse),
    /// Immediate Data.
    Immediate(u64),
    /// Terminate.
    Terminate(TerminateHdr),
}

/// Why a segment header was refused; each maps onto a TERMINATE triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer bytes than the header needs (the ULPDU is shorter than its header).
    Truncated,
    /// DDP version not 1 (tagged or untagged by the T flag).
    DdpVersion {
        /// The T flag of the offending segment.
        tagged: bool,
    },
    /// RDMAP version not 1.
    RdmapVersion,
    /// Reserved opcode, or an opcode on the wrong buffer model.
    Opcode,
}

impl From<HeaderError> for TermCode {
    fn from(e: HeaderError) -> TermCode {
        match e {
            // A ULPDU shorter than its DDP/RDMAP header: siw reports an MPA length mismatch;
            // we report a DDP local catastrophic error (RFC 5041 §7.2 etype 0).
            HeaderError::Truncated => DdpError::LocalCatastrophic.into(),
            HeaderError::DdpVersion { tagged: true } => DdpError::TaggedInvalidVersion.into(),
            HeaderError::DdpVersion { tagged: false } => DdpError::UntaggedInvalidVersion.into(),
            HeaderError::RdmapVersion => RdmapError::InvalidVersion.into(),
            HeaderError::Opcode => RdmapError::UnexpectedOpcode.into(),
        }
    }
}

/// Validate the first two bytes of a segment and return the header length, or `Ok(None)`
/// when the header is as long as the ULPDU (Terminate). Order of checks: DDP version, RDMAP
/// version, opcode (RFC 5041 §7.1 then RFC 5040 §7.1).
pub fn header_len(ctrl: u8, ulp_ctrl: u8) -> Result<Option<usize>, HeaderError> {
    let op = classify(ctrl, ulp_ctrl)?;
    Ok(op.extra_len().map(|x| ddp::header_len(ctrl) + x))
}

/// The checks of [`header_len`], returning the opcode.
#[inline]
pub(crate) fn classify(ctrl: u8, ulp_ctrl: u8) -> Result<Opcode, HeaderError> {
    let tagged = ctrl & ddp::FLAG_TAGGED != 0;
    if ctrl & ddp::DV_MASK != ddp::DDP_VERSION {
        return Err(HeaderError::DdpVersion { tagged });
    }
    if ulp_ctrl >> 6 != RDMAP_VERSION {
        return Err(HeaderError::RdmapVersion);
    }
    let op = Opcode::from_u8(ulp_ctrl & 0x0f).ok_or(HeaderError::Opcode)?;
    if op.is_tagged() != tagged {
        return Err(HeaderError::Opcode);
    }
    Ok(op)
}

/// The DDP header (RFC 5041 §4.2, §4.3) at the start of `b`, whose control bytes passed
/// [`classify`]: one length check, then fixed offsets.
#[inline]
fn parse_ddp(b: &[u8]) -> Result<ddp::Repr, HeaderError> {
    let (ctrl, buf) = if let Some(h) = b.first_chunk::<{ ddp::UNTAGGED_HDR_LEN }>()
        && h[0] & ddp::FLAG_TAGGED == 0
    {
        let [
            _,
            _,
            u0,
            u1,
            u2,
            u3,
            q0,
            q1,
            q2,
            q3,
            n0,
            n1,
            n2,
            n3,
            m0,
            m1,
            m2,
            m3,
        ] = *h;
        let buf = DdpBuf::Untagged {
            ulp_word: u32::from_be_bytes([u0, u1, u2, u3]),
            qn: u32::from_be_bytes([q0, q1, q2, q3]),
            msn: u32::from_be_bytes([n0, n1, n2, n3]),
            mo: u32::from_be_bytes([m0, m1, m2, m3]),
        };
        (h[0], buf)
    } else if let Some(h) = b.first_chunk::<{ ddp::TAGGED_HDR_LEN }>()
        && h[0] & ddp::FLAG_TAGGED != 0
    {
        let [_, _, s0, s1, s2, s3, t @ ..] = *h;
        let buf = DdpBuf::Tagged {
            stag: Stag(u32::from_be_bytes([s0, s1, s2, s3])),
            to: u64::from_be_bytes(t),
        };
        (h[0], buf)
    } else {
        return Err(HeaderError::Truncated);
    };
    Ok(ddp::Repr {
        last: ctrl & ddp::FLAG_LAST != 0,
        ulp_ctrl: b.get(1).copied().unwrap_or(0),
        buf,
    })
}

fn be32(b: &[u8], at: usize) -> Result<u32, HeaderError> {
    let s = b.get(at..at + 4).ok_or(HeaderError::Truncated)?;
    Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be64(b: &[u8], at: usize) -> Result<u64, HeaderError> {
    let s = b.get(at..at + 8).ok_or(HeaderError::Truncated)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_be_bytes(a))
}

/// A whole DDP/RDMAP segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// RDMAP opcode.
    pub opcode: Opcode,
    /// DDP header (its `ulp_ctrl` is the RDMAP control byte).
    pub ddp: ddp::Repr,
    /// RDMAP fields after the DDP header.
    pub rdmap: RdmapPart,
}

impl Header {
    /// Parse the header at the start of `b` (a ULPDU, or at least its header). For a
    /// Terminate the whole of `b` is the Terminate header.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Header, HeaderError> {
        let &[c0, c1, ..] = b else {
            return Err(HeaderError::Truncated);
        };
        let opcode = classify(c0, c1)?;
        let d = parse_ddp(b)?;
        if matches!(opcode, Opcode::Write | Opcode::ReadResponse) {
            // Tagged (the data path): no RDMAP fields after the DDP header.
            return Ok(Header {
                opcode,
                ddp: d,
                rdmap: RdmapPart::None,
            });
        }
        Self::parse_rdmap(b, opcode, d)
    }

    /// The RDMAP part of an untagged message (RFC 5040 §4.4-§4.8, RFC 7306 §4).
    #[inline(never)]
    fn parse_rdmap(b: &[u8], opcode: Opcode, d: ddp::Repr) -> Result<Header, HeaderError> {
        let o = d.buffer_len();
        let rdmap = match opcode {
            Opcode::ReadRequest => RdmapPart::ReadRequest(ReadRequest {
                sink_stag: Stag(be32(b, o)?),
                sink_to: be64(b, o + 4)?,
                size: be32(b, o + 12)?,
                src_stag: Stag(be32(b, o + 16)?),
                src_to: be64(b, o + 20)?,
            }),
            Opcode::AtomicRequest => RdmapPart::AtomicRequest(AtomicRequest {
                aopcode: (be32(b, o)? & 0xf) as u8,
                req_id: be32(b, o + 4)?,
                stag: Stag(be32(b, o + 8)?),
                to: be64(b, o + 12)?,
                add_swap: be64(b, o + 20)?,
                add_swap_mask: be64(b, o + 28)?,
                compare: be64(b, o + 36)?,
                compare_mask: be64(b, o + 44)?,
            }),
            Opcode::AtomicResponse => RdmapPart::AtomicResponse(AtomicResponse {
                req_id: be32(b, o)?,
                orig: be64(b, o + 4)?,
            }),
            Opcode::ImmediateData | Opcode::ImmediateDataSe => RdmapPart::Immediate(be64(b, o)?),
            Opcode::Terminate => {
                let rest = b.get(o..).ok_or(HeaderError::Truncated)?;
                RdmapPart::Terminate(
                    TerminateHdr::parse(rest, Default::default())
                        .map_err(|_| HeaderError::Truncated)?,
                )
            }
            _ => RdmapPart::None,
        };
        Ok(Header {
            opcode,
            ddp: d,
            rdmap,
        })
    }

    /// Length of the header on the wire.
    pub fn buffer_len(&self) -> usize {
        self.ddp.buffer_len()
            + match &self.rdmap {
                RdmapPart::Terminate(t) => t.buffer_len(),
                _ => self.opcode.extra_len().unwrap_or(0),
            }
    }

    /// Write the header into `out[..self.buffer_len()]`; returns that length.
    pub fn emit(&self, out: &mut [u8]) -> usize {
        let mut d = self.ddp;
        d.ulp_ctrl = self.opcode.ctrl();
        d.emit(&mut ddp::Packet::new_unchecked(&mut *out));
        let o = d.buffer_len();
        let mut put = |at: usize, v: &[u8]| out[o + at..o + at + v.len()].copy_from_slice(v);
        match &self.rdmap {
            RdmapPart::None => {}
            RdmapPart::ReadRequest(r) => {
                put(0, &r.sink_stag.0.to_be_bytes());
                put(4, &r.sink_to.to_be_bytes());
                put(12, &r.size.to_be_bytes());
                put(16, &r.src_stag.0.to_be_bytes());
                put(20, &r.src_to.to_be_bytes());
            }
            RdmapPart::AtomicRequest(a) => {
                put(0, &u32::from(a.aopcode & 0xf).to_be_bytes());
                put(4, &a.req_id.to_be_bytes());
                put(8, &a.stag.0.to_be_bytes());
                put(12, &a.to.to_be_bytes());
                put(20, &a.add_swap.to_be_bytes());
                put(28, &a.add_swap_mask.to_be_bytes());
                put(36, &a.compare.to_be_bytes());
                put(44, &a.compare_mask.to_be_bytes());
            }
            RdmapPart::AtomicResponse(a) => {
                put(0, &a.req_id.to_be_bytes());
                put(4, &a.orig.to_be_bytes());
            }
            RdmapPart::Immediate(v) => put(0, &v.to_be_bytes()),
            RdmapPart::Terminate(t) => {
                t.emit(&mut out[o..]);
            }
        }
        self.buffer_len()
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RDMAP {:?} | {}", self.opcode, self.ddp)?;
        match &self.rdmap {
            RdmapPart::None => Ok(()),
            RdmapPart::ReadRequest(r) => write!(
                f,
                " | sink={:#010x}@{:#x} size={} src={:#010x}@{:#x}",
                r.sink_stag.0, r.sink_to, r.size, r.src_stag.0, r.src_to
            ),
            RdmapPart::AtomicRequest(a) => write!(
                f,
                " | aop={} id={} stag={:#010x}@{:#x} data={:#x} cmp={:#x}",
                a.aopcode, a.req_id, a.stag.0, a.to, a.add_swap, a.compare
            ),
            RdmapPart::AtomicResponse(a) => write!(f, " | id={} orig={:#x}", a.req_id, a.orig),
            RdmapPart::Immediate(v) => write!(f, " | imm={v:#x}"),
            RdmapPart::Terminate(t) => write!(f, " | {t}"),
        }
    }
}

/// Convenience: the untagged DDP part of a header.
pub fn untagged(last: bool, qn: u32, msn: u32, mo: u32, ulp_word: u32) -> ddp::Repr {
    ddp::Repr {
        last,
        ulp_ctrl: 0,
        buf: DdpBuf::Untagged {
            ulp_word,
            qn,
            msn,
            mo,
        },
    }
}

/// Convenience: the tagged DDP part of a header.
pub fn tagged(last: bool, stag: Stag, to: u64) -> ddp::Repr {
    ddp::Repr {
        last,
        ulp_ctrl: 0,
        buf: DdpBuf::Tagged { stag, to },
    }
}
