//! Fuzz the MPA deframer: arbitrary configuration, arbitrary stream bytes cut at arbitrary
//! points. It must never panic, must honour the `Data` contract, and must agree with itself
//! when the same stream is fed in one piece.
#![no_main]

use iwarp::mpa::{Deframed, Deframer, DeframerConfig};
use libfuzzer_sys::fuzz_target;

fn run(cfg: DeframerConfig, stream: &[u8], cuts: &[u8]) -> (Vec<u8>, usize, bool) {
    let mut d = Deframer::new(cfg);
    let mut ulpdus = Vec::new();
    let mut ends = 0;
    let mut errored = false;
    let mut at = 0;
    let mut ci = 0;
    while at < stream.len() {
        let n = usize::from(cuts.get(ci).copied().unwrap_or(255)).max(1);
        ci += 1;
        let mut chunk = &stream[at..(at + n).min(stream.len())];
        at += chunk.len();
        loop {
            let (used, ev) = d.deframe(chunk);
            assert!(used <= chunk.len());
            match ev {
                None => {
                    assert_eq!(used, chunk.len());
                    break;
                }
                Some(Ok(Deframed::Data(x))) => {
                    assert!(std::ptr::eq(x, &chunk[used - x.len()..used]));
                    ulpdus.extend_from_slice(x);
                }
                Some(Ok(Deframed::End)) => ends += 1,
                Some(Ok(Deframed::Start { .. })) => {}
                Some(Err(_)) => {
                    errored = true;
                    return (ulpdus, ends, errored);
                }
            }
            chunk = &chunk[used..];
        }
    }
    (ulpdus, ends, errored)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (head, rest) = data.split_at(8);
    let ncuts = usize::from(head[5]) % 32;
    let (cuts, stream) = rest.split_at(ncuts.min(rest.len()));
    let cfg = DeframerConfig {
        crc: head[0] & 1 != 0,
        markers: head[0] & 2 != 0,
        stream_pos: u32::from_be_bytes([head[1], head[2], head[3], head[4]]) & !3,
        min_ulpdu_len: u16::from(head[6] % 20),
        max_ulpdu_len: u16::MAX - u16::from(head[7]),
        ..Default::default()
    };
    let a = run(cfg, stream, cuts);
    let b = run(cfg, stream, &[]);
    assert_eq!(a, b, "segmentation changed the result");
});
