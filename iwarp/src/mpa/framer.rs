//! The FPDU framer: ULPDU in, FPDU out, never larger than the EMSS (RFC 5044 §4, §5, §6).
//!
//! One FPDU per TCP segment: the caller asks [`Framer::max_ulpdu_len`] for the current EMSS,
//! builds a DDP segment no larger, and frames it. RFC 5044 §4.1 wants the FPDU aligned with
//! the segment; siw's breakage against hardware was exactly FPDUs larger than the MSS.
//!
//! Two modes:
//! - copy ([`Framer::frame`]): ULPDU parts are copied into the caller's buffer, markers
//!   inserted where they fall, CRC and zero pad appended;
//! - gather ([`Framer::gather`], markers off only): the framer hands out the 2-octet prefix and
//!   the pad+CRC trailer so the dataplane can send `[prefix + DDP header][payload][trailer]`
//!   without copying the payload.

use core::fmt;

use netcore::crc::Crc32c;

use super::deframer::{CRC_COVERS_MARKERS, crc_to_wire};
use super::{CRC_LEN, LEN_FIELD, MARKER_INTERVAL, MARKER_LEN, is_marker_pos, markers_in, pad_len};

/// How the framer writes the stream; fixed once MPA negotiation is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FramerConfig {
    /// CRC negotiated; when off the CRC field is sent as zero (as siw does).
    pub crc: bool,
    /// Markers negotiated for this direction (the peer asked for them).
    pub markers: bool,
    /// Stream offset of the first octet this framer writes, relative to the marker origin (the
    /// first octet of the first FPDU). Zero for a fresh connection.
    pub stream_pos: u32,
}

/// Why an FPDU could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The ULPDU is longer than 65535 octets.
    UlpduTooLong(usize),
    /// The output buffer is too small; `needed` octets are required.
    BufferTooSmall {
        /// Wire size of the FPDU.
        needed: usize,
    },
    /// Gather mode was asked for while markers are on.
    MarkersOn,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UlpduTooLong(n) => write!(f, "ULPDU of {n} octets exceeds 65535"),
            FrameError::BufferTooSmall { needed } => write!(f, "FPDU needs {needed} octets"),
            FrameError::MarkersOn => f.write_str("gather framing needs markers off"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Largest ULPDU that fits an EMSS of `emss` octets at any stream position.
///
/// With markers off this is exact (`floor4(emss - 4) - 2`, e.g. 1442 for 1448); with markers
/// on it assumes the worst placement of markers.
pub const fn max_ulpdu_len_any_pos(emss: usize, markers: bool) -> usize {
    let t = emss & !3;
    let worst_markers = if markers {
        t.div_ceil(MARKER_INTERVAL as usize)
    } else {
        0
    };
    let non_marker = t.saturating_sub(worst_markers * MARKER_LEN);
    let u = non_marker.saturating_sub(LEN_FIELD + CRC_LEN);
    if u > u16::MAX as usize {
        u16::MAX as usize
    } else {
        u
    }
}

/// ULPDU -> FPDU framer (see the module docs).
#[derive(Debug, Clone)]
pub struct Framer {
    cfg: FramerConfig,
    /// Stream offset of the next octet written, relative to the marker origin.
    pos: u32,
}

/// Output cursor that inserts markers and feeds the CRC.
struct Writer<'o> {
    out: &'o mut [u8],
    at: usize,
    pos: u32,
    markers: bool,
    /// Stream offset of this FPDU's ULPDU_LENGTH field, once written.
    fpdu_start: Option<u32>,
    crc: Crc32c,
    /// Whether the CRC is computed at all (CRC negotiated).
    crc_on: bool,
}

impl Writer<'_> {
    fn marker_if_due(&mut self) {
        if !self.markers || !is_marker_pos(self.pos) {
            return;
        }
        // RFC 5044 §5: FPDUPTR = octets from the FPDU's ULPDU_LENGTH field to the marker; a
        // marker just before the FPDU points at it (0).
        let ptr = match self.fpdu_start {
            Some(s) => self.pos.wrapping_sub(s) as u16,
            None => 0,
        };
        let [hi, lo] = ptr.to_be_bytes();
        let m = [0, 0, hi, lo];
        if let Some(dst) = self.out.get_mut(self.at..self.at + MARKER_LEN) {
            dst.copy_from_slice(&m);
        }
        // Leading and inner markers alike are covered (see `CRC_COVERS_MARKERS`).
        if CRC_COVERS_MARKERS && self.crc_on {
            self.crc.update(&m);
        }
        self.at += MARKER_LEN;
        self.pos = self.pos.wrapping_add(MARKER_LEN as u32);
    }

    fn put(&mut self, mut bytes: &[u8], crc: bool) {
        while !bytes.is_empty() {
            self.marker_if_due();
            let room = if self.markers {
                (MARKER_INTERVAL - self.pos % MARKER_INTERVAL) as usize
            } else {
                usize::MAX
            };
            let take = bytes.len().min(room);
            let (now, later) = bytes.split_at(take);
            if let Some(dst) = self.out.get_mut(self.at..self.at + take) {
                dst.copy_from_slice(now);
            }
            if crc && self.crc_on {
                self.crc.update(now);
            }
            self.at += take;
            self.pos = self.pos.wrapping_add(take as u32);
            bytes = later;
        }
    }
}

impl Framer {
    /// A framer positioned at `cfg.stream_pos`.
    pub fn new(cfg: FramerConfig) -> Self {
        Framer {
            cfg,
            pos: cfg.stream_pos,
        }
    }

    /// The configuration this framer runs with.
    pub fn config(&self) -> &FramerConfig {
        &self.cfg
    }

    /// Stream offset (relative to the marker origin) of the next octet to be written.
    pub fn stream_pos(&self) -> u32 {
        self.pos
    }

    /// Move the write position (e.g. to rebuild an FPDU for retransmission at its original
    /// offset: markers depend on the position, so the same position gives the same bytes).
    pub fn set_stream_pos(&mut self, pos: u32) {
        self.pos = pos;
    }

    /// Wire length of an FPDU carrying `ulpdu_len` octets, written at the current position.
    pub fn fpdu_len(&self, ulpdu_len: usize) -> usize {
        let base = LEN_FIELD + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN;
        if !self.cfg.markers {
            return base;
        }
        // Each marker pushes the rest of the FPDU 4 octets later and may reveal another
        // marker position; iterate to the fixed point (at most a few rounds).
        let mut n = 0u32;
        loop {
            let total = base + n as usize * MARKER_LEN;
            let m = markers_in(self.pos, u32::try_from(total).unwrap_or(u32::MAX));
            if m == n {
                return total;
            }
            n = m;
        }
    }

    /// Largest ULPDU whose FPDU, written at the current position, fits `emss` octets.
    pub fn max_ulpdu_len(&self, emss: usize) -> usize {
        if !self.cfg.markers {
            return max_ulpdu_len_any_pos(emss, false);
        }
        // An FPDU is a multiple of 4 octets; take the largest such extent T <= emss, remove the
        // markers that start inside [pos, pos + T), the length field and the CRC. What is left
        // is 2 mod 4, so no pad is needed and the FPDU fills T exactly.
        let t = emss & !3;
        let n = markers_in(self.pos, u32::try_from(t).unwrap_or(u32::MAX)) as usize;
        let u = t
            .saturating_sub(n * MARKER_LEN)
            .saturating_sub(LEN_FIELD + CRC_LEN);
        u.min(u16::MAX as usize)
    }

    /// Frame the ULPDU made of `ulpdu_parts` (concatenated) into `out`; returns the FPDU's
    /// wire length. Advances the stream position on success only.
    pub fn frame(&mut self, ulpdu_parts: &[&[u8]], out: &mut [u8]) -> Result<usize, FrameError> {
        let ulpdu_len: usize = ulpdu_parts.iter().map(|p| p.len()).sum();
        let len16 = u16::try_from(ulpdu_len).map_err(|_| FrameError::UlpduTooLong(ulpdu_len))?;
        let needed = self.fpdu_len(ulpdu_len);
        if out.len() < needed {
            return Err(FrameError::BufferTooSmall { needed });
        }
        let mut w = Writer {
            out,
            at: 0,
            pos: self.pos,
            markers: self.cfg.markers,
            fpdu_start: None,
            crc: Crc32c::new(),
            crc_on: self.cfg.crc,
        };
        w.marker_if_due();
        w.fpdu_start = Some(w.pos);
        w.put(&len16.to_be_bytes(), true);
        for p in ulpdu_parts {
            w.put(p, true);
        }
        let pad = [0u8; 3];
        w.put(pad.get(..pad_len(ulpdu_len)).unwrap_or(&[]), true);
        // A marker due right before the CRC is inside the FPDU and covered by the CRC.
        w.marker_if_due();
        let crc = if self.cfg.crc {
            crc_to_wire(w.crc.value())
        } else {
            [0; 4]
        };
        w.put(&crc, false);
        debug_assert_eq!(w.at, needed);
        self.pos = w.pos;
        Ok(w.at)
    }

    /// Start a gather-mode FPDU of `ulpdu_len` octets (markers must be off). The returned
    /// [`GatherFpdu`] gives the 2-octet prefix now and the pad+CRC trailer once every ULPDU
    /// octet was fed to it. Advances the stream position by the FPDU's wire length.
    pub fn gather(&mut self, ulpdu_len: u16) -> Result<GatherFpdu, FrameError> {
        if self.cfg.markers {
            return Err(FrameError::MarkersOn);
        }
        let prefix = ulpdu_len.to_be_bytes();
        let mut crc = Crc32c::new();
        if self.cfg.crc {
            crc.update(&prefix);
        }
        let wire = self.fpdu_len(usize::from(ulpdu_len));
        self.pos = self.pos.wrapping_add(wire as u32);
        Ok(GatherFpdu {
            prefix,
            crc,
            crc_on: self.cfg.crc,
            ulpdu_len,
            fed: 0,
        })
    }
}

impl Framer {
    /// `count` gather-mode FPDUs of `ulpdu_len` octets each whose CRC the sender computes
    /// later over its copy ([`seal_fpdu`]): their ULPDU_LENGTH prefix and their pad plus zero
    /// CRC field (as [`GatherFpdu::trailer_deferred`]). Advances the stream position by their
    /// wire length, as `count` calls of [`Framer::gather`] would.
    pub fn gather_deferred(
        &mut self,
        ulpdu_len: u16,
        count: u32,
    ) -> Result<([u8; 2], Trailer), FrameError> {
        if self.cfg.markers {
            return Err(FrameError::MarkersOn);
        }
        let wire = self.fpdu_len(usize::from(ulpdu_len)) as u32;
        self.pos = self.pos.wrapping_add(wire.wrapping_mul(count));
        let pad = pad_len(usize::from(ulpdu_len));
        let trailer = Trailer {
            bytes: [0u8; 7],
            len: (pad + CRC_LEN) as u8,
        };
        Ok((ulpdu_len.to_be_bytes(), trailer))
    }
}

/// Write the CRC of a whole FPDU of a stream without markers (ULPDU_LENGTH, ULPDU, pad and
/// the 4-octet CRC field, as [`GatherFpdu::trailer_deferred`] leaves it) into its CRC field:
/// RFC 5044 §4.4 (the CRC covers every octet of the FPDU before the CRC field; markers are
/// off in gather mode). Nothing happens to a slice shorter than a CRC field.
pub fn seal_fpdu(fpdu: &mut [u8]) {
    let Some(body) = fpdu.len().checked_sub(CRC_LEN) else {
        return;
    };
    let (covered, field) = fpdu.split_at_mut(body);
    let mut crc = Crc32c::new();
    crc.update(covered);
    field.copy_from_slice(&crc_to_wire(crc.value()));
}

/// A gather-mode FPDU in progress: `prefix()`, then `update()` with every ULPDU octet in
/// order, then `trailer()`.
#[derive(Debug, Clone)]
pub struct GatherFpdu {
    prefix: [u8; 2],
    crc: Crc32c,
    crc_on: bool,
    ulpdu_len: u16,
    fed: usize,
}

/// Pad and CRC that end a gather-mode FPDU (3 to 7 octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    bytes: [u8; 7],
    len: u8,
}

impl Trailer {
    /// The trailer octets.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

impl GatherFpdu {
    /// The ULPDU_LENGTH field, to be sent first.
    pub fn prefix(&self) -> [u8; 2] {
        self.prefix
    }

    /// Feed the next ULPDU octets (DDP header, then payload) to the CRC.
    pub fn update(&mut self, bytes: &[u8]) {
        self.fed += bytes.len();
        if self.crc_on {
            self.crc.update(bytes);
        }
    }

    /// Octets fed so far.
    pub fn fed(&self) -> usize {
        self.fed
    }

    /// Whether the FPDU carries a CRC (negotiated on).
    pub fn crc_on(&self) -> bool {
        self.crc_on
    }

    /// Zero pad plus a zero CRC field, for a sender that fills the CRC in later over the
    /// FPDU's bytes as it copies them into a frame ([`seal_fpdu`]); nothing needs to be fed.
    pub fn trailer_deferred(self) -> Trailer {
        let pad = pad_len(usize::from(self.ulpdu_len));
        Trailer {
            bytes: [0u8; 7],
            len: (pad + CRC_LEN) as u8,
        }
    }

    /// Zero pad plus CRC (zero when CRC is off). `debug_assert`s that exactly `ulpdu_len`
    /// octets were fed.
    pub fn trailer(mut self) -> Trailer {
        debug_assert_eq!(self.fed, usize::from(self.ulpdu_len));
        let pad = pad_len(usize::from(self.ulpdu_len));
        let zeros = [0u8; 3];
        let pad_bytes = zeros.get(..pad).unwrap_or(&[]);
        if self.crc_on {
            self.crc.update(pad_bytes);
        }
        let crc = if self.crc_on {
            crc_to_wire(self.crc.value())
        } else {
            [0; 4]
        };
        let mut bytes = [0u8; 7];
        if let Some(dst) = bytes.get_mut(pad..pad + CRC_LEN) {
            dst.copy_from_slice(&crc);
        }
        Trailer {
            bytes,
            len: (pad + CRC_LEN) as u8,
        }
    }
}
