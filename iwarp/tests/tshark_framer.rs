//! FPDUs built by our framer, written into a pcap behind a TCP handshake and the MPA
//! Request/Reply, must decode in tshark without "Malformed" and with good CRCs.
//! Skips loudly only when tshark is not installed.

mod common;

use std::path::PathBuf;

use common::{TcpScript, run_tshark, tshark};
use iwarp::mpa::wire::{FrameKind, IrdOrd, Repr};
use iwarp::mpa::{Deframed, Deframer, DeframerConfig, Framer, FramerConfig};
use netcore::rng::{Rng, Xoshiro256};

const EMSS: usize = 1448;

/// An untagged RDMAP Send DDP segment (RFC 5041 §4.4, RFC 5040 §4.3): 18-octet header.
fn send_segment(msn: u32, mo: u32, last: bool, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![if last { 0x41 } else { 0x01 }, 0x43, 0, 0, 0, 0];
    v.extend_from_slice(&0u32.to_be_bytes()); // QN 0
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&mo.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// A tagged RDMA Write DDP segment (RFC 5041 §4.3): 14-octet header.
fn write_segment(stag: u32, to: u64, last: bool, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![if last { 0xc1 } else { 0x81 }, 0x40];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// ULPDUs for one direction: Sends of assorted sizes (odd lengths exercise pad) and a large
/// RDMA Write segmented to the EMSS.
fn ulpdus(rng: &mut Xoshiro256, f: &Framer) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // A copy of the framer tracks the stream position so Write segments can be sized.
    let mut f = f.clone();
    for (i, len) in [1usize, 2, 3, 16, 57, 300, 1000].into_iter().enumerate() {
        let mut p = vec![0u8; len];
        rng.fill(&mut p);
        let seg = send_segment(i as u32 + 1, 0, true, &p);
        let mut scratch = vec![0u8; f.fpdu_len(seg.len())];
        f.frame(&[&seg], &mut scratch).unwrap();
        out.push(seg);
    }
    // Write of 10000 octets split into FPDUs as large as the EMSS allows at each position.
    let mut to = 0u64;
    let total = 10_000u64;
    while to < total {
        let room = f.max_ulpdu_len(EMSS) - 14;
        let n = room.min((total - to) as usize);
        let mut p = vec![0u8; n];
        rng.fill(&mut p);
        let seg = write_segment(0x0184_9f00, to, to + n as u64 == total, &p);
        let mut scratch = vec![0u8; f.fpdu_len(seg.len())];
        assert!(scratch.len() <= EMSS);
        f.frame(&[&seg], &mut scratch).unwrap();
        out.push(seg);
        to += n as u64;
    }
    out
}

struct Case {
    crc: bool,
    /// Markers asked for by the initiator (so the responder sends them).
    markers_to_client: bool,
    /// Markers asked for by the responder (so the initiator sends them).
    markers_to_server: bool,
}

fn build_pcap(case: &Case, seed: u64) -> (PathBuf, usize, Vec<u16>) {
    let mut t = TcpScript::new(([10, 9, 0, 1], 40_000), ([10, 9, 0, 2], 7174));
    let io = Some(IrdOrd {
        ird: 1,
        ord: 1,
        ..Default::default()
    });
    let req = Repr {
        kind: FrameKind::Request,
        markers: case.markers_to_client,
        crc: case.crc,
        reject: false,
        revision: 2,
        ird_ord: io,
        ulp_data: &[],
    };
    let rep = Repr {
        kind: FrameKind::Reply,
        markers: case.markers_to_server,
        ..req
    };
    for (from_client, r) in [(true, req), (false, rep)] {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b).unwrap();
        t.send(from_client, &b);
    }
    let mut rng = Xoshiro256::seed_from_u64(seed);
    let mut c = Framer::new(FramerConfig {
        crc: case.crc,
        markers: case.markers_to_server,
        stream_pos: 0,
    });
    let mut s = Framer::new(FramerConfig {
        crc: case.crc,
        markers: case.markers_to_client,
        stream_pos: 0,
    });
    let cu = ulpdus(&mut rng, &c);
    let su = ulpdus(&mut rng, &s);
    let mut lens = Vec::new();
    let mut count = 0;
    // Interleave the two directions.
    for i in 0..cu.len().max(su.len()) {
        for (from_client, f, list) in [(true, &mut c, &cu), (false, &mut s, &su)] {
            let Some(u) = list.get(i) else { continue };
            let mut fpdu = vec![0u8; f.fpdu_len(u.len())];
            assert!(fpdu.len() <= EMSS, "FPDU {} > EMSS", fpdu.len());
            f.frame(&[u], &mut fpdu).unwrap();
            // Our own deframer must agree before tshark is asked.
            let cfg = DeframerConfig {
                crc: case.crc,
                markers: f.config().markers,
                stream_pos: f.stream_pos().wrapping_sub(fpdu.len() as u32),
                ..Default::default()
            };
            let mut d = Deframer::new(cfg);
            let mut got = Vec::new();
            let mut rest = &fpdu[..];
            loop {
                let (n, ev) = d.deframe(rest);
                rest = &rest[n..];
                match ev {
                    Some(Ok(Deframed::Data(x))) => got.extend_from_slice(x),
                    Some(Ok(Deframed::End)) | None => break,
                    Some(Ok(Deframed::Start { .. })) => {}
                    Some(Err(e)) => panic!("own deframer: {e}"),
                }
            }
            assert_eq!(&got, u);
            t.send(from_client, &fpdu);
            lens.push(u.len() as u16);
            count += 1;
        }
    }
    let name = format!(
        "iwarp-tshark-{}-{}{}{}.pcap",
        std::process::id(),
        u8::from(case.crc),
        u8::from(case.markers_to_client),
        u8::from(case.markers_to_server)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, t.pcap.bytes()).unwrap();
    (path, count, lens)
}

#[test]
fn tshark_decodes_our_fpdus() {
    let Some(ts) = tshark() else {
        eprintln!(
            "\n!!!!! tshark NOT INSTALLED: tshark_decodes_our_fpdus SKIPPED (apt install tshark) !!!!!\n"
        );
        return;
    };
    let cases = [
        Case {
            crc: false,
            markers_to_client: false,
            markers_to_server: false,
        },
        Case {
            crc: true,
            markers_to_client: false,
            markers_to_server: false,
        },
        Case {
            crc: true,
            markers_to_client: true,
            markers_to_server: true,
        },
        Case {
            crc: false,
            markers_to_client: true,
            markers_to_server: true,
        },
        // Markers in one direction only (RFC 5044 §7.1 negotiates M per receiver) cannot be
        // checked here: Wireshark 4.0 assumes markers in both directions when either side
        // asked. The deframer round trip covers that case (tests/mpa_deframer.rs).
    ];
    for (i, case) in cases.iter().enumerate() {
        let (path, count, lens) = build_pcap(case, i as u64 + 1);
        let v = run_tshark(&ts, &path, &["-V"]);
        let label = format!(
            "case crc={} markers s->c={} c->s={} ({})",
            case.crc,
            case.markers_to_client,
            case.markers_to_server,
            path.display()
        );
        assert!(
            !v.contains("Malformed"),
            "{label}: tshark reports a malformed packet"
        );
        assert!(!v.contains("Bad CRC"), "{label}: tshark reports a bad CRC");
        assert!(
            !v.contains("does not contain the expected length"),
            "{label}: length"
        );
        assert!(v.contains("Request frame header") && v.contains("Reply frame header"));
        let good = v.matches("Good CRC32").count();
        if case.crc {
            assert_eq!(good, count, "{label}: Good CRC32 lines vs FPDUs");
        } else {
            assert_eq!(good, 0);
        }
        let fields = run_tshark(&ts, &path, &["-T", "fields", "-e", "iwarp_mpa.ulpdulength"]);
        let theirs: Vec<u16> = fields
            .lines()
            .filter(|l| !l.is_empty())
            .flat_map(|l| {
                l.split(',')
                    .map(|x| x.parse::<u16>().unwrap())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(theirs, lens, "{label}: ULPDU lengths per tshark");
        let ddp = v.matches("Direct Data Placement").count();
        assert!(ddp >= count, "{label}: DDP decoded {ddp} < {count}");
        std::fs::remove_file(&path).ok();
    }
}
