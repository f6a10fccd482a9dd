//! The zero-copy TX seam: `poll_segment` (header bytes + region ranges) framed in MPA gather
//! mode gives exactly the bytes `poll_fpdu` (copy mode) gives.

use iwarp::mpa::{Framer, FramerConfig};
use iwarp::rdmap::{Qp, QpConfig, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, PdId, Placer};
use iwarp::testing::{VecMemory, test_now};
use netcore::Rng;
use netcore::rng::Xoshiro256;

fn setup(crc: bool) -> (Qp, VecMemory) {
    let mut qp = Qp::new(QpConfig {
        pd: PdId(1),
        crc,
        ..Default::default()
    });
    qp.establish();
    let mut mem = VecMemory::new(42);
    let src = mem.register(PdId(1), Access::ALL, 0x1000, 20_000);
    let mut rng = Xoshiro256::seed_from_u64(3);
    rng.fill(mem.bytes_mut(src.handle));
    let sge = |offset, len| Sge {
        mr: src.handle,
        offset,
        len,
    };
    qp.post_send(WorkRequest::new(
        1,
        WrOpcode::Send,
        vec![sge(0, 3000), sge(5000, 10), sge(7000, 2500)],
    ))
    .unwrap();
    let mut wr = WorkRequest::new(2, WrOpcode::Write, vec![sge(100, 9000)]);
    wr.remote_stag = iwarp::stag::Stag(0x1234_5600);
    wr.remote_to = 0xabc;
    qp.post_send(wr).unwrap();
    let mut wr = WorkRequest::new(3, WrOpcode::Read, vec![sge(10_000, 4000)]);
    wr.remote_stag = iwarp::stag::Stag(0x1234_5600);
    qp.post_send(wr).unwrap();
    qp.post_send(WorkRequest::new(4, WrOpcode::Send, vec![]))
        .unwrap();
    (qp, mem)
}

#[test]
fn gather_mode_equals_copy_mode() {
    for crc in [false, true] {
        for emss in [128usize, 536, 1448] {
            let (mut a, mut mem_a) = setup(crc);
            let (mut b, mut mem_b) = setup(crc);
            let mut copy = Vec::new();
            let mut out = vec![0u8; emss];
            while let Some(n) = a.poll_fpdu(test_now(), emss, &mut mem_a, &mut out) {
                copy.extend_from_slice(&out[..n]);
            }
            let mut framer = Framer::new(FramerConfig {
                crc,
                ..Default::default()
            });
            let mut gathered = Vec::new();
            loop {
                let max = framer.max_ulpdu_len(emss);
                let Some(seg) = b.poll_segment(max, &mut mem_b) else {
                    break;
                };
                let mut g = framer.gather(seg.ulpdu_len() as u16).unwrap();
                let start = gathered.len();
                gathered.extend_from_slice(&g.prefix());
                g.update(seg.header());
                gathered.extend_from_slice(seg.header());
                for p in seg.pieces() {
                    // The dataplane would attach region memory here; the test copies it.
                    let mut buf = vec![0u8; p.len as usize];
                    mem_b.read(p.mr, p.offset, &mut buf);
                    g.update(&buf);
                    gathered.extend_from_slice(&buf);
                }
                gathered.extend_from_slice(g.trailer().as_slice());
                assert!(gathered.len() - start <= emss);
            }
            assert!(!copy.is_empty());
            assert_eq!(copy, gathered, "crc {crc} emss {emss}");
        }
    }
}

/// `poll_run` gives the segments `poll_segment` gives, the runs expanded with
/// `TxRun::segment`: same headers, ranges and completions, for any run length; a run's extra
/// segments are never a message's last and complete nothing.
#[test]
fn runs_expand_to_the_segments_poll_segment_gives() {
    let key =
        |s: &iwarp::rdmap::TxSegment| (s.header().to_vec(), s.pieces().to_vec(), s.completion());
    for emss in [128usize, 536, 1448] {
        let max = iwarp::mpa::framer::max_ulpdu_len_any_pos(emss, false);
        let (mut a, mut mem_a) = setup(true);
        let mut want = Vec::new();
        while let Some(seg) = a.poll_segment(max, &mut mem_a) {
            want.push(key(&seg));
        }
        for max_count in [1u32, 2, 3, 7, 1000] {
            let (mut b, mut mem_b) = setup(true);
            let mut got = Vec::new();
            let mut longest = 0;
            while let Some(run) = b.poll_run(max, max_count, &mut mem_b) {
                assert!(run.count() >= 1 && run.count() <= max_count.max(1));
                longest = longest.max(run.count());
                for k in 0..run.count() {
                    let seg = run.segment(k);
                    if k > 0 {
                        let last = seg.header()[0] & iwarp::ddp::wire::FLAG_LAST != 0;
                        assert!(!last && seg.completion().is_none());
                        assert_eq!(seg.ulpdu_len(), run.first().ulpdu_len());
                    }
                    got.push(key(&seg));
                }
            }
            assert_eq!(got, want, "emss {emss} max_count {max_count}");
            if max_count > 1 {
                assert!(longest > 1, "emss {emss}: no run formed");
            }
        }
    }
}
