//! Diagnostic TCP services run by the dataplane, for testing with ordinary tools:
//! - **echo**: every byte received is sent back (RFC 862 style);
//! - **discard**: bytes are counted and hashed (SHA-256 logged when the peer closes);
//! - **sender**: connect out and send N pattern bytes followed by their 32-byte SHA-256, then FIN.
//!
//! Each service is a [`tcp::SendSource`]: the connection asks it for stream bytes whenever it
//! (re)transmits, so a retransmission re-reads the service's memory, never a private copy.

use netcore::Instant;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Arc;
use tcp::SendSource;

/// Largest payload one received segment can carry (jumbo MTU).
pub const MAX_SEGMENT: usize = 9000;

/// Lower-case hex of a digest.
pub fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes in the pattern table.
const TABLE: usize = 1 << 20;

/// The sender's stream: a 1 MiB table of seeded SplitMix64 bytes, read at an offset that
/// also moves by 7919 bytes per MiB of stream, so the stream does not repeat every MiB and any
/// range can be regenerated for a retransmission with plain copies.
#[derive(Debug, Clone)]
pub struct Pattern {
    table: Vec<u8>,
}

impl Pattern {
    /// The pattern keyed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut table = vec![0u8; TABLE];
        let mut x = seed;
        for chunk in table.chunks_mut(8) {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        Pattern { table }
    }

    /// Fill `dst` with the stream bytes starting at `off`.
    pub fn fill(&self, off: u64, dst: &mut [u8]) {
        let mut o = off;
        let mut w = 0;
        while w < dst.len() {
            let mib = o / TABLE as u64;
            let within = (o % TABLE as u64) as usize;
            let start = (within + (mib as usize).wrapping_mul(7919)) % TABLE;
            // Stay inside this MiB of stream and inside the table.
            let n = (dst.len() - w).min(TABLE - within).min(TABLE - start);
            dst[w..w + n].copy_from_slice(&self.table[start..start + n]);
            w += n;
            o += n as u64;
        }
    }
}

/// Echo: received bytes wait in a bounded ring until acknowledged after being sent back.
#[derive(Debug)]
pub struct Echo {
    ring: VecDeque<u8>,
    /// Stream offset of `ring[0]`.
    base: u64,
    cap: usize,
    /// Bytes echoed (queued for sending).
    pub bytes: u64,
}

impl Echo {
    /// An echo with a ring of `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Echo {
            ring: VecDeque::new(),
            base: 0,
            cap,
            bytes: 0,
        }
    }
    /// Room for one more segment?
    pub fn has_room(&self) -> bool {
        self.ring.len() + MAX_SEGMENT <= self.cap
    }
    /// Take received bytes (to be queued for sending by the caller).
    pub fn push(&mut self, data: &[u8]) {
        self.ring.extend(data);
        self.bytes += data.len() as u64;
    }
    /// Everything below `upto` was acknowledged: free it.
    pub fn acked(&mut self, upto: u64) {
        let n = upto.saturating_sub(self.base).min(self.ring.len() as u64);
        self.ring.drain(..n as usize);
        self.base += n;
    }
}

impl SendSource for Echo {
    fn read(&mut self, off: u64, dst: &mut [u8]) {
        let mut skip = off.saturating_sub(self.base) as usize;
        let (a, b) = self.ring.as_slices();
        let mut w = 0;
        for part in [a, b] {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let n = (part.len() - skip).min(dst.len() - w);
            dst[w..w + n].copy_from_slice(&part[skip..skip + n]);
            w += n;
            skip = 0;
            if w == dst.len() {
                break;
            }
        }
        dst[w..].fill(0);
    }
}

/// Discard: count and (optionally) hash the stream. The last 32 bytes are held back from the
/// running hash, so both the digest of the whole stream and the digest of everything but a
/// trailing SHA-256 (what the sender service and `tcp_peer.py` append) come out of one pass.
#[derive(Debug, Default)]
pub struct Discard {
    /// Bytes received.
    pub bytes: u64,
    hasher: Option<Sha256>,
    tail: Vec<u8>,
}

/// What the discard service computed over one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscardDigest {
    /// SHA-256 of every byte received.
    pub all: String,
    /// SHA-256 of all but the last 32 bytes.
    pub body: String,
    /// The last 32 bytes, hex.
    pub trailer: String,
}

impl DiscardDigest {
    /// Whether the stream ended with the SHA-256 of the rest (a sender-service stream).
    pub fn trailer_ok(&self) -> bool {
        self.body == self.trailer
    }
}

impl Discard {
    /// A discard service; `hash` turns the SHA-256 on.
    pub fn new(hash: bool) -> Self {
        Discard {
            bytes: 0,
            hasher: hash.then(Sha256::new),
            tail: Vec::with_capacity(64),
        }
    }
    /// Take received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        let Some(h) = &mut self.hasher else { return };
        let total = self.tail.len() + data.len();
        if total <= 32 {
            self.tail.extend_from_slice(data);
            return;
        }
        // Hash all but the newest 32 bytes of tail ++ data; keep those 32 as the new tail.
        let to_hash = total - 32;
        let from_tail = to_hash.min(self.tail.len());
        h.update(&self.tail[..from_tail]);
        h.update(&data[..to_hash - from_tail]);
        self.tail.drain(..from_tail);
        self.tail.extend_from_slice(&data[to_hash - from_tail..]);
    }
    /// The digests (if hashing).
    pub fn digest(&mut self) -> Option<DiscardDigest> {
        let h = self.hasher.take()?;
        let body = hex(&h.clone().finalize());
        let mut all = h;
        all.update(&self.tail);
        Some(DiscardDigest {
            all: hex(&all.finalize()),
            body,
            trailer: hex(&self.tail),
        })
    }
}

/// Sender: `total` pattern bytes then their SHA-256.
#[derive(Debug)]
pub struct Sender {
    pattern: Arc<Pattern>,
    /// Where in the pattern this connection's stream starts (connections differ).
    shift: u64,
    hash: bool,
    /// Pattern bytes to send.
    pub total: u64,
    /// Bytes queued so far (pattern, then digest).
    pub queued: u64,
    hasher: Sha256,
    digest: Option<[u8; 32]>,
    /// When the connection was established.
    pub started: Option<Instant>,
    scratch: Vec<u8>,
}

/// Bytes the sender hashes and queues per step.
const SEND_CHUNK: u64 = 256 * 1024;

impl Sender {
    /// A sender of `total` bytes of `pattern` from `shift` on, followed by their SHA-256
    /// when `hash` (a 32-byte trailer of zeros otherwise, for benchmarks).
    pub fn new(total: u64, pattern: Arc<Pattern>, shift: u64, hash: bool) -> Self {
        Sender {
            pattern,
            shift,
            hash,
            total,
            queued: 0,
            hasher: Sha256::new(),
            digest: None,
            started: None,
            scratch: vec![0; SEND_CHUNK as usize],
        }
    }

    /// Length of the whole stream (pattern + digest).
    pub fn stream_len(&self) -> u64 {
        self.total + 32
    }

    /// Queue as much as `capacity` allows; returns the bytes to pass to `Connection::send`.
    /// The digest is queued only whole, after the last pattern byte.
    pub fn next_chunk(&mut self, capacity: u64) -> u64 {
        if self.queued < self.total {
            let n = capacity.min(self.total - self.queued).min(SEND_CHUNK);
            if n == 0 {
                return 0;
            }
            if self.hash {
                let buf = &mut self.scratch[..n as usize];
                self.pattern.fill(self.shift + self.queued, buf);
                self.hasher.update(&*buf);
            }
            self.queued += n;
            return n;
        }
        if self.digest.is_none() && capacity >= 32 {
            self.digest = Some(if self.hash {
                self.hasher.clone().finalize().into()
            } else {
                [0; 32]
            });
            self.queued += 32;
            return 32;
        }
        0
    }

    /// Everything (pattern and digest) queued?
    pub fn all_queued(&self) -> bool {
        self.digest.is_some()
    }

    /// The digest, once queued (None when hashing is off).
    pub fn digest_hex(&self) -> Option<String> {
        self.digest.filter(|_| self.hash).map(|d| hex(&d))
    }
}

impl SendSource for Sender {
    fn read(&mut self, off: u64, dst: &mut [u8]) {
        let pat = (self.total.saturating_sub(off) as usize).min(dst.len());
        self.pattern.fill(self.shift + off, &mut dst[..pat]);
        for (i, b) in dst[pat..].iter_mut().enumerate() {
            let k = (off + (pat + i) as u64).saturating_sub(self.total) as usize;
            *b = self.digest.and_then(|d| d.get(k).copied()).unwrap_or(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_position_independent_and_does_not_repeat_per_mib() {
        let p = Pattern::new(7);
        let base = (1u64 << 20) - 5000;
        let mut whole = vec![0u8; 3 << 20];
        p.fill(base, &mut whole);
        for (off, len) in [
            (base, 1usize),
            (base + 1, 7),
            (base + 4990, 20),
            (base + 333, 2 << 20),
        ] {
            let mut part = vec![0u8; len];
            p.fill(off, &mut part);
            let s = (off - base) as usize;
            assert_eq!(part, whole[s..s + len], "offset {off}");
        }
        // MiB k and MiB k+1 differ.
        let (a, b) = (
            &whole[5000..5000 + 4096],
            &whole[5000 + (1 << 20)..5000 + (1 << 20) + 4096],
        );
        assert_ne!(a, b);
        assert_ne!(Pattern::new(8).table[..64], p.table[..64]);
    }

    #[test]
    fn sender_stream_ends_with_its_sha256() {
        let mut s = Sender::new(1_000_003, Arc::new(Pattern::new(42)), 77, true);
        let mut queued = 0;
        while !s.all_queued() {
            queued += s.next_chunk(100_000);
        }
        assert_eq!(queued, s.stream_len());
        let mut stream = vec![0u8; queued as usize];
        // Read back in odd pieces, as retransmissions would.
        let mut off = 0;
        while off < stream.len() {
            let n = 1447.min(stream.len() - off);
            s.read(off as u64, &mut stream[off..off + n]);
            off += n;
        }
        let (data, digest) = stream.split_at(1_000_003);
        assert_eq!(hex(&Sha256::digest(data)), hex(digest));
        assert_eq!(s.digest_hex().unwrap(), hex(digest));
    }

    #[test]
    fn echo_ring_reads_at_offsets_and_frees_on_ack() {
        let mut e = Echo::new(64 * 1024);
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        e.push(&data[..12_000]);
        e.acked(5_000);
        e.push(&data[12_000..]);
        let mut out = vec![0u8; 9_000];
        e.read(6_000, &mut out);
        assert_eq!(out, data[6_000..15_000]);
        e.acked(20_000);
        assert!(e.has_room());
        assert_eq!(e.bytes, 20_000);
    }

    #[test]
    fn discard_hashes_what_it_gets() {
        let mut d = Discard::new(true);
        d.push(b"hello ");
        d.push(b"world");
        assert_eq!(d.bytes, 11);
        let g = d.digest().unwrap();
        assert_eq!(g.all, hex(&Sha256::digest(b"hello world")));
        assert!(!g.trailer_ok());
    }

    #[test]
    fn discard_checks_a_sender_stream_in_any_segmentation() {
        let mut s = Sender::new(100_000, Arc::new(Pattern::new(9)), 0, true);
        while !s.all_queued() {
            s.next_chunk(7_777);
        }
        let mut stream = vec![0u8; s.stream_len() as usize];
        s.read(0, &mut stream);
        for cut in [1usize, 5, 31, 32, 33, 1448, 65_536] {
            let mut d = Discard::new(true);
            for part in stream.chunks(cut) {
                d.push(part);
            }
            let g = d.digest().unwrap();
            assert!(g.trailer_ok(), "cut {cut}");
            assert_eq!(g.body, s.digest_hex().unwrap());
            assert_eq!(g.all, hex(&Sha256::digest(&stream)));
        }
    }
}
