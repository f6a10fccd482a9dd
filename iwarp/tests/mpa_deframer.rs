//! Deframer/framer properties: round trips with and without markers and CRC, arbitrary
//! segmentation, errors, and random input never panicking.

use iwarp::mpa::framer::max_ulpdu_len_any_pos;
use iwarp::mpa::{Deframed, Deframer, DeframerConfig, Framer, FramerConfig, MpaError, seal_fpdu};
use netcore::rng::{Rng, Xoshiro256};

/// What a deframer produced, flattened: one entry per FPDU (ulpdu bytes) or an error.
#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Fpdu(Vec<u8>),
    Err(MpaError),
}

/// Feed `stream` in the given chunk sizes; collect complete FPDUs and check the Data contract.
fn run(cfg: DeframerConfig, stream: &[u8], chunks: &mut dyn FnMut() -> usize) -> Vec<Ev> {
    let mut d = Deframer::new(cfg);
    let mut out = Vec::new();
    let mut cur: Option<(u16, Vec<u8>)> = None;
    let mut off = 0;
    while off < stream.len() {
        let n = chunks().clamp(1, stream.len() - off);
        let mut input = &stream[off..off + n];
        off += n;
        loop {
            let (used, ev) = d.deframe(input);
            match ev {
                None => {
                    assert_eq!(used, input.len(), "None must mean all input consumed");
                    break;
                }
                Some(Ok(Deframed::Start { ulpdu_len })) => {
                    assert!(cur.is_none());
                    cur = Some((ulpdu_len, Vec::new()));
                }
                Some(Ok(Deframed::Data(data))) => {
                    // Contract: data is the tail of the consumed input.
                    assert!(std::ptr::eq(data, &input[used - data.len()..used]));
                    cur.as_mut().unwrap().1.extend_from_slice(data);
                }
                Some(Ok(Deframed::End)) => {
                    let (len, bytes) = cur.take().unwrap();
                    assert_eq!(usize::from(len), bytes.len());
                    out.push(Ev::Fpdu(bytes));
                }
                Some(Err(e)) => {
                    out.push(Ev::Err(e));
                    // sticky
                    assert_eq!(d.deframe(&[1, 2, 3]), (0, Some(Err(e))));
                    return out;
                }
            }
            input = &input[used..];
        }
    }
    assert!(cur.is_none(), "stream ended inside an FPDU");
    out
}

fn ulpdus(rng: &mut Xoshiro256, n: usize, max: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = 14 + (rng.next_u32() as usize) % (max - 14);
            let mut v = vec![0u8; len];
            rng.fill(&mut v);
            v
        })
        .collect()
}

fn frame_all(cfg: FramerConfig, msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Framer::new(cfg);
    let mut stream = Vec::new();
    for m in msgs {
        let mut buf = vec![0u8; f.fpdu_len(m.len())];
        let pos = f.stream_pos();
        // split the ULPDU into two parts to exercise gather of parts
        let cut = m.len() / 3;
        let n = f.frame(&[&m[..cut], &m[cut..]], &mut buf).unwrap();
        assert_eq!(n, buf.len());
        assert_eq!(f.stream_pos(), pos.wrapping_add(n as u32));
        assert_eq!(n % 4, 0, "FPDUs are 4-aligned");
        stream.extend_from_slice(&buf);
    }
    stream
}

fn all_modes() -> Vec<(bool, bool, u32)> {
    let mut v = Vec::new();
    for crc in [false, true] {
        for markers in [false, true] {
            for pos in [0u32, 4, 508, 1000, u32::MAX - 511] {
                v.push((crc, markers, pos));
            }
        }
    }
    v
}

#[test]
fn round_trip_any_segmentation() {
    let mut rng = Xoshiro256::seed_from_u64(7);
    for (crc, markers, pos) in all_modes() {
        let msgs = ulpdus(&mut rng, 20, 2000);
        let stream = frame_all(
            FramerConfig {
                crc,
                markers,
                stream_pos: pos,
            },
            &msgs,
        );
        let dcfg = DeframerConfig {
            crc,
            markers,
            stream_pos: pos,
            ..Default::default()
        };
        let want: Vec<Ev> = msgs.iter().cloned().map(Ev::Fpdu).collect();
        assert_eq!(
            run(dcfg, &stream, &mut || usize::MAX),
            want,
            "whole {crc} {markers} {pos}"
        );
        assert_eq!(
            run(dcfg, &stream, &mut || 1),
            want,
            "bytewise {crc} {markers} {pos}"
        );
        let mut r2 = Xoshiro256::seed_from_u64(u64::from(pos) ^ 99);
        assert_eq!(
            run(dcfg, &stream, &mut || 1 + (r2.next_u32() as usize) % 1500),
            want,
            "random {crc} {markers} {pos}"
        );
    }
}

#[test]
fn markers_are_on_the_wire_every_512_octets() {
    let msgs = vec![vec![0xabu8; 1400], vec![0xcdu8; 30]];
    let stream = frame_all(
        FramerConfig {
            crc: true,
            markers: true,
            stream_pos: 0,
        },
        &msgs,
    );
    // Leading marker at 0 points at the FPDU right after it.
    assert_eq!(&stream[0..4], &[0, 0, 0, 0]);
    assert_eq!(&stream[4..6], &1400u16.to_be_bytes());
    // The marker at 512 points back to the length field at 4: FPDUPTR 508.
    assert_eq!(&stream[512..516], &[0, 0, 0x01, 0xfc]);
    assert_eq!(&stream[1024..1028], &[0, 0, 0x03, 0xfc]);
    // Without markers the same ULPDU makes a plain FPDU.
    let plain = frame_all(
        FramerConfig {
            crc: true,
            markers: false,
            stream_pos: 0,
        },
        &msgs,
    );
    assert_eq!(stream.len(), plain.len() + 3 * 4);
}

/// RFC 5044 §5: markers sit every 512 octets from the start of the first FPDU, and the first
/// one, in front of the first FPDU, has FPDUPTR 0; an FPDU that starts at any later marker
/// position likewise has the marker in front of its ULPDU_LENGTH with FPDUPTR 0. The marker
/// belongs to that FPDU: the CRC (RFC 5044 §4.1/§6) covers it, as Wireshark's MPA dissector
/// computes it (CRC from the first octet of the segment, markers included). Golden bytes.
#[test]
fn fpdu_at_a_marker_position_golden() {
    for stream_pos in [0u32, 512, 1024 * 1024] {
        let ulpdu: Vec<u8> = (0u8..60).collect();
        let stream = frame_all(
            FramerConfig {
                crc: true,
                markers: true,
                stream_pos,
            },
            std::slice::from_ref(&ulpdu),
        );
        // marker (4) + length (2) + 60 + pad 2 + CRC 4
        assert_eq!(stream.len(), 72, "pos {stream_pos}");
        assert_eq!(&stream[..4], &[0, 0, 0, 0], "leading marker, FPDUPTR 0");
        assert_eq!(&stream[4..6], &60u16.to_be_bytes());
        assert_eq!(&stream[6..66], &ulpdu[..]);
        let crc = netcore::crc::crc32c(&stream[..68]);
        assert_eq!(
            &stream[68..],
            &crc.to_le_bytes(),
            "CRC covers the leading marker"
        );
        let without = netcore::crc::crc32c(&stream[4..68]);
        assert_ne!(&stream[68..], &without.to_le_bytes());
    }
    // An FPDU that starts 8 octets before a marker: the marker lands inside it after the
    // length field and 6 ULPDU octets, FPDUPTR 8 (from the ULPDU_LENGTH field to the marker).
    let stream = frame_all(
        FramerConfig {
            crc: true,
            markers: true,
            stream_pos: 504,
        },
        &[vec![7u8; 20]],
    );
    assert_eq!(&stream[8..12], &[0, 0, 0, 8]);
    let n = stream.len();
    assert_eq!(
        &stream[n - 4..],
        &netcore::crc::crc32c(&stream[..n - 4]).to_le_bytes()
    );
    // The deframer takes both back.
    let cfg = DeframerConfig {
        crc: true,
        markers: true,
        stream_pos: 504,
        ..DeframerConfig::default()
    };
    assert_eq!(run(cfg, &stream, &mut || 1), vec![Ev::Fpdu(vec![7u8; 20])]);
}

#[test]
fn bad_crc_is_an_error_with_term_code() {
    let msgs = vec![vec![1u8; 100], vec![2u8; 50]];
    let mut stream = frame_all(
        FramerConfig {
            crc: true,
            ..Default::default()
        },
        &msgs,
    );
    let cfg = DeframerConfig {
        crc: true,
        ..Default::default()
    };
    stream[110] ^= 0x40; // second FPDU's payload
    let evs = run(cfg, &stream, &mut || 7);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0], Ev::Fpdu(msgs[0].clone()));
    let Ev::Err(e) = evs[1] else {
        panic!("expected error, got {:?}", evs[1])
    };
    assert!(matches!(e, MpaError::Crc { .. }));
    assert_eq!(e.term_code(), (2, 0, 2));
    // Same stream with CRC off: the corrupt CRC is ignored.
    let cfg_off = DeframerConfig {
        crc: false,
        ..Default::default()
    };
    assert_eq!(run(cfg_off, &stream, &mut || 7).len(), 2);
}

#[test]
fn nonzero_pad_is_ignored_but_covered_by_crc() {
    // ULPDU of 17 octets -> 1 pad octet. Build by hand with pad 0x40 and a CRC over it.
    let ulpdu = [9u8; 17];
    let mut fpdu = Vec::new();
    fpdu.extend_from_slice(&17u16.to_be_bytes());
    fpdu.extend_from_slice(&ulpdu);
    fpdu.push(0x40);
    let crc = netcore::crc::crc32c(&fpdu);
    fpdu.extend_from_slice(&crc.to_le_bytes());
    let cfg = DeframerConfig {
        crc: true,
        ..Default::default()
    };
    assert_eq!(run(cfg, &fpdu, &mut || 3), vec![Ev::Fpdu(ulpdu.to_vec())]);
    fpdu[19] = 0x41;
    assert!(matches!(
        run(cfg, &fpdu, &mut || 3)[0],
        Ev::Err(MpaError::Crc { .. })
    ));
}

#[test]
fn corrupt_marker_is_an_error() {
    let msgs = vec![vec![0x11u8; 1200]];
    let mut stream = frame_all(
        FramerConfig {
            crc: false,
            markers: true,
            stream_pos: 0,
        },
        &msgs,
    );
    stream[515] ^= 4;
    let cfg = DeframerConfig {
        markers: true,
        ..Default::default()
    };
    let evs = run(cfg, &stream, &mut || 100);
    let Ev::Err(e) = evs[0] else {
        panic!("{evs:?}")
    };
    assert_eq!(
        e,
        MpaError::Marker {
            fpduptr: 508 ^ 4,
            expected: 508
        }
    );
    assert_eq!(e.term_code(), (2, 0, 3));
}

#[test]
fn impossible_lengths() {
    // Length 3 < smallest DDP header.
    let evs = run(
        DeframerConfig::default(),
        &[0, 3, 1, 2, 3, 0, 0, 0, 0, 0],
        &mut || 1,
    );
    assert_eq!(evs, vec![Ev::Err(MpaError::UlpduLength(3))]);
    let cfg = DeframerConfig {
        max_ulpdu_len: 1442,
        ..Default::default()
    };
    let evs = run(cfg, &[0x05, 0xa3, 0, 0], &mut || 4);
    assert_eq!(evs, vec![Ev::Err(MpaError::UlpduLength(1443))]);
    // Zero-length ULPDU is fine when allowed.
    let cfg0 = DeframerConfig {
        min_ulpdu_len: 0,
        ..Default::default()
    };
    assert_eq!(
        run(cfg0, &[0, 0, 0, 0, 0, 0, 0, 0], &mut || 1),
        vec![Ev::Fpdu(vec![])]
    );
}

#[test]
fn max_ulpdu_fits_emss_exactly() {
    for emss in [64usize, 536, 1448, 1460, 8948, 9000] {
        assert_eq!(max_ulpdu_len_any_pos(emss, false), ((emss - 4) & !3) - 2);
        for markers in [false, true] {
            for pos in (0..1024u32).step_by(4) {
                let f = Framer::new(FramerConfig {
                    crc: true,
                    markers,
                    stream_pos: pos,
                });
                let max = f.max_ulpdu_len(emss);
                assert!(
                    f.fpdu_len(max) <= emss,
                    "emss {emss} pos {pos} markers {markers}"
                );
                assert!(
                    f.fpdu_len(max + 1) > emss,
                    "emss {emss} pos {pos} markers {markers}"
                );
                assert!(max >= max_ulpdu_len_any_pos(emss, markers));
            }
        }
    }
    assert_eq!(max_ulpdu_len_any_pos(1448, false), 1442);
}

/// A copy-mode and a gather-mode framer at stream position 0, markers off.
fn two_framers(crc: bool) -> (Framer, Framer) {
    let cfg = FramerConfig {
        crc,
        markers: false,
        stream_pos: 0,
    };
    (Framer::new(cfg), Framer::new(cfg))
}

/// `m` framed by the copy-mode framer.
fn framed(copy: &mut Framer, m: &[u8]) -> Vec<u8> {
    let mut a = vec![0u8; copy.fpdu_len(m.len())];
    copy.frame(&[m], &mut a).unwrap();
    a
}

#[test]
fn gather_equals_copy() {
    let mut rng = Xoshiro256::seed_from_u64(3);
    for crc in [false, true] {
        let (mut copy, mut gather) = two_framers(crc);
        for m in ulpdus(&mut rng, 30, 3000) {
            let a = framed(&mut copy, &m);
            let mut g = gather.gather(m.len() as u16).unwrap();
            let mut b = g.prefix().to_vec();
            let (h, p) = m.split_at(14);
            g.update(h);
            g.update(p);
            b.extend_from_slice(&m);
            b.extend_from_slice(g.trailer().as_slice());
            assert_eq!(a, b);
            assert_eq!(copy.stream_pos(), gather.stream_pos());
        }
    }
    let mut fm = Framer::new(FramerConfig {
        markers: true,
        ..Default::default()
    });
    assert!(fm.gather(20).is_err());
}

/// A gather-mode FPDU whose CRC is left to the sender (`trailer_deferred`, then `seal_fpdu`
/// over the bytes in the frame) is the same FPDU the copy-mode framer writes, and the
/// deframer (which checks the CRC, RFC 5044 §4.4) accepts it; one octet changed before the
/// seal still gives a CRC that matches the octets sent.
#[test]
fn deferred_crc_equals_copy() {
    let mut rng = Xoshiro256::seed_from_u64(4);
    let (mut copy, mut gather) = two_framers(true);
    for m in ulpdus(&mut rng, 30, 3000) {
        let a = framed(&mut copy, &m);
        let g = gather.gather(m.len() as u16).unwrap();
        assert!(g.crc_on());
        let mut b = g.prefix().to_vec();
        b.extend_from_slice(&m);
        b.extend_from_slice(g.trailer_deferred().as_slice());
        assert_eq!(a.len(), b.len());
        assert_ne!(a[a.len() - 4..], b[b.len() - 4..], "CRC field left zero");
        seal_fpdu(&mut b);
        assert_eq!(a, b);
        b[5] ^= 0x40;
        seal_fpdu(&mut b);
        let dcfg = DeframerConfig {
            crc: true,
            ..Default::default()
        };
        let mut changed = m.clone();
        changed[3] ^= 0x40;
        assert_eq!(run(dcfg, &b, &mut || 7), vec![Ev::Fpdu(changed)]);
    }
    // Too short to hold a CRC field: left alone.
    let mut tiny = [1u8, 2, 3];
    seal_fpdu(&mut tiny);
    assert_eq!(tiny, [1, 2, 3]);
}

/// `gather_deferred` for `count` FPDUs gives the prefix and deferred trailer of `gather` and
/// moves the stream position as `count` calls of it; refused with markers on.
#[test]
fn gather_deferred_equals_repeated_gather() {
    for crc in [false, true] {
        for (len, count) in [(1u16, 1u32), (14, 3), (1434, 44), (1435, 2), (1437, 7)] {
            let (_, mut one) = two_framers(crc);
            let (_, mut run) = two_framers(crc);
            let (prefix, trailer) = run.gather_deferred(len, count).unwrap();
            for _ in 0..count {
                let g = one.gather(len).unwrap();
                assert_eq!(g.prefix(), prefix);
                assert_eq!(g.trailer_deferred().as_slice(), trailer.as_slice());
            }
            assert_eq!(
                one.stream_pos(),
                run.stream_pos(),
                "len {len} count {count}"
            );
        }
    }
    let mut fm = Framer::new(FramerConfig {
        crc: true,
        markers: true,
        stream_pos: 0,
    });
    assert!(fm.gather_deferred(20, 2).is_err());
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Xoshiro256::seed_from_u64(0xdead_beef);
    for round in 0..3000 {
        let len = (rng.next_u32() % 3000) as usize;
        let mut bytes = vec![0u8; len];
        rng.fill(&mut bytes);
        // Bias some rounds towards plausible lengths so the deframer gets deep.
        if round % 2 == 0 && len >= 2 {
            let l = (rng.next_u32() % 1600) as u16;
            bytes[..2].copy_from_slice(&l.to_be_bytes());
        }
        let cfg = DeframerConfig {
            crc: rng.next_u32() & 1 == 0,
            markers: rng.next_u32() & 1 == 0,
            stream_pos: rng.next_u32() & !3,
            min_ulpdu_len: (rng.next_u32() % 20) as u16,
            max_ulpdu_len: u16::MAX,
            crc_data_by_caller: false,
        };
        let mut d = Deframer::new(cfg);
        let mut input = &bytes[..];
        let mut guard = 0;
        loop {
            guard += 1;
            assert!(guard < 100_000);
            let (used, ev) = d.deframe(input);
            assert!(used <= input.len());
            input = &input[used..];
            match ev {
                None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    }
}

#[test]
fn crc_fed_by_the_caller() {
    let mut rng = Xoshiro256::seed_from_u64(11);
    for markers in [false, true] {
        let msgs = ulpdus(&mut rng, 10, 1500);
        let mut stream = frame_all(
            FramerConfig {
                crc: true,
                markers,
                stream_pos: 0,
            },
            &msgs,
        );
        let cfg = DeframerConfig {
            crc: true,
            markers,
            crc_data_by_caller: true,
            ..Default::default()
        };
        let feed = |stream: &[u8], skip_feed: bool| -> (usize, Option<MpaError>) {
            let mut d = Deframer::new(cfg);
            let mut ends = 0;
            for mut chunk in stream.chunks(97) {
                loop {
                    let (used, ev) = d.deframe(chunk);
                    chunk = &chunk[used..];
                    match ev {
                        None => break,
                        Some(Ok(Deframed::Data(x))) => {
                            if !skip_feed {
                                d.crc_state().update(x);
                            }
                        }
                        Some(Ok(Deframed::End)) => ends += 1,
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return (ends, Some(e)),
                    }
                }
            }
            (ends, None)
        };
        assert_eq!(feed(&stream, false), (msgs.len(), None));
        // A caller that forgets to feed the data gets a CRC error on the first FPDU.
        assert!(matches!(
            feed(&stream, true),
            (0, Some(MpaError::Crc { .. }))
        ));
        // Corruption is still caught.
        let at = stream.len() / 2;
        stream[at] ^= 1;
        assert!(feed(&stream, false).1.is_some());
    }
}

/// What `deframe` reports for the first FPDU of `input` from a fresh deframer: its ULPDU and
/// the octets it spans, or `None` (error, or not all there).
fn slow_first(cfg: DeframerConfig, input: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut d = Deframer::new(cfg);
    let mut ulpdu = Vec::new();
    let mut off = 0;
    loop {
        let (used, ev) = d.deframe(&input[off..]);
        off += used;
        match ev {
            Some(Ok(Deframed::Data(x))) => ulpdu.extend_from_slice(x),
            Some(Ok(Deframed::End)) => return Some((ulpdu, off)),
            Some(Ok(Deframed::Start { .. })) => {}
            None | Some(Err(_)) => return None,
        }
    }
}

#[test]
fn whole_fpdu_fast_path_agrees_with_deframe() {
    let mut rng = Xoshiro256::seed_from_u64(0x5eed);
    for crc in [false, true] {
        let msgs = ulpdus(&mut rng, 40, 3000);
        let fcfg = FramerConfig {
            crc,
            markers: false,
            stream_pos: 0,
        };
        let stream = frame_all(fcfg, &msgs);
        let cfg = DeframerConfig {
            crc,
            ..Default::default()
        };
        // Consuming the stream FPDU by FPDU through the fast path gives every ULPDU.
        let mut d = Deframer::new(cfg);
        let mut off = 0;
        for m in &msgs {
            let w = d.peek_whole(&stream[off..]).expect("whole FPDU");
            assert_eq!(w.ulpdu, &m[..]);
            assert!(std::ptr::eq(w.ulpdu, &stream[off + 2..off + 2 + m.len()]));
            let spans = 2 + m.len() + iwarp::mpa::pad_len(m.len()) + 4;
            assert_eq!(w.len, spans);
            let before = d.stream_pos();
            d.consume_whole(&w);
            assert_eq!(d.stream_pos(), before.wrapping_add(spans as u32));
            assert!(d.at_boundary());
            off += w.len;
        }
        assert_eq!(d.fpdus(), msgs.len() as u64);
        assert_eq!(off, stream.len());
        // Mixed with the slow path: the deframer continues where the fast path stopped.
        let mut d = Deframer::new(cfg);
        let w = d.peek_whole(&stream).unwrap();
        d.consume_whole(&w);
        assert_eq!(
            slow_first(cfg, &stream[w.len..]).map(|x| x.0),
            Some(msgs[1].clone())
        );
        let (used, ev) = d.deframe(&stream[w.len..]);
        assert_eq!(used, 2);
        assert_eq!(
            ev,
            Some(Ok(Deframed::Start {
                ulpdu_len: msgs[1].len() as u16
            }))
        );
    }
}

/// `n` random ULPDUs of up to 1500 octets framed with CRCs, no markers: the ULPDUs, the stream,
/// and the framer's and a matching deframer's configurations.
fn crc_stream(seed: u64, n: usize) -> (Vec<Vec<u8>>, Vec<u8>, FramerConfig, DeframerConfig) {
    let mut rng = Xoshiro256::seed_from_u64(seed);
    let msgs = ulpdus(&mut rng, n, 1500);
    let fcfg = FramerConfig {
        crc: true,
        markers: false,
        stream_pos: 0,
    };
    let stream = frame_all(fcfg, &msgs);
    let cfg = DeframerConfig {
        crc: true,
        ..Default::default()
    };
    (msgs, stream, fcfg, cfg)
}

/// The unchecked fast path (the placer computes the CRC while it copies): the same FPDU as
/// the checked one, whose CRC parts give back exactly the CRC field's verdict, a mismatch
/// with the MPA CRC error for any flipped octet that the length field lets through.
#[test]
fn unchecked_whole_fpdu_carries_what_its_crc_check_needs() {
    let (msgs, stream, fcfg, cfg) = crc_stream(78, 8);
    let d = Deframer::new(cfg);
    let crc_of = |w: &iwarp::mpa::WholeFpdu<'_>| {
        let u = w.unchecked.expect("CRC parts");
        let mut c = u.start();
        c.update(w.ulpdu);
        u.check(c)
    };
    let mut off = 0;
    for m in &msgs {
        let w = d.peek_whole_unchecked(&stream[off..]).expect("whole FPDU");
        assert_eq!(w.ulpdu, &m[..]);
        assert_eq!(crc_of(&w), Ok(()));
        let checked = d.peek_whole(&stream[off..]).unwrap();
        assert_eq!(
            (checked.len, checked.ulpdu, checked.unchecked),
            (w.len, w.ulpdu, None)
        );
        off += w.len;
    }
    let first = d.peek_whole(&stream).unwrap().len;
    for pos in 2..first {
        let mut bad = stream.clone();
        bad[pos] ^= 0x04;
        let w = d.peek_whole_unchecked(&bad).expect("same length field");
        assert!(
            matches!(crc_of(&w), Err(MpaError::Crc { .. })),
            "flip at {pos}"
        );
    }
    // CRCs off: nothing to check.
    let plain = frame_all(FramerConfig { crc: false, ..fcfg }, &msgs);
    let d = Deframer::new(DeframerConfig { crc: false, ..cfg });
    assert_eq!(d.peek_whole_unchecked(&plain).unwrap().unchecked, None);
}

/// `UncheckedCrc::start_with` (the length field and the ULPDU's first octets in one CRC call)
/// is `start` continued over those octets, for heads of 0 to 64 octets hashed where they lie in
/// the input, and the rest of the ULPDU then checks.
#[test]
fn start_with_is_start_continued_over_the_head() {
    let (msgs, stream, _, cfg) = crc_stream(79, 4);
    let d = Deframer::new(cfg);
    let mut off = 0;
    for m in &msgs {
        let w = d.peek_whole_unchecked(&stream[off..]).expect("whole FPDU");
        assert_eq!(w.ulpdu, &m[..]);
        let u = w.unchecked.expect("CRC parts");
        for k in 0..=w.ulpdu.len().min(64) {
            let (head, rest) = w.ulpdu.split_at(k);
            let mut want = u.start();
            want.update(head);
            let mut c = u.start_with(head);
            assert_eq!(c, want, "head of {k} octets");
            c.update(rest);
            assert_eq!(u.check(c), Ok(()), "head of {k} octets");
        }
        off += w.len;
    }
}

/// `start_with` over a copy of the ULPDU's first octets (not where they lie in the input, its
/// `covered` octets) gives the same CRC, by two calls.
#[test]
fn start_with_a_copy_of_the_head_is_the_same() {
    let (msgs, stream, _, cfg) = crc_stream(80, 4);
    let d = Deframer::new(cfg);
    let mut off = 0;
    for m in &msgs {
        let w = d.peek_whole_unchecked(&stream[off..]).expect("whole FPDU");
        let u = w.unchecked.expect("CRC parts");
        assert_eq!(u.covered.get(2..2 + m.len()), Some(&m[..]));
        for n in [0, 1, 14, 18, m.len()] {
            let n = n.min(m.len());
            let copy = w.ulpdu[..n].to_vec();
            assert_eq!(
                u.start_with(&copy),
                u.start_with(&w.ulpdu[..n]),
                "{n} octets"
            );
        }
        off += w.len;
    }
}

#[test]
fn whole_fpdu_fast_path_declines_what_it_cannot_vouch_for() {
    let (msgs, stream, _, cfg) = crc_stream(77, 3);
    let first = 2 + msgs[0].len() + iwarp::mpa::pad_len(msgs[0].len()) + 4;
    let d = Deframer::new(cfg);
    // Every truncation of the first FPDU: not whole.
    for k in 0..first {
        assert_eq!(d.peek_whole(&stream[..k]), None, "prefix {k}");
    }
    assert!(d.peek_whole(&stream[..first]).is_some());
    // Any flipped octet of the first FPDU: refused, and `deframe` reports the error.
    for pos in 0..first {
        let mut bad = stream.clone();
        bad[pos] ^= 0x01;
        assert_eq!(d.peek_whole(&bad), None, "flip at {pos}");
        assert_eq!(slow_first(cfg, &bad[..first]), None, "flip at {pos}");
    }
    // A length outside the configured bounds.
    let tight = DeframerConfig {
        max_ulpdu_len: msgs[0].len() as u16 - 1,
        ..cfg
    };
    assert_eq!(Deframer::new(tight).peek_whole(&stream), None);
    // Markers, or a deframer in the middle of an FPDU, or after an error: the slow path.
    let marked = DeframerConfig {
        markers: true,
        ..cfg
    };
    assert_eq!(Deframer::new(marked).peek_whole(&stream), None);
    let mut mid = Deframer::new(cfg);
    let _ = mid.deframe(&stream[..1]);
    assert_eq!(mid.peek_whole(&stream[1..]), None);
    let mut dead = Deframer::new(cfg);
    let mut bad = stream.clone();
    bad[first - 1] ^= 0xff;
    let mut input = &bad[..];
    while let (used, Some(Ok(_))) = dead.deframe(input) {
        input = &input[used..];
    }
    assert!(dead.error().is_some());
    assert_eq!(dead.peek_whole(&stream), None);
}

#[test]
fn whole_fpdu_fast_path_on_random_bytes() {
    let mut rng = Xoshiro256::seed_from_u64(0xfa57);
    let mut accepted = 0;
    for round in 0..20_000 {
        let len = (rng.next_u32() % 200) as usize;
        let mut bytes = vec![0u8; len];
        rng.fill(&mut bytes);
        if round % 2 == 0 && len >= 2 {
            let l = (rng.next_u32() % 220) as u16;
            bytes[..2].copy_from_slice(&l.to_be_bytes());
        }
        let crc = round % 4 < 2;
        if crc && len >= 6 && round % 8 == 0 {
            // Give some a correct CRC so the accepting branch runs too.
            let l = usize::from(u16::from_be_bytes([bytes[0], bytes[1]]));
            let body = 2 + l + iwarp::mpa::pad_len(l);
            if body + 4 <= len {
                let c = netcore::crc::crc32c(&bytes[..body]);
                bytes[body..body + 4].copy_from_slice(&c.to_le_bytes());
            }
        }
        let cfg = DeframerConfig {
            crc,
            min_ulpdu_len: (rng.next_u32() % 20) as u16,
            ..Default::default()
        };
        let fast = Deframer::new(cfg)
            .peek_whole(&bytes)
            .map(|w| (w.ulpdu.to_vec(), w.len));
        accepted += usize::from(fast.is_some());
        assert_eq!(fast, slow_first(cfg, &bytes), "round {round}");
    }
    assert!(accepted > 100, "accepted {accepted}");
}
