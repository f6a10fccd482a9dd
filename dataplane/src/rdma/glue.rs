//! The engine's view of a dataplane thread's network stack ([`Net`] over the netstack's
//! TCP endpoint and L2/L3 interface).

use std::net::SocketAddrV4;

use netcore::Instant;
use tcp::Endpoint;
use tcp::iface::{Iface, Resolve};

use super::engine::{Engine, Net};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;
use crate::rss::RssSteering;
use tcp::ConnHandle;
use tcp::iface::{ETH_HEADER_LEN, IP_PROTO_TCP, IPV4_HEADER_LEN, MIN_FRAME_LEN};

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
    /// A frame to send.
    Frame(Mbuf),
    /// TCP sent a segment but the next hop is unknown (TCP retransmits).
    NoNeighbor,
    /// Out of mbufs (the segment is lost: TCP retransmits).
    NoMbuf,
    /// Nothing to send.
    Nothing,
}

/// Largest TCP header.
const TCP_HDR_MAX: usize = 60;

/// One segment of RDMA connection `h`, zero copy (DESIGN.md §2.6): Ethernet, IP and TCP
/// headers in an mbuf of the pool, the FPDU's length field and DDP/RDMAP header copied after
/// them, the payload attached by reference to the registered region, the pad and CRC in a
/// small mbuf behind it. The TCP checksum comes from the sum the FPDU log computed with the
/// CRC. Payload whose mapping cannot be registered with DPDK, and frames shorter than the
/// Ethernet minimum, are copied instead.
pub(crate) fn emit_zero_copy(
    now: Instant,
    h: ConnHandle,
    engine: &mut Engine,
    tcp: &mut Endpoint<Mbuf>,
    iface: &mut Iface,
    pool: &Mempool,
) -> Emitted {
    let hdr = ETH_HEADER_LEN + IPV4_HEADER_LEN;
    let Some(mut m) = pool.alloc() else {
        return Emitted::NoMbuf;
    };
    m.set_len(0);
    let Some(buf) = m.append(hdr + TCP_HDR_MAX) else {
        return Emitted::NoMbuf;
    };
    let table = engine.mem().clone();
    let by_ref_wanted = engine.payload_by_ref();
    let (Some(c), Some(log)) = (tcp.conn_mut(h), engine.log(h)) else {
        return Emitted::Nothing;
    };
    let Some(t) = c.poll_transmit_header(now, &mut buf[hdr..], log) else {
        return Emitted::Nothing;
    };
    let plen = (t.payload.end - t.payload.start) as usize;
    let dst = t.dst.octets();
    let Resolve::Known(mac) = iface.resolve(now, dst) else {
        return Emitted::NoNeighbor;
    };
    iface.emit_ipv4_header(mac, dst, IP_PROTO_TCP, t.header_len + plen, &mut buf[..hdr]);
    m.trim(TCP_HDR_MAX - t.header_len);
    let total = hdr + t.header_len + plen;
    if plen > 0 {
        // Copied when the device copies anyway and the payload fits (else by reference).
        let copy = !by_ref_wanted && m.tailroom() >= plen;
        let by_ref =
            !copy && total >= MIN_FRAME_LEN && log.prepare_zero_copy(t.payload.start, plen, &table);
        if by_ref {
            if log.attach(t.payload.start, plen, &mut m, pool).is_err() {
                return Emitted::NoMbuf;
            }
        } else {
            let Some(p) = m.append(plen) else {
                return Emitted::NoMbuf;
            };
            tcp::SendSource::read(log, t.payload.start, p);
        }
    }
    if total < MIN_FRAME_LEN {
        match m.append(MIN_FRAME_LEN - total) {
            Some(p) => p.fill(0),
            None => return Emitted::NoMbuf,
        }
    }
    Emitted::Frame(m)
}
