//! The per-connection FPDU log: every byte we queued on the TCP stream, by stream offset, until
//! TCP reports it acknowledged (DESIGN.md §2.6; the transmit-contract finding of issue 7).
//!
//! TCP only tracks stream offsets and reads the bytes again through [`SendSource`] on every
//! (re)transmission, possibly from the middle of a record (a tail-loss probe sends "the last
//! segment's worth" of the outstanding range). So each record keeps what is needed to
//! regenerate its bytes exactly: inline bytes (an MPA Request/Reply, or the length field and
//! DDP/RDMAP header of a gathered FPDU, or a whole FPDU built with markers), the registered
//! region ranges of the payload (with an `Arc` of each region, so a deregistration cannot pull
//! the memory away), and the pad + CRC trailer. The CRC is computed once, over the region
//! bytes, when the record is built; with software TCP checksums the ones-complement sum of the
//! record is computed in the same pass ([`SendSource::checksum`] answers from it). With
//! [`LogMode::defer_crc`] (a device whose frames get their payload by copy) the region is not
//! read when the record is built: [`SendSource::read`] fills each FPDU's CRC over the bytes it
//! just copied into the frame, so the CRC always covers the octets on the wire, in one pass
//! less over the payload.
//!
//! When `Event::Acked { upto }` arrives, [`TxLog::ack`] drops the records below `upto` and
//! returns the completion tokens of the work requests they ended, so the QP completes a
//! Send/Write only once TCP has its last byte acknowledged.

use std::collections::VecDeque;
use std::sync::Arc;

use iwarp::mpa::{Framer, seal_fpdu};
use iwarp::rdmap::{SqToken, TxRun, TxSegment};
use netcore::crc::Crc32c;
use tcp::SendSource;
use tcp::wire::{combine, ones_complement_sum};

use super::memory::{MemTable, QpMemory, Region};
use crate::extbuf::{ExtPin, ExtRegion};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;

/// Most region ranges per record (one DDP segment gathers at most this many).
const MAX_PIECES: usize = iwarp::rdmap::tx::MAX_PIECES;
/// Length field + the largest DDP/RDMAP header a segment carries.
const HEAD_CAP: usize = 2 + 96;

/// Running ones-complement sum of a byte string fed in pieces of any length.
#[derive(Debug, Clone, Copy, Default)]
struct Csum {
    sum: u16,
    odd: bool,
}

impl Csum {
    fn add(&mut self, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        let s = ones_complement_sum(b);
        // A piece that starts at an odd position contributes its bytes in the other halves of
        // the 16-bit words: its sum is byte-swapped (RFC 1071 §2(B)).
        self.sum = combine(self.sum, if self.odd { s.swap_bytes() } else { s });
        self.odd ^= b.len() % 2 == 1;
    }
}

/// How a log builds its records (the engine's choice per device).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogMode {
    /// Compute the ones-complement sum of each record (software TCP checksums, payload by
    /// reference).
    pub sums: bool,
    /// Leave each gathered FPDU's CRC to [`SendSource::read`], which computes it over the
    /// bytes it copies (payload copied into every frame; the only reader of the log's bytes).
    pub defer_crc: bool,
}

/// Inline bytes of a record.
#[derive(Debug, Clone)]
enum Head {
    Fixed([u8; HEAD_CAP], u8),
    Owned(Vec<u8>),
}

impl Head {
    /// `len` zero bytes: in place when they fit, else on the heap.
    fn zeroed(len: usize) -> Head {
        match u8::try_from(len) {
            Ok(n) if len <= HEAD_CAP => Head::Fixed([0; HEAD_CAP], n),
            _ => Head::Owned(vec![0; len]),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Head::Fixed(b, n) => b.get(..usize::from(*n)).unwrap_or(&[]),
            Head::Owned(v) => v,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Head::Fixed(b, n) => b.get_mut(..usize::from(*n)).unwrap_or(&mut []),
            Head::Owned(v) => v,
        }
    }
}

/// A payload range in a registered region (the region by its slot in [`Regions`]).
#[derive(Debug, Clone, Copy)]
struct Piece {
    slot: u32,
    offset: u64,
    len: u32,
}

/// The regions the log's records read from, each held once with the number of pieces naming
/// it: one `Arc` per region rather than one per piece, so building an FPDU and dropping it
/// once acknowledged costs no atomic reference count operation (two per FPDU on the sender's
/// hottest path before). A region stays held while a piece names it, so a deregistration
/// cannot pull the memory away (DESIGN.md §2.6).
#[derive(Debug, Default)]
struct Regions {
    slots: Vec<Option<(Arc<Region>, u32)>>,
    /// Slots free for reuse.
    free: Vec<u32>,
    /// Slot of each held region, by address (consulted when the region changes).
    by_addr: rustc_hash::FxHashMap<usize, u32>,
    /// The slot the last [`Regions::hold`] landed on (consecutive FPDUs read one region).
    last: u32,
}

impl Regions {
    /// One more piece names `r`: its slot.
    fn hold(&mut self, r: &Arc<Region>) -> u32 {
        if let Some(Some((held, n))) = self.slots.get_mut(self.last as usize)
            && Arc::ptr_eq(held, r)
        {
            *n += 1;
            return self.last;
        }
        let addr = Arc::as_ptr(r) as usize;
        let slot = match self.by_addr.get(&addr) {
            Some(&slot) => {
                if let Some(Some((_, n))) = self.slots.get_mut(slot as usize) {
                    *n += 1;
                }
                slot
            }
            None => {
                let held = Some((r.clone(), 1));
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.slots[slot as usize] = held;
                        slot
                    }
                    None => {
                        self.slots.push(held);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.by_addr.insert(addr, slot);
                slot
            }
        };
        self.last = slot;
        slot
    }

    /// A piece naming `slot` is gone: the region is let go with the last one.
    fn release(&mut self, slot: u32) {
        let Some(entry) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if let Some((r, n)) = entry {
            *n -= 1;
            if *n == 0 {
                self.by_addr.remove(&(Arc::as_ptr(r) as usize));
                *entry = None;
                self.free.push(slot);
            }
        }
    }

    fn get(&self, slot: u32) -> Option<&Arc<Region>> {
        self.slots.get(slot as usize)?.as_ref().map(|(r, _)| r)
    }

    /// Regions held (tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

/// One record: an MPA frame or one FPDU (the unit TCP never splits across segments).
#[derive(Debug)]
struct Record {
    start: u64,
    len: u32,
    head: Head,
    pieces: [Option<Piece>; MAX_PIECES],
    trailer: [u8; 7],
    tlen: u8,
    token: Option<SqToken>,
    /// Ones-complement sum of the whole record (when computed).
    sum: Option<u16>,
    /// The CRC field is zero here: [`SendSource::read`] computes it ([`LogMode::defer_crc`]).
    crc_later: bool,
    /// Zero-copy transmit: one pin per piece on its mapping's DPDK registration, made at the
    /// first transmission; dropped with the record (mbufs still in flight keep the memory).
    pins: [Option<ExtPin>; MAX_PIECES],
    /// FPDUs in the record: 1, or a run ([`TxLog::push_run`]) of `run` FPDUs of `len / run`
    /// octets each, FPDU `k` being the first with its DDP offset field advanced by `k * step`
    /// and its one piece `k * step` octets further into the region.
    run: u32,
    /// Payload octets per FPDU of a run.
    step: u32,
    /// Octets per FPDU (`len / run`), set by [`TxLog::push`].
    fpdu: u32,
    /// `fpdu`'s reciprocal ([`reciprocal`]) for the index of an FPDU in a run without a
    /// division ([`Record::fpdu_at`]); 0 for a record of one FPDU.
    inv: u64,
}

/// Longest inline part a run synthesizes: the ULPDU_LENGTH field and an untagged DDP header.
const INLINE_CAP: usize = 2 + iwarp::ddp::wire::UNTAGGED_HDR_LEN;
/// The head a run's FPDU is built from ([`TxLog::copy_run_fpdu`]): [`INLINE_CAP`] rounded up
/// to whole 8-byte words.
const RUN_HEAD: usize = INLINE_CAP.next_multiple_of(8);

/// A part of the stream for zero-copy transmission: inline bytes or a region range.
#[derive(Debug, Clone, Copy)]
pub enum Part<'a> {
    /// Bytes owned by the log (headers, trailers, MPA frames).
    Bytes(&'a [u8]),
    /// Bytes built for this read: the length field and header of an FPDU of a run.
    Inline([u8; INLINE_CAP], u8),
    /// `len` bytes at `offset` of a registered region.
    Region {
        /// The region.
        region: &'a Arc<Region>,
        /// Byte offset in the region.
        offset: u64,
        /// Length.
        len: u32,
    },
}

impl Record {
    fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }

    /// Octets per FPDU.
    fn fpdu_len(&self) -> u64 {
        u64::from(self.fpdu)
    }

    /// The FPDU holding stream offset `at` (the record's first for an offset before it): its
    /// index in the run and its stream range. Two integer divisions per FPDU on the sender's
    /// hottest path (this index and `fpdu_len`) were ~10 ns per segment on an Intel Xeon
    /// (BENCHMARKS.md §4): both come from what [`TxLog::push`] precomputed.
    fn fpdu_at(&self, at: u64) -> (u32, u64, u64) {
        if self.run <= 1 {
            return (0, self.start, self.end());
        }
        // Below `len`, so within 32 bits, for every offset inside the record.
        let rel = u32::try_from(at.saturating_sub(self.start)).unwrap_or(u32::MAX);
        let k = if self.inv != 0 {
            div_by_reciprocal(rel, self.inv)
        } else {
            rel / self.fpdu.max(1)
        };
        let fs = self.start + u64::from(k) * u64::from(self.fpdu);
        (k, fs, (fs + u64::from(self.fpdu)).min(self.end()))
    }

    /// The parts of FPDU `k` of the record (0 for a record of one FPDU).
    fn fpdu_parts<'a>(
        &'a self,
        k: u32,
        regions: &'a Regions,
    ) -> [Option<Part<'a>>; 2 + MAX_PIECES] {
        let mut out = [None; 2 + MAX_PIECES];
        if k == 0 {
            for (o, p) in out.iter_mut().zip(self.parts(regions)) {
                *o = Some(p);
            }
            return out;
        }
        let by = u64::from(k) * u64::from(self.step);
        let head = self.head.bytes();
        let mut inline = [0u8; INLINE_CAP];
        let n = head.len().min(INLINE_CAP);
        inline[..n].copy_from_slice(&head[..n]);
        // The ULPDU_LENGTH field first, then the DDP header (RFC 5044 §4.1).
        if let Some(ddp) = inline.get_mut(2..n) {
            iwarp::ddp::wire::advance_offset(ddp, by);
        }
        let piece = self.pieces[0].and_then(|p| {
            Some(Part::Region {
                region: regions.get(p.slot)?,
                offset: p.offset + by,
                len: p.len,
            })
        });
        let trailer = Part::Bytes(self.trailer.get(..usize::from(self.tlen)).unwrap_or(&[]));
        out[0] = Some(Part::Inline(inline, n as u8));
        out[1] = piece;
        out[2] = Some(trailer);
        out
    }

    /// The record's parts in order (its regions held in `regions`).
    fn parts<'a>(&'a self, regions: &'a Regions) -> impl Iterator<Item = Part<'a>> {
        let head = std::iter::once(Part::Bytes(self.head.bytes()));
        let pieces = self.pieces.iter().flatten().filter_map(|p| {
            Some(Part::Region {
                region: regions.get(p.slot)?,
                offset: p.offset,
                len: p.len,
            })
        });
        let trailer = std::iter::once(Part::Bytes(
            self.trailer.get(..usize::from(self.tlen)).unwrap_or(&[]),
        ));
        head.chain(pieces).chain(trailer)
    }
}

impl<'a> Part<'a> {
    /// Octets `from..to` of the part.
    fn clip(self, from: usize, to: usize) -> Part<'a> {
        match self {
            Part::Bytes(b) => Part::Bytes(b.get(from..to).unwrap_or(&[])),
            Part::Inline(b, _) => {
                let mut c = [0u8; INLINE_CAP];
                let n = to.saturating_sub(from).min(INLINE_CAP);
                if let Some(src) = b.get(from..from + n) {
                    c[..n].copy_from_slice(src);
                }
                Part::Inline(c, n as u8)
            }
            Part::Region { region, offset, .. } => Part::Region {
                region,
                offset: offset + from as u64,
                len: (to - from) as u32,
            },
        }
    }

    fn len(&self) -> usize {
        match self {
            Part::Bytes(b) => b.len(),
            Part::Inline(_, n) => usize::from(*n),
            Part::Region { len, .. } => *len as usize,
        }
    }
}

/// Why a segment could not be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogError {
    /// A payload range names a region this QP cannot see any more (deregistered while in use):
    /// the bytes are sent as zeros.
    RegionGone,
}

/// The per-connection log (see the module docs).
#[derive(Debug, Default)]
pub struct TxLog {
    recs: VecDeque<Record>,
    /// Stream offset of the first byte not yet logged.
    end: u64,
    /// Compute the ones-complement sum of each record (software TCP checksums).
    sums: bool,
    /// [`LogMode::defer_crc`].
    defer_crc: bool,
    /// Some record was logged with its CRC left to the copy (`Record::crc_later`): the
    /// connection's FPDUs carry CRCs ([`TxLog::copy_mode`]).
    crcs: bool,
    scratch: Vec<u8>,
    /// The regions the records' pieces name.
    regions: Regions,
    /// Records built with a region that was gone.
    pub region_gone: u64,
    /// Payload bytes transmitted by reference (external mbufs), retransmissions included.
    pub bytes_by_ref: u64,
    /// Records dropped from the front since the log began (turns [`TxLog::hint`] into an index).
    popped: u64,
    /// The record the last [`TxLog::find`] landed on, counted from the log's beginning: TCP
    /// reads the stream front to back (the checksum, then the bytes of each new segment), so
    /// the next lookup is almost always this record or the one after it, and a binary search
    /// over thousands of records in flight (8 MiB of 1.4 KiB FPDUs) is skipped.
    hint: std::cell::Cell<u64>,
    /// The DPDK registration of the last region a pin was made for: consecutive FPDUs come
    /// from the same region, so the table's lock and hash lookup are paid once per region
    /// instead of once per FPDU. Holding the `Arc<Region>` keeps the identity check sound (the
    /// region cannot be freed and its address reused while we compare against it); dropped
    /// when the log empties, so it does not outlive the pins that need it by more than that.
    ext_cache: Option<(Arc<Region>, Arc<ExtRegion>)>,
}

impl TxLog {
    /// An empty log at stream offset 0; `sums`: precompute TCP checksum sums.
    pub fn new(sums: bool) -> Self {
        Self::with_mode(LogMode {
            sums,
            defer_crc: false,
        })
    }

    /// An empty log at stream offset 0 that builds its records as `mode` says.
    pub fn with_mode(mode: LogMode) -> Self {
        TxLog {
            sums: mode.sums,
            defer_crc: mode.defer_crc,
            ..Default::default()
        }
    }

    /// Whether CRCs are computed at the copy ([`LogMode::defer_crc`]): runs of FPDUs are
    /// logged as one record ([`TxLog::push_run`]).
    pub fn defers_crc(&self) -> bool {
        self.defer_crc
    }

    /// Stream offset after the last logged byte.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Stream offset of the oldest byte still held.
    pub fn start(&self) -> u64 {
        self.recs.front().map_or(self.end, |r| r.start)
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    /// Nothing held (everything acknowledged).
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    fn push(&mut self, mut r: Record) -> u32 {
        r.start = self.end;
        r.fpdu = r.len / r.run.max(1);
        r.inv = if r.run > 1 { reciprocal(r.fpdu) } else { 0 };
        self.crcs |= r.crc_later;
        self.end += u64::from(r.len);
        let len = r.len;
        self.recs.push_back(r);
        len
    }

    /// Log raw bytes (an MPA Request/Reply, or an FPDU framed in copy mode); returns the
    /// record length to queue with `Connection::send_record`.
    pub fn push_bytes(&mut self, bytes: &[u8], token: Option<SqToken>) -> u32 {
        self.push_whole(Head::Owned(bytes.to_vec()), token, false)
    }

    /// Log a record whose bytes are all in `head` (with its sum when the log keeps sums);
    /// `crc_later`: the FPDU's CRC field is left to the fused copy.
    fn push_whole(&mut self, head: Head, token: Option<SqToken>, crc_later: bool) -> u32 {
        let bytes = head.bytes();
        let sum = self.sums.then(|| ones_complement_sum(bytes));
        let len = bytes.len() as u32;
        self.push(Record {
            start: 0,
            len,
            head,
            pieces: Default::default(),
            trailer: [0; 7],
            tlen: 0,
            token,
            sum,
            crc_later,
            pins: Default::default(),
            run: 1,
            step: 0,
            fpdu: 0,
            inv: 0,
        })
    }

    /// Log one FPDU in gather mode (markers off): the length field and DDP/RDMAP header
    /// inline, the payload as region ranges, the CRC computed over the region bytes now (or,
    /// with [`LogMode::defer_crc`], by [`SendSource::read`] over its copy). Returns the
    /// FPDU's length.
    pub fn push_gather(
        &mut self,
        framer: &mut Framer,
        seg: &TxSegment,
        mem: &mut QpMemory,
    ) -> Result<u32, LogError> {
        let hdr = seg.header();
        let ulpdu = u16::try_from(seg.ulpdu_len()).unwrap_or(u16::MAX);
        let Ok(mut g) = framer.gather(ulpdu) else {
            // Markers on: the caller uses push_copy. Never reached with markers off.
            return self.push_copy(framer, seg, mem).map(|(n, _)| n);
        };
        let (head, head_len) = head_bytes(g.prefix(), hdr);
        // Deferred, the CRC is computed over the frame's copy ([`TxLog::seal`]); without a
        // CRC or a sum to compute the region needs no pass here.
        let crc_later = self.defer_crc && g.crc_on();
        let scan = (g.crc_on() && !crc_later) || self.sums;
        let mut csum = Csum::default();
        if scan {
            g.update(hdr);
            if self.sums {
                csum.add(&head[..head_len]);
            }
        }
        let (pieces, gone) = self.gather_pieces(seg, mem, scan.then_some((&mut g, &mut csum)));
        let t = if crc_later || !scan {
            g.trailer_deferred()
        } else {
            g.trailer()
        };
        let tb = t.as_slice();
        if self.sums {
            csum.add(tb);
        }
        let trailer = trailer_bytes(tb);
        if gone {
            self.region_gone += 1;
            for p in pieces.iter().flatten() {
                self.regions.release(p.slot);
            }
            // Keep the stream consistent: send the FPDU with zeros where the region was.
            let mut bytes = head[..head_len].to_vec();
            bytes.resize(head_len + seg.ulpdu_len() - hdr.len(), 0);
            bytes.extend_from_slice(tb);
            if crc_later {
                seal_fpdu(&mut bytes);
            }
            self.push_bytes(&bytes, seg.completion());
            return Err(LogError::RegionGone);
        }
        let len = (head_len + seg.ulpdu_len() - hdr.len() + tb.len()) as u32;
        Ok(self.push(Record {
            start: 0,
            len,
            head: Head::Fixed(head, head_len as u8),
            pieces,
            trailer,
            tlen: tb.len() as u8,
            token: seg.completion(),
            sum: self.sums.then_some(csum.sum),
            crc_later,
            pins: Default::default(),
            run: 1,
            step: 0,
            fpdu: 0,
            inv: 0,
        }))
    }

    /// Log a run of FPDUs ([`Qp::poll_run`](iwarp::rdmap::Qp::poll_run)) as one record: the
    /// first FPDU's length field and header, its region range, and the count; each FPDU's
    /// header and range are derived from them when the stream is read ([`Record::fpdu_parts`]).
    /// Building a record per FPDU was the sender's largest cost after the copies and CRCs.
    /// Only with [`LogMode::defer_crc`] (the CRCs are computed at the copy, so the record
    /// needs none); otherwise, or for a run this log cannot hold whole, each FPDU is logged on
    /// its own. Returns the length of each FPDU (all are equal) and how many were logged, and
    /// [`LogError::RegionGone`] when a region was gone (those FPDUs carry zeros).
    pub fn push_run(
        &mut self,
        framer: &mut Framer,
        run: &TxRun,
        mem: &mut QpMemory,
    ) -> (u32, u32, Result<(), LogError>) {
        let seg = run.first();
        let (count, step) = (run.count(), run.payload_len());
        let head_len = 2 + seg.header().len();
        let piece = seg.pieces().first().copied();
        let region = piece.and_then(|p| {
            let bytes = usize::try_from(u64::from(step) * u64::from(count)).ok()?;
            mem.region_ref(p.mr).filter(|r| r.contains(p.offset, bytes))
        });
        let framed = match (
            self.defer_crc && seg.pieces().len() == 1 && head_len <= INLINE_CAP,
            region,
        ) {
            (true, Some(_)) => framer
                .gather_deferred(u16::try_from(seg.ulpdu_len()).unwrap_or(u16::MAX), count)
                .ok(),
            _ => None,
        };
        let (Some((prefix, t)), Some(region), Some(p)) = (framed, region, piece) else {
            return self.push_each(framer, run, mem);
        };
        let (head, _) = head_bytes(prefix, seg.header());
        let tb = t.as_slice();
        let trailer = trailer_bytes(tb);
        let fpdu_len = (head_len + step as usize + tb.len()) as u32;
        let slot = self.regions.hold(region);
        let mut pieces: [Option<Piece>; MAX_PIECES] = Default::default();
        pieces[0] = Some(Piece {
            slot,
            offset: p.offset,
            len: step,
        });
        self.push(Record {
            start: 0,
            len: fpdu_len * count,
            head: Head::Fixed(head, head_len as u8),
            pieces,
            trailer,
            tlen: tb.len() as u8,
            token: None,
            sum: None,
            crc_later: framer.config().crc,
            pins: Default::default(),
            run: count,
            step,
            fpdu: 0,
            inv: 0,
        });
        (fpdu_len, count, Ok(()))
    }

    /// Log the FPDUs of `run` one by one (as [`TxLog::push_gather`] does).
    fn push_each(
        &mut self,
        framer: &mut Framer,
        run: &TxRun,
        mem: &mut QpMemory,
    ) -> (u32, u32, Result<(), LogError>) {
        let (mut len, mut res) = (0, Ok(()));
        for k in 0..run.count() {
            let before = self.end;
            if let Err(e) = self.push_gather(framer, &run.segment(k), mem) {
                res = Err(e);
            }
            len = (self.end - before) as u32;
        }
        (len, run.count(), res)
    }

    /// The payload pieces of `seg`, each feeding the CRC and sum of `feed` (when given: the
    /// region bytes are read for it) or only checked to exist. `true` with them when a
    /// region is gone or out of range (the pieces then feed zeros).
    fn gather_pieces(
        &mut self,
        seg: &TxSegment,
        mem: &mut QpMemory,
        mut feed: Option<(&mut iwarp::mpa::GatherFpdu, &mut Csum)>,
    ) -> ([Option<Piece>; MAX_PIECES], bool) {
        let mut pieces: [Option<Piece>; MAX_PIECES] = Default::default();
        let mut gone = false;
        for (slot, p) in pieces.iter_mut().zip(seg.pieces()) {
            let region = mem.region_ref(p.mr);
            let ok = region.is_some_and(|r| match feed.as_mut() {
                Some((g, csum)) => r.scan(p.offset, p.len as usize, |chunk| {
                    g.update(chunk);
                    if self.sums {
                        csum.add(chunk);
                    }
                }),
                None => r.contains(p.offset, p.len as usize),
            });
            if !ok {
                gone = true;
                if let Some((g, csum)) = feed.as_mut() {
                    let zeros = vec![0u8; p.len as usize];
                    g.update(&zeros);
                    if self.sums {
                        csum.add(&zeros);
                    }
                }
            }
            *slot = region.map(|region| Piece {
                slot: self.regions.hold(region),
                offset: p.offset,
                len: p.len,
            });
        }
        (pieces, gone)
    }

    /// Log one FPDU in copy mode (markers on: their positions depend on the stream offset, so
    /// the framer writes the whole FPDU). Returns the FPDU's length and its CRC field.
    pub fn push_copy(
        &mut self,
        framer: &mut Framer,
        seg: &TxSegment,
        mem: &mut QpMemory,
    ) -> Result<(u32, [u8; 4]), LogError> {
        let (out, gone) = self.frame_copy(framer, seg, mem);
        let mut crc = [0u8; 4];
        if let Some(c) = out.get(out.len().saturating_sub(4)..) {
            crc.copy_from_slice(c);
        }
        let len = self.push_bytes(&out, seg.completion());
        if gone {
            self.region_gone += 1;
            return Err(LogError::RegionGone);
        }
        Ok((len, crc))
    }

    /// Log one small FPDU as a copy (markers off): an inline message whose work request
    /// completes once it is logged, so the log must not read the application's buffer again
    /// ([`TxLog::take_last_token`]). The FPDU is built in one buffer: the record's fixed head
    /// when it fits (no allocation, the case of a few-byte Write or Send), else one vector.
    /// Its CRC is one pass over the built bytes, or left to the copy with
    /// [`LogMode::defer_crc`] (as for gathered FPDUs); the sum one pass when kept. Returns
    /// the FPDU's length; [`LogError::RegionGone`] when a region was gone (zeros in its place).
    pub fn push_inline(
        &mut self,
        framer: &mut Framer,
        seg: &TxSegment,
        mem: &mut QpMemory,
    ) -> Result<u32, LogError> {
        let hdr = seg.header();
        let ulpdu = seg.ulpdu_len();
        let deferred = u16::try_from(ulpdu)
            .ok()
            .and_then(|u| framer.gather_deferred(u, 1).ok());
        let Some((prefix, t)) = deferred else {
            // Markers on (or a ULPDU no FPDU holds): the framer writes it whole.
            return self.push_copy(framer, seg, mem).map(|(n, _)| n);
        };
        let tb = t.as_slice();
        let len = 2 + ulpdu + tb.len();
        let mut head = Head::zeroed(len);
        let buf = head.bytes_mut();
        buf[..2].copy_from_slice(&prefix);
        buf[2..2 + hdr.len()].copy_from_slice(hdr);
        let mut at = 2 + hdr.len();
        let mut gone = false;
        for p in seg.pieces() {
            let d = &mut buf[at..at + p.len as usize];
            // Out of range: `read` zeroes `d`; a region gone leaves the zeros it holds.
            gone |= !mem.region_ref(p.mr).is_some_and(|r| r.read(p.offset, d));
            at += p.len as usize;
        }
        // The pad and the CRC field are zeros already (RFC 5044 §4.1, §4.4).
        let crc_later = self.defer_crc && framer.config().crc;
        if framer.config().crc && !crc_later {
            seal_fpdu(buf);
        }
        self.push_whole(head, seg.completion(), crc_later);
        if gone {
            self.region_gone += 1;
            return Err(LogError::RegionGone);
        }
        Ok(len as u32)
    }

    /// Frame one FPDU whole (copy mode) without logging it; `true` when a region was gone
    /// (zeros sent in its place). The fault switches break FPDUs built this way.
    pub fn frame_copy(
        &mut self,
        framer: &mut Framer,
        seg: &TxSegment,
        mem: &mut QpMemory,
    ) -> (Vec<u8>, bool) {
        let mut payload = std::mem::take(&mut self.scratch);
        payload.clear();
        let mut gone = false;
        for p in seg.pieces() {
            let at = payload.len();
            payload.resize(at + p.len as usize, 0);
            let ok = mem
                .region_ref(p.mr)
                .is_some_and(|r| r.read(p.offset, &mut payload[at..]));
            gone |= !ok;
        }
        let ulpdu = seg.ulpdu_len();
        let mut out = vec![0u8; framer.fpdu_len(ulpdu)];
        let n = framer
            .frame(&[seg.header(), &payload], &mut out)
            .unwrap_or(0);
        out.truncate(n);
        self.scratch = payload;
        (out, gone)
    }

    /// Detach the completion token of the newest record: its work request completes now
    /// (an inline FPDU whose bytes the log holds as a copy, so the application's buffer is no
    /// longer needed for retransmission).
    pub fn take_last_token(&mut self) -> Option<SqToken> {
        self.recs.back_mut().and_then(|r| r.token.take())
    }

    /// TCP acknowledged everything below `upto`: drop those records and return the
    /// completion tokens of the work requests they ended (in stream order).
    pub fn ack(&mut self, upto: u64, tokens: &mut Vec<SqToken>) {
        while let Some(r) = self.recs.front() {
            if r.end() > upto {
                break;
            }
            if let Some(t) = r.token {
                tokens.push(t);
            }
            for p in r.pieces.iter().flatten() {
                self.regions.release(p.slot);
            }
            self.recs.pop_front();
            self.popped += 1;
        }
        if self.recs.is_empty() {
            self.ext_cache = None;
        }
    }

    /// Index of the record holding stream offset `off`: the hinted record or its successor
    /// when it holds `off` (the sequential case), else a binary search.
    fn find(&self, off: u64) -> Option<usize> {
        let holds = |i: usize| {
            self.recs
                .get(i)
                .is_some_and(|r| r.start <= off && off < r.end())
        };
        let h = self.hint.get().checked_sub(self.popped).map(|h| h as usize);
        if let Some(h) = h {
            for i in [h, h + 1] {
                if holds(i) {
                    self.hint.set(self.popped + i as u64);
                    return Some(i);
                }
            }
        }
        let i = self.recs.partition_point(|r| r.end() <= off);
        let found = self.recs.get(i).filter(|r| r.start <= off).map(|_| i);
        if let Some(i) = found {
            self.hint.set(self.popped + i as u64);
        }
        found
    }

    /// Visit the parts of stream range `[off, off + len)` in order, clipped to the range
    /// (for zero-copy transmission). Stops early when `f` returns false. Bytes outside the log
    /// are not visited.
    pub fn for_each_part<'a>(
        &'a self,
        off: u64,
        len: usize,
        mut f: impl FnMut(Part<'a>) -> bool,
    ) -> usize {
        let Some(mut i) = self.find(off) else {
            return 0;
        };
        let mut at = off;
        let end = off + len as u64;
        while at < end {
            let Some(r) = self.recs.get(i) else { break };
            // The FPDU of a run holding `at` (a record of one FPDU: 0).
            let (first, _, _) = r.fpdu_at(at);
            for k in first..r.run {
                let mut p_start = r.start + u64::from(k) * r.fpdu_len();
                if p_start >= end {
                    break;
                }
                for p in r.fpdu_parts(k, &self.regions).into_iter().flatten() {
                    let p_end = p_start + p.len() as u64;
                    if p_end > at && p_start < end {
                        let from = (at - p_start) as usize;
                        let to = (end.min(p_end) - p_start) as usize;
                        if !f(p.clip(from, to)) {
                            return (at - off) as usize;
                        }
                        at = p_start + to as u64;
                    }
                    p_start = p_end;
                }
            }
            i += 1;
        }
        (at - off) as usize
    }
}

/// Why payload could not be attached without a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachFail {
    /// A range outside the log.
    Range,
    /// No mbuf left, or the chain is too long: the packet is dropped (TCP retransmits).
    Mbuf,
}

impl TxLog {
    /// Make sure every region range of stream range `[off, off + len)` can go out by
    /// reference (its mapping registered with DPDK, a pin made); false when one cannot (the
    /// caller copies the payload instead).
    pub fn prepare_zero_copy(&mut self, off: u64, len: usize, table: &MemTable) -> bool {
        let Some(first) = self.find(off) else {
            return false;
        };
        let end = off + len as u64;
        let cache = &mut self.ext_cache;
        for r in self.recs.range_mut(first..) {
            if r.start >= end {
                break;
            }
            if r.run > 1 {
                // Runs are built for copying devices only ([`TxLog::push_run`]).
                return false;
            }
            for (piece, pin) in r.pieces.iter().zip(r.pins.iter_mut()) {
                let Some(p) = piece else { continue };
                let Some(region) = self.regions.get(p.slot) else {
                    return false;
                };
                if pin.is_none() {
                    let e = match cache {
                        Some((reg, e)) if Arc::ptr_eq(reg, region) => e.clone(),
                        _ => match table.ext_region(region) {
                            Some(e) => {
                                *cache = Some((region.clone(), e.clone()));
                                e
                            }
                            None => return false,
                        },
                    };
                    *pin = Some(ExtPin::new(&e, || {}));
                }
            }
        }
        true
    }

    /// Append stream range `[off, off + len)` to `head`: log bytes copied (a few header and
    /// trailer octets), region ranges attached as external-buffer mbufs (no copy). Call
    /// [`TxLog::prepare_zero_copy`] first.
    pub fn attach(
        &mut self,
        off: u64,
        len: usize,
        head: &mut Mbuf,
        pool: &Mempool,
    ) -> Result<(), AttachFail> {
        let first = self.find(off).ok_or(AttachFail::Range)?;
        let end = off + len as u64;
        let mut at = off;
        // Bytes after an external segment go into a fresh direct mbuf, chained before the
        // next external segment and at the end.
        let mut tail: Option<Mbuf> = None;
        let mut ext_seen = false;
        let mut by_ref = 0u64;
        for r in self.recs.range(first..) {
            if at >= end {
                break;
            }
            if r.run > 1 {
                // Runs are built for copying devices only ([`TxLog::push_run`]).
                return Err(AttachFail::Range);
            }
            let mut p_start = r.start;
            let parts = std::iter::once((Part::Bytes(r.head.bytes()), None))
                .chain(r.pieces.iter().zip(&r.pins).filter_map(|(p, pin)| {
                    let p = p.as_ref()?;
                    let part = Part::Region {
                        region: self.regions.get(p.slot)?,
                        offset: p.offset,
                        len: p.len,
                    };
                    Some((part, pin.as_ref()))
                }))
                .chain(std::iter::once((
                    Part::Bytes(r.trailer.get(..usize::from(r.tlen)).unwrap_or(&[])),
                    None,
                )));
            for (p, pin) in parts {
                let p_end = p_start + p.len() as u64;
                if p_end > at && p_start < end {
                    let from = (at - p_start) as usize;
                    let to = (end.min(p_end) - p_start) as usize;
                    match p {
                        Part::Bytes(b) => {
                            let b = b.get(from..to).unwrap_or(&[]);
                            put_bytes(head, &mut tail, ext_seen, b, pool)?;
                        }
                        // Runs are built for copying devices only ([`TxLog::push_run`]).
                        Part::Inline(..) => return Err(AttachFail::Range),
                        Part::Region { region, offset, .. } => {
                            let pin = pin.ok_or(AttachFail::Range)?;
                            if let Some(t) = tail.take() {
                                head.chain(t).map_err(|_| AttachFail::Mbuf)?;
                            }
                            let moff = region.mapping_offset() + (offset as usize) + from;
                            let m = pin
                                .attach(pool, moff, to - from)
                                .map_err(|_| AttachFail::Mbuf)?;
                            head.chain_ext(m).map_err(|_| AttachFail::Mbuf)?;
                            ext_seen = true;
                            by_ref += (to - from) as u64;
                        }
                    }
                    at = p_start + to as u64;
                }
                p_start = p_end;
            }
        }
        if let Some(t) = tail.take() {
            head.chain(t).map_err(|_| AttachFail::Mbuf)?;
        }
        if at < end {
            return Err(AttachFail::Range);
        }
        self.bytes_by_ref += by_ref;
        Ok(())
    }
}

/// Copy `b` to the end of the packet: into `head` while no external segment was chained,
/// else into the pending direct mbuf `tail`.
fn put_bytes(
    head: &mut Mbuf,
    tail: &mut Option<Mbuf>,
    ext_seen: bool,
    b: &[u8],
    pool: &Mempool,
) -> Result<(), AttachFail> {
    if b.is_empty() {
        return Ok(());
    }
    let dst = if ext_seen {
        if tail.is_none() {
            let mut m = pool.alloc().ok_or(AttachFail::Mbuf)?;
            m.set_len(0);
            *tail = Some(m);
        }
        tail.as_mut().and_then(|t| t.append(b.len()))
    } else {
        head.append(b.len())
    };
    dst.ok_or(AttachFail::Mbuf)?.copy_from_slice(b);
    Ok(())
}

impl TxLog {
    /// Fill the deferred CRC fields ([`LogMode::defer_crc`]) that fall in `dst`, the log's
    /// bytes from stream offset `off`: over `dst` itself for a record it holds whole (the
    /// usual case: TCP sends whole FPDUs), else over the record rebuilt aside (a tail-loss
    /// probe or a retransmission from the middle of a record).
    pub fn seal(&self, off: u64, dst: &mut [u8]) {
        self.seal_where(off, dst, true);
    }

    /// [`TxLog::seal`] for bytes read by [`TxLog::read_fused`]: only the FPDUs cut by `dst`'s
    /// edges, whose CRCs the fused read left out.
    pub fn seal_cut(&self, off: u64, dst: &mut [u8]) {
        self.seal_where(off, dst, false);
    }

    fn seal_where(&self, off: u64, dst: &mut [u8], whole: bool) {
        let end = off + dst.len() as u64;
        let Some(mut i) = self.find(off) else {
            return;
        };
        while let Some(r) = self.recs.get(i)
            && r.start < end
        {
            i += 1;
            if !r.crc_later || r.end() <= off {
                continue;
            }
            let fl = r.fpdu_len().max(1);
            let (first, _, _) = r.fpdu_at(off);
            for k in u64::from(first)..u64::from(r.run) {
                let fs = r.start + k * fl;
                if fs >= end {
                    break;
                }
                if whole || fs < off || fs + fl > end {
                    self.seal_one(fs, fs + fl, off, dst);
                }
            }
        }
    }

    /// Fill the CRC field of the FPDU at stream range `[fs, fe)` where it falls in `dst` (the
    /// log's bytes from `off`): over `dst` when the FPDU is whole in it, else over the FPDU
    /// rebuilt aside.
    fn seal_one(&self, fs: u64, fe: u64, off: u64, dst: &mut [u8]) {
        let end = off + dst.len() as u64;
        let crc_at = fe.saturating_sub(iwarp::mpa::CRC_LEN as u64);
        if fe <= off || crc_at >= end {
            return;
        }
        if fs >= off && fe <= end {
            if let Some(fpdu) = dst.get_mut((fs - off) as usize..(fe - off) as usize) {
                seal_fpdu(fpdu);
            }
            return;
        }
        let mut whole = vec![0u8; (fe - fs) as usize];
        let mut w = 0;
        self.for_each_part(fs, whole.len(), |p| {
            let n = p.len();
            if let Some(d) = whole.get_mut(w..w + n) {
                copy_part(p, d);
            }
            w += n;
            true
        });
        seal_fpdu(&mut whole);
        // The part of the CRC field inside dst.
        let (from, to) = (crc_at.max(off), fe.min(end));
        if let (Some(d), Some(c)) = (
            dst.get_mut((from - off) as usize..(to - off) as usize),
            whole.get((from - fs) as usize..(to - fs) as usize),
        ) {
            d.copy_from_slice(c);
        }
    }
}

/// `2^64 / d` rounded up (`d` at least 2), for [`div_by_reciprocal`]; 0 for `d` below 2.
fn reciprocal(d: u32) -> u64 {
    if d < 2 {
        0
    } else {
        u64::MAX / u64::from(d) + 1
    }
}

/// `n / d` from `d`'s [`reciprocal`] `inv`: the high half of the 128-bit product, one
/// multiplication instead of a division. Exact for every 32-bit `n` and `d` (the
/// reciprocal's rounding error, below 1 in 2^64, times `n` < 2^32 stays below the distance
/// of `n / d` to the next integer, at least `1 / d` > 2^-32); tested against the division.
fn div_by_reciprocal(n: u32, inv: u64) -> u32 {
    ((u128::from(n) * u128::from(inv)) >> 64) as u32
}

/// A gathered FPDU's inline head: its ULPDU_LENGTH field, then its DDP/RDMAP header.
fn head_bytes(prefix: [u8; 2], hdr: &[u8]) -> ([u8; HEAD_CAP], usize) {
    let mut head = [0u8; HEAD_CAP];
    head[..2].copy_from_slice(&prefix);
    head[2..2 + hdr.len()].copy_from_slice(hdr);
    (head, 2 + hdr.len())
}

/// A gathered FPDU's pad and CRC field (3 to 7 octets) in a record's fixed array.
fn trailer_bytes(tb: &[u8]) -> [u8; 7] {
    let mut trailer = [0u8; 7];
    trailer[..tb.len()].copy_from_slice(tb);
    trailer
}

/// Copy one part of the log into `d` (of the part's length).
fn copy_part(p: Part<'_>, d: &mut [u8]) {
    match p {
        Part::Bytes(b) => d.copy_from_slice(b),
        Part::Inline(b, n) => d.copy_from_slice(&b[..usize::from(n)]),
        Part::Region { region, offset, .. } => {
            region.read(offset, d);
        }
    }
}

impl TxLog {
    /// [`SendSource::read`] without the deferred CRCs ([`LogMode::defer_crc`]): the caller
    /// fills them in with [`TxLog::seal`] over the same bytes before they leave. The FPDUs of
    /// runs that lie whole in `dst` are built directly ([`TxLog::copy_run_fpdu`]), the rest
    /// part by part.
    pub fn read_unsealed(&self, stream_offset: u64, dst: &mut [u8]) {
        let end = stream_offset + dst.len() as u64;
        let mut at = stream_offset;
        while at < end {
            let Some(r) = self.find(at).and_then(|i| self.recs.get(i)) else {
                break;
            };
            let w = (at - stream_offset) as usize;
            let mut stop = r.end().min(end);
            if r.step > 0 {
                let (k, fs, fe) = r.fpdu_at(at);
                let d = &mut dst[w..(fe.min(end) - stream_offset) as usize];
                if fs == at
                    && fe <= end
                    && self.copy_run_fpdu(r, k, d, RunCrc::Logged, false).is_some()
                {
                    at = fe;
                    continue;
                }
                stop = fe.min(end);
            }
            let d = &mut dst[w..(stop - stream_offset) as usize];
            let mut n = 0;
            let done = self.for_each_part(at, d.len(), |p| {
                let Some(part) = d.get_mut(n..n + p.len()) else {
                    return false;
                };
                copy_part(p, part);
                n += p.len();
                true
            });
            at += done as u64;
            if done < d.len() {
                break;
            }
        }
        if let Some(rest) = dst.get_mut((at - stream_offset) as usize..) {
            rest.fill(0);
        }
    }
}

impl TxLog {
    /// Whether [`TxLog::read_fused`] applies: CRCs deferred to the copy, and a CRC
    /// implementation that computes them in the copy's pass.
    pub fn fuses(&self) -> bool {
        self.defer_crc && netcore::crc::current().fuses_copy()
    }

    /// [`SendSource::read`] with the copy and the deferred CRCs ([`LogMode::defer_crc`]) in one
    /// pass: each FPDU whole in `dst` is copied part by part with its CRC computed from the
    /// bytes as they pass (the region's through [`Region::read_crc`]), and its CRC field
    /// written (RFC 5044 §4.4: the CRC covers every octet before the field). An FPDU cut by
    /// `dst`'s edges (a tail-loss probe, a retransmission from the middle of a record) is
    /// read unsealed: [`TxLog::seal_cut`] completes it. Past the log's end `dst` is zeroed.
    /// Returns whether such an FPDU was met (false: every CRC in `dst` is filled in).
    pub fn read_fused(&self, stream_offset: u64, dst: &mut [u8]) -> bool {
        self.read_fused_into(stream_offset, dst, None)
    }

    /// How a frame's payload is best copied from this log on this CPU ([`CopyMode`]): with
    /// deferred CRCs ([`LogMode::defer_crc`]), [`CopyMode::FusedSum`] where the copy computes
    /// the CRCs and the sum in its pass (the CRC implementation fuses copies and the CPU has
    /// `copycrc`'s copy-CRC-sum kernel, [`copycrc::fuses_sum`]; or, FPDUs without CRCs, its
    /// copy-sum kernel, [`copycrc::fuses_copy_sum`]), else [`CopyMode::Fused`] where the copy
    /// computes the CRCs, else [`CopyMode::Unsealed`]. A few atomic loads and a feature
    /// check: the sender asks once per batch of frames.
    pub fn copy_mode(&self) -> CopyMode {
        if !self.defer_crc {
            return CopyMode::Unsealed;
        }
        let crc_fuses = netcore::crc::current().fuses_copy();
        match (crc_fuses, self.crcs) {
            (true, _) if copycrc::fuses_sum() => CopyMode::FusedSum,
            (true, _) => CopyMode::Fused,
            (false, false) if copycrc::fuses_copy_sum() => CopyMode::FusedSum,
            (false, _) => CopyMode::Unsealed,
        }
    }

    /// [`TxLog::read_fused`] that also returns the RFC 1071 sum of the bytes it wrote into
    /// `dst` ([`ones_complement_sum`]'s value for `dst`): the region's payload of each FPDU of
    /// a run summed in the copy's pass ([`Region::read_crc_sum_after`]; without CRCs,
    /// [`Region::read_sum`]), each FPDU's head, pad and CRC field from the
    /// small buffers they are built in, other parts from `dst` after they are written, a
    /// piece at an odd offset of `dst` byte-swapped (RFC 1071 §2(B)). The sum is `None` when
    /// an FPDU was cut (the first value true): [`TxLog::seal_cut`] still writes into `dst`.
    pub fn read_fused_sum(&self, stream_offset: u64, dst: &mut [u8]) -> (bool, Option<u16>) {
        let mut sum = FrameSum::default();
        let cut = self.read_fused_into(stream_offset, dst, Some(&mut sum));
        (cut, (!cut).then(|| sum.value()))
    }

    /// [`TxLog::read_fused`], with `sum` the sum of what it writes ([`TxLog::read_fused_sum`]).
    fn read_fused_into(
        &self,
        stream_offset: u64,
        dst: &mut [u8],
        mut sum: Option<&mut FrameSum>,
    ) -> bool {
        let end = stream_offset + dst.len() as u64;
        let mut at = stream_offset;
        let mut cut = false;
        while at < end {
            let Some(r) = self.find(at).and_then(|i| self.recs.get(i)) else {
                break;
            };
            let o = (at - stream_offset) as usize;
            if r.step > 0 {
                // The write_bw path: an FPDU of a run, whole in `dst`, its CRC (if on) and its
                // sum (if asked) computed in the copy's pass.
                let (k, fs, fe) = r.fpdu_at(at);
                let (crc, logged) = (RunCrc::Compute, RunCrc::Logged);
                if fs == at
                    && fe <= end
                    && let d = &mut dst[o..(fe - stream_offset) as usize]
                    && let Some(v) = match (r.crc_later, sum.is_some()) {
                        (true, true) => self.copy_run_fpdu(r, k, d, crc, true),
                        (true, false) => self.copy_run_fpdu(r, k, d, crc, false),
                        (false, true) => self.copy_run_fpdu(r, k, d, logged, true),
                        (false, false) => self.copy_run_fpdu(r, k, d, logged, false),
                    }
                {
                    if let Some(s) = sum.as_deref_mut() {
                        s.add(o, v);
                    }
                    at = fe;
                    continue;
                }
            }
            if !r.crc_later {
                // Nothing to compute (an MPA frame, CRCs off): the record's bytes in one read.
                let stop = r.end().min(end);
                let d = &mut dst[o..(stop - stream_offset) as usize];
                self.read_unsealed(at, d);
                if let Some(s) = sum.as_deref_mut() {
                    s.add_bytes(o, d);
                }
                at = stop;
                continue;
            }
            let (k, fs, fe) = r.fpdu_at(at);
            let stop = fe.min(end);
            let d = &mut dst[o..(stop - stream_offset) as usize];
            let whole = fs == at && fe <= end;
            cut |= !whole;
            if !(whole && self.copy_fpdu(r, k, d)) {
                self.read_unsealed(at, d);
                if whole {
                    seal_fpdu(d);
                }
            }
            if let Some(s) = sum.as_deref_mut() {
                s.add_bytes(o, d);
            }
            at = stop;
        }
        if let Some(rest) = dst.get_mut((at - stream_offset) as usize..) {
            // Zeros add nothing to the sum.
            rest.fill(0);
        }
        cut
    }

    /// Copy FPDU `k` of `r` (deferred CRC) into `d`, its exact length, computing its CRC on
    /// the way. False (nothing reliable in `d`) when its parts do not add up to `d`.
    fn copy_fpdu(&self, r: &Record, k: u32, d: &mut [u8]) -> bool {
        let Some(covered) = d.len().checked_sub(iwarp::mpa::CRC_LEN) else {
            return false;
        };
        if r.step > 0 {
            return self
                .copy_run_fpdu(r, k, d, RunCrc::Compute, false)
                .is_some();
        }
        let mut crc = Crc32c::new();
        if r.tlen == 0 && r.pieces.iter().all(Option::is_none) {
            // The whole FPDU is the record's head ([`TxLog::push_inline`]): one copy.
            let b = r.head.bytes();
            if b.len() != d.len() {
                return false;
            }
            crc.copy_update(&b[..covered], &mut d[..covered]);
            d[covered..].copy_from_slice(&iwarp::mpa::crc_to_wire(crc.value()));
            return true;
        }
        let mut w = 0;
        for p in r.fpdu_parts(k, &self.regions).into_iter().flatten() {
            let n = p.len();
            let Some(seg) = d.get_mut(w..w + n) else {
                return false;
            };
            // Bytes past `covered` are the CRC field itself (zeros in the trailer).
            let hashed = covered.saturating_sub(w).min(n);
            match (p, part_bytes(&p)) {
                (_, Some(b)) => {
                    let (now, rest) = seg.split_at_mut(hashed);
                    crc.copy_update(&b[..hashed], now);
                    rest.copy_from_slice(&b[hashed..]);
                }
                (Part::Region { region, offset, .. }, None) if hashed == n => {
                    region.read_crc(offset, seg, &mut crc);
                }
                _ => return false,
            }
            w += n;
        }
        if w != d.len() {
            return false;
        }
        d[covered..].copy_from_slice(&iwarp::mpa::crc_to_wire(crc.value()));
        true
    }

    /// FPDU `k` of a run ([`TxLog::push_run`]) into `d` (its exact length): its head built in
    /// a small buffer of fixed size (the offset field advanced there) and copied, then the
    /// region's bytes, then the pad and the CRC field. With [`RunCrc::Compute`]
    /// ([`TxLog::copy_fpdu`]) the CRC is computed on the way and written, with
    /// [`RunCrc::Logged`] the field copied as logged (zero). With `sum`, returns the RFC 1071
    /// sum of the bytes written into `d` ([`FrameSum`] from `d`'s start; 0 without): the
    /// region's payload copied (and hashed) and summed in one pass ([`Region::read_sum`],
    /// [`Region::read_crc_sum_after`], the head copied and hashed in the same call), the head and
    /// the trailer summed from the buffers they are
    /// copied from. None (nothing reliable in `d`) when the record does not add up to `d`, or,
    /// with `sum`, when the region's bytes cannot be read by a kernel that sums.
    ///
    /// No FPDU parts ([`Record::fpdu_parts`]) are built and moved through the stack: those
    /// were read back by loads spanning several smaller stores, which the CPU cannot forward
    /// from its store buffer, so each such load waited until the buffer (the previous frame's
    /// payload) had drained, 20-60 ns per FPDU on an Intel Xeon (BENCHMARKS.md §4). Here the
    /// head is built in this frame by one whole-buffer copy, and every later load of it (the
    /// copy into `d`, its CRC and sum) reads bytes that one store wrote. Inlined always: each
    /// caller passes constants (the fused read one per case), which leave one path of the
    /// copier in each copy.
    #[inline(always)]
    fn copy_run_fpdu(
        &self,
        r: &Record,
        k: u32,
        d: &mut [u8],
        crc: RunCrc,
        sum: bool,
    ) -> Option<u16> {
        let Head::Fixed(bytes, n) = &r.head else {
            return None;
        };
        let (n, step) = (usize::from(*n), r.step as usize);
        let (p, trailer) = (r.pieces[0]?, r.trailer.get(..usize::from(r.tlen))?);
        let region = self.regions.get(p.slot)?;
        let pad = trailer.len().checked_sub(iwarp::mpa::CRC_LEN)?;
        if !(2..=RUN_HEAD).contains(&n) || n + step + trailer.len() != d.len() {
            return None;
        }
        // A whole-buffer copy: each later load lies inside one of its stores.
        let mut head = [0u8; RUN_HEAD];
        head.copy_from_slice(&bytes[..RUN_HEAD]);
        let by = u64::from(k) * u64::from(r.step);
        // The ULPDU_LENGTH field first, then the DDP header (RFC 5044 §4.1).
        iwarp::ddp::wire::advance_offset(&mut head[2..n], by);
        let (hp, tail) = d.split_at_mut(n + step);
        let off = p.offset + by;
        let mut s = FrameSum::default();
        if sum {
            s.add(0, small_sum(&head[..n]));
        }
        match crc {
            RunCrc::Logged => {
                let (h, payload) = hp.split_at_mut(n);
                h.copy_from_slice(&head[..n]);
                if sum {
                    s.add(n, region.read_sum(off, payload)?);
                    s.add(n + step, small_sum(trailer));
                } else if !region.read(off, payload) {
                    return None;
                }
                tail.copy_from_slice(trailer);
            }
            RunCrc::Compute => {
                let mut c = Crc32c::new();
                if sum && step >= HEAD_IN_KERNEL_MIN {
                    // The head's CRC in the payload kernel's call (one dispatch, not two).
                    s.add(n, region.read_crc_sum_after(&head[..n], off, hp, &mut c)?);
                } else if sum {
                    let (h, payload) = hp.split_at_mut(n);
                    c.copy_update(&head[..n], h);
                    s.add(n, region.read_crc_sum(off, payload, &mut c)?);
                } else {
                    let (h, payload) = hp.split_at_mut(n);
                    c.copy_update(&head[..n], h);
                    if !region.read_crc(off, payload, &mut c) {
                        return None;
                    }
                }
                // The pad (zeros, RFC 5044 §4.1) hashed from the record, then the CRC field
                // over everything before it (RFC 5044 §4.4), built aside to be summed.
                c.update(&trailer[..pad]);
                let mut t = [0u8; 3 + iwarp::mpa::CRC_LEN];
                let t = t.get_mut(..trailer.len())?;
                t[..pad].copy_from_slice(&trailer[..pad]);
                t[pad..].copy_from_slice(&iwarp::mpa::crc_to_wire(c.value()));
                tail.copy_from_slice(t);
                if sum {
                    s.add(n + step, small_sum(t));
                }
            }
        }
        Some(s.value())
    }
}

/// What [`TxLog::copy_run_fpdu`] writes into an FPDU's CRC field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunCrc {
    /// The field as logged: zero (CRCs off, or the CRC left to [`TxLog::seal`]).
    Logged,
    /// The CRC computed over the bytes as they are copied (deferred CRCs, a fused read).
    Compute,
}

/// How the sender copies a frame's payload from the FPDU log ([`TxLog::copy_mode`], chosen
/// once per batch of frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMode {
    /// [`TxLog::read_unsealed`]: the deferred CRCs ([`TxLog::seal`]) and the payload's sum
    /// after the batch.
    Unsealed,
    /// [`TxLog::read_fused`]: the CRCs in the copy's pass, the sum after the batch.
    Fused,
    /// [`TxLog::read_fused_sum`]: the CRCs (if on) and the sum in the copy's pass.
    FusedSum,
}

/// The shortest run-FPDU payload whose head is copied and hashed in the payload kernel's call
/// ([`Region::read_crc_sum_after`]) rather than by a call of its own. Measured on an Intel Xeon
/// (model 207, memif, BENCHMARKS.md §4, the eleventh session's total): with the head in the
/// kernel's call at every length, write_bw 64 KiB gained ~1.9 % but write_lat 2 B lost ~0.1 us
/// (t_typical 2.08 -> 2.18, 8+8 runs); with this bound both keep their better figure. Why the
/// one call is slower for a few payload bytes was not found.
const HEAD_IN_KERNEL_MIN: usize = 256;

/// A running RFC 1071 sum of pieces written into a buffer ([`TxLog::read_fused_sum`]): each
/// piece's sum of its own big-endian words, byte-swapped when the piece starts at an odd
/// offset of the buffer (its words are then the buffer's words shifted by one byte, RFC 1071
/// §2(B)), added with end-around carry deferred to [`FrameSum::value`].
#[derive(Debug, Default, Clone, Copy)]
struct FrameSum {
    acc: u64,
}

impl FrameSum {
    /// Add `sum`, the sum of a piece at offset `at` of the buffer.
    #[inline]
    fn add(&mut self, at: usize, sum: u16) {
        self.acc += u64::from(if at % 2 == 1 { sum.swap_bytes() } else { sum });
    }

    /// Add the piece `bytes` at offset `at` of the buffer.
    #[inline]
    fn add_bytes(&mut self, at: usize, bytes: &[u8]) {
        self.add(at, ones_complement_sum(bytes));
    }

    /// The buffer's sum, folded to 16 bits (not complemented).
    fn value(self) -> u16 {
        netcore::csum::fold(self.acc)
    }
}

/// The RFC 1071 sum of a few bytes just built by narrow stores (an FPDU's head, its pad and
/// CRC field), a byte at a time: each load lies inside one store and is forwarded from the
/// store buffer, where a wide load over them (the sum kernels') would wait for the stores to
/// drain.
#[inline]
fn small_sum(bytes: &[u8]) -> u16 {
    let acc = bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| u64::from(b) << (8 * (1 - i % 2)))
        .sum();
    netcore::csum::fold(acc)
}

/// The inline bytes of `p` (None for a region part).
fn part_bytes<'a>(p: &'a Part<'_>) -> Option<&'a [u8]> {
    match p {
        Part::Bytes(b) => Some(b),
        Part::Inline(b, n) => b.get(..usize::from(*n)),
        Part::Region { .. } => None,
    }
}

impl SendSource for TxLog {
    fn read(&mut self, stream_offset: u64, dst: &mut [u8]) {
        if self.fuses() {
            if self.read_fused(stream_offset, dst) {
                self.seal_cut(stream_offset, dst);
            }
            return;
        }
        self.read_unsealed(stream_offset, dst);
        if self.defer_crc {
            // Past the log's end `dst` holds zeros, which no record's CRC field covers.
            self.seal(stream_offset, dst);
        }
    }

    fn checksum(&mut self, stream_offset: u64, len: usize) -> u16 {
        if self.defer_crc {
            // The CRC fields exist only in copies: sum what `read` writes.
            return tcp::conn::checksum_by_read(self, stream_offset, len);
        }
        // One whole record (the usual case): the sum computed when it was built.
        if let Some(i) = self.find(stream_offset)
            && let Some(r) = self.recs.get(i)
            && r.start == stream_offset
            && r.len as usize == len
            && let Some(s) = r.sum
        {
            return s;
        }
        let mut csum = Csum::default();
        self.for_each_part(stream_offset, len, |p| {
            match p {
                Part::Bytes(b) => csum.add(b),
                Part::Inline(b, n) => csum.add(&b[..usize::from(n)]),
                Part::Region {
                    region,
                    offset,
                    len,
                } => {
                    region.scan(offset, len as usize, |c| csum.add(c));
                }
            }
            true
        });
        // Bytes beyond the log read as zeros and add nothing to the sum.
        csum.sum
    }
}

/// CRC32c of `bytes` (tests and diagnostics).
pub fn crc_of(bytes: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(bytes);
    c.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::ids::ClientId;
    use crate::rdma::memory::{HeapMemory, MemTable, MrRequest};
    use iwarp::mpa::{Deframed, Deframer, DeframerConfig, FramerConfig};
    use iwarp::rdmap::{Qp, QpConfig, WorkRequest, WrOpcode};
    use iwarp::stag::{Access, PdId, Stag};

    struct Setup {
        qp: Qp,
        mem: QpMemory,
        table: Arc<MemTable>,
        lkey: iwarp::stag::MrHandle,
        data: Vec<u8>,
    }

    fn setup(len: usize) -> Setup {
        let table = MemTable::new(8, 9);
        let heap = HeapMemory::new(len);
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        heap.fill(0, &data);
        let k = table
            .register(MrRequest {
                owner: ClientId(1),
                pd: PdId(1),
                mem: heap,
                offset: 0,
                len,
                base_to: 0,
                access: Access::LOCAL_READ | Access::LOCAL_WRITE,
                remote_invalidate: false,
            })
            .unwrap();
        let mut qp = Qp::new(QpConfig {
            pd: PdId(1),
            crc: true,
            complete_on_ack: true,
            ..Default::default()
        });
        qp.establish();
        let mem = QpMemory::new(table.clone(), ClientId(1), PdId(1));
        Setup {
            qp,
            mem,
            table,
            lkey: k.lkey,
            data,
        }
    }

    fn sge(s: &Setup, off: u64, len: u32) -> iwarp::rdmap::Sge {
        iwarp::rdmap::Sge {
            mr: s.lkey,
            offset: off,
            len,
        }
    }

    /// A log holding an MPA frame, then a Write of `len` bytes and a Send of 1 byte, framed for
    /// `emss`. Returns the log and the record lengths.
    fn build(s: &mut Setup, crc: bool, emss: usize, sums: bool) -> (TxLog, Vec<u32>) {
        build_with(
            s,
            crc,
            emss,
            LogMode {
                sums,
                defer_crc: false,
            },
        )
    }

    /// [`build`] with a log of `mode`.
    /// The work requests every log of these tests carries: a Write of 5000 octets and a
    /// Send of one.
    fn post(s: &mut Setup) {
        let mut w = WorkRequest::new(7, WrOpcode::Write, vec![sge(s, 3, 5000)]);
        w.remote_stag = Stag(0x100);
        s.qp.post_send(w).unwrap();
        s.qp.post_send(WorkRequest::new(8, WrOpcode::Send, vec![sge(s, 1, 1)]))
            .unwrap();
    }

    fn build_with(s: &mut Setup, crc: bool, emss: usize, mode: LogMode) -> (TxLog, Vec<u32>) {
        let mut log = TxLog::with_mode(mode);
        let mut lens = vec![log.push_bytes(b"MPA ID Req Frame\x80\x01\x00\x00", None)];
        post(s);
        let mut framer = Framer::new(FramerConfig {
            crc,
            markers: false,
            stream_pos: 0,
        });
        let max = iwarp::mpa::framer::max_ulpdu_len_any_pos(emss, false);
        while let Some(seg) = s.qp.poll_segment(max, &mut s.mem) {
            lens.push(log.push_gather(&mut framer, &seg, &mut s.mem).unwrap());
        }
        (log, lens)
    }

    /// As [`build_with`] with deferred CRCs, the FPDUs polled and logged as runs of at most
    /// `max_count`, plus a Send of three scatter/gather elements.
    fn build_runs(s: &mut Setup, crc: bool, emss: usize, max_count: u32) -> (TxLog, Vec<u32>) {
        let mut log = TxLog::with_mode(LogMode {
            sums: false,
            defer_crc: true,
        });
        let mut lens = vec![log.push_bytes(b"MPA ID Req Frame\x80\x01\x00\x00", None)];
        post(s);
        let sges = vec![sge(s, 10, 2000), sge(s, 4000, 7), sge(s, 5000, 3000)];
        s.qp.post_send(WorkRequest::new(9, WrOpcode::Send, sges))
            .unwrap();
        let mut framer = Framer::new(FramerConfig {
            crc,
            markers: false,
            stream_pos: 0,
        });
        let max = iwarp::mpa::framer::max_ulpdu_len_any_pos(emss, false);
        while let Some(run) = s.qp.poll_run(max, max_count, &mut s.mem) {
            if run.count() > 1 {
                let (len, n, res) = log.push_run(&mut framer, &run, &mut s.mem);
                res.unwrap();
                lens.extend(std::iter::repeat_n(len, n as usize));
            } else {
                lens.push(
                    log.push_gather(&mut framer, run.first(), &mut s.mem)
                        .unwrap(),
                );
            }
        }
        (log, lens)
    }

    /// A log of runs reads like one of single FPDUs (the same work requests polled one segment
    /// at a time): every range of a grid, checksums included, before and after each FPDU is
    /// acknowledged; the region is let go with the last FPDU of the last run.
    #[test]
    fn runs_read_like_single_fpdus() {
        for crc in [true, false] {
            for emss in [200usize, 1460] {
                for max_count in [1u32, 2, 3, 1000] {
                    let mut s = setup(9000);
                    let (mut a, la) = build_runs(&mut s, crc, emss, 1);
                    let mut s = setup(9000);
                    let (mut b, lb) = build_runs(&mut s, crc, emss, max_count);
                    assert_eq!(la, lb);
                    if max_count > 1 {
                        assert!(b.len() < a.len(), "no run formed");
                    }
                    let total = (a.end() - a.start()) as usize;
                    let mut wa = vec![0u8; total];
                    a.read(0, &mut wa);
                    let mut ends = vec![];
                    let mut acked = 0u64;
                    for l in &lb {
                        acked += u64::from(*l);
                        ends.push(acked);
                    }
                    let mut tokens = Vec::new();
                    for (n, upto) in ends.iter().enumerate().step_by(3) {
                        let from = if n == 0 { 0 } else { ends[n - 1] as usize };
                        for start in (from..total).step_by(97) {
                            for len in [1, 3, 5, 100, 1453, 1466, 3000] {
                                let len = len.min(total - start);
                                let mut x = vec![0u8; len];
                                b.read(start as u64, &mut x);
                                let want = &wa[start..start + len];
                                let at =
                                    format!("crc {crc} emss {emss} run {max_count} @{start}+{len}");
                                assert_eq!(x, want, "{at}");
                                assert_eq!(
                                    b.checksum(start as u64, len),
                                    ones_complement_sum(want)
                                );
                            }
                        }
                        b.ack(*upto, &mut tokens);
                    }
                    b.ack(b.end(), &mut tokens);
                    a.ack(a.end(), &mut tokens);
                    assert_eq!((b.regions.held(), a.regions.held()), (0, 0));
                }
            }
        }
    }

    /// The logs of runs the fused-copy tests read, built by [`build_runs`] for each `(crc,
    /// emss, max_count)`: single FPDUs and long runs, CRCs on and off, payloads of even and
    /// odd lengths (pads and CRC fields at odd offsets). Each with whether CRCs are on, a
    /// label, the FPDU lengths and the log's length.
    fn run_logs() -> impl Iterator<Item = (bool, String, TxLog, Vec<u32>, usize)> {
        const CASES: [(bool, usize, u32); 9] = [
            (true, 200, 1),
            (true, 200, 1000),
            (true, 199, 1000),
            (true, 1460, 1),
            (true, 1460, 1000),
            (true, 1461, 1000),
            (false, 1460, 1),
            (false, 1460, 1000),
            (false, 1459, 1),
        ];
        CASES.iter().map(|&(crc, emss, max_count)| {
            let mut s = setup(9000);
            let (log, lens) = build_runs(&mut s, crc, emss, max_count);
            let total = (log.end() - log.start()) as usize;
            let what = format!("crc {crc} emss {emss} run {max_count}");
            (crc, what, log, lens, total)
        })
    }

    /// The `(start, len)` ranges the fused-copy tests read from a log of `total` bytes whose
    /// FPDUs have lengths `lens`: starts every 89 bytes and at the first two FPDUs, ends inside
    /// headers, payloads and CRC fields, at every FPDU's end, and past the log's end.
    fn read_ranges(total: usize, lens: &[u32]) -> Vec<(usize, usize)> {
        let whole: Vec<usize> = lens
            .iter()
            .scan(0, |e, &l| {
                *e += l as usize;
                Some(*e)
            })
            .collect();
        let starts = (0..total).step_by(89).chain([0, lens[0] as usize]);
        starts
            .flat_map(|start| {
                let ends = [1, 4, 5, 100, 1453, 1466, 3000, total + 10].map(|l| start + l);
                let whole = whole.clone();
                ends.into_iter()
                    .chain(whole)
                    .map(move |end| (start, end.min(total + 10).saturating_sub(start)))
            })
            .collect()
    }

    /// The fused copy (CRCs computed while the FPDUs are copied, then only the cut ones
    /// sealed) reads exactly what the copy followed by a CRC pass reads, over a grid of ranges
    /// that start and end inside headers, payloads and CRC fields, past the log's end too.
    /// Called directly, both paths run whatever CRC implementation the process chose.
    #[test]
    fn fused_reads_like_copy_then_seal() {
        for (crc, what, log, lens, total) in run_logs() {
            for (start, len) in read_ranges(total, &lens) {
                let (mut x, mut y) = (vec![0xaau8; len], vec![0x55u8; len]);
                if log.read_fused(start as u64, &mut x) {
                    log.seal_cut(start as u64, &mut x);
                }
                log.read_unsealed(start as u64, &mut y);
                log.seal(start as u64, &mut y);
                assert_eq!(x, y, "{what} @{start}+{len}");
            }
            // FPDUs read whole by the fused copy carry valid CRCs (the deframer checks
            // them) and nothing else sealed them.
            let mut all = vec![0u8; total];
            assert!(!log.read_fused(0, &mut all), "nothing cut");
            assert_eq!(deframe(&all[lens[0] as usize..], crc).len(), lens.len() - 1);
        }
    }

    /// The fused copy that also sums ([`TxLog::read_fused_sum`]) writes what
    /// [`TxLog::read_fused`] writes, and its sum, where no FPDU was cut, is the sum of those
    /// bytes: over the same logs and grid of ranges.
    #[test]
    fn fused_sum_is_the_sum_of_what_the_fused_copy_writes() {
        for (_, what, log, lens, total) in run_logs() {
            for (start, len) in read_ranges(total, &lens) {
                let (mut x, mut y) = (vec![0xaau8; len], vec![0x55u8; len]);
                let at = format!("{what} @{start}+{len}");
                let (cut, sum) = log.read_fused_sum(start as u64, &mut x);
                assert_eq!(cut, log.read_fused(start as u64, &mut y), "{at}");
                assert_eq!(x, y, "{at}");
                assert_eq!(sum.is_none(), cut, "{at}");
                if let Some(sum) = sum {
                    assert_eq!(sum, ones_complement_sum(&x), "{at}");
                }
            }
        }
    }

    /// The copy mode a batch of frames uses: FPDUs without CRCs are copied and summed in one
    /// pass wherever the copy-sum kernel runs, whatever CRC implementation the process chose;
    /// a log without deferred CRCs is read unsealed.
    #[test]
    fn copy_mode_sums_crcless_fpdus_in_the_copy_where_the_kernel_runs() {
        for (crc, what, log, _, _) in run_logs() {
            let mode = log.copy_mode();
            if !crc && copycrc::fuses_copy_sum() {
                assert_eq!(mode, CopyMode::FusedSum, "{what}");
            }
            if crc && !netcore::crc::current().fuses_copy() {
                assert_eq!(mode, CopyMode::Unsealed, "{what}");
            }
        }
        let mut s = setup(9000);
        let (log, _) = build(&mut s, false, 1460, true);
        assert_eq!(log.copy_mode(), CopyMode::Unsealed);
    }

    /// A run whose region is gone (or too short) is logged FPDU by FPDU with zeros, each of the
    /// same length.
    #[test]
    fn a_run_without_its_region_is_sent_as_zeros() {
        let mut s = setup(9000);
        let mut w = WorkRequest::new(7, WrOpcode::Write, vec![sge(&s, 0, 6000)]);
        w.remote_stag = Stag(0x100);
        s.qp.post_send(w).unwrap();
        let run = s.qp.poll_run(1000, 4, &mut s.mem).unwrap();
        assert_eq!(run.count(), 4);
        let mut log = TxLog::with_mode(LogMode {
            sums: false,
            defer_crc: true,
        });
        let mut framer = Framer::new(FramerConfig {
            crc: true,
            markers: false,
            stream_pos: 0,
        });
        let mut s2 = setup(16);
        let (len, n, res) = log.push_run(&mut framer, &run, &mut s2.mem);
        assert_eq!((n, res), (4, Err(LogError::RegionGone)));
        assert_eq!(log.len(), 4);
        assert_eq!(log.end(), u64::from(len) * 4);
        assert_eq!(framer.stream_pos() as u64, log.end());
        let mut out = vec![0u8; log.end() as usize];
        log.read(0, &mut out);
        let fpdus = deframe(&out, true);
        assert_eq!(fpdus.len(), 4);
        assert!(fpdus.iter().all(|f| f[14..].iter().all(|&b| b == 0)));
    }

    /// A log that leaves its CRCs to `read` (payload copied into frames) reads exactly like
    /// one that computed them when each record was built: the whole stream, and every range
    /// of a grid of starts and lengths (whole FPDUs, mid-record probes, ranges that cut the
    /// CRC field); its checksums are the sums of those bytes; with CRC off the field is zero
    /// either way. A deferred FPDU whose region is gone is sent with zeros and a right CRC.
    #[test]
    fn deferred_crc_reads_like_the_precomputed_one() {
        let deferred = LogMode {
            sums: false,
            defer_crc: true,
        };
        for crc in [true, false] {
            let mut s = setup(9000);
            let (mut a, la) = build(&mut s, crc, 1460, false);
            let mut s = setup(9000);
            let (mut b, lb) = build_with(&mut s, crc, 1460, deferred);
            assert_eq!(la, lb);
            let total = (a.end() - a.start()) as usize;
            let (mut wa, mut wb) = (vec![0u8; total], vec![0u8; total]);
            a.read(0, &mut wa);
            b.read(0, &mut wb);
            assert_eq!(wa, wb, "crc {crc}");
            for start in (0..total).step_by(37) {
                for len in [1, 2, 3, 4, 5, 6, 100, 1453, 1466, 3000] {
                    let len = len.min(total - start);
                    let mut x = vec![0u8; len];
                    b.read(start as u64, &mut x);
                    let want = &wa[start..start + len];
                    assert_eq!(x, want, "crc {crc} start {start} len {len}");
                    assert_eq!(b.checksum(start as u64, len), ones_complement_sum(want));
                }
            }
        }
        // A region gone between the post and the logging: zeros, and a CRC over them.
        let mut s = setup(9000);
        let mut log = TxLog::with_mode(deferred);
        let mut w = WorkRequest::new(7, WrOpcode::Write, vec![sge(&s, 0, 100)]);
        w.remote_stag = Stag(0x100);
        s.qp.post_send(w).unwrap();
        let seg = s.qp.poll_segment(1000, &mut s.mem).unwrap();
        // Logged against memory where the range does not exist (16 bytes).
        let mut s2 = setup(16);
        let mut framer = Framer::new(FramerConfig {
            crc: true,
            markers: false,
            stream_pos: 0,
        });
        assert_eq!(
            log.push_gather(&mut framer, &seg, &mut s2.mem),
            Err(LogError::RegionGone)
        );
        let mut out = vec![0u8; log.end() as usize];
        log.read(0, &mut out);
        let mut d = Deframer::new(DeframerConfig {
            crc: true,
            ..Default::default()
        });
        let (used, ev) = d.deframe(&out);
        assert!(matches!(ev, Some(Ok(Deframed::Start { .. }))), "{ev:?}");
        let mut rest = &out[used..];
        let mut ulpdu = Vec::new();
        loop {
            let (used, ev) = d.deframe(rest);
            match ev {
                Some(Ok(Deframed::Data(p))) => ulpdu.extend_from_slice(p),
                Some(Ok(Deframed::End)) => break,
                other => panic!("{other:?}"),
            }
            rest = &rest[used..];
        }
        // The tagged DDP/RDMAP header (14 octets), then the payload as zeros.
        assert_eq!(ulpdu.len(), 14 + 100);
        assert!(ulpdu[14..].iter().all(|&b| b == 0));
    }

    /// The hinted lookup finds the same record as a scan, for reads front to back, backwards,
    /// at random, and across acknowledgements that drop records from the front; and reads
    /// give the logged bytes.
    #[test]
    fn find_with_hint_agrees_with_a_scan() {
        let mut log = TxLog::new(true);
        let mut bytes = Vec::new();
        for k in 0..200u32 {
            let rec: Vec<u8> = (0..(k * 37 % 101 + 1)).map(|i| (i + k) as u8).collect();
            bytes.extend_from_slice(&rec);
            log.push_bytes(&rec, None);
        }
        let scan = |log: &TxLog, off: u64| {
            log.recs
                .iter()
                .position(|r| r.start <= off && off < r.end())
        };
        let mut x = 12345u64;
        let mut tokens = Vec::new();
        for round in 0..4 {
            let (lo, hi) = (log.start(), log.end());
            let mut offs: Vec<u64> = (lo..hi + 3).collect();
            if round % 2 == 1 {
                offs.reverse();
            }
            for _ in 0..500 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                offs.push(lo + (x >> 33) % (hi - lo + 3));
            }
            for off in offs {
                assert_eq!(log.find(off), scan(&log, off), "round {round} off {off}");
            }
            let mut b = vec![0u8; 50];
            let at = lo + (hi - lo) / 3;
            log.read(at, &mut b);
            assert_eq!(&b[..], &bytes[at as usize..at as usize + 50]);
            log.ack(lo + (hi - lo) / 4, &mut tokens);
        }
    }

    fn whole(log: &mut TxLog) -> Vec<u8> {
        let mut v = vec![0u8; (log.end() - log.start()) as usize];
        let s = log.start();
        log.read(s, &mut v);
        v
    }

    /// Deframe `fpdus` with CRC checking; returns the ULPDUs.
    fn deframe(fpdus: &[u8], crc: bool) -> Vec<Vec<u8>> {
        let mut d = Deframer::new(DeframerConfig {
            crc,
            ..Default::default()
        });
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let (n, ev) = d.deframe(&fpdus[i..]);
            i += n;
            match ev {
                None => return out,
                Some(Ok(Deframed::Start { .. })) => out.push(Vec::new()),
                Some(Ok(Deframed::Data(b))) => out.last_mut().unwrap().extend_from_slice(b),
                Some(Ok(Deframed::End)) => {}
                Some(Err(e)) => panic!("deframe: {e:?}"),
            }
        }
    }

    #[test]
    fn records_regenerate_valid_fpdus_never_larger_than_the_emss() {
        for crc in [true, false] {
            let mut s = setup(8192);
            let (mut log, lens) = build(&mut s, crc, 1448, true);
            assert!(lens[1..].iter().all(|&l| l <= 1448), "{lens:?}");
            assert_eq!(lens.len(), 1 + 4 + 1, "{lens:?}");
            let stream = whole(&mut log);
            let ulpdus = deframe(&stream[20..], crc);
            // Payload of the Write = region bytes 3..5003, after each 14-byte tagged header.
            let payload: Vec<u8> = ulpdus[..4].iter().flat_map(|u| u[14..].to_vec()).collect();
            assert_eq!(payload, s.data[3..5003]);
            assert_eq!(ulpdus[4][18..], s.data[1..2]);
        }
    }

    #[test]
    fn retransmission_and_mid_record_probe_read_the_same_bytes() {
        let mut s = setup(8192);
        let (mut log, lens) = build(&mut s, true, 1448, true);
        let stream = whole(&mut log);
        // Every range a retransmission or a tail-loss probe could ask for: whole records,
        // record tails starting mid-record, ranges spanning records, odd offsets.
        let mut starts = vec![0u64];
        for l in &lens {
            starts.push(starts.last().unwrap() + u64::from(*l));
        }
        let mut cases = Vec::new();
        for w in starts.windows(2) {
            cases.push((w[0], (w[1] - w[0]) as usize));
            let len = w[1] - w[0];
            let mid = if len > 333 { 333 } else { len / 2 };
            cases.push((w[0] + mid, (len - mid).min(1000) as usize));
        }
        cases.push((1000, 3001));
        cases.push((stream.len() as u64 - 7, 7));
        for (off, len) in cases {
            let mut got = vec![0xeeu8; len];
            log.read(off, &mut got);
            assert_eq!(got, stream[off as usize..off as usize + len], "{off}+{len}");
            assert_eq!(
                log.checksum(off, len),
                ones_complement_sum(&got),
                "checksum {off}+{len}"
            );
        }
        // The region deregistered after logging: retransmissions still read the bytes.
        s.table.deregister(ClientId(1), s.lkey).unwrap();
        s.mem.release();
        assert_eq!(whole(&mut log), stream);
    }

    /// The log holds each region its records read once, with a count of the pieces naming
    /// it, and lets it go with the last of them.
    #[test]
    fn regions_are_held_while_a_record_names_them() {
        let mut s = setup(8192);
        let region = s.mem.region(s.lkey).unwrap();
        let outside = Arc::strong_count(&region);
        let (mut log, lens) = build(&mut s, true, 1448, false);
        assert_eq!(log.regions.held(), 1);
        assert_eq!(Arc::strong_count(&region), outside + 1);
        let mut tokens = Vec::new();
        let mut acked = 0u64;
        for l in &lens[..lens.len() - 1] {
            acked += u64::from(*l);
            log.ack(acked, &mut tokens);
            assert_eq!(log.regions.held(), 1, "still named by the Send");
        }
        log.ack(log.end(), &mut tokens);
        assert!(log.is_empty());
        assert_eq!(log.regions.held(), 0);
        assert_eq!(Arc::strong_count(&region), outside);
    }

    /// Two regions interleaved: each counted apart, a freed slot reused.
    #[test]
    fn region_slots_count_and_reuse() {
        let s = setup(64);
        let a = s.table.by_handle(s.lkey).unwrap();
        let other = s
            .table
            .register(MrRequest {
                owner: ClientId(1),
                pd: PdId(1),
                mem: HeapMemory::new(64),
                offset: 0,
                len: 64,
                base_to: 0,
                access: Access::LOCAL_READ,
                remote_invalidate: false,
            })
            .unwrap();
        let b = s.table.by_handle(other.lkey).unwrap();
        let (na, nb) = (Arc::strong_count(&a), Arc::strong_count(&b));
        let mut r = Regions::default();
        let sa = r.hold(&a);
        let sb = r.hold(&b);
        assert_ne!(sa, sb);
        assert_eq!(r.hold(&a), sa);
        assert_eq!(r.hold(&b), sb);
        assert_eq!(
            (Arc::strong_count(&a), Arc::strong_count(&b)),
            (na + 1, nb + 1)
        );
        r.release(sa);
        assert_eq!(r.held(), 2);
        r.release(sa);
        assert_eq!(r.held(), 1);
        assert_eq!(Arc::strong_count(&a), na);
        assert!(r.get(sa).is_none());
        assert!(Arc::ptr_eq(r.get(sb).unwrap(), &b));
        // The freed slot serves the next region.
        assert_eq!(r.hold(&a), sa);
        r.release(sa);
        r.release(sb);
        r.release(sb);
        assert_eq!(r.held(), 0);
        assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (na, nb));
    }

    #[test]
    fn acks_release_records_and_tokens_in_order() {
        let mut s = setup(8192);
        let (mut log, lens) = build(&mut s, true, 1448, false);
        let ends: Vec<u64> = lens
            .iter()
            .scan(0u64, |a, l| {
                *a += u64::from(*l);
                Some(*a)
            })
            .collect();
        let mut tokens = Vec::new();
        // Mid-way through the Write's last FPDU: nothing completes.
        log.ack(ends[4] - 1, &mut tokens);
        assert!(tokens.is_empty());
        assert_eq!(log.start(), ends[3]);
        log.ack(ends[4], &mut tokens);
        assert_eq!(tokens.len(), 1);
        for t in tokens.drain(..) {
            s.qp.handle_acked(t);
        }
        assert_eq!(s.qp.poll_completion().unwrap().wr_id, 7);
        log.ack(ends[5], &mut tokens);
        s.qp.handle_acked(tokens[0]);
        assert_eq!(s.qp.poll_completion().unwrap().wr_id, 8);
        assert!(log.is_empty());
        assert_eq!(log.start(), log.end());
    }

    #[test]
    fn copy_mode_with_markers_matches_the_framer() {
        let mut s = setup(8192);
        let mut log = TxLog::new(true);
        let mut framer = Framer::new(FramerConfig {
            crc: true,
            markers: true,
            stream_pos: 0,
        });
        let mut w = WorkRequest::new(1, WrOpcode::Write, vec![sge(&s, 0, 4000)]);
        w.remote_stag = Stag(0x200);
        s.qp.post_send(w).unwrap();
        let mut total = 0;
        loop {
            let max = framer.max_ulpdu_len(1448);
            let Some(seg) = s.qp.poll_segment(max, &mut s.mem) else {
                break;
            };
            let (n, crc) = log.push_copy(&mut framer, &seg, &mut s.mem).unwrap();
            assert!(n <= 1448);
            assert_ne!(crc, [0; 4]);
            total += n;
        }
        let stream = whole(&mut log);
        assert_eq!(stream.len(), total as usize);
        let mut d = Deframer::new(DeframerConfig {
            crc: true,
            markers: true,
            ..Default::default()
        });
        let mut i = 0;
        let mut payload = Vec::new();
        while i < stream.len() {
            let (n, ev) = d.deframe(&stream[i..]);
            i += n;
            match ev {
                Some(Ok(Deframed::Data(b))) => payload.extend_from_slice(b),
                Some(Err(e)) => panic!("{e:?}"),
                _ => {}
            }
        }
        assert_eq!(d.fpdus(), 3);
        // Headers are 14 bytes per FPDU.
        assert_eq!(payload.len(), 4000 + 3 * 14);
    }

    /// An inline FPDU logged by [`TxLog::push_inline`] reads as the framer writes the same
    /// segment (CRC on and off, each log mode, in the fixed head and past it, through the
    /// fused copy too), its checksum is
    /// the sum of those bytes, a read from its middle gives the same bytes, and it carries
    /// its work request's token.
    #[test]
    fn inline_fpdus_read_as_the_framer_writes_them() {
        let modes = [
            LogMode::default(),
            LogMode {
                sums: true,
                defer_crc: false,
            },
            LogMode {
                sums: false,
                defer_crc: true,
            },
        ];
        for crc in [true, false] {
            for mode in modes {
                for n in [0u32, 1, 2, 3, 60, 77, 78, 79, 80, 256] {
                    let mut s = setup(1024);
                    let sges = if n == 0 { vec![] } else { vec![sge(&s, 5, n)] };
                    let mut w = WorkRequest::new(3, WrOpcode::Write, sges);
                    w.remote_stag = Stag(0x300);
                    s.qp.post_send(w).unwrap();
                    let seg = s.qp.poll_segment(1400, &mut s.mem).unwrap();
                    let cfg = FramerConfig {
                        crc,
                        markers: false,
                        stream_pos: 0,
                    };
                    let mut log = TxLog::with_mode(mode);
                    let len = log
                        .push_inline(&mut Framer::new(cfg), &seg, &mut s.mem)
                        .unwrap();
                    let payload = &s.data[5..5 + n as usize];
                    let mut want = vec![0u8; 2048];
                    let wn = Framer::new(cfg)
                        .frame(&[seg.header(), payload], &mut want)
                        .unwrap();
                    want.truncate(wn);
                    let what = format!("crc {crc} {mode:?} n {n}");
                    assert_eq!(len as usize, wn, "{what}");
                    assert_eq!(whole(&mut log), want, "{what}");
                    if mode.defer_crc {
                        // The fused copy (whatever CRC implementation `read` uses here).
                        let mut f = vec![0xaau8; wn];
                        assert!(!log.read_fused(0, &mut f), "{what}");
                        assert_eq!(f, want, "{what}");
                    }
                    assert_eq!(log.checksum(0, wn), ones_complement_sum(&want), "{what}");
                    let mut mid = vec![0u8; wn - 3];
                    log.read(3, &mut mid);
                    assert_eq!(mid, want[3..], "{what}");
                    assert_eq!(log.take_last_token(), seg.completion(), "{what}");
                    assert!(seg.completion().is_some());
                }
            }
        }
    }

    #[test]
    fn csum_of_pieces_equals_the_sum_of_the_whole() {
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 13) as u8).collect();
        for cuts in [[1usize, 2, 3], [7, 100, 555], [0, 0, 1000]] {
            let mut c = Csum::default();
            let mut prev = 0;
            for &k in &cuts {
                c.add(&data[prev..k.max(prev)]);
                prev = k.max(prev);
            }
            c.add(&data[prev..]);
            assert_eq!(c.sum, ones_complement_sum(&data), "{cuts:?}");
        }
        assert_eq!(crc_of(b""), 0);
    }

    /// The reciprocal's quotient is the division's: every divisor up to 70,000 (FPDUs are at
    /// most 64 KiB) at the multiples around the top of the 32-bit range and a spread of
    /// dividends, each next to a multiple of the divisor; some divisors up to 2^32 - 1.
    #[test]
    fn division_by_reciprocal_is_exact() {
        assert_eq!((reciprocal(0), reciprocal(1)), (0, 0));
        let check = |d: u32, n: u32| {
            assert_eq!(div_by_reciprocal(n, reciprocal(d)), n / d, "{n} / {d}");
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let divisors =
            (2..=70_000u32).chain([1 << 20, (1 << 31) - 1, 1 << 31, u32::MAX - 1, u32::MAX]);
        for d in divisors {
            let top = u32::MAX - u32::MAX % d;
            for n in [0, 1, d - 1, d, d.saturating_add(1), top - 1, top, u32::MAX] {
                check(d, n);
            }
            for _ in 0..8 {
                let m = (next() as u32 / d).saturating_mul(d);
                for n in [m.saturating_sub(1), m, m.saturating_add(1)] {
                    check(d, n);
                }
            }
        }
    }

    /// A run's FPDU at each stream offset (the first for offsets before the record): index and
    /// range as the division gives them, for runs of several FPDU lengths.
    #[test]
    fn fpdu_at_finds_the_fpdu_of_every_offset() {
        for emss in [200usize, 536, 1460, 2100] {
            let mut s = setup(20_000);
            let (log, _) = build_runs(&mut s, true, emss, 1000);
            let mut runs = 0;
            for r in log.recs.iter() {
                let fl = u64::from(r.len / r.run);
                runs += usize::from(r.run > 1);
                assert_eq!(r.fpdu_len(), fl);
                assert_eq!(r.fpdu_at(r.start.saturating_sub(5)).0, 0);
                for at in r.start..r.end() {
                    let k = (at - r.start) / fl;
                    let fs = r.start + k * fl;
                    let want = (k as u32, fs, (fs + fl).min(r.end()));
                    assert_eq!(r.fpdu_at(at), want, "emss {emss} @{at}");
                }
            }
            assert!(runs > 0, "emss {emss}: no run formed");
        }
    }
}
