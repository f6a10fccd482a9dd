//! The Terminate header (RFC 5040 §4.8), sent on untagged QN 2 after the first error.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | Layer | EType |  Error Code   |M|D|R|       Reserved          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   DDP Segment Length (if any) |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! //            Terminated DDP Header (if any): 14 or 18 bytes   //
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! //            Terminated RDMA Header (if any): 28 bytes        //
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! M: the DDP Segment Length is valid; D: the DDP header of the offending segment is included;
//! R: its RDMA header (Read Request) is included.
//!
//! Linux siw (x86) emits the first word through little-endian C bit-fields: Layer in the LOW
//! nibble and EType in the HIGH nibble of byte 0, and M/D/R at 0x01/0x02/0x04 of byte 2
//! (`../shared/siw-peer/README.md` §10). We emit per the RFC and decode both, reporting which.

use core::fmt;

use crate::ddp::wire as ddp;
use crate::error::{Layer, TermCode};

const FLAG_M: u8 = 0x80;
const FLAG_D: u8 = 0x40;
const FLAG_R: u8 = 0x20;
const SIW_FLAG_M: u8 = 0x01;
const SIW_FLAG_D: u8 = 0x02;
const SIW_FLAG_R: u8 = 0x04;
/// Length of the terminated RDMA header (a Read Request header).
pub const RDMA_HDR_LEN: usize = 28;

/// Which encoding of the control word a Terminate used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TermLayout {
    /// RFC 5040 §4.8.
    #[default]
    Rfc,
    /// Linux siw on little-endian hosts (nibbles and flag bits swapped).
    Siw,
}

/// True when the triple is defined by RFC 5040/5041/5044/6581 §7 tables.
fn defined(layer: u8, etype: u8, ecode: u8) -> bool {
    match (layer, etype) {
        (0, 0) => ecode == 0,
        (0, 1) => matches!(ecode, 0..=4 | 9 | 0xff),
        (0, 2) => matches!(ecode, 5..=8 | 0xff),
        (1, 0) => ecode == 0,
        (1, 1) => ecode <= 4,
        (1, 2) => (1..=6).contains(&ecode),
        (2, 0) => (1..=7).contains(&ecode),
        _ => false,
    }
}

/// A decoded Terminate header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateHdr {
    /// Layer nibble as decoded (may be a reserved value in a received one).
    pub layer: u8,
    /// EType nibble.
    pub etype: u8,
    /// Error code.
    pub ecode: u8,
    /// M flag.
    pub m: bool,
    /// D flag.
    pub d: bool,
    /// R flag.
    pub r: bool,
    /// DDP segment length of the offending segment (when M or D).
    pub seg_len: u16,
    /// Terminated DDP header bytes (valid prefix of length `ddp_len`).
    pub ddp_hdr: [u8; ddp::UNTAGGED_HDR_LEN],
    /// Number of valid bytes in `ddp_hdr` (0, 14 or 18).
    pub ddp_len: u8,
    /// Terminated RDMA header (valid when `r`).
    pub rdma_hdr: [u8; RDMA_HDR_LEN],
    /// The layout the control word was read in.
    pub layout: TermLayout,
    /// Both layouts gave a defined triple and the flags did not disambiguate: the layout is
    /// the caller's preference.
    pub ambiguous: bool,
}

/// Terminate decode error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermError {
    /// Shorter than the control word or than the headers its flags announce.
    Truncated,
}

impl TerminateHdr {
    /// A Terminate for `code`, optionally carrying the offending segment's length, DDP header
    /// and RDMA header (RFC 5040 §4.8).
    pub fn new(code: TermCode, seg: Option<(u16, &[u8])>, rdma: Option<&[u8]>) -> TerminateHdr {
        let mut t = TerminateHdr {
            layer: code.layer as u8,
            etype: code.etype,
            ecode: code.ecode,
            m: false,
            d: false,
            r: false,
            seg_len: 0,
            ddp_hdr: [0; ddp::UNTAGGED_HDR_LEN],
            ddp_len: 0,
            rdma_hdr: [0; RDMA_HDR_LEN],
            layout: TermLayout::Rfc,
            ambiguous: false,
        };
        if let Some((len, hdr)) = seg
            && let Some(&c) = hdr.first()
            && hdr.len() >= ddp::header_len(c)
        {
            let n = ddp::header_len(c);
            t.m = true;
            t.d = true;
            t.seg_len = len;
            t.ddp_hdr[..n].copy_from_slice(&hdr[..n]);
            t.ddp_len = n as u8;
        }
        if let Some(r) = rdma
            && t.d
            && r.len() >= RDMA_HDR_LEN
        {
            t.r = true;
            t.rdma_hdr.copy_from_slice(&r[..RDMA_HDR_LEN]);
        }
        t
    }

    /// The reported triple.
    pub fn code(&self) -> TermCode {
        TermCode::from_raw(self.layer, self.etype, self.ecode)
    }

    /// The layer, if defined.
    pub fn layer(&self) -> Option<Layer> {
        Layer::from_nibble(self.layer)
    }

    /// Decode the bytes after the untagged DDP header. `prefer` breaks ties when both layouts
    /// give a defined triple and the flag bits do not tell them apart.
    pub fn parse(b: &[u8], prefer: TermLayout) -> Result<TerminateHdr, TermError> {
        let w = b.get(..4).ok_or(TermError::Truncated)?;
        let (b0, ecode, b2) = (w[0], w[1], w[2]);
        let rfc = defined(b0 >> 4, b0 & 0xf, ecode);
        let siw = defined(b0 & 0xf, b0 >> 4, ecode);
        let rfc_flags = b2 & (FLAG_M | FLAG_D | FLAG_R);
        let siw_flags = b2 & (SIW_FLAG_M | SIW_FLAG_D | SIW_FLAG_R);
        let (layout, ambiguous) = match (rfc, siw) {
            (true, false) => (TermLayout::Rfc, false),
            (false, true) => (TermLayout::Siw, false),
            _ if rfc_flags != 0 && siw_flags == 0 => (TermLayout::Rfc, false),
            _ if siw_flags != 0 && rfc_flags == 0 => (TermLayout::Siw, false),
            _ => (prefer, b0 >> 4 != b0 & 0xf),
        };
        let (layer, etype, m, d, r) = match layout {
            TermLayout::Rfc => (
                b0 >> 4,
                b0 & 0xf,
                b2 & FLAG_M != 0,
                b2 & FLAG_D != 0,
                b2 & FLAG_R != 0,
            ),
            TermLayout::Siw => (
                b0 & 0xf,
                b0 >> 4,
                b2 & SIW_FLAG_M != 0,
                b2 & SIW_FLAG_D != 0,
                b2 & SIW_FLAG_R != 0,
            ),
        };
        let mut t = TerminateHdr {
            layer,
            etype,
            ecode,
            m,
            d,
            r,
            seg_len: 0,
            ddp_hdr: [0; ddp::UNTAGGED_HDR_LEN],
            ddp_len: 0,
            rdma_hdr: [0; RDMA_HDR_LEN],
            layout,
            ambiguous,
        };
        let mut o = 4;
        if m || d {
            let s = b.get(o..o + 2).ok_or(TermError::Truncated)?;
            t.seg_len = u16::from_be_bytes([s[0], s[1]]);
            o += 2;
        }
        if d {
            let c = *b.get(o).ok_or(TermError::Truncated)?;
            let n = ddp::header_len(c);
            let h = b.get(o..o + n).ok_or(TermError::Truncated)?;
            t.ddp_hdr[..n].copy_from_slice(h);
            t.ddp_len = n as u8;
            o += n;
        }
        if r {
            let h = b.get(o..o + RDMA_HDR_LEN).ok_or(TermError::Truncated)?;
            t.rdma_hdr.copy_from_slice(h);
        }
        Ok(t)
    }

    /// Bytes after the untagged DDP header.
    pub fn buffer_len(&self) -> usize {
        let mut n = 4;
        if self.m || self.d {
            n += 2;
        }
        if self.d {
            n += usize::from(self.ddp_len);
        }
        if self.r {
            n += RDMA_HDR_LEN;
        }
        n
    }

    /// Emit in the RFC layout into `out[..self.buffer_len()]`.
    pub fn emit(&self, out: &mut [u8]) -> usize {
        let mut flags = 0;
        if self.m {
            flags |= FLAG_M;
        }
        if self.d {
            flags |= FLAG_D;
        }
        if self.r {
            flags |= FLAG_R;
        }
        out[0] = (self.layer & 0xf) << 4 | (self.etype & 0xf);
        out[1] = self.ecode;
        out[2] = flags;
        out[3] = 0;
        let mut o = 4;
        if self.m || self.d {
            out[o..o + 2].copy_from_slice(&self.seg_len.to_be_bytes());
            o += 2;
        }
        if self.d {
            let n = usize::from(self.ddp_len);
            out[o..o + n].copy_from_slice(&self.ddp_hdr[..n]);
            o += n;
        }
        if self.r {
            out[o..o + RDMA_HDR_LEN].copy_from_slice(&self.rdma_hdr);
            o += RDMA_HDR_LEN;
        }
        o
    }
}

impl fmt::Display for TerminateHdr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TERM {} ({:?}", self.code(), self.layout)?;
        if self.ambiguous {
            write!(f, "?")?;
        }
        write!(f, ")")?;
        for (set, c) in [(self.m, 'M'), (self.d, 'D'), (self.r, 'R')] {
            if set {
                write!(f, " {c}")?;
            }
        }
        if self.m || self.d {
            write!(f, " seglen={}", self.seg_len)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{DdpError, LlpError, RdmapError};

    fn word(w: u32) -> Vec<u8> {
        let mut v = w.to_be_bytes().to_vec();
        v.extend_from_slice(&[0u8; 2 + 18 + 28]);
        v
    }

    /// Codes observed from Linux siw (`siw-peer/README.md` §10), decoded as siw meant them.
    #[test]
    fn siw_table() {
        let rows: &[(u32, TermCode, bool)] = &[
            (0x02020000, LlpError::Crc.into(), false),
            (0x11000300, DdpError::TaggedInvalidStag.into(), false),
            (0x11010300, DdpError::TaggedBaseBounds.into(), false),
            (0x21010300, DdpError::UntaggedInvalidQn.into(), false),
            (0x21030300, DdpError::UntaggedMsnRange.into(), false),
            (0x21020300, DdpError::UntaggedNoBuffer.into(), false),
            (0x21060000, DdpError::UntaggedInvalidVersion.into(), false),
            (0x20070300, RdmapError::CatastrophicStream.into(), false),
            (0x10000700, RdmapError::InvalidStag.into(), false),
            (0x01000300, DdpError::LocalCatastrophic.into(), false),
            (0x21040300, DdpError::UntaggedInvalidMo.into(), false),
            (0x02030000, LlpError::MarkerMismatch.into(), false),
        ];
        for &(w, code, amb) in rows {
            let t = TerminateHdr::parse(&word(w), TermLayout::Rfc).unwrap();
            assert_eq!(t.layout, TermLayout::Siw, "{w:08x}");
            assert_eq!(t.code(), code, "{w:08x}");
            assert_eq!(t.ambiguous, amb, "{w:08x}");
        }
        // 20050000: RDMAP/RemoteOp/version (siw) or LLP/local catastrophic (RFC): ambiguous.
        let t = TerminateHdr::parse(&word(0x20050000), TermLayout::Siw).unwrap();
        assert!(t.ambiguous);
        assert_eq!(t.code(), RdmapError::InvalidVersion.into());
        let t = TerminateHdr::parse(&word(0x20050000), TermLayout::Rfc).unwrap();
        assert_eq!(t.code(), LlpError::LocalCatastrophic.into());
    }

    #[test]
    fn rfc_roundtrip_with_headers() {
        let hdr = [0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        let t = TerminateHdr::new(DdpError::UntaggedInvalidQn.into(), Some((16, &hdr)), None);
        let mut out = [0u8; 64];
        let n = t.emit(&mut out);
        assert_eq!(n, 4 + 2 + 18);
        assert_eq!(&out[..6], &[0x12, 0x01, 0xc0, 0x00, 0x00, 0x10]);
        let back = TerminateHdr::parse(&out[..n], TermLayout::Siw).unwrap();
        assert_eq!(back.layout, TermLayout::Rfc);
        assert_eq!(back, t);
        assert_eq!(back.code(), DdpError::UntaggedInvalidQn.into());
        for k in 0..n {
            assert_eq!(
                TerminateHdr::parse(&out[..k], TermLayout::Rfc),
                Err(TermError::Truncated)
            );
        }
    }
}
