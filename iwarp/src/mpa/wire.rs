//! MPA Request/Reply/Reject frames (RFC 5044 §7.1) and the RFC 6581 enhanced IRD/ORD words.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +         Key (16 octets): "MPA ID Req Frame" or                +
//! |                          "MPA ID Rep Frame"                   |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |M|C|R|E|  Res  |     Rev       |          PD_Length            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ~              Private Data (PD_Length octets)                  ~
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! M: markers wanted by the sender's receiver; C: CRC wanted; R: reject (Reply only);
//! E (0x10): RFC 6581 enhanced connection setup, in which case the private data starts with
//! (RFC 6581 §9.1):
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |P|S|            IRD            |W|R|            ORD            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! P (0x8000 of the IRD word): peer-to-peer mode; S (0x4000): zero-length Send RTR;
//! W (0x8000 of the ORD word): zero-length RDMA Write RTR; R (0x4000): zero-length RDMA Read
//! RTR. IRD/ORD are 14-bit values. Linux siw uses exactly these masks (`MPA_V2_*`), and the
//! siw p2p initiator's `8001c001` (P, IRD 1, W+R, ORD 1) decodes accordingly.
//!
//! Wire contract (as smoltcp `wire`): after [`Packet::new_checked`] no accessor panics;
//! [`Repr::emit`] never panics on a buffer of at least [`Repr::buffer_len`] octets.

use core::fmt;

/// Key of an MPA Request frame.
pub const KEY_REQ: &[u8; 16] = b"MPA ID Req Frame";
/// Key of an MPA Reply (and Reject) frame.
pub const KEY_REP: &[u8; 16] = b"MPA ID Rep Frame";
/// Length of the fixed part (key, flags, revision, PD_Length).
pub const HEADER_LEN: usize = 20;
/// Largest private data RFC 5044 §7.1 allows.
pub const MAX_PD_LEN: usize = 512;
/// Largest private data Linux siw accepts (`RDMA_MAX_PRIVATE_DATA`, IRD/ORD included); larger
/// gets a reset (`siw-peer/README.md` §5.7).
pub const SIW_MAX_PD_LEN: usize = 256;
/// Size of the RFC 6581 IRD/ORD words.
pub const IRD_ORD_LEN: usize = 4;

/// Flag bits of octet 16.
pub mod flags {
    /// M: the sender wants markers on the FPDUs it receives (RFC 5044 §7.1).
    pub const MARKERS: u8 = 0x80;
    /// C: the sender wants CRC (RFC 5044 §7.1).
    pub const CRC: u8 = 0x40;
    /// R: the Reply rejects the connection (RFC 5044 §7.1).
    pub const REJECT: u8 = 0x20;
    /// Enhanced connection setup: IRD/ORD words lead the private data (RFC 6581 §9).
    pub const ENHANCED: u8 = 0x10;
    /// siw's GSO experiment flag (never sent by stock siw; ignored).
    pub const GSO_EXP: u8 = 0x08;
}

mod field {
    use core::ops::Range;
    pub(super) const KEY: Range<usize> = 0..16;
    pub(super) const FLAGS: usize = 16;
    pub(super) const REV: usize = 17;
    pub(super) const PD_LEN: Range<usize> = 18..20;
}

/// Errors from parsing an MPA Request/Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer octets than the header or the announced private data.
    Truncated,
    /// The key is neither the Request nor the Reply key.
    BadKey,
    /// PD_Length above the RFC 5044 limit of 512.
    PdTooLong(u16),
    /// Enhanced flag set with fewer than 4 octets of private data.
    MissingIrdOrd,
    /// A buffer given to `emit` is too small or the private data too long to encode.
    BufferTooSmall,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("truncated MPA request/reply"),
            WireError::BadKey => f.write_str("bad MPA key"),
            WireError::PdTooLong(n) => write!(f, "MPA private data length {n} > 512"),
            WireError::MissingIrdOrd => f.write_str("enhanced MPA frame without IRD/ORD"),
            WireError::BufferTooSmall => f.write_str("buffer too small for MPA frame"),
        }
    }
}

impl std::error::Error for WireError {}

/// Request or Reply (a Reject is a Reply with R set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// "MPA ID Req Frame".
    Request,
    /// "MPA ID Rep Frame".
    Reply,
}

/// A checked view of an MPA Request/Reply frame.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checks (for emitting into a buffer of the right size).
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap untrusted bytes: checks the header and the private data length.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// Check that the header and all announced private data are present and within limits.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        let Some(pd) = b.get(field::PD_LEN) else {
            return Err(WireError::Truncated);
        };
        let pd_len = u16::from_be_bytes([pd[0], pd[1]]);
        if usize::from(pd_len) > MAX_PD_LEN {
            return Err(WireError::PdTooLong(pd_len));
        }
        if b.len() < HEADER_LEN + usize::from(pd_len) {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Request or Reply, from the key; `None` for an unknown key.
    pub fn kind(&self) -> Option<FrameKind> {
        match self.buffer.as_ref().get(field::KEY) {
            Some(k) if k == KEY_REQ => Some(FrameKind::Request),
            Some(k) if k == KEY_REP => Some(FrameKind::Reply),
            _ => None,
        }
    }

    /// The flags octet.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref().get(field::FLAGS).copied().unwrap_or(0)
    }

    /// M bit.
    pub fn markers(&self) -> bool {
        self.flags() & flags::MARKERS != 0
    }

    /// C bit.
    pub fn crc(&self) -> bool {
        self.flags() & flags::CRC != 0
    }

    /// R bit.
    pub fn reject(&self) -> bool {
        self.flags() & flags::REJECT != 0
    }

    /// RFC 6581 enhanced bit.
    pub fn enhanced(&self) -> bool {
        self.flags() & flags::ENHANCED != 0
    }

    /// Revision octet.
    pub fn revision(&self) -> u8 {
        self.buffer.as_ref().get(field::REV).copied().unwrap_or(0)
    }

    /// PD_Length.
    pub fn pd_len(&self) -> u16 {
        match self.buffer.as_ref().get(field::PD_LEN) {
            Some(&[a, b]) => u16::from_be_bytes([a, b]),
            _ => 0,
        }
    }

    /// Private data (empty if truncated; use after `check_len`).
    pub fn private_data(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.pd_len());
        self.buffer.as_ref().get(HEADER_LEN..end).unwrap_or(&[])
    }

    /// Total frame length (header + private data).
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + usize::from(self.pd_len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Write the key for `kind`.
    pub fn set_kind(&mut self, kind: FrameKind) {
        let key = match kind {
            FrameKind::Request => KEY_REQ,
            FrameKind::Reply => KEY_REP,
        };
        if let Some(k) = self.buffer.as_mut().get_mut(field::KEY) {
            k.copy_from_slice(key);
        }
    }

    /// Write the flags octet.
    pub fn set_flags(&mut self, v: u8) {
        if let Some(f) = self.buffer.as_mut().get_mut(field::FLAGS) {
            *f = v;
        }
    }

    /// Write the revision.
    pub fn set_revision(&mut self, v: u8) {
        if let Some(f) = self.buffer.as_mut().get_mut(field::REV) {
            *f = v;
        }
    }

    /// Write PD_Length.
    pub fn set_pd_len(&mut self, v: u16) {
        if let Some(f) = self.buffer.as_mut().get_mut(field::PD_LEN) {
            f.copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Private data area (as long as PD_Length says, clipped to the buffer).
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.pd_len());
        let b = self.buffer.as_mut();
        let end = end.min(b.len());
        b.get_mut(HEADER_LEN.min(end)..end).unwrap_or(&mut [])
    }
}

/// Ready-to-receive message types of RFC 6581 §5 (peer-to-peer mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RtrKind {
    /// Zero-length RDMA Write (siw's first choice).
    Write,
    /// Zero-length RDMA Read Request.
    Read,
    /// Zero-length Send.
    Send,
}

/// The RFC 6581 §9.1 IRD/ORD words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IrdOrd {
    /// Inbound RDMA Read queue depth (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits).
    pub ord: u16,
    /// P: peer-to-peer mode (an RTR message follows the Reply).
    pub p2p: bool,
    /// S: zero-length Send is acceptable as RTR.
    pub rtr_send: bool,
    /// W: zero-length RDMA Write is acceptable as RTR.
    pub rtr_write: bool,
    /// R: zero-length RDMA Read is acceptable as RTR.
    pub rtr_read: bool,
}

impl IrdOrd {
    /// Mask of the 14-bit IRD/ORD values.
    pub const VALUE_MASK: u16 = 0x3fff;
    const P2P: u16 = 0x8000;
    const SEND: u16 = 0x4000;
    const WRITE: u16 = 0x8000;
    const READ: u16 = 0x4000;

    /// Decode the 4 octets.
    pub fn parse(b: [u8; 4]) -> Self {
        let ird = u16::from_be_bytes([b[0], b[1]]);
        let ord = u16::from_be_bytes([b[2], b[3]]);
        IrdOrd {
            ird: ird & Self::VALUE_MASK,
            ord: ord & Self::VALUE_MASK,
            p2p: ird & Self::P2P != 0,
            rtr_send: ird & Self::SEND != 0,
            rtr_write: ord & Self::WRITE != 0,
            rtr_read: ord & Self::READ != 0,
        }
    }

    /// Encode into 4 octets (values above 14 bits are clipped to 0x3fff).
    pub fn to_bytes(&self) -> [u8; 4] {
        let mut ird = self.ird.min(Self::VALUE_MASK);
        let mut ord = self.ord.min(Self::VALUE_MASK);
        if self.p2p {
            ird |= Self::P2P;
        }
        if self.rtr_send {
            ird |= Self::SEND;
        }
        if self.rtr_write {
            ord |= Self::WRITE;
        }
        if self.rtr_read {
            ord |= Self::READ;
        }
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        [a, b, c, d]
    }

    /// Whether `kind` is among the offered RTR types.
    pub fn offers(&self, kind: RtrKind) -> bool {
        match kind {
            RtrKind::Write => self.rtr_write,
            RtrKind::Read => self.rtr_read,
            RtrKind::Send => self.rtr_send,
        }
    }

    /// Set exactly the RTR bit for `kind` (clearing the others).
    pub fn with_only_rtr(mut self, kind: Option<RtrKind>) -> Self {
        self.rtr_write = kind == Some(RtrKind::Write);
        self.rtr_read = kind == Some(RtrKind::Read);
        self.rtr_send = kind == Some(RtrKind::Send);
        self
    }
}

/// A validated MPA Request/Reply/Reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// Request or Reply.
    pub kind: FrameKind,
    /// M bit.
    pub markers: bool,
    /// C bit.
    pub crc: bool,
    /// R bit (meaningful in a Reply).
    pub reject: bool,
    /// Revision (1 = RFC 5044, 2 = RFC 6581).
    pub revision: u8,
    /// RFC 6581 IRD/ORD words, present iff the enhanced bit is set on a revision ≥ 2 frame.
    pub ird_ord: Option<IrdOrd>,
    /// The ULP's private data (after the IRD/ORD words, if any).
    pub ulp_data: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parse a packet view. The enhanced bit on a revision 1 frame is ignored (RFC 6581
    /// defines it for revision 2 only) and its private data is all ULP data.
    pub fn parse(p: &Packet<&'a [u8]>) -> Result<Self, WireError> {
        Self::parse_bytes(p.buffer).map(|(r, _)| r)
    }

    /// Parse untrusted bytes that start with an MPA frame; returns the frame and its length
    /// (bytes after it, e.g. FPDUs, are not looked at).
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<(Self, usize), WireError> {
        let p = Packet::new_checked(bytes)?;
        let len = p.frame_len();
        let kind = p.kind().ok_or(WireError::BadKey)?;
        let pd = bytes.get(HEADER_LEN..len).ok_or(WireError::Truncated)?;
        let flags = p.flags();
        let rev = p.revision();
        let (ird_ord, ulp_data) = if flags & flags::ENHANCED != 0 && rev >= 2 {
            match pd.split_first_chunk::<4>() {
                Some((w, rest)) => (Some(IrdOrd::parse(*w)), rest),
                None => return Err(WireError::MissingIrdOrd),
            }
        } else {
            (None, pd)
        };
        let repr = Repr {
            kind,
            markers: flags & flags::MARKERS != 0,
            crc: flags & flags::CRC != 0,
            reject: flags & flags::REJECT != 0,
            revision: rev,
            ird_ord,
            ulp_data,
        };
        Ok((repr, len))
    }

    /// PD_Length of the emitted frame.
    pub fn pd_len(&self) -> usize {
        self.ulp_data.len()
            + if self.ird_ord.is_some() {
                IRD_ORD_LEN
            } else {
                0
            }
    }

    /// Octets `emit` writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.pd_len()
    }

    /// Write the frame into `buf` (at least `buffer_len()` octets); returns the length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        let pd_len = u16::try_from(self.pd_len()).map_err(|_| WireError::BufferTooSmall)?;
        let Some(out) = buf.get_mut(..len) else {
            return Err(WireError::BufferTooSmall);
        };
        let mut p = Packet::new_unchecked(out);
        p.set_kind(self.kind);
        let mut f = 0;
        if self.markers {
            f |= flags::MARKERS;
        }
        if self.crc {
            f |= flags::CRC;
        }
        if self.reject {
            f |= flags::REJECT;
        }
        if self.ird_ord.is_some() {
            f |= flags::ENHANCED;
        }
        p.set_flags(f);
        p.set_revision(self.revision);
        p.set_pd_len(pd_len);
        let pd = p.private_data_mut();
        let ulp_at = match self.ird_ord {
            Some(io) => {
                if let Some(w) = pd.get_mut(..IRD_ORD_LEN) {
                    w.copy_from_slice(&io.to_bytes());
                }
                IRD_ORD_LEN
            }
            None => 0,
        };
        if let Some(d) = pd.get_mut(ulp_at..) {
            d.copy_from_slice(self.ulp_data);
        }
        Ok(len)
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match (self.kind, self.reject) {
            (FrameKind::Request, _) => "MPA Request",
            (FrameKind::Reply, false) => "MPA Reply",
            (FrameKind::Reply, true) => "MPA Reject",
        };
        write!(f, "{kind} rev {}", self.revision)?;
        if self.markers {
            f.write_str(" M")?;
        }
        if self.crc {
            f.write_str(" C")?;
        }
        if let Some(io) = self.ird_ord {
            write!(f, " ird {} ord {}", io.ird, io.ord)?;
            if io.p2p {
                f.write_str(" p2p")?;
            }
            for (on, n) in [(io.rtr_write, "W"), (io.rtr_read, "R"), (io.rtr_send, "S")] {
                if on {
                    write!(f, " rtr:{n}")?;
                }
            }
        }
        write!(f, " pd {}", self.ulp_data.len())
    }
}
