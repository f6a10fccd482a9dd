//! The FPDU deframer: TCP stream bytes in, ULPDU bytes out (RFC 5044 §4, §5, §6).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          ULPDU_LENGTH         |                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//! ~                 ULPDU (DDP segment), markers inside           ~
//! +                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                               |          PAD (0-3 octets)     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                             CRC                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The deframer takes arbitrary slices of the in-order TCP byte stream: an FPDU may straddle
//! slices and several FPDUs may share one. It keeps the few octets of a split length field,
//! marker or CRC itself, so it always consumes its whole input; ULPDU bytes are handed out as
//! [`Deframed::Data`] slices of the caller's input (zero-copy). Markers are removed
//! (RFC 5044 §5), the CRC is checked when negotiated (RFC 5044 §6), pad octets are ignored but
//! included in the CRC (siw sends non-zero pad, see `siw-peer/README.md` §5.9).

use netcore::crc::Crc32c;

use super::{CRC_LEN, LEN_FIELD, MARKER_INTERVAL, MARKER_LEN, MpaError, is_marker_pos, pad_len};

/// Smallest ULPDU a DDP peer can send: a tagged DDP header (RFC 5041 §4.2) is 14 octets.
pub const MIN_DDP_HEADER: u16 = 14;

/// Whether the CRC covers the markers of an FPDU (RFC 5044 §6: the CRC covers the FPDU as
/// sent, markers included). A marker that falls right before an FPDU's ULPDU_LENGTH field
/// counts as part of that FPDU, with FPDUPTR 0: RFC 5044 puts the first marker in front of
/// the first FPDU with FPDUPTR 0, and Wireshark's MPA dissector (`dissect_mpa_fpdu`: a segment
/// that starts at a marker position skips the marker, then the CRC runs from the segment's
/// first octet) reads it the same way. `tests/tshark_framer.rs`, `tests/rdmap_tshark.rs` and
/// `tests/mpa_deframer.rs::fpdu_at_a_marker_position_golden` pin this down. Wireshark 4.0
/// miscounts the markers of an FPDU that ends exactly at a marker position (one too many);
/// that is its off-by-one, documented and skipped in `tests/rdmap_tshark.rs`.
pub(crate) const CRC_COVERS_MARKERS: bool = true;

/// Put a CRC32c value on the wire: the little-endian bytes of the final value, as iSCSI does
/// (RFC 3720 B.4; verified against Linux siw captures with "Good CRC32" decodes).
#[inline]
pub fn crc_to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// Read a CRC32c value from its wire bytes (inverse of [`crc_to_wire`]).
#[inline]
pub(crate) fn crc_from_wire(b: [u8; 4]) -> u32 {
    u32::from_le_bytes(b)
}

/// How the deframer reads the stream; fixed once MPA negotiation is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeframerConfig {
    /// CRC negotiated (RFC 5044 §7.1: used if either side asked). When off, the CRC field is
    /// skipped unchecked.
    pub crc: bool,
    /// Markers negotiated for this direction (the peer sends them; RFC 5044 §7.1 M bit).
    pub markers: bool,
    /// Stream offset of the first octet the deframer will see, relative to the marker origin
    /// (the first octet of the first FPDU, i.e. the octet right after the MPA Request/Reply).
    /// Zero for a fresh connection.
    pub stream_pos: u32,
    /// Smallest acceptable ULPDU_LENGTH (default [`MIN_DDP_HEADER`]).
    pub min_ulpdu_len: u16,
    /// Largest acceptable ULPDU_LENGTH (default `u16::MAX`).
    pub max_ulpdu_len: u16,
    /// The caller feeds the CRC with the ULPDU octets itself (e.g. fused with the copy into
    /// the registered region, DESIGN.md §2.4): for every `Data(d)` it calls
    /// [`Deframer::crc_data`] with `d` (or updates [`Deframer::crc_state`] the same way)
    /// before the next `deframe` call. The deframer still covers the length field, markers
    /// and pad, and still checks the result at the end of the FPDU.
    pub crc_data_by_caller: bool,
}

impl Default for DeframerConfig {
    fn default() -> Self {
        DeframerConfig {
            crc: false,
            markers: false,
            stream_pos: 0,
            min_ulpdu_len: MIN_DDP_HEADER,
            max_ulpdu_len: u16::MAX,
            crc_data_by_caller: false,
        }
    }
}

/// A complete FPDU found by [`Deframer::peek_whole`]: its ULPDU (a slice of the caller's
/// input) and the octets it spans in the stream (length field, ULPDU, pad, CRC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeFpdu<'a> {
    /// Stream octets of the whole FPDU.
    pub len: usize,
    /// The ULPDU (DDP segment), `ULPDU_LENGTH` octets.
    pub ulpdu: &'a [u8],
    /// From [`Deframer::peek_whole_unchecked`] with CRCs on: what the caller needs to check
    /// the CRC it computes while placing the ULPDU. `None`: checked already, or CRCs off.
    pub unchecked: Option<UncheckedCrc<'a>>,
}

/// The parts of a whole FPDU's CRC check around its ULPDU (RFC 5044 §4.4: the CRC covers the
/// ULPDU_LENGTH field, the ULPDU and the pad).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UncheckedCrc<'a> {
    /// The ULPDU_LENGTH field, the first octets the CRC covers.
    pub len_field: [u8; LEN_FIELD],
    /// The octets the CRC covers, in the caller's input: the ULPDU_LENGTH field, the ULPDU
    /// and the pad.
    pub covered: &'a [u8],
    /// The pad after the ULPDU (0 to 3 octets), the last octets it covers.
    pub pad: &'a [u8],
    /// The CRC field's value.
    pub received: u32,
}

impl UncheckedCrc<'_> {
    /// A CRC fed with the ULPDU_LENGTH field: the caller continues it over the ULPDU.
    pub fn start(&self) -> Crc32c {
        let mut c = Crc32c::new();
        c.update(&self.len_field);
        c
    }

    /// [`UncheckedCrc::start`] continued over `head`, the ULPDU's first octets, in one call:
    /// the length field and a DDP header are 16 contiguous octets of the stream, and each
    /// call of a CRC implementation has a set-up cost. Hashed where they lie in the input
    /// ([`UncheckedCrc::covered`]) when `head` is the ULPDU's start there: a copy of them to
    /// the stack (as before) was read back by loads spanning two stores, which the CPU cannot
    /// forward, so each FPDU waited for its store buffer (the previous FPDU's placement) to
    /// drain, ~13 ns on an Intel Xeon (BENCHMARKS.md §4).
    pub fn start_with(&self, head: &[u8]) -> Crc32c {
        let n = LEN_FIELD + head.len();
        let mut c = Crc32c::new();
        match (self.covered.get(..n), self.covered.get(LEN_FIELD..n)) {
            (Some(both), Some(h)) if std::ptr::eq(h, head) => c.update(both),
            _ => {
                c.update(&self.len_field);
                c.update(head);
            }
        }
        c
    }

    /// Finish `crc` (of the length field and the ULPDU) with the pad and compare it with the
    /// CRC field: the [`MpaError::Crc`] when they differ.
    pub fn check(&self, mut crc: Crc32c) -> Result<(), MpaError> {
        crc.update(self.pad);
        if crc.value() == self.received {
            Ok(())
        } else {
            Err(MpaError::Crc {
                computed: crc.value(),
                received: self.received,
            })
        }
    }
}

/// One event of the deframed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deframed<'a> {
    /// A new FPDU starts; its ULPDU has `ulpdu_len` octets.
    Start {
        /// The ULPDU_LENGTH field.
        ulpdu_len: u16,
    },
    /// The next ULPDU octets of the current FPDU, a slice of the caller's input. One ULPDU may
    /// arrive as several `Data` events (slice ends, markers).
    Data(&'a [u8]),
    /// The current FPDU is complete and its CRC verified (or CRC is off).
    End,
}

/// What one step of [`Deframer::deframe`] did: the input bytes it took and its event, if any.
type Step<'a> = (usize, Option<Result<Deframed<'a>, MpaError>>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the 2-octet ULPDU_LENGTH; `have` octets are in `buf`.
    Len { have: u8, buf: [u8; 2] },
    /// Reading ULPDU octets.
    Payload { remaining: u16 },
    /// Skipping pad octets.
    Pad { remaining: u8 },
    /// Reading the 4-octet CRC field.
    Crc { have: u8, buf: [u8; 4] },
}

/// Stream-to-ULPDU deframer (see the module docs).
///
/// ```
/// use iwarp::mpa::{Deframed, Deframer, DeframerConfig};
/// let mut d = Deframer::new(DeframerConfig { min_ulpdu_len: 0, ..Default::default() });
/// let stream = [0u8, 2, 0xaa, 0xbb, 0, 0, 0, 0];
/// let (n, ev) = d.deframe(&stream);
/// assert_eq!((n, ev), (2, Some(Ok(Deframed::Start { ulpdu_len: 2 }))));
/// let (n2, ev) = d.deframe(&stream[n..]);
/// assert_eq!(ev, Some(Ok(Deframed::Data(&[0xaa, 0xbb][..]))));
/// let (_, ev) = d.deframe(&stream[n + n2..]);
/// assert_eq!(ev, Some(Ok(Deframed::End)));
/// ```
#[derive(Debug, Clone)]
pub struct Deframer {
    cfg: DeframerConfig,
    /// Stream offset of the next input octet, relative to the marker origin.
    pos: u32,
    phase: Phase,
    /// Stream offset of the current FPDU's ULPDU_LENGTH field.
    fpdu_start: u32,
    /// Octets of a marker read so far (0 = not inside a marker).
    marker_have: u8,
    marker_buf: [u8; MARKER_LEN],
    /// ULPDU_LENGTH of the current FPDU.
    ulpdu_len: u16,
    crc: Crc32c,
    /// Whether `crc` already covers octets of the current FPDU (a leading marker).
    crc_started: bool,
    /// First error seen; the stream is dead after it.
    error: Option<MpaError>,
    fpdus: u64,
}

impl Deframer {
    /// A deframer positioned at an FPDU boundary.
    pub fn new(cfg: DeframerConfig) -> Self {
        Deframer {
            cfg,
            pos: cfg.stream_pos,
            phase: Phase::Len {
                have: 0,
                buf: [0; 2],
            },
            fpdu_start: cfg.stream_pos,
            marker_have: 0,
            marker_buf: [0; MARKER_LEN],
            ulpdu_len: 0,
            crc: Crc32c::new(),
            crc_started: false,
            error: None,
            fpdus: 0,
        }
    }

    /// The configuration this deframer runs with.
    pub fn config(&self) -> &DeframerConfig {
        &self.cfg
    }

    /// Stream offset (relative to the marker origin) of the next octet expected.
    pub fn stream_pos(&self) -> u32 {
        self.pos
    }

    /// True between FPDUs (no partial FPDU or marker held).
    pub fn at_boundary(&self) -> bool {
        self.marker_have == 0 && matches!(self.phase, Phase::Len { have: 0, .. })
    }

    /// Number of FPDUs completed so far.
    pub fn fpdus(&self) -> u64 {
        self.fpdus
    }

    /// With `crc_data_by_caller`: feed the ULPDU octets of the last `Data` event to the CRC
    /// (no-op when CRC is off).
    #[inline]
    pub fn crc_data(&mut self, data: &[u8]) {
        if self.cfg.crc {
            self.crc.update(data);
        }
    }

    /// With `crc_data_by_caller`: the running CRC of the current FPDU, for a caller that
    /// computes the CRC while copying the `Data` octets.
    pub fn crc_state(&mut self) -> &mut Crc32c {
        &mut self.crc
    }

    /// The error that killed the stream, if any.
    pub fn error(&self) -> Option<MpaError> {
        self.error
    }

    /// Octets that can be taken before the next marker position (`usize::MAX` without markers).
    #[inline]
    fn room(&self) -> usize {
        if self.cfg.markers {
            (MARKER_INTERVAL - self.pos % MARKER_INTERVAL) as usize
        } else {
            usize::MAX
        }
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        // n is at most a few KiB per step; the stream offset wraps like a TCP sequence number
        // and 2^32 is a multiple of the marker interval.
        self.pos = self.pos.wrapping_add(n as u32);
    }

    fn fail(&mut self, e: MpaError) -> Option<Result<Deframed<'static>, MpaError>> {
        self.error = Some(e);
        Some(Err(e))
    }

    /// Fast path for the common case of one or more whole FPDUs in one slice (RFC 5044 §8:
    /// senders align FPDUs with TCP segments): when the deframer is between FPDUs, markers are
    /// off and `input` starts with a complete FPDU whose ULPDU_LENGTH is acceptable and whose
    /// CRC (when negotiated, RFC 5044 §6: over the length field, ULPDU and pad) matches, that
    /// FPDU, verified in one CRC pass before any of it is used. `None` otherwise, with nothing
    /// changed: [`Deframer::deframe`] then walks the same octets and reports the FPDU or its
    /// error. The caller takes the FPDU with [`Deframer::consume_whole`].
    #[inline]
    pub fn peek_whole<'a>(&self, input: &'a [u8]) -> Option<WholeFpdu<'a>> {
        let w = self.peek_whole_unchecked(input)?;
        match w.unchecked {
            Some(u) => {
                // RFC 5044 §4.4: over the length field, the ULPDU and the pad.
                let covered = input.get(..w.len - CRC_LEN)?;
                (netcore::crc::crc32c(covered) == u.received).then_some(WholeFpdu {
                    unchecked: None,
                    ..w
                })
            }
            None => Some(w),
        }
    }

    /// [`Deframer::peek_whole`] without the CRC check, for a caller that computes the CRC
    /// while it places the ULPDU (the integrated placer: one pass over the octets) and checks
    /// it with [`WholeFpdu::unchecked`] before it acts on the FPDU. The same conditions
    /// otherwise; nothing changes until [`Deframer::consume_whole`].
    #[inline]
    pub fn peek_whole_unchecked<'a>(&self, input: &'a [u8]) -> Option<WholeFpdu<'a>> {
        if self.cfg.markers
            || self.error.is_some()
            || !matches!(self.phase, Phase::Len { have: 0, .. })
        {
            return None;
        }
        let &[hi, lo] = input.first_chunk::<LEN_FIELD>()?;
        let ulpdu_len = u16::from_be_bytes([hi, lo]);
        if ulpdu_len < self.cfg.min_ulpdu_len || ulpdu_len > self.cfg.max_ulpdu_len {
            return None;
        }
        let n = usize::from(ulpdu_len);
        let covered = LEN_FIELD + n + pad_len(n);
        let fpdu = input.get(..covered + CRC_LEN)?;
        let (body, crc) = fpdu.split_at(covered);
        let unchecked = match self.cfg.crc {
            true => Some(UncheckedCrc {
                len_field: [hi, lo],
                covered: body,
                pad: body.get(LEN_FIELD + n..)?,
                received: crc_from_wire(*crc.first_chunk::<CRC_LEN>()?),
            }),
            false => None,
        };
        Some(WholeFpdu {
            len: fpdu.len(),
            ulpdu: body.get(LEN_FIELD..LEN_FIELD + n)?,
            unchecked,
        })
    }

    /// Take the FPDU [`Deframer::peek_whole`] returned (the caller handled it).
    #[inline]
    pub fn consume_whole(&mut self, w: &WholeFpdu<'_>) {
        self.fpdu_start = self.pos;
        self.ulpdu_len = w.ulpdu.len() as u16;
        self.advance(w.len);
        self.fpdus += 1;
    }

    /// Walk `input`; returns how many input bytes were consumed and the next event, or `None`
    /// when input is exhausted (then everything was consumed and partial state is kept).
    ///
    /// For `Data(d)` with `consumed` bytes consumed, `d` is exactly
    /// `&input[consumed - d.len()..consumed]`. After an error every call returns
    /// `(0, Some(Err(e)))` with the same error.
    pub fn deframe<'a>(
        &mut self,
        input: &'a [u8],
    ) -> (usize, Option<Result<Deframed<'a>, MpaError>>) {
        if let Some(e) = self.error {
            return (0, Some(Err(e)));
        }
        let mut i = 0usize;
        loop {
            let Some(rest) = input.get(i..).filter(|r| !r.is_empty()) else {
                return (i, None);
            };
            let (took, event) =
                if self.cfg.markers && (self.marker_have > 0 || is_marker_pos(self.pos)) {
                    self.step_marker(rest)
                } else {
                    let room = self.room();
                    match self.phase {
                        Phase::Len { have, buf } => self.step_len(rest, room, have, buf),
                        Phase::Payload { remaining } => self.step_payload(rest, room, remaining),
                        Phase::Pad { remaining } => self.step_pad(rest, room, remaining),
                        Phase::Crc { have, buf } => self.step_crc(rest, room, have, buf),
                    }
                };
            i += took;
            if event.is_some() {
                return (i, event);
            }
        }
    }

    /// [`Deframer::deframe`] at a marker (or inside one split over slices): take its bytes
    /// from `rest` and, once all four are in, check its FPDUPTR. Returns the bytes taken and
    /// an error, if any.
    #[inline]
    fn step_marker<'a>(&mut self, rest: &'a [u8]) -> Step<'a> {
        let have = usize::from(self.marker_have);
        let take = (MARKER_LEN - have).min(rest.len());
        let (src, _) = rest.split_at(take);
        if let Some(dst) = self.marker_buf.get_mut(have..have + take) {
            dst.copy_from_slice(src);
        }
        let inside = !matches!(self.phase, Phase::Len { have: 0, .. });
        if !inside && !self.crc_started {
            // A marker right before the FPDU starts its CRC.
            self.crc = Crc32c::new();
            self.crc_started = true;
        }
        if CRC_COVERS_MARKERS && self.cfg.crc {
            self.crc.update(src);
        }
        self.advance(take);
        self.marker_have += take as u8;
        if usize::from(self.marker_have) < MARKER_LEN {
            return (take, None);
        }
        self.marker_have = 0;
        let [_, _, hi, lo] = self.marker_buf;
        let fpduptr = u16::from_be_bytes([hi, lo]);
        let marker_pos = self.pos.wrapping_sub(MARKER_LEN as u32);
        // RFC 5044 §5: FPDUPTR counts the octets from the start of the FPDU's ULPDU_LENGTH
        // field to the marker; a marker right before an FPDU points at that FPDU (0).
        let expected = if inside {
            marker_pos.wrapping_sub(self.fpdu_start) as u16
        } else {
            0
        };
        if fpduptr != expected {
            return (take, self.fail(MpaError::Marker { fpduptr, expected }));
        }
        (take, None)
    }

    /// [`Deframer::deframe`] in the ULPDU_LENGTH field, `have` of its bytes in `buf`: take
    /// the rest (up to `room`, the next marker); once whole, check it and report
    /// [`Deframed::Start`].
    #[inline]
    fn step_len<'a>(
        &mut self,
        rest: &'a [u8],
        room: usize,
        have: u8,
        mut buf: [u8; 2],
    ) -> Step<'a> {
        if have == 0 {
            self.fpdu_start = self.pos;
            if !self.crc_started {
                self.crc = Crc32c::new();
                self.crc_started = true;
            }
        }
        let h = usize::from(have);
        let take = (LEN_FIELD - h).min(rest.len()).min(room);
        let (src, _) = rest.split_at(take);
        if let Some(dst) = buf.get_mut(h..h + take) {
            dst.copy_from_slice(src);
        }
        self.advance(take);
        let have = have + take as u8;
        if usize::from(have) < LEN_FIELD {
            self.phase = Phase::Len { have, buf };
            return (take, None);
        }
        if self.cfg.crc {
            self.crc.update(&buf);
        }
        let ulpdu_len = u16::from_be_bytes(buf);
        if ulpdu_len < self.cfg.min_ulpdu_len || ulpdu_len > self.cfg.max_ulpdu_len {
            return (take, self.fail(MpaError::UlpduLength(ulpdu_len)));
        }
        self.ulpdu_len = ulpdu_len;
        self.phase = if ulpdu_len > 0 {
            Phase::Payload {
                remaining: ulpdu_len,
            }
        } else {
            self.after_payload()
        };
        (take, Some(Ok(Deframed::Start { ulpdu_len })))
    }

    /// [`Deframer::deframe`] in the ULPDU, `remaining` bytes of it to come: report what
    /// `rest` holds of it (up to `room`) as [`Deframed::Data`].
    #[inline]
    fn step_payload<'a>(&mut self, rest: &'a [u8], room: usize, remaining: u16) -> Step<'a> {
        let take = usize::from(remaining).min(rest.len()).min(room);
        let (data, _) = rest.split_at(take);
        if self.cfg.crc && !self.cfg.crc_data_by_caller {
            self.crc.update(data);
        }
        self.advance(take);
        let remaining = remaining - take as u16;
        self.phase = if remaining == 0 {
            self.after_payload()
        } else {
            Phase::Payload { remaining }
        };
        (take, Some(Ok(Deframed::Data(data))))
    }

    /// [`Deframer::deframe`] in the pad, `remaining` bytes of it to come: skip them (into
    /// the CRC); no event.
    #[inline]
    fn step_pad<'a>(&mut self, rest: &'a [u8], room: usize, remaining: u8) -> Step<'a> {
        let take = usize::from(remaining).min(rest.len()).min(room);
        let (pad, _) = rest.split_at(take);
        if self.cfg.crc {
            self.crc.update(pad);
        }
        self.advance(take);
        let remaining = remaining - take as u8;
        self.phase = if remaining == 0 {
            Phase::Crc {
                have: 0,
                buf: [0; 4],
            }
        } else {
            Phase::Pad { remaining }
        };
        (take, None)
    }

    /// [`Deframer::deframe`] in the CRC field, `have` of its bytes in `buf`: take the rest;
    /// once whole, check it (when negotiated) and report [`Deframed::End`].
    #[inline]
    fn step_crc<'a>(
        &mut self,
        rest: &'a [u8],
        room: usize,
        have: u8,
        mut buf: [u8; 4],
    ) -> Step<'a> {
        let h = usize::from(have);
        let take = (CRC_LEN - h).min(rest.len()).min(room);
        let (src, _) = rest.split_at(take);
        if let Some(dst) = buf.get_mut(h..h + take) {
            dst.copy_from_slice(src);
        }
        self.advance(take);
        let have = have + take as u8;
        if usize::from(have) < CRC_LEN {
            self.phase = Phase::Crc { have, buf };
            return (take, None);
        }
        self.crc_started = false;
        self.phase = Phase::Len {
            have: 0,
            buf: [0; 2],
        };
        if self.cfg.crc {
            let computed = self.crc.value();
            let received = crc_from_wire(buf);
            if computed != received {
                return (take, self.fail(MpaError::Crc { computed, received }));
            }
        }
        self.fpdus += 1;
        (take, Some(Ok(Deframed::End)))
    }

    /// Phase after the ULPDU of the current FPDU: pad, then CRC.
    fn after_payload(&self) -> Phase {
        let pad = pad_len(usize::from(self.ulpdu_len));
        if pad == 0 {
            Phase::Crc {
                have: 0,
                buf: [0; 4],
            }
        } else {
            Phase::Pad {
                remaining: pad as u8,
            }
        }
    }
}
