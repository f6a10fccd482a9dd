//! DDP segment header (RFC 5041 §4).
//!
//! Wire contract (smoltcp `wire` style): [`Packet::new_checked`] validates the length so the
//! accessors never panic; [`Repr::parse`] validates the fields of untrusted bytes and never
//! panics; [`Repr::emit`] never panics on a buffer of at least [`Repr::buffer_len`] bytes.
//!
//! Tagged buffer model header (RFC 5041 §4.2), 14 bytes:
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |T|L| Resrv | DV|   RsvdULP     |              STag             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  STag (cont.) |                                               |
//! +-+-+-+-+-+-+-+-+               TO                              +
//! |                                                               |
//! +               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               |
//! +-+-+-+-+-+-+-+-+
//! ```
//! Untagged buffer model header (RFC 5041 §4.3), 18 bytes:
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |T|L| Resrv | DV|              RsvdULP[0:23]                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  RsvdULP[24:39] |               QN                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  QN (cont.)     |               MSN                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  MSN (cont.)    |               MO                            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  MO (cont.)     |
//! +-+-+-+-+-+-+-+-+-+
//! ```
//! RDMAP uses the first RsvdULP byte as its control field and, for untagged messages, the next
//! four bytes as the Invalidate STag (RFC 5040 §4.1).

use core::fmt;

use crate::error::WireError;
use crate::stag::Stag;

/// Byte ranges of the header fields.
mod field {
    pub(super) const CTRL: usize = 0;
    pub(super) const ULP_CTRL: usize = 1;
    pub(super) const STAG: core::ops::Range<usize> = 2..6;
    pub(super) const TO: core::ops::Range<usize> = 6..14;
    pub(super) const ULP_WORD: core::ops::Range<usize> = 2..6;
    pub(super) const QN: core::ops::Range<usize> = 6..10;
    pub(super) const MSN: core::ops::Range<usize> = 10..14;
    pub(super) const MO: core::ops::Range<usize> = 14..18;
}

/// Tagged flag of the control byte.
pub const FLAG_TAGGED: u8 = 0x80;
/// Last flag of the control byte.
pub const FLAG_LAST: u8 = 0x40;
/// DDP version field mask.
pub const DV_MASK: u8 = 0x03;
/// The only DDP version (RFC 5041 §4.1).
pub const DDP_VERSION: u8 = 1;
/// Tagged header length.
pub const TAGGED_HDR_LEN: usize = 14;
/// Untagged header length.
pub const UNTAGGED_HDR_LEN: usize = 18;

/// The header length implied by a control byte.
pub fn header_len(ctrl: u8) -> usize {
    if ctrl & FLAG_TAGGED != 0 {
        TAGGED_HDR_LEN
    } else {
        UNTAGGED_HDR_LEN
    }
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A checked view of a DDP header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking (for emission into a buffer known to be long enough).
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and check the length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The buffer holds the whole header implied by its T flag.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        match b.first() {
            None => Err(WireError::Truncated),
            Some(&c) if b.len() < header_len(c) => Err(WireError::Truncated),
            Some(_) => Ok(()),
        }
    }

    /// Control byte.
    pub fn ctrl(&self) -> u8 {
        self.buffer.as_ref()[field::CTRL]
    }
    /// T flag.
    pub fn tagged(&self) -> bool {
        self.ctrl() & FLAG_TAGGED != 0
    }
    /// L flag.
    pub fn last(&self) -> bool {
        self.ctrl() & FLAG_LAST != 0
    }
    /// DDP version.
    pub fn version(&self) -> u8 {
        self.ctrl() & DV_MASK
    }
    /// First RsvdULP byte (the RDMAP control field).
    pub fn ulp_ctrl(&self) -> u8 {
        self.buffer.as_ref()[field::ULP_CTRL]
    }
    /// Tagged: STag.
    pub fn stag(&self) -> Stag {
        Stag(be32(&self.buffer.as_ref()[field::STAG]))
    }
    /// Tagged: TO.
    pub fn to(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::TO])
    }
    /// Untagged: `RsvdULP[8:39]` (RDMAP Invalidate STag).
    pub fn ulp_word(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ULP_WORD])
    }
    /// Untagged: queue number.
    pub fn qn(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::QN])
    }
    /// Untagged: message sequence number.
    pub fn msn(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::MSN])
    }
    /// Untagged: message offset.
    pub fn mo(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::MO])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Set the control byte.
    pub fn set_ctrl(&mut self, v: u8) {
        self.b()[field::CTRL] = v;
    }
    /// Set the first RsvdULP byte.
    pub fn set_ulp_ctrl(&mut self, v: u8) {
        self.b()[field::ULP_CTRL] = v;
    }
    /// Set the STag.
    pub fn set_stag(&mut self, v: Stag) {
        self.b()[field::STAG].copy_from_slice(&v.0.to_be_bytes());
    }
    /// Set the TO.
    pub fn set_to(&mut self, v: u64) {
        self.b()[field::TO].copy_from_slice(&v.to_be_bytes());
    }
    /// Set `RsvdULP[8:39]`.
    pub fn set_ulp_word(&mut self, v: u32) {
        self.b()[field::ULP_WORD].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the QN.
    pub fn set_qn(&mut self, v: u32) {
        self.b()[field::QN].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the MSN.
    pub fn set_msn(&mut self, v: u32) {
        self.b()[field::MSN].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the MO.
    pub fn set_mo(&mut self, v: u32) {
        self.b()[field::MO].copy_from_slice(&v.to_be_bytes());
    }
}

/// Advance the offset field of the DDP header at the start of `hdr` by `by` octets: the TO
/// of a tagged header, the MO of an untagged one (RFC 5041 §4.2, §4.3: every segment of a
/// message carries the offset of its first payload octet, so the segments of one message
/// differ in this field only, and in the L flag of the last). A header too short for its
/// field is left alone.
pub fn advance_offset(hdr: &mut [u8], by: u64) {
    let Some(&ctrl) = hdr.first() else {
        return;
    };
    if ctrl & FLAG_TAGGED != 0 {
        if let Some(f) = hdr.get_mut(field::TO) {
            let to = be64(f).wrapping_add(by);
            f.copy_from_slice(&to.to_be_bytes());
        }
    } else if let Some(f) = hdr.get_mut(field::MO) {
        let mo = be32(f).wrapping_add(by as u32);
        f.copy_from_slice(&mo.to_be_bytes());
    }
}

/// Buffer model part of a DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpBuf {
    /// Tagged buffer model (RFC 5041 §4.2).
    Tagged {
        /// Data sink STag.
        stag: Stag,
        /// Data sink tagged offset.
        to: u64,
    },
    /// Untagged buffer model (RFC 5041 §4.3).
    Untagged {
        /// `RsvdULP[8:39]`: the RDMAP Invalidate STag or zero.
        ulp_word: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number.
        msn: u32,
        /// Message offset.
        mo: u32,
    },
}

/// A validated DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// L flag: last segment of the message.
    pub last: bool,
    /// First RsvdULP byte (RDMAP control field).
    pub ulp_ctrl: u8,
    /// Buffer model and its fields.
    pub buf: DdpBuf,
}

impl Repr {
    /// Parse and validate a header (DV must be 1, RFC 5041 §4.1; reserved bits ignored).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, WireError> {
        p.check_len()?;
        if p.version() != DDP_VERSION {
            return Err(WireError::BadVersion);
        }
        let buf = if p.tagged() {
            DdpBuf::Tagged {
                stag: p.stag(),
                to: p.to(),
            }
        } else {
            DdpBuf::Untagged {
                ulp_word: p.ulp_word(),
                qn: p.qn(),
                msn: p.msn(),
                mo: p.mo(),
            }
        };
        Ok(Repr {
            last: p.last(),
            ulp_ctrl: p.ulp_ctrl(),
            buf,
        })
    }

    /// Header length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self.buf {
            DdpBuf::Tagged { .. } => TAGGED_HDR_LEN,
            DdpBuf::Untagged { .. } => UNTAGGED_HDR_LEN,
        }
    }

    /// Write the header into the first [`Repr::buffer_len`] bytes of `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let mut ctrl = DDP_VERSION;
        if self.last {
            ctrl |= FLAG_LAST;
        }
        match self.buf {
            DdpBuf::Tagged { stag, to } => {
                p.set_ctrl(ctrl | FLAG_TAGGED);
                p.set_stag(stag);
                p.set_to(to);
            }
            DdpBuf::Untagged {
                ulp_word,
                qn,
                msn,
                mo,
            } => {
                p.set_ctrl(ctrl);
                p.set_ulp_word(ulp_word);
                p.set_qn(qn);
                p.set_msn(msn);
                p.set_mo(mo);
            }
        }
        p.set_ulp_ctrl(self.ulp_ctrl);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.buf {
            DdpBuf::Tagged { stag, to } => write!(f, "DDP T stag={:#010x} to={to:#x}", stag.0)?,
            DdpBuf::Untagged {
                ulp_word,
                qn,
                msn,
                mo,
            } => {
                write!(f, "DDP U qn={qn} msn={msn} mo={mo}")?;
                if ulp_word != 0 {
                    write!(f, " ulp={ulp_word:#010x}")?;
                }
            }
        }
        if self.last {
            write!(f, " L")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ULPDU of frame 8 of `cap_rping.txt` (siw Send, 16 data bytes): DDP header part.
    static SEND_HDR: [u8; 18] = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    /// Frame 10 of `cap_rping.txt` (Read Response): tagged header.
    static RRESP_HDR: [u8; 14] = [
        0xc1, 0x42, 0xed, 0x6d, 0x6c, 0x00, 0, 0, 0x56, 0x12, 0xac, 0xa2, 0x0b, 0x20,
    ];

    #[test]
    fn golden_untagged() {
        let r = Repr::parse(&Packet::new_checked(&SEND_HDR[..]).unwrap()).unwrap();
        assert_eq!(r.ulp_ctrl, 0x43);
        assert!(r.last);
        assert_eq!(
            r.buf,
            DdpBuf::Untagged {
                ulp_word: 0,
                qn: 0,
                msn: 1,
                mo: 0
            }
        );
        let mut out = [0u8; 18];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, SEND_HDR);
        assert_eq!(r.to_string(), "DDP U qn=0 msn=1 mo=0 L");
    }

    #[test]
    fn golden_tagged() {
        let r = Repr::parse(&Packet::new_checked(&RRESP_HDR[..]).unwrap()).unwrap();
        assert_eq!(
            r.buf,
            DdpBuf::Tagged {
                stag: Stag(0xed6d6c00),
                to: 0x5612_aca2_0b20
            }
        );
        let mut out = [0u8; 14];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, RRESP_HDR);
    }

    #[test]
    fn truncated_and_version() {
        for n in 0..18 {
            assert_eq!(
                Packet::new_checked(&SEND_HDR[..n]).err(),
                Some(WireError::Truncated)
            );
        }
        for n in 0..14 {
            assert!(Packet::new_checked(&RRESP_HDR[..n]).is_err());
        }
        let mut bad = SEND_HDR;
        bad[0] = 0x42;
        let p = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(WireError::BadVersion));
    }
}
