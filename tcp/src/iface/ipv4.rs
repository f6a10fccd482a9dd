//! IPv4 receive checks (RFC 791, RFC 1122 section 3.2.1) and header emission.

use smoltcp::wire::Ipv4Packet;

use crate::wire::ones_complement_sum;

use super::{DropReason, ETH_HEADER_LEN, IP_PROTO_ICMP, IP_PROTO_TCP, Iface, Instant, RxAction};

/// The fields of a received IPv4 header that passed [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ipv4Info {
    pub(super) src: [u8; 4],
    pub(super) dst: [u8; 4],
    pub(super) proto: u8,
    pub(super) ttl: u8,
    /// Header length in bytes (IHL * 4, options included).
    pub(super) header_len: usize,
    /// Total length from the header: bytes beyond it are link-layer padding.
    pub(super) total_len: usize,
}

/// Validate an IPv4 datagram at the start of `pkt` (which may carry Ethernet padding).
///
/// Checks, in order: room for the fixed header; version 4; IHL >= 5 (RFC 791 3.1: "the
/// minimum value for a correct header is 5"); room for the options; total length covers
/// the header and fits in the buffer; the header checksum (when `verify_checksum`); no
/// fragment (we do not reassemble: MF set or offset non-zero is dropped).
pub(super) fn parse(pkt: &[u8], verify_checksum: bool) -> Result<Ipv4Info, DropReason> {
    let p = Ipv4Packet::new_unchecked(pkt);
    if pkt.len() < super::IPV4_HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    // The accessors below read the fixed 20-byte header only: safe after the check above.
    if p.version() != 4 {
        return Err(DropReason::BadIpVersion);
    }
    let header_len = usize::from(p.header_len());
    if header_len < super::IPV4_HEADER_LEN {
        return Err(DropReason::BadIpHeaderLen);
    }
    if pkt.len() < header_len {
        return Err(DropReason::Truncated);
    }
    let total_len = usize::from(p.total_len());
    if total_len < header_len {
        return Err(DropReason::BadIpHeaderLen);
    }
    if total_len > pkt.len() {
        return Err(DropReason::Truncated);
    }
    // smoltcp's check_len now holds, so the payload accessors cannot panic. RFC 1071: the
    // sum over a correct header, its checksum field included, is all ones (our word-at-a-time
    // sum; smoltcp's byte-pair loop cost 4 % of a sender's core).
    if verify_checksum && ones_complement_sum(&pkt[..header_len]) != 0xffff {
        return Err(DropReason::BadIpChecksum);
    }
    if p.more_frags() || p.frag_offset() != 0 {
        return Err(DropReason::IpFragment);
    }
    Ok(Ipv4Info {
        src: p.src_addr().octets(),
        dst: p.dst_addr().octets(),
        proto: u8::from(p.next_header()),
        ttl: p.hop_limit(),
        header_len,
        total_len,
    })
}

/// What to write in an IPv4 header.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeaderFields {
    pub(super) src: [u8; 4],
    pub(super) dst: [u8; 4],
    pub(super) proto: u8,
    pub(super) payload_len: usize,
    pub(super) ident: u16,
    pub(super) ttl: u8,
}

/// Write a 20-byte IPv4 header (no options, DF set, DSCP/ECN 0) into `buf[..20]`.
/// `buf` must hold 20 bytes and `payload_len <= 65515` (checked by callers).
///
/// The fields are written as one array (RFC 791 §3.1's layout) rather than by smoltcp's
/// setters, each a read-modify-write of its word: this runs for every frame sent.
pub(super) fn write_header(buf: &mut [u8], h: &HeaderFields, compute_checksum: bool) {
    let Some(out) = buf.first_chunk_mut::<20>() else {
        return;
    };
    let [t0, t1] = u16::try_from(h.payload_len + super::IPV4_HEADER_LEN)
        .unwrap_or(u16::MAX)
        .to_be_bytes();
    let [i0, i1] = h.ident.to_be_bytes();
    let [s0, s1, s2, s3] = h.src;
    let [d0, d1, d2, d3] = h.dst;
    // Version 4, IHL 5 words; DSCP/ECN 0; total length; identification; flags DF (RFC 6864
    // §4.1: IDs of atomic datagrams carry no meaning; we still count them up, which helps
    // reading captures), fragment offset 0; TTL; protocol; checksum; addresses.
    let [c0, c1] = if compute_checksum {
        checksum(h).to_be_bytes()
    } else {
        [0, 0]
    };
    *out = [
        0x45, 0, t0, t1, i0, i1, 0x40, 0, h.ttl, h.proto, c0, c1, s0, s1, s2, s3, d0, d1, d2, d3,
    ];
}

/// The header checksum of [`write_header`]'s header (RFC 791 §3.1: the complement of the
/// ones-complement sum of the header's 16-bit words, the checksum field zero), computed from
/// the fields rather than from the written bytes: reading a header back as words right after
/// its byte stores stalls the CPU (the stores cannot be forwarded to the wider loads).
/// RFC 1071 §2(A): a 32-bit address adds in whole, 2^16 being 1 modulo 0xffff.
fn checksum(h: &HeaderFields) -> u16 {
    let total = u16::try_from(h.payload_len + super::IPV4_HEADER_LEN).unwrap_or(u16::MAX);
    let words = 0x4500
        + u64::from(total)
        + u64::from(h.ident)
        + 0x4000
        + (u64::from(h.ttl) << 8 | u64::from(h.proto))
        + u64::from(u32::from_be_bytes(h.src))
        + u64::from(u32::from_be_bytes(h.dst));
    !crate::wire::fold(words)
}

impl Iface {
    /// Is `src` acceptable as the source of a datagram for us? RFC 1122 3.2.1.3: "A host
    /// MUST silently discard an incoming datagram containing an IP source address that is
    /// invalid" ({0, x} "this network", limited or subnet broadcast, multicast, class E,
    /// loopback). Our own address is refused too (a reflection or a spoof).
    pub(super) fn valid_src_ip(&self, src: [u8; 4]) -> bool {
        !(src[0] == 0
            || src[0] == 127
            || src[0] >= 224
            || src == self.cfg.ip
            || Some(src) == self.subnet_broadcast())
    }

    /// Handle an IPv4 frame. `frame` is the whole Ethernet frame (length already checked).
    pub(super) fn rx_ipv4(
        &mut self,
        now: Instant,
        link_broadcast: bool,
        src_mac: [u8; 6],
        frame: &[u8],
        tx: &mut [u8],
    ) -> RxAction {
        self.stats.rx_ipv4 += 1;
        let Some(pkt) = frame.get(ETH_HEADER_LEN..) else {
            return RxAction::Dropped(DropReason::Truncated);
        };
        let ip = match parse(pkt, self.cfg.checksum_caps.ipv4.rx()) {
            Ok(ip) => ip,
            Err(r) => return RxAction::Dropped(r),
        };
        if ip.dst != self.cfg.ip {
            return RxAction::Dropped(DropReason::NotOurIp);
        }
        // RFC 1122 3.3.6: "A host SHOULD silently discard a datagram that is received via a
        // link-layer broadcast but does not specify an IP multicast or broadcast destination".
        if link_broadcast {
            return RxAction::Dropped(DropReason::LinkBroadcastUnicastIp);
        }
        if !self.valid_src_ip(ip.src) {
            return RxAction::Dropped(DropReason::BadSrcIp);
        }
        let payload = ETH_HEADER_LEN + ip.header_len..ETH_HEADER_LEN + ip.total_len;
        match ip.proto {
            IP_PROTO_TCP => RxAction::Tcp {
                src: ip.src,
                dst: ip.dst,
                payload,
            },
            IP_PROTO_ICMP => match frame.get(payload) {
                Some(icmp) => self.rx_icmp(now, &ip, src_mac, icmp, tx),
                None => RxAction::Dropped(DropReason::Truncated),
            },
            _ => RxAction::Dropped(DropReason::UnsupportedIpProto),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 checksum computed independently of smoltcp.
    fn csum(data: &[u8]) -> u16 {
        let mut sum = 0u32;
        for c in data.chunks(2) {
            let w = u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
            sum += w;
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// The direct writer gives the bytes smoltcp's setters gave (its previous body), over a
    /// grid of lengths, identifications, TTLs, protocols and addresses, checksum on and off.
    #[test]
    fn write_header_matches_smoltcp_setters() {
        use smoltcp::wire::{IpProtocol, Ipv4Address};
        fn by_setters(h: &HeaderFields, compute_checksum: bool) -> [u8; 20] {
            let mut b = [0xa5u8; 20];
            let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
            p.set_version(4);
            p.set_header_len(20);
            p.set_dscp(0);
            p.set_ecn(0);
            p.set_total_len(u16::try_from(h.payload_len + 20).unwrap_or(u16::MAX));
            p.set_ident(h.ident);
            p.clear_flags();
            p.set_dont_frag(true);
            p.set_frag_offset(0);
            p.set_hop_limit(h.ttl);
            p.set_next_header(IpProtocol::from(h.proto));
            p.set_src_addr(Ipv4Address::from(h.src));
            p.set_dst_addr(Ipv4Address::from(h.dst));
            if compute_checksum {
                p.fill_checksum();
            } else {
                p.set_checksum(0);
            }
            b
        }
        let mut x = 7u32;
        for payload_len in [0usize, 1, 8, 40, 1480, 8980, 65515] {
            for k in 0..200u32 {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let h = HeaderFields {
                    src: x.to_be_bytes(),
                    dst: x.rotate_left(13).to_be_bytes(),
                    proto: [1u8, 6, 17, (x >> 7) as u8][k as usize % 4],
                    payload_len,
                    ident: (x >> 3) as u16,
                    ttl: (x >> 20) as u8,
                };
                for csum in [true, false] {
                    let mut b = [0x5au8; 21];
                    write_header(&mut b, &h, csum);
                    assert_eq!(b[..20], by_setters(&h, csum), "{payload_len} {k} {csum}");
                    assert_eq!(b[20], 0x5a);
                }
            }
        }
    }

    #[test]
    fn write_header_golden() {
        let mut b = [0u8; 20];
        let h = HeaderFields {
            src: [192, 168, 0, 1],
            dst: [192, 168, 0, 199],
            proto: 17,
            payload_len: 0x73 - 20,
            ident: 0,
            ttl: 64,
        };
        write_header(&mut b, &h, true);
        let expect_no_csum = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = csum(&expect_no_csum);
        let mut expect = expect_no_csum;
        expect[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(b, expect);
        // Hand-computed value of the classic example header (Wikipedia "IPv4 header checksum").
        assert_eq!(c, 0xb861);
        write_header(&mut b, &h, false);
        assert_eq!(&b[10..12], &[0, 0]);
        assert_eq!(
            parse(&b, false).map(|i| i.total_len),
            Err(DropReason::Truncated)
        );
    }

    #[test]
    fn parse_rejects_each_bad_field() {
        let mut good = [0u8; 60];
        let h = HeaderFields {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            proto: 1,
            payload_len: 8,
            ident: 1,
            ttl: 64,
        };
        write_header(&mut good, &h, true);
        let info = parse(&good, true).expect("valid header");
        assert_eq!((info.header_len, info.total_len, info.proto), (20, 28, 1));

        assert_eq!(parse(&good[..19], true), Err(DropReason::Truncated));
        assert_eq!(parse(&good[..27], true), Err(DropReason::Truncated));
        let mut b = good;
        b[0] = 0x65;
        assert_eq!(parse(&b, false), Err(DropReason::BadIpVersion));
        let mut b = good;
        b[0] = 0x44;
        assert_eq!(parse(&b, false), Err(DropReason::BadIpHeaderLen));
        let mut b = good;
        b[0] = 0x4f; // 60-byte header, total length 28
        assert_eq!(parse(&b, false), Err(DropReason::BadIpHeaderLen));
        assert_eq!(parse(&b[..40], false), Err(DropReason::Truncated));
        let mut b = good;
        b[11] ^= 1;
        assert_eq!(parse(&b, true), Err(DropReason::BadIpChecksum));
        assert!(parse(&b, false).is_ok());
        for (flags_off, what) in [([0x20u8, 0x00], "MF"), ([0x00, 0x01], "offset")] {
            let mut b = good;
            b[6..8].copy_from_slice(&flags_off);
            b[10..12].fill(0);
            let c = csum(&b[..20]);
            b[10..12].copy_from_slice(&c.to_be_bytes());
            assert_eq!(parse(&b, true), Err(DropReason::IpFragment), "{what}");
        }
    }
}
