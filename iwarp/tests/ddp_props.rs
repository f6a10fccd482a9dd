//! Seeded never-panic and round-trip properties over random DDP/RDMAP headers, and random
//! (mutated) segments fed through a queue pair with random stream segmentation.

use iwarp::ddp::wire as ddp;
use iwarp::mpa::{Framer, FramerConfig};
use iwarp::rdmap::wire::{Header, Opcode, RdmapPart, ReadRequest, qn, tagged, untagged};
use iwarp::rdmap::{Qp, QpConfig, QpState, RecvRequest, Sge, TermLayout, TerminateHdr};
use iwarp::stag::{Access, PdId, Stag};
use iwarp::testing::{VecMemory, test_now};
use netcore::Rng;
use netcore::rng::Xoshiro256;

fn seed() -> u64 {
    std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

#[test]
fn random_bytes_never_panic_and_round_trip() {
    let s = seed();
    let mut rng = Xoshiro256::seed_from_u64(s);
    for i in 0..20_000 {
        let len = (rng.next_u32() % 100) as usize;
        let mut b = vec![0u8; len];
        rng.fill(&mut b);
        if len >= 2 && i % 2 == 0 {
            // Bias towards valid control fields so deeper code runs.
            b[0] = (b[0] & 0xc0) | 1;
            b[1] = 0x40 | (b[1] % 12);
        }
        let _ = ddp::Packet::new_checked(&b[..]).map(|p| ddp::Repr::parse(&p));
        for layout in [TermLayout::Rfc, TermLayout::Siw] {
            if let Ok(t) = TerminateHdr::parse(&b, layout) {
                let _ = t.to_string();
                if t.layout == TermLayout::Rfc {
                    let mut out = vec![0u8; t.buffer_len()];
                    t.emit(&mut out);
                    let back = TerminateHdr::parse(&out, layout).unwrap();
                    assert_eq!(back.code(), t.code(), "seed {s} iter {i}");
                }
            }
        }
        if let Ok(h) = Header::parse(&b) {
            let _ = h.to_string();
            if h.opcode != Opcode::Terminate {
                let mut out = vec![0u8; h.buffer_len()];
                assert_eq!(h.emit(&mut out), h.buffer_len());
                let back = Header::parse(&out).unwrap();
                assert_eq!(back.opcode, h.opcode, "seed {s} iter {i}");
                assert_eq!(back.ddp.buf, h.ddp.buf, "seed {s} iter {i}");
                assert_eq!(back.rdmap, h.rdmap, "seed {s} iter {i}");
                // Same bytes, except reserved bits, which are ignored on receive and zero on
                // emission (RFC 5041 §4.1, RFC 5040 §4.2, RFC 7306 §4.3).
                let mut want = b[..h.buffer_len()].to_vec();
                want[0] &= 0xc3;
                want[1] &= 0xcf;
                if h.opcode == Opcode::AtomicRequest {
                    want[18..21].fill(0);
                    want[21] &= 0x0f;
                }
                assert_eq!(out, want, "seed {s} iter {i}: canonical bytes");
            }
        }
    }
}

/// `Header::parse` reads the DDP header itself (one length check, fixed offsets): it must
/// agree with the DDP module's checked `Packet`/`Repr` on random, truncated and garbage
/// input, and report the RFC 5041 §7.1 / RFC 5040 §7.1 checks in the same order as
/// `header_len`.
#[test]
fn header_parse_agrees_with_the_ddp_module() {
    use iwarp::rdmap::wire::{HeaderError, header_len};
    let s = seed();
    let mut rng = Xoshiro256::seed_from_u64(s ^ 0xddb);
    let mut parsed = 0;
    for i in 0..50_000 {
        let len = (rng.next_u32() % 40) as usize;
        let mut b = vec![0u8; len];
        rng.fill(&mut b);
        if len >= 2 && i % 4 != 0 {
            b[0] = (b[0] & 0xfc) | 1;
            b[1] = 0x40 | (b[1] % 12);
        }
        let got = Header::parse(&b);
        // The reference: control bytes, then the DDP module's parse, then the RDMAP part's
        // length (extra bytes after the DDP header).
        let want_ctrl = match b.as_slice() {
            [c0, c1, ..] => header_len(*c0, *c1).map(|_| ()),
            _ => Err(HeaderError::Truncated),
        };
        match (&got, want_ctrl) {
            (Err(e), Err(w)) => assert_eq!(*e, w, "seed {s} iter {i} {b:02x?}"),
            (Ok(_), Err(w)) => panic!("seed {s} iter {i}: accepted, want {w:?}: {b:02x?}"),
            (_, Ok(())) => {
                let reference = ddp::Packet::new_checked(&b[..]).map(|p| ddp::Repr::parse(&p));
                match (&got, reference) {
                    (Ok(h), Ok(Ok(r))) => {
                        parsed += 1;
                        assert_eq!(h.ddp, r, "seed {s} iter {i}");
                        assert_eq!(h.opcode as u8, b[1] & 0x0f);
                    }
                    // The DDP header is there but the RDMAP part is not (or, for a
                    // Terminate, is not a Terminate header).
                    (Err(HeaderError::Truncated), Ok(Ok(r))) => {
                        let op = Opcode::from_u8(b[1] & 0x0f).unwrap();
                        match op.extra_len() {
                            Some(x) => assert!(len < r.buffer_len() + x, "seed {s} iter {i}"),
                            None => assert!(
                                TerminateHdr::parse(&b[r.buffer_len()..], TermLayout::Rfc).is_err(),
                                "seed {s} iter {i}: {b:02x?}"
                            ),
                        }
                    }
                    (Err(HeaderError::Truncated), Err(_)) => {}
                    (g, r) => panic!("seed {s} iter {i}: {g:?} vs {r:?}: {b:02x?}"),
                }
            }
        }
    }
    assert!(parsed > 1000, "parsed {parsed}");
}

fn valid_ulpdu(rng: &mut Xoshiro256, stags: &[Stag]) -> Vec<u8> {
    let stag = stags[(rng.next_u32() as usize) % stags.len()];
    let payload = (rng.next_u32() % 300) as usize;
    let h = match rng.next_u32() % 4 {
        0 => Header {
            opcode: Opcode::Write,
            ddp: tagged(true, stag, 0x1000),
            rdmap: RdmapPart::None,
        },
        1 => Header {
            opcode: Opcode::Send,
            ddp: untagged(true, qn::SEND, 1, 0, 0),
            rdmap: RdmapPart::None,
        },
        2 => Header {
            opcode: Opcode::ReadRequest,
            ddp: untagged(true, qn::READ_REQ, 1, 0, 0),
            rdmap: RdmapPart::ReadRequest(ReadRequest {
                sink_stag: Stag(9),
                sink_to: 0,
                size: 100,
                src_stag: stag,
                src_to: 0x1000,
            }),
        },
        _ => Header {
            opcode: Opcode::SendInvalidate,
            ddp: untagged(true, 0, 1, 0, stag.0),
            rdmap: RdmapPart::None,
        },
    };
    let extra = if h.opcode == Opcode::ReadRequest {
        0
    } else {
        payload
    };
    let mut v = vec![0u8; h.buffer_len() + extra];
    h.emit(&mut v);
    v
}

#[test]
fn mutated_segments_through_a_qp_never_panic() {
    let s = seed();
    let mut rng = Xoshiro256::seed_from_u64(s ^ 1);
    for round in 0..1500u64 {
        let mut qp = Qp::new(QpConfig {
            pd: PdId(1),
            ird: 2,
            ord: 2,
            crc: round.is_multiple_of(2),
            ..Default::default()
        });
        qp.establish();
        let mut mem = VecMemory::new(round);
        let a = mem.register(PdId(1), Access::ALL, 0x1000, 4096);
        let b = mem.register(PdId(2), Access::ALL, 0x1000, 4096);
        let r = mem.register(PdId(1), Access::LOCAL_WRITE, 0, 256);
        qp.post_recv(RecvRequest {
            wr_id: 1,
            sges: vec![Sge {
                mr: r.handle,
                offset: 0,
                len: 256,
            }],
        })
        .unwrap();
        let mut framer = Framer::new(FramerConfig {
            crc: round.is_multiple_of(2),
            ..Default::default()
        });
        let mut stream = Vec::new();
        for _ in 0..1 + rng.next_u32() % 4 {
            let mut u = valid_ulpdu(&mut rng, &[a.stag, b.stag, Stag(0x77)]);
            for _ in 0..rng.next_u32() % 4 {
                let k = (rng.next_u32() as usize) % u.len();
                u[k] ^= 1 << (rng.next_u32() % 8);
            }
            let mut out = vec![0u8; u.len() + 16];
            let n = framer.frame(&[&u], &mut out).unwrap();
            stream.extend_from_slice(&out[..n]);
        }
        if rng.next_u32().is_multiple_of(8) {
            let k = (rng.next_u32() as usize) % stream.len();
            stream[k] ^= 0x10;
        }
        let mut i = 0;
        while i < stream.len() {
            let k = (1 + rng.next_u32() as usize % 64).min(stream.len() - i);
            assert_eq!(qp.handle_stream(test_now(), &mut mem, &stream[i..i + k]), k);
            i += k;
        }
        let mut out = [0u8; 1500];
        let mut n_term = 0;
        while let Some(n) = qp.poll_fpdu(test_now(), 1460, &mut mem, &mut out) {
            assert!(n <= 1460);
            if out[3] & 0xf == Opcode::Terminate as u8 {
                n_term += 1;
            }
        }
        match qp.state() {
            QpState::Error => assert!(n_term == 1 || qp.local_error().is_none(), "seed {s}"),
            QpState::Rts => assert_eq!(n_term, 0),
            other => panic!("seed {s} round {round}: stuck in {other:?}"),
        }
    }
}

/// The receive path takes whole FPDUs in one step (CRC over the FPDU, then the segment) and
/// walks the deframer's events otherwise. On random, mutated streams both must end the same:
/// same error, state, completions, Terminate sent, region bytes and FPDU count.
#[test]
fn whole_fpdu_fast_path_equals_the_event_path() {
    let s = seed();
    let mut rng = Xoshiro256::seed_from_u64(s ^ 2);
    for round in 0..1500u64 {
        let crc = !round.is_multiple_of(3);
        let by_placer = round.is_multiple_of(2);
        let mut framer = Framer::new(FramerConfig {
            crc,
            ..Default::default()
        });
        // The STags the receiver's memory hands out (same seed, same registrations).
        let mut probe = VecMemory::new(round);
        let pa = probe.register(PdId(1), Access::ALL, 0x1000, 4096);
        let pb = probe.register(PdId(2), Access::ALL, 0x1000, 4096);
        let stags = [pa.stag, pb.stag, Stag(0x77)];
        let mut stream = Vec::new();
        for _ in 0..1 + rng.next_u32() % 5 {
            let mut u = valid_ulpdu(&mut rng, &stags);
            for _ in 0..rng.next_u32() % 3 {
                let k = (rng.next_u32() as usize) % u.len();
                u[k] ^= 1 << (rng.next_u32() % 8);
            }
            let mut out = vec![0u8; u.len() + 16];
            let n = framer.frame(&[&u], &mut out).unwrap();
            stream.extend_from_slice(&out[..n]);
        }
        if rng.next_u32().is_multiple_of(6) {
            let k = (rng.next_u32() as usize) % stream.len();
            stream[k] ^= 0x10;
        }
        let run = |chunk: usize| {
            let mut qp = Qp::new(QpConfig {
                pd: PdId(1),
                crc,
                crc_by_placer: by_placer,
                ..Default::default()
            });
            qp.establish();
            let mut mem = VecMemory::new(round);
            let a = mem.register(PdId(1), Access::ALL, 0x1000, 4096);
            let b = mem.register(PdId(2), Access::ALL, 0x1000, 4096);
            let r = mem.register(PdId(1), Access::LOCAL_WRITE, 0, 512);
            assert_eq!((a.stag, b.stag), (pa.stag, pb.stag));
            qp.post_recv(RecvRequest {
                wr_id: 1,
                sges: vec![Sge {
                    mr: r.handle,
                    offset: 0,
                    len: 512,
                }],
            })
            .unwrap();
            for c in stream.chunks(chunk) {
                assert_eq!(qp.handle_stream(test_now(), &mut mem, c), c.len());
            }
            let mut cqes = Vec::new();
            while let Some(c) = qp.poll_completion() {
                cqes.push(c);
            }
            let mut sent = Vec::new();
            let mut out = [0u8; 1500];
            while let Some(n) = qp.poll_fpdu(test_now(), 1460, &mut mem, &mut out) {
                sent.extend_from_slice(&out[..n]);
            }
            let bytes = [a.handle, b.handle, r.handle].map(|h| mem.bytes(h).to_vec());
            (
                qp.local_error(),
                qp.state(),
                qp.rx_fpdus(),
                cqes,
                sent,
                bytes,
            )
        };
        let whole = run(stream.len());
        let by_octet = run(1);
        assert_eq!(whole, by_octet, "seed {s} round {round}");
    }
}
