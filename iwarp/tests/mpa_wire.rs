//! MPA Request/Reply/Reject golden bytes from real Linux siw captures, and parse/emit
//! round trips of every MPA frame in them.

mod common;

use common::{connections, read_capture, siw_pcap};
use iwarp::mpa::wire::{
    FrameKind, HEADER_LEN, IrdOrd, KEY_REP, KEY_REQ, Packet, Repr, RtrKind, WireError,
};

/// (capture, client port, request bytes after the key, reply bytes after the key)
fn frames_of(file: &str) -> Vec<(u16, Vec<u8>, Vec<u8>)> {
    let bytes = std::fs::read(siw_pcap(file)).unwrap();
    let mut v = Vec::new();
    for c in connections(&read_capture(&bytes)) {
        let get = |s: &[u8], key: &[u8; 16]| -> Option<Vec<u8>> {
            if !s.starts_with(key) || s.len() < HEADER_LEN {
                return None;
            }
            let pd = usize::from(u16::from_be_bytes([s[18], s[19]]));
            s.get(..HEADER_LEN + pd).map(|b| b.to_vec())
        };
        if let (Some(q), Some(p)) = (get(&c.c2s.stream, KEY_REQ), get(&c.s2c.stream, KEY_REP)) {
            v.push((c.client.1, q, p));
        }
    }
    v
}

fn frame(kind: FrameKind, tail: &[u8]) -> Vec<u8> {
    let mut v = match kind {
        FrameKind::Request => KEY_REQ.to_vec(),
        FrameKind::Reply => KEY_REP.to_vec(),
    };
    v.extend_from_slice(tail);
    v
}

fn emit(r: &Repr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; r.buffer_len()];
    assert_eq!(r.emit(&mut buf).unwrap(), buf.len());
    buf
}

#[test]
fn golden_rev2_enhanced_rping() {
    // cap_rping: rev 2, Enhanced, IRD/ORD 1/1 both ways (pd 00010001).
    let f = frames_of("cap_rping.pcap");
    let (_, req, rep) = &f[0];
    assert_eq!(
        req,
        &frame(FrameKind::Request, &[0x10, 2, 0, 4, 0, 1, 0, 1])
    );
    assert_eq!(rep, &frame(FrameKind::Reply, &[0x10, 2, 0, 4, 0, 1, 0, 1]));
    let ours = Repr {
        kind: FrameKind::Request,
        markers: false,
        crc: false,
        reject: false,
        revision: 2,
        ird_ord: Some(IrdOrd {
            ird: 1,
            ord: 1,
            ..Default::default()
        }),
        ulp_data: &[],
    };
    assert_eq!(&emit(&ours), req);
    assert_eq!(ours.to_string(), "MPA Request rev 2 ird 1 ord 1 pd 0");
}

#[test]
fn golden_negotiation_variants() {
    let f = frames_of("mpa_negotiation.pcap");
    let by_tail = |q: &[u8]| {
        f.iter()
            .find(|(_, req, _)| &req[16..] == q)
            .cloned()
            .unwrap()
    };
    // CRC requested -> C echoed.
    let (_, _, rep) = by_tail(&[0x50, 2, 0, 4, 0, 1, 0, 1]);
    assert_eq!(rep, frame(FrameKind::Reply, &[0x50, 2, 0, 4, 0, 1, 0, 1]));
    // Markers requested -> Reject (R, Enhanced, IRD/ORD 0/0).
    let (_, _, rep) = by_tail(&[0x90, 2, 0, 4, 0, 1, 0, 1]);
    assert_eq!(rep, frame(FrameKind::Reply, &[0x30, 2, 0, 4, 0, 0, 0, 0]));
    let (r, _) = Repr::parse_bytes(&rep).unwrap();
    assert!(r.reject && !r.markers);
    assert_eq!(r.to_string(), "MPA Reject rev 2 ird 0 ord 0 pd 0");
    // Revision 1 -> revision 1 reply without private data.
    let (_, _, rep) = by_tail(&[0x00, 1, 0, 0]);
    assert_eq!(rep, frame(FrameKind::Reply, &[0x00, 1, 0, 0]));
    // P2P with Write+Read offered (8001c001) -> siw picks Write (80018001).
    let (_, req, rep) = by_tail(&[0x10, 2, 0, 4, 0x80, 0x01, 0xc0, 0x01]);
    let (q, _) = Repr::parse_bytes(&req).unwrap();
    let io = q.ird_ord.unwrap();
    assert!(io.p2p && io.rtr_write && io.rtr_read && !io.rtr_send);
    assert_eq!((io.ird, io.ord), (1, 1));
    assert_eq!(
        rep,
        frame(FrameKind::Reply, &[0x10, 2, 0, 4, 0x80, 0x01, 0x80, 0x01])
    );
    let (p, _) = Repr::parse_bytes(&rep).unwrap();
    let pio = p.ird_ord.unwrap();
    assert!(pio.p2p && pio.offers(RtrKind::Write) && !pio.offers(RtrKind::Read));
    // IRD/ORD 200/200 -> capped at 128/128.
    let (_, _, rep) = by_tail(&[0x10, 2, 0, 4, 0, 200, 0, 200]);
    assert_eq!(
        rep,
        frame(FrameKind::Reply, &[0x10, 2, 0, 4, 0, 128, 0, 128])
    );
}

#[test]
fn golden_rsockets_private_data() {
    // cap_riostream: pd_len 44 = IRD/ORD 0/1 (00000001) + 40 octets of rs_conn_data (0102 0180..).
    let f = frames_of("cap_riostream.pcap");
    let (_, req, _) = &f[0];
    let (r, len) = Repr::parse_bytes(req).unwrap();
    assert_eq!(len, HEADER_LEN + 44);
    assert_eq!(r.ulp_data.len(), 40);
    assert_eq!(&r.ulp_data[..4], &[1, 2, 1, 0x80]);
    assert_eq!(
        r.ird_ord.unwrap(),
        IrdOrd {
            ird: 0,
            ord: 1,
            ..Default::default()
        }
    );
}

#[test]
fn every_captured_frame_round_trips() {
    let mut n = 0;
    for path in common::siw_pcaps() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for (port, req, rep) in frames_of(&name) {
            for bytes in [&req, &rep] {
                let p = Packet::new_checked(&bytes[..]).unwrap();
                let r = Repr::parse(&p).unwrap();
                assert_eq!(&emit(&r), bytes, "{name} port {port}: {r}");
                n += 1;
            }
        }
    }
    assert!(n >= 60, "only {n} frames");
}

#[test]
fn truncated_and_impossible() {
    let good = frame(FrameKind::Request, &[0x10, 2, 0, 6, 0, 1, 0, 1, 0xaa, 0xbb]);
    for cut in 0..good.len() {
        assert_eq!(
            Repr::parse_bytes(&good[..cut]).unwrap_err(),
            WireError::Truncated,
            "{cut}"
        );
    }
    let (r, len) = Repr::parse_bytes(&good).unwrap();
    assert_eq!((len, r.ulp_data), (good.len(), &[0xaa, 0xbb][..]));
    // PD_Length above 512.
    let big = frame(FrameKind::Request, &[0, 1, 0x02, 0x01]);
    assert_eq!(
        Repr::parse_bytes(&big).unwrap_err(),
        WireError::PdTooLong(513)
    );
    // Enhanced without room for IRD/ORD.
    let short = frame(FrameKind::Request, &[0x10, 2, 0, 2, 0, 1]);
    assert_eq!(
        Repr::parse_bytes(&short).unwrap_err(),
        WireError::MissingIrdOrd
    );
    // Bad key.
    let mut bad = good.clone();
    bad[4] = b'X';
    assert_eq!(Repr::parse_bytes(&bad).unwrap_err(), WireError::BadKey);
    // Enhanced bit on revision 1 is not IRD/ORD.
    let v1 = frame(FrameKind::Reply, &[0x10, 1, 0, 4, 0, 1, 0, 1]);
    let (r, _) = Repr::parse_bytes(&v1).unwrap();
    assert_eq!((r.ird_ord, r.ulp_data.len()), (None, 4));
    // emit into a short buffer fails, no panic
    let mut tiny = [0u8; 10];
    assert_eq!(r.emit(&mut tiny), Err(WireError::BufferTooSmall));
}

#[test]
fn ird_ord_bits() {
    let io = IrdOrd::parse([0x80, 0x01, 0xc0, 0x01]);
    assert_eq!(io.to_bytes(), [0x80, 0x01, 0xc0, 0x01]);
    let s = IrdOrd {
        ird: 0x3fff,
        ord: 5,
        rtr_send: true,
        ..Default::default()
    };
    assert_eq!(s.to_bytes(), [0x7f, 0xff, 0x00, 0x05]);
    assert_eq!(
        IrdOrd {
            ird: 20000,
            ..Default::default()
        }
        .to_bytes()[..2],
        [0x3f, 0xff]
    );
    let only = io.with_only_rtr(Some(RtrKind::Read));
    assert!(only.rtr_read && !only.rtr_write && !only.rtr_send && only.p2p);
}
