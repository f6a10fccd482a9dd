//! The engine's view of a dataplane thread's network stack ([`Net`] over the netstack's
//! TCP endpoint and L2/L3 interface).

use std::net::SocketAddrV4;

use netcore::Instant;
use tcp::Endpoint;
use tcp::iface::{Iface, Resolve};

#[cfg(doc)]
use super::engine::Engine;
use super::engine::Net;
use super::memory::MemTable;
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::rdma::txlog::{CopyMode, TxLog};
use crate::rss::RssSteering;
use tcp::ConnHandle;
use tcp::iface::{ETH_HEADER_LEN, IP_PROTO_TCP, IPV4_HEADER_LEN, MIN_FRAME_LEN};
use tcp::wire::{combine, ones_complement_sum};

/// Borrowed parts of the netstack for one `Engine::poll`.
pub(crate) struct StackNet<'a> {
    pub(crate) tcp: &'a mut Endpoint<Mbuf>,
    pub(crate) iface: &'a mut Iface,
    pub(crate) steering: &'a Option<(RssSteering, u16)>,
    pub(crate) seed: u64,
    pub(crate) next_port_offset: &'a mut u32,
}

impl Net<Mbuf> for StackNet<'_> {
    fn tcp(&mut self) -> &mut Endpoint<Mbuf> {
        self.tcp
    }

    fn resolve(&mut self, now: Instant, ip: [u8; 4]) -> Resolve {
        self.iface.resolve(now, ip)
    }

    fn source_port(&mut self, remote: SocketAddrV4) -> u16 {
        // A random ephemeral port per run (so a new run does not meet the peer's TIME-WAIT
        // state of the last one), steered to our queue when the port uses RSS.
        let start = 49152
            + ((self.seed >> 16).wrapping_add(u64::from(*self.next_port_offset)) % 16384) as u16;
        *self.next_port_offset = self.next_port_offset.wrapping_add(1);
        let Some((s, q)) = self.steering else {
            return start;
        };
        let local = self.iface.config().ip;
        let dst = remote.ip().octets();
        match s.pick_source_port((local, dst, remote.port()), *q, start, |_| false) {
            Some(p) => {
                *self.next_port_offset = self
                    .next_port_offset
                    .wrapping_add(u32::from(p.wrapping_sub(start)));
                p
            }
            None => start,
        }
    }
}

/// What one zero-copy transmission attempt produced.
pub(crate) enum Emitted {
    /// A frame to send; with [`Unsealed`], its payload's CRCs and TCP checksum are still to be
    /// filled in by [`finish_copy`] before it leaves. The flag: TCP has nothing after it
    /// ([`tcp::Transmit::last`]), the caller need not ask again.
    Frame(Mbuf, Option<Unsealed>, bool),
    /// Out of mbufs (the segment is lost: TCP retransmits).
    NoMbuf,
    /// Nothing to send.
    Nothing,
}

/// Largest TCP header.
const TCP_HDR_MAX: usize = 60;

/// A frame whose payload was copied from the FPDU log without its deferred CRCs and without
/// its sum in the TCP checksum: stream offset, position and length of the payload in the
/// frame. [`finish_copy`] completes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unsealed {
    off: u64,
    at: usize,
    len: usize,
    /// Which CRCs are still missing.
    crcs: Missing,
}

/// The CRCs a frame copied without them still lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    /// None (a fused read, [`TxLog::read_fused`], that met no cut FPDU).
    None,
    /// Those of the FPDUs cut by the payload's edges (a fused read that met one).
    Cut,
    /// All of them ([`TxLog::read_unsealed`]).
    All,
}

/// Complete a frame copied as [`Unsealed`] says: the CRC of every FPDU in it over the bytes
/// in the frame ([`TxLog::seal`]; after a fused read, [`TxLog::read_fused`], only of the FPDUs
/// cut by the payload's edges), then the payload's sum added to the TCP checksum field.
/// The sender finishes a batch of frames this way after copying all of them, instead of each
/// right after its copy: reading bytes just written stalls on the stores still in flight
/// (about 20 ns per 1448-byte FPDU on the CPUs of BENCHMARKS.md), reading them a batch later
/// does not. The CRC still covers exactly the octets sent, and the checksum the whole frame.
pub(crate) fn finish_copy(log: &TxLog, m: &mut Mbuf, u: Unsealed) {
    let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
    // A fresh mbuf of the pool is always writable; were it not, the frame leaves with the
    // header's checksum only, the peer drops it and TCP retransmits.
    let Some(d) = m.data_mut() else {
        return;
    };
    let Some(p) = d.get_mut(u.at..u.at + u.len) else {
        return;
    };
    match u.crcs {
        Missing::None => {}
        Missing::Cut => log.seal_cut(u.off, p),
        Missing::All => log.seal(u.off, p),
    }
    // TCP headers are whole 32-bit words, so the payload starts on a 16-bit word boundary of
    // the segment (RFC 1071 §2(B)).
    let sum = ones_complement_sum(p);
    if let Some(f) = d.get_mut(hdr + 16..hdr + 18) {
        add_to_checksum(f, sum);
    }
}

/// The FPDU log as TCP sees it when the payload is copied into the frame after the header is
/// written ([`Engine::copy_payload`]): the payload's sum is left out of the checksum TCP
/// computes (0 is the identity of ones-complement addition), and the copy adds the sum of
/// the bytes it wrote ([`add_to_checksum`]). One pass over the payload at transmission
/// instead of a sum when the FPDU is logged plus a copy when a chain is linearized; and the
/// checksum always covers the bytes on the wire. With `false` the log as it is (its own
/// sums). One type for both, so that [`emit_zero_copy`] polls TCP at one call site: the
/// [`tcp::Transmit`]s of two call sites were merged through a copy whose 16-byte loads,
/// over the field-by-field stores just made, cannot be forwarded from the store buffer and
/// waited for it to drain (~20 % of the sender's `Netstack::emit` on an Intel Xeon,
/// BENCHMARKS.md §4).
struct SumLater<'a>(&'a mut TxLog, bool);

impl tcp::SendSource for SumLater<'_> {
    fn read(&mut self, stream_offset: u64, dst: &mut [u8]) {
        tcp::SendSource::read(self.0, stream_offset, dst);
    }

    fn checksum(&mut self, stream_offset: u64, len: usize) -> u16 {
        if self.1 {
            0
        } else {
            tcp::SendSource::checksum(self.0, stream_offset, len)
        }
    }
}

/// Add `sum` (a [`ones_complement_sum`] of bytes the checksum did not cover yet) to the TCP
/// checksum `field` (2 bytes, network order): the field is the complement of the running sum
/// (RFC 9293 §3.1), so uncomplement, add, complement again (RFC 1624 §3).
pub(crate) fn add_to_checksum(field: &mut [u8], sum: u16) {
    if let Ok(f) = <&mut [u8; 2]>::try_from(field) {
        let old = u16::from_be_bytes(*f);
        *f = (!combine(!old, sum)).to_be_bytes();
    }
}

/// What the frames of one batch of a connection share, looked up once per batch rather than
/// per frame (the engine's connections change only in its own poll, not while the netstack
/// emits): the connection's FPDU log, the memory table when payload may go by reference
/// (`None`: every payload is copied, [`Engine::copy_payload`]), the next hop's MAC,
/// resolved by the caller for the connection's peer (every segment goes there), and how a
/// copied payload is read from the log ([`TxLog::copy_mode`]: atomic loads and CPU feature
/// checks, once per batch instead of once per frame).
pub(crate) struct Frames<'a> {
    pub(crate) log: &'a mut TxLog,
    pub(crate) table: Option<&'a MemTable>,
    pub(crate) mac: [u8; 6],
    pub(crate) copy: CopyMode,
}

/// One segment of RDMA connection `h`, zero copy (DESIGN.md §2.6): Ethernet, IP and TCP
/// headers in an mbuf of the pool, the FPDU's length field and DDP/RDMAP header copied after
/// them, the payload attached by reference to the registered region, the pad and CRC in a
/// small mbuf behind it. The TCP checksum comes from the sum the FPDU log computed with the
/// CRC. Payload whose mapping cannot be registered with DPDK, and frames shorter than the
/// Ethernet minimum, are copied instead. With [`Engine::copy_payload`] (a device without
/// multi-segment TX) every payload is copied into the header's mbuf and the TCP checksum is
/// completed from the sum of the copied bytes ([`SumLater`]). `spare`: an mbuf kept from an
/// attempt that had nothing to send, used (and refilled) before the pool is asked.
pub(crate) fn emit_zero_copy(
    now: Instant,
    h: ConnHandle,
    frames: &mut Frames<'_>,
    tcp: &mut Endpoint<Mbuf>,
    iface: &mut Iface,
    pool: &Mempool,
    spare: &mut Option<Mbuf>,
) -> Emitted {
    let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
    let Some(mut m) = spare.take().or_else(|| pool.alloc()) else {
        return Emitted::NoMbuf;
    };
    // The frame's length is set without calls into DPDK ([`Mbuf::resize`]): room for the
    // largest header now, the header and payload once TCP has chosen them.
    let Some(buf) = m.resize(hdr + TCP_HDR_MAX) else {
        return Emitted::NoMbuf;
    };
    let copy = frames.table.is_none();
    let log = &mut *frames.log;
    let Some(c) = tcp.conn_mut(h) else {
        *spare = Some(m);
        return Emitted::Nothing;
    };
    let t = c.poll_transmit_header(now, &mut buf[hdr..], &mut SumLater(log, copy));
    let Some(t) = t else {
        // A connection serviced without output (every loop step in which its queues were
        // looked at): keep the mbuf rather than free and allocate one each time.
        *spare = Some(m);
        return Emitted::Nothing;
    };
    let plen = (t.payload.end - t.payload.start) as usize;
    let dst = t.dst.octets();
    iface.emit_ipv4_header(
        frames.mac,
        dst,
        IP_PROTO_TCP,
        t.header_len + plen,
        &mut buf[..hdr],
    );
    let head = hdr + t.header_len;
    let total = head + plen;
    let mut unsealed = None;
    let by_ref = plen > 0
        && total >= MIN_FRAME_LEN
        && frames
            .table
            .is_some_and(|table| log.prepare_zero_copy(t.payload.start, plen, table));
    if plen == 0 || by_ref {
        if !m.set_len(head) {
            return Emitted::NoMbuf;
        }
        if by_ref && log.attach(t.payload.start, plen, &mut m, pool).is_err() {
            return Emitted::NoMbuf;
        }
    } else {
        let Some((front, p)) = m
            .resize(total)
            .filter(|f| f.len() >= head)
            .map(|f| f.split_at_mut(head))
        else {
            return Emitted::NoMbuf;
        };
        if copy {
            // The payload's sum (the header's is in the field) comes later, and so do the
            // CRCs unless the copy computes them; where the copy also sums
            // ([`CopyMode::FusedSum`]) and met no cut FPDU, the frame is finished here.
            let (crcs, sum) = match frames.copy {
                CopyMode::Unsealed => {
                    log.read_unsealed(t.payload.start, p);
                    (Missing::All, None)
                }
                CopyMode::FusedSum => match log.read_fused_sum(t.payload.start, p) {
                    (true, _) => (Missing::Cut, None),
                    (false, sum) => (Missing::None, sum),
                },
                CopyMode::Fused if log.read_fused(t.payload.start, p) => (Missing::Cut, None),
                CopyMode::Fused => (Missing::None, None),
            };
            match (sum, front.get_mut(hdr + 16..hdr + 18)) {
                // TCP headers are whole 32-bit words: the payload starts on a 16-bit word
                // boundary of the segment (RFC 1071 §2(B)), as in [`finish_copy`].
                (Some(sum), Some(f)) => add_to_checksum(f, sum),
                _ => {
                    unsealed = Some(Unsealed {
                        off: t.payload.start,
                        at: head,
                        len: plen,
                        crcs,
                    })
                }
            }
        } else {
            tcp::SendSource::read(log, t.payload.start, p);
        }
    }
    if total < MIN_FRAME_LEN {
        match m.append(MIN_FRAME_LEN - total) {
            Some(p) => p.fill(0),
            None => return Emitted::NoMbuf,
        }
    }
    Emitted::Frame(m, unsealed, t.last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::Ipv4Address;
    use tcp::SendSource;
    use tcp::wire::{checksum_ok, pseudo_header_sum};

    /// A 20-byte TCP header (checksum field zero) of a segment with `payload` bytes, and the
    /// field TCP writes when the payload's sum is left out (what [`SumLater`] makes it do).
    fn header_without_payload(src: Ipv4Address, dst: Ipv4Address, n: usize, seed: u8) -> [u8; 20] {
        let mut h = [0u8; 20];
        for (i, b) in h.iter_mut().enumerate() {
            *b = seed.wrapping_mul(31).wrapping_add(i as u8 * 7);
        }
        h[12] = 5 << 4;
        h[16..18].fill(0);
        let s = combine(pseudo_header_sum(src, dst, 20 + n), ones_complement_sum(&h));
        h[16..18].copy_from_slice(&(!s).to_be_bytes());
        h
    }

    #[test]
    fn the_folded_checksum_equals_the_reference_at_odd_and_even_lengths() {
        let (src, dst) = (
            Ipv4Address::new(10, 78, 0, 2),
            Ipv4Address::new(10, 78, 0, 1),
        );
        for n in [
            0usize, 1, 2, 3, 5, 7, 8, 63, 64, 1023, 1447, 1448, 1460, 8941,
        ] {
            for seed in [0u8, 1, 0x5a, 0xff] {
                let payload: Vec<u8> = (0..n)
                    .map(|i| (i as u8).wrapping_mul(seed | 1) ^ seed)
                    .collect();
                let mut h = header_without_payload(src, dst, n, seed);
                add_to_checksum(&mut h[16..18], ones_complement_sum(&payload));
                let mut seg = h.to_vec();
                seg.extend_from_slice(&payload);
                assert!(checksum_ok(src, dst, &seg), "n {n} seed {seed}");
                // The reference: TCP's own software checksum over header and payload at once.
                let mut r = seg.clone();
                r[16..18].fill(0);
                let want = !combine(
                    pseudo_header_sum(src, dst, r.len()),
                    ones_complement_sum(&r),
                );
                assert_eq!(&seg[16..18], &want.to_be_bytes(), "n {n} seed {seed}");
            }
        }
    }

    #[test]
    fn all_ones_payloads_and_a_zero_field_fold_right() {
        // Ones-complement corner cases: a payload summing to 0xffff (negative zero) and a
        // header whose field is 0 (the running sum 0xffff).
        let (src, dst) = (Ipv4Address::new(0, 0, 0, 0), Ipv4Address::new(0, 0, 0, 0));
        for payload in [
            vec![0xffu8; 2],
            vec![0xff; 3],
            vec![0xff; 1460],
            vec![0u8; 9],
        ] {
            for seed in 0..=255u8 {
                let mut h = header_without_payload(src, dst, payload.len(), seed);
                add_to_checksum(&mut h[16..18], ones_complement_sum(&payload));
                let mut seg = h.to_vec();
                seg.extend_from_slice(&payload);
                assert!(
                    checksum_ok(src, dst, &seg),
                    "len {} seed {seed}",
                    payload.len()
                );
            }
        }
    }

    #[test]
    fn sum_later_reads_the_log_and_leaves_the_payload_out_of_the_sum() {
        // Records of inline bytes read through SumLater at odd offsets and lengths, across a
        // record boundary: the bytes are the log's, the sum TCP sees is 0, and the sum of what
        // was copied is the log's own sum over the same range.
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut log = TxLog::new(false);
        log.push_bytes(&data[..333], None);
        log.push_bytes(&data[333..], None);
        for (off, len) in [
            (0u64, 333usize),
            (1, 331),
            (17, 1),
            (100, 633),
            (333, 667),
            (3, 0),
        ] {
            let mut got = vec![0u8; len];
            let mut s = SumLater(&mut log, true);
            s.read(off, &mut got);
            assert_eq!(s.checksum(off, len), 0);
            assert_eq!(got, data[off as usize..off as usize + len]);
            assert_eq!(
                ones_complement_sum(&got),
                log.checksum(off, len),
                "{off}+{len}"
            );
        }
    }
}
