//! Receive path: deframed ULPDU bytes -> validated DDP segments -> placements, completions,
//! responses to send (RFC 5041 §5.3, §7; RFC 5040 §5.3-§5.5, §6.4, §7; RFC 7306 §5).
//!
//! A segment's header is gathered (it may straddle TCP segments and markers) into a small
//! buffer; once complete it is validated against the STag table and the posted receives, and
//! the rest of the ULPDU is handed to the placer slice by slice, zero-copy. Completions wait
//! for the MPA `End` event (CRC verified). The first error stops the stream and queues the
//! Terminate (RFC 5040 §7.1: "the first error").

use netcore::crc::Crc32c;

use crate::ddp::wire::{self as ddp, DdpBuf};
use crate::error::{DdpError, Layer, RdmapError, TermCode, rdmap_etype};
use crate::mpa::{Deframed, MpaError, UncheckedCrc, WholeFpdu};
use crate::rdmap::qp::{
    Completion, CqOpcode, Memory, Qp, QpState, RecvRequest, Sge, WcStatus, sq_cq_opcode,
};
use crate::rdmap::terminate::{RDMA_HDR_LEN, TerminateHdr};
use crate::rdmap::tx::{TxMsg, sges_ok};
use crate::rdmap::wire::{
    self as rw, Header, HeaderError, Opcode, RdmapPart, aopcode, header_len, qn,
};
use crate::stag::{Access, AtomicOp, MrHandle, Stag, check_access};

/// Header bytes kept per segment: enough for every fixed header and a Terminate with both
/// optional headers (18 + 4 + 2 + 18 + 28 = 70).
const HDR_CAP: usize = 96;

/// Where the payload of the current segment goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Sink {
    /// No payload expected (or it is ignored, e.g. the tail of a long Terminate).
    #[default]
    Discard,
    /// Tagged: contiguous bytes of one region from `offset`.
    Region { mr: MrHandle, offset: u64 },
    /// Untagged QN 0: the current receive buffer, from message offset `mo`.
    Recv { mo: u64 },
}

/// Per-stream receive state.
#[derive(Debug, Clone)]
pub(crate) struct RxState {
    in_fpdu: bool,
    ulpdu_len: usize,
    hdr: [u8; HDR_CAP],
    have: usize,
    /// Header length once known (0 = not yet).
    hdr_len: usize,
    header: Option<Header>,
    sink: Sink,
    placed: u64,
    /// Receive buffer of the Send message in progress.
    pub(crate) cur_recv: Option<RecvRequest>,
    /// Bytes received so far of the Send message in progress (expected next MO).
    msg_off: u64,
    expected_msn: [u32; qn::COUNT],
    /// The last complete FPDU ended a message (DDP L flag, RFC 5041 §5.1).
    msg_end: bool,
}

impl RxState {
    /// Whether the last complete FPDU ended a message (DDP L flag).
    pub(crate) fn msg_end(&self) -> bool {
        self.msg_end
    }

    /// The MSN expected next on untagged queue `q` (0 for an unknown queue).
    pub(crate) fn expected_msn_of(&self, q: u32) -> u32 {
        self.expected_msn.get(q as usize).copied().unwrap_or(0)
    }

    /// A message on queue `q` is complete: expect the next MSN.
    pub(crate) fn bump_msn(&mut self, q: u32) {
        if let Some(m) = self.expected_msn.get_mut(q as usize) {
            *m = m.wrapping_add(1);
        }
    }
}

impl Default for RxState {
    fn default() -> Self {
        RxState {
            in_fpdu: false,
            ulpdu_len: 0,
            hdr: [0; HDR_CAP],
            have: 0,
            hdr_len: 0,
            header: None,
            sink: Sink::Discard,
            placed: 0,
            cur_recv: None,
            msg_off: 0,
            // RFC 5041 §5.3: the first MSN of every queue is 1.
            expected_msn: [1; qn::COUNT],
            msg_end: false,
        }
    }
}

/// What [`Qp::rx_whole`] did with a whole FPDU.
enum Whole {
    /// Handled and consumed.
    Done,
    /// The QP failed (TERMINATE queued): nothing after it is read.
    Failed,
}

/// Copy `data` into the SGE list at message offset `off`, feeding `crc` with every byte.
fn place_sges(
    mem: &mut dyn Memory,
    sges: &[Sge],
    mut off: u64,
    mut data: &[u8],
    mut crc: Option<&mut Crc32c>,
) {
    for s in sges {
        if data.is_empty() {
            return;
        }
        let len = u64::from(s.len);
        if off >= len {
            off -= len;
            continue;
        }
        let n = ((len - off) as usize).min(data.len());
        let (now, rest) = data.split_at(n);
        mem.place(s.mr, s.offset + off, now, crc.as_deref_mut());
        data = rest;
        off = 0;
    }
    // Bytes beyond the SGEs (the length was checked, so none in practice) still count.
    if let Some(c) = crc {
        c.update(data);
    }
}

/// Which offending headers a Terminate carries (RFC 5040 §4.8; siw `siw_send_terminate`):
/// none for local catastrophic and LLP errors or when the header could not be parsed (bad
/// version or opcode: its layout is unknown); the DDP header otherwise; plus the RDMA header
/// for a remote protection error on a Read Request.
fn term_for(code: TermCode, hdr: &[u8], ulpdu_len: usize, parsed: bool) -> TerminateHdr {
    if !parsed || code.etype == 0 || code.layer == Layer::Llp {
        return TerminateHdr::new(code, None, None);
    }
    let seg_len = u16::try_from(ulpdu_len).unwrap_or(u16::MAX);
    let ddp_len = hdr.first().map(|&c| ddp::header_len(c)).unwrap_or(0);
    let is_rreq = hdr.get(1).map(|&c| c & 0xf) == Some(Opcode::ReadRequest as u8);
    let rdma =
        if code.layer == Layer::Rdmap && code.etype == rdmap_etype::REMOTE_PROTECTION && is_rreq {
            hdr.get(ddp_len..ddp_len + RDMA_HDR_LEN)
        } else {
            None
        };
    TerminateHdr::new(code, Some((seg_len, hdr)), rdma)
}

impl Qp {
    pub(crate) fn rx_stream(&mut self, mem: &mut dyn Memory, input: &[u8]) -> usize {
        let mut i = 0;
        while i < input.len() {
            if matches!(self.state, QpState::Terminate | QpState::Error) {
                return input.len();
            }
            let rest = input.get(i..).unwrap_or(&[]);
            let by_placer = self.cfg.crc_by_placer && self.cfg.crc;
            let whole = match by_placer {
                true => self.deframer.peek_whole_unchecked(rest),
                false => self.deframer.peek_whole(rest),
            };
            if let Some(w) = whole {
                match self.rx_whole(mem, &w) {
                    Whole::Done => {
                        i += w.len;
                        continue;
                    }
                    Whole::Failed => return input.len(),
                }
            }
            let (n, ev) = self.deframer.deframe(rest);
            i += n;
            match ev {
                None => break,
                Some(Err(e)) => {
                    let (l, t, c) = e.term_code();
                    let code = TermCode::from_raw(l, t, c);
                    self.fail(code, TerminateHdr::new(code, None, None));
                    // The framing is lost: nothing after this point can be trusted.
                    return input.len();
                }
                Some(Ok(Deframed::Start { ulpdu_len })) => self.rx_start(usize::from(ulpdu_len)),
                Some(Ok(Deframed::Data(d))) => {
                    let feed_crc = self.cfg.crc_by_placer && self.cfg.crc;
                    if let Err(code) = self.rx_data(mem, d, feed_crc) {
                        self.rx_fail(code);
                    }
                }
                Some(Ok(Deframed::End)) => {
                    let last = self.rx.header.as_ref().is_some_and(|h| h.ddp.last);
                    match self.rx_end(mem) {
                        Ok(()) => self.rx.msg_end = last,
                        Err(code) => self.rx_fail(code),
                    }
                }
            }
        }
        i
    }

    /// A whole FPDU in one slice: the same steps as the deframer's events (Start, Data, End)
    /// without the per-event state walk. Its CRC is checked already, or (`w.unchecked`, the
    /// integrated placer) computed while its ULPDU is placed and checked before anything acts
    /// on it: a mismatch leaves placed octets in the sink, undefined as after any failed
    /// placement (RFC 5040 §5.1; siw does the same), and sends the MPA CRC error's TERMINATE
    /// (RFC 5044 §8, layer LLP, ecode 0x02) with no completion.
    #[inline]
    fn rx_whole(&mut self, mem: &mut dyn Memory, w: &WholeFpdu<'_>) -> Whole {
        let last = w.ulpdu.first().is_some_and(|&c| c & ddp::FLAG_LAST != 0);
        let mut crc = None;
        if self.rx_write_whole(mem, w.ulpdu, w.unchecked.as_ref(), &mut crc) {
            if let (Some(u), Some(c)) = (w.unchecked, crc)
                && let Err(e) = u.check(c)
            {
                return self.rx_crc_fail(e);
            }
            self.deframer.consume_whole(w);
            self.rx.msg_end = last;
            return Whole::Done;
        }
        let crc = w.unchecked.map(|u| u.start());
        self.rx_start(w.ulpdu.len());
        if let Some(c) = crc {
            *self.deframer.crc_state() = c;
        }
        // A header the checks refuse is reported as the events' path reports it: at once,
        // before the CRC is known.
        if let Err(code) = self.rx_data(mem, w.ulpdu, crc.is_some()) {
            self.rx_fail(code);
            return Whole::Failed;
        }
        if let Some(u) = w.unchecked
            && let Err(e) = u.check(*self.deframer.crc_state())
        {
            return self.rx_crc_fail(e);
        }
        // `End`: the deframer counts the FPDU before the segment completes.
        self.deframer.consume_whole(w);
        if let Err(code) = self.rx_end(mem) {
            self.rx_fail(code);
            return Whole::Failed;
        }
        self.rx.msg_end = last;
        Whole::Done
    }

    /// A whole FPDU's CRC did not match (RFC 5044 §8): TERMINATE with the MPA error's code and
    /// no header, as the deframer's own check does; the framing is lost.
    fn rx_crc_fail(&mut self, e: MpaError) -> Whole {
        let (l, t, c) = e.term_code();
        let code = TermCode::from_raw(l, t, c);
        tracing::debug!("whole FPDU: {e}");
        self.fail(code, TerminateHdr::new(code, None, None));
        Whole::Failed
    }

    /// The data path's common segment, a whole RDMA Write that passes every check
    /// `begin_segment` makes for it (RFC 5041 §7.1 versions, RFC 5040 §7.1 opcode, RFC 5041
    /// §7.2 / RFC 5042 §5 STag, PD, rights, bounds): placed in one step; with `unchecked`
    /// (the FPDU's CRC still to be checked), `crc` is set to the CRC of its length field and
    /// ULPDU, computed while the ULPDU is placed. An RDMA Write completes nothing at the Data
    /// Sink (RFC 5040 §5.3). False, with nothing done, for anything else: the general path then
    /// runs the same checks and reports the first failing one.
    #[inline]
    fn rx_write_whole(
        &mut self,
        mem: &mut dyn Memory,
        ulpdu: &[u8],
        unchecked: Option<&UncheckedCrc<'_>>,
        crc: &mut Option<Crc32c>,
    ) -> bool {
        let Some((h, payload)) = ulpdu.split_first_chunk::<{ ddp::TAGGED_HDR_LEN }>() else {
            return false;
        };
        if self.rtr_rx.is_some() || rw::classify(h[0], h[1]) != Ok(Opcode::Write) {
            return false;
        }
        let [_, _, s0, s1, s2, s3, to @ ..] = *h;
        let stag = Stag(u32::from_be_bytes([s0, s1, s2, s3]));
        let to = u64::from_be_bytes(to);
        let need = Access::REMOTE_WRITE;
        let len = payload.len() as u64;
        let Ok((info, off)) = check_access(&*mem, stag, self.cfg.pd, need, to, len) else {
            return false;
        };
        // The length field and the header in one CRC call.
        *crc = unchecked.map(|u| u.start_with(h));
        if !payload.is_empty() {
            mem.place(info.handle, off, payload, crc.as_mut());
        }
        true
    }

    /// A new FPDU whose ULPDU has `ulpdu_len` octets.
    #[inline]
    fn rx_start(&mut self, ulpdu_len: usize) {
        let rx = &mut self.rx;
        rx.in_fpdu = true;
        rx.ulpdu_len = ulpdu_len;
        rx.have = 0;
        rx.hdr_len = 0;
        rx.header = None;
        rx.sink = Sink::Discard;
        rx.placed = 0;
    }

    /// The FPDU is complete and its CRC verified.
    #[inline]
    fn rx_end(&mut self, mem: &mut dyn Memory) -> Result<(), TermCode> {
        self.rx.in_fpdu = false;
        match self.rx.header {
            // RFC 5040 §5.3: an RDMA Write segment completes nothing at the Data Sink (what
            // `end_segment` does for it, without copying the header).
            Some(Header {
                opcode: Opcode::Write,
                ..
            }) if self.rtr_rx.is_none() => Ok(()),
            Some(h) => self.end_segment(mem, &h),
            None => Err(HeaderError::Truncated.into()),
        }
    }

    fn rx_fail(&mut self, code: TermCode) {
        let have = self.rx.have.min(HDR_CAP);
        let term = term_for(
            code,
            &self.rx.hdr[..have],
            self.rx.ulpdu_len,
            self.rx.header.is_some(),
        );
        self.fail(code, term);
    }

    /// ULPDU octets of the current FPDU. With `by_placer` (the CRC by the placer, and not
    /// already checked), every octet is fed to the deframer's CRC here or in `Placer::place`,
    /// exactly once and in stream order.
    fn rx_data(
        &mut self,
        mem: &mut dyn Memory,
        mut d: &[u8],
        by_placer: bool,
    ) -> Result<(), TermCode> {
        if !self.rx.in_fpdu {
            return Ok(());
        }
        if self.rx.header.is_none() {
            let rx = &mut self.rx;
            if rx.have == 0
                && let &[c0, c1, ..] = d
            {
                // The common case: the whole header at the start of this slice. The same
                // checks and state as the octet-gathering loop below, in one step.
                let n = match header_len(c0, c1)? {
                    Some(n) if n > rx.ulpdu_len => return Err(HeaderError::Truncated.into()),
                    Some(n) => n,
                    None => rx.ulpdu_len.min(HDR_CAP),
                };
                if let (Some(take), Some(dst)) = (d.get(..n), rx.hdr.get_mut(..n)) {
                    if by_placer {
                        self.deframer.crc_data(take);
                    }
                    dst.copy_from_slice(take);
                    rx.have = n;
                    rx.hdr_len = n;
                    let h = Header::parse(take)?;
                    rx.header = Some(h);
                    d = d.get(n..).unwrap_or(&[]);
                    self.begin_segment(mem, &h)?;
                    return self.rx_payload(mem, d, by_placer);
                }
            }
            while rx.header.is_none() && !d.is_empty() {
                let want = if rx.hdr_len == 0 { 2 } else { rx.hdr_len };
                let n = want.saturating_sub(rx.have).min(d.len());
                let (take, rest) = d.split_at(n);
                if by_placer {
                    self.deframer.crc_data(take);
                }
                rx.hdr[rx.have..rx.have + n].copy_from_slice(take);
                rx.have += n;
                d = rest;
                if rx.have < want {
                    break;
                }
                if rx.hdr_len == 0 {
                    rx.hdr_len = match header_len(rx.hdr[0], rx.hdr[1])? {
                        Some(n) if n > rx.ulpdu_len => return Err(HeaderError::Truncated.into()),
                        Some(n) => n,
                        None => rx.ulpdu_len.min(HDR_CAP),
                    };
                    continue;
                }
                rx.header = Some(Header::parse(&rx.hdr[..rx.hdr_len])?);
            }
            match self.rx.header {
                Some(h) => self.begin_segment(mem, &h)?,
                None => return Ok(()),
            }
        }
        self.rx_payload(mem, d, by_placer)
    }

    /// Payload octets of the current segment, after its header: to the sink chosen by
    /// `begin_segment`.
    #[inline]
    fn rx_payload(
        &mut self,
        mem: &mut dyn Memory,
        d: &[u8],
        by_placer: bool,
    ) -> Result<(), TermCode> {
        if d.is_empty() {
            return Ok(());
        }
        let placed = self.rx.placed;
        let crc = if by_placer {
            Some(self.deframer.crc_state())
        } else {
            None
        };
        match (self.rx.sink, &self.rx.cur_recv) {
            (Sink::Region { mr, offset }, _) => mem.place(mr, offset + placed, d, crc),
            (Sink::Recv { mo }, Some(rr)) => place_sges(mem, &rr.sges, mo + placed, d, crc),
            (Sink::Discard | Sink::Recv { .. }, _) => {
                if let Some(c) = crc {
                    c.update(d);
                }
            }
        }
        self.rx.placed += d.len() as u64;
        Ok(())
    }

    fn payload_len(&self) -> u64 {
        self.rx.ulpdu_len.saturating_sub(self.rx.hdr_len) as u64
    }

    /// Validate a complete header and choose the payload sink.
    fn begin_segment(&mut self, mem: &mut dyn Memory, h: &Header) -> Result<(), TermCode> {
        let len = self.payload_len();
        let pd = self.cfg.pd;
        if let Some(kind) = self.rtr_rx {
            self.begin_rtr(kind, h, len)?;
            self.rx.sink = Sink::Discard;
            return Ok(());
        }
        self.rx.sink = match (h.ddp.buf, h.opcode) {
            // RFC 5041 §7.2 tagged checks; RFC 5040 §5.3 RDMA Write.
            (DdpBuf::Tagged { stag, to }, Opcode::Write) => {
                let (info, off) = check_access(&*mem, stag, pd, Access::REMOTE_WRITE, to, len)
                    .map_err(|e| e.tagged())?;
                Sink::Region {
                    mr: info.handle,
                    offset: off,
                }
            }
            // RFC 5040 §5.4: a Read Response must answer the oldest outstanding Read Request
            // and land exactly at its advertised sink.
            (DdpBuf::Tagged { stag, to }, _) => {
                let o = self.orq.front().ok_or(RdmapError::UnexpectedOpcode)?;
                let (sink_stag, sink_to) = o.sink.ok_or(RdmapError::UnexpectedOpcode)?;
                if stag != sink_stag {
                    return Err(DdpError::TaggedInvalidStag.into());
                }
                if Some(to) != sink_to.checked_add(o.received) || o.received + len > o.size {
                    return Err(DdpError::TaggedBaseBounds.into());
                }
                if o.rtr {
                    // The zero-length answer to our Read RTR names no buffer (RFC 6581 §5).
                    self.rx.sink = Sink::Discard;
                    return Ok(());
                }
                let (info, off) = check_access(&*mem, stag, pd, Access::LOCAL_WRITE, to, len)
                    .map_err(|e| e.tagged())?;
                Sink::Region {
                    mr: info.handle,
                    offset: off,
                }
            }
            (DdpBuf::Untagged { qn: q, msn, mo, .. }, op) => {
                // RFC 5041 §7.2: QN must exist and carry this message type.
                if op.queue() != Some(q) {
                    return Err(DdpError::UntaggedInvalidQn.into());
                }
                let expected = self.rx.expected_msn.get(q as usize).copied().unwrap_or(0);
                if msn != expected {
                    return Err(DdpError::UntaggedMsnRange.into());
                }
                self.begin_untagged(mem, h, q, u64::from(mo), len)?
            }
        };
        Ok(())
    }

    fn begin_untagged(
        &mut self,
        mem: &mut dyn Memory,
        h: &Header,
        q: u32,
        mo: u64,
        len: u64,
    ) -> Result<Sink, TermCode> {
        match q {
            qn::SEND => {
                // RFC 7306 Immediate Data: one segment of exactly the 8-byte header. RFC 7306
                // assigns no error code for a longer one; report an unspecified remote
                // operation error (RFC 5040 §4.8).
                if matches!(h.opcode, Opcode::ImmediateData | Opcode::ImmediateDataSe)
                    && (len != 0 || !h.ddp.last || mo != 0)
                {
                    return Err(RdmapError::UnspecifiedOperation.into());
                }
                if self.rx.cur_recv.is_none() {
                    if mo != 0 {
                        return Err(DdpError::UntaggedInvalidMo.into());
                    }
                    let rr = self.rq.pop_front().ok_or(DdpError::UntaggedNoBuffer)?;
                    if !sges_ok(&*mem, &rr.sges, Access::LOCAL_WRITE) {
                        // A receive we cannot write to: our fault, not the peer's.
                        self.rx.cur_recv = Some(rr);
                        return Err(RdmapError::LocalCatastrophic.into());
                    }
                    self.rx.cur_recv = Some(rr);
                    self.rx.msg_off = 0;
                }
                if mo != self.rx.msg_off {
                    return Err(DdpError::UntaggedInvalidMo.into());
                }
                let cap: u64 = self
                    .rx
                    .cur_recv
                    .iter()
                    .flat_map(|r| &r.sges)
                    .map(|s| u64::from(s.len))
                    .sum();
                if mo + len > cap {
                    return Err(DdpError::UntaggedTooLong.into());
                }
                Ok(Sink::Recv { mo })
            }
            qn::READ_REQ => {
                // Single-segment messages (RFC 5040 §4.4, RFC 7306 §4.3).
                if mo != 0 || !h.ddp.last || len != 0 {
                    return Err(DdpError::UntaggedInvalidMo.into());
                }
                let busy = self.irq.len()
                    + usize::from(self.cur_tx.as_ref().is_some_and(|m| m.is_response()));
                if busy >= self.cfg.ird as usize {
                    // siw: RDMAP / remote operation / catastrophic localized to the stream.
                    return Err(RdmapError::CatastrophicStream.into());
                }
                let pd = self.cfg.pd;
                match h.rdmap {
                    RdmapPart::ReadRequest(r) => {
                        check_access(
                            &*mem,
                            r.src_stag,
                            pd,
                            Access::REMOTE_READ,
                            r.src_to,
                            u64::from(r.size),
                        )?;
                    }
                    RdmapPart::AtomicRequest(a) => {
                        if !matches!(
                            a.aopcode,
                            aopcode::FETCH_ADD | aopcode::SWAP | aopcode::CMP_SWAP
                        ) {
                            return Err(RdmapError::UnexpectedOpcode.into());
                        }
                        if a.to % 8 != 0 {
                            return Err(RdmapError::BaseBounds.into());
                        }
                        check_access(&*mem, a.stag, pd, Access::REMOTE_ATOMIC, a.to, 8)?;
                    }
                    _ => return Err(RdmapError::UnexpectedOpcode.into()),
                }
                Ok(Sink::Discard)
            }
            qn::ATOMIC_RESP => {
                let id = match h.rdmap {
                    RdmapPart::AtomicResponse(a) => a.req_id,
                    _ => return Err(RdmapError::UnexpectedOpcode.into()),
                };
                match self.orq.front() {
                    Some(o) if o.sink.is_none() && o.req_id == id => Ok(Sink::Discard),
                    _ => Err(RdmapError::UnexpectedOpcode.into()),
                }
            }
            _ => Ok(Sink::Discard), // Terminate: the header holds everything.
        }
    }

    /// The segment's CRC checked: complete messages.
    fn end_segment(&mut self, mem: &mut dyn Memory, h: &Header) -> Result<(), TermCode> {
        let len = self.payload_len();
        if self.rtr_rx.is_some() {
            self.end_rtr(h);
            return Ok(());
        }
        match (h.ddp.buf, h.opcode) {
            (DdpBuf::Tagged { .. }, Opcode::Write) => {}
            (DdpBuf::Tagged { .. }, _) => {
                if let Some(o) = self.orq.front_mut() {
                    o.received += len;
                }
                if h.ddp.last {
                    let o = self.orq.pop_front().ok_or(RdmapError::UnexpectedOpcode)?;
                    if o.received != o.size {
                        return Err(DdpError::TaggedBaseBounds.into());
                    }
                    if o.rtr {
                        return Ok(());
                    }
                    let cqe = o.wr.flags.signaled.then_some(Completion {
                        wr_id: o.wr.wr_id,
                        opcode: CqOpcode::Read,
                        status: WcStatus::Success,
                        byte_len: o.size,
                        imm: None,
                        invalidated: None,
                        solicited: false,
                    });
                    self.sq_done(o.seq, cqe);
                }
            }
            (
                DdpBuf::Untagged {
                    qn: q, ulp_word, ..
                },
                op,
            ) => {
                if h.ddp.last
                    && let Some(m) = self.rx.expected_msn.get_mut(q as usize)
                {
                    *m = m.wrapping_add(1);
                }
                match q {
                    qn::SEND => self.end_send(mem, h, op, Stag(ulp_word), len)?,
                    qn::READ_REQ => self.end_request(mem, h),
                    qn::ATOMIC_RESP => {
                        if let (Some(o), RdmapPart::AtomicResponse(a)) =
                            (self.orq.pop_front(), h.rdmap)
                        {
                            if let Some(s) = o.wr.sges.first() {
                                mem.place(s.mr, s.offset, &a.orig.to_ne_bytes(), None);
                            }
                            let cqe = o.wr.flags.signaled.then_some(Completion {
                                wr_id: o.wr.wr_id,
                                opcode: sq_cq_opcode(o.wr.opcode),
                                status: WcStatus::Success,
                                byte_len: 8,
                                imm: None,
                                invalidated: None,
                                solicited: false,
                            });
                            self.sq_done(o.seq, cqe);
                        }
                    }
                    _ => {
                        // RFC 5040 §5.5: a received Terminate ends the stream.
                        if let RdmapPart::Terminate(t) = h.rdmap {
                            let rest = self.rx.hdr.get(ddp::UNTAGGED_HDR_LEN..self.rx.hdr_len);
                            let t = rest
                                .and_then(|b| {
                                    TerminateHdr::parse(b, self.cfg.term_layout_hint).ok()
                                })
                                .unwrap_or(t);
                            self.remote_term = Some(t);
                        }
                        self.enter_error();
                    }
                }
            }
        }
        Ok(())
    }

    fn end_send(
        &mut self,
        mem: &mut dyn Memory,
        h: &Header,
        op: Opcode,
        inv: Stag,
        len: u64,
    ) -> Result<(), TermCode> {
        self.rx.msg_off += len;
        if !h.ddp.last {
            return Ok(());
        }
        let mut invalidated = None;
        if matches!(op, Opcode::SendInvalidate | Opcode::SendSeInvalidate) {
            // RFC 5040 §6.4 / RFC 5042 §5: only a valid STag of our PD registered for remote
            // invalidation may be invalidated by the peer. RFC 5040 §4.8 lists "STag cannot be
            // invalidated" under both Remote Operation (no such STag) and Remote Protection
            // (an STag the peer may not invalidate); siw splits them the same way.
            let info = mem.lookup(inv).filter(|i| i.valid && i.stag == inv);
            match info {
                None => return Err(RdmapError::CannotInvalidateOperation.into()),
                Some(i) if i.pd != self.cfg.pd || !i.remote_invalidate => {
                    return Err(RdmapError::CannotInvalidate.into());
                }
                Some(_) => {}
            }
            if mem.invalidate(inv).is_err() {
                return Err(RdmapError::CannotInvalidateOperation.into());
            }
            invalidated = Some(inv);
        }
        let rr = self.rx.cur_recv.take();
        let byte_len = self.rx.msg_off;
        self.rx.msg_off = 0;
        if let Some(rr) = rr {
            let (opcode, imm) = match h.rdmap {
                RdmapPart::Immediate(v) => (CqOpcode::RecvImm, Some(v)),
                _ => (CqOpcode::Recv, None),
            };
            self.cq.push_back(Completion {
                wr_id: rr.wr_id,
                opcode,
                status: WcStatus::Success,
                byte_len,
                imm,
                invalidated,
                solicited: matches!(
                    op,
                    Opcode::SendSe | Opcode::SendSeInvalidate | Opcode::ImmediateDataSe
                ),
            });
        }
        Ok(())
    }

    /// A Read or atomic request passed its checks: queue the response (RFC 5040 §5.4,
    /// RFC 7306 §5.2).
    fn end_request(&mut self, mem: &mut dyn Memory, h: &Header) {
        let pd = self.cfg.pd;
        match h.rdmap {
            RdmapPart::ReadRequest(r) => {
                let size = u64::from(r.size);
                if let Ok((info, off)) =
                    check_access(&*mem, r.src_stag, pd, Access::REMOTE_READ, r.src_to, size)
                {
                    self.irq
                        .push_back(TxMsg::read_response(&r, info.handle, off));
                }
            }
            RdmapPart::AtomicRequest(a) => {
                if let Ok((info, off)) =
                    check_access(&*mem, a.stag, pd, Access::REMOTE_ATOMIC, a.to, 8)
                {
                    let op = match a.aopcode {
                        aopcode::FETCH_ADD => AtomicOp::FetchAdd {
                            add: a.add_swap,
                            add_mask: a.add_swap_mask,
                        },
                        aopcode::SWAP => AtomicOp::Swap {
                            swap: a.add_swap,
                            swap_mask: a.add_swap_mask,
                        },
                        _ => AtomicOp::CmpSwap {
                            compare: a.compare,
                            compare_mask: a.compare_mask,
                            swap: a.add_swap,
                            swap_mask: a.add_swap_mask,
                        },
                    };
                    let orig = mem.atomic(info.handle, off, op);
                    self.tx_msn[qn::ATOMIC_RESP as usize] =
                        self.tx_msn[qn::ATOMIC_RESP as usize].wrapping_add(1);
                    let msn = self.tx_msn[qn::ATOMIC_RESP as usize];
                    self.irq.push_back(TxMsg::atomic_response(
                        rw::AtomicResponse {
                            req_id: a.req_id,
                            orig,
                        },
                        msn,
                    ));
                }
            }
            _ => {}
        }
    }
}
