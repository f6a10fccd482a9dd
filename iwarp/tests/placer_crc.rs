//! The CRC computed by the placer (`QpConfig::crc_by_placer`): the deframer runs in
//! CRC-by-caller mode and `Placer::place` hashes the bytes it copies. A corrupted octet
//! anywhere in the FPDU (length field, header, payload, pad, CRC, marker) must still be
//! caught, however the stream is cut.

use iwarp::error::{LlpError, TermCode};
use iwarp::rdmap::{Qp, QpConfig, QpState, RecvRequest, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, PdId};
use iwarp::testing::{VecMemory, test_now};
use netcore::Rng;
use netcore::rng::Xoshiro256;

const PD: PdId = PdId(3);

fn cfg(markers: bool) -> QpConfig {
    QpConfig {
        pd: PD,
        crc: true,
        markers_rx: markers,
        markers_tx: markers,
        crc_by_placer: true,
        ..Default::default()
    }
}

/// The stream of one Write (to B's region) and one Send of `len` bytes each, from A.
fn stream(markers: bool, len: usize, emss: usize) -> (Vec<u8>, Vec<u8>, u32, u64) {
    let mut a = Qp::new(cfg(markers));
    a.establish();
    let mut mem_a = VecMemory::new(1);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let src = mem_a.register(PD, rw, 0, len);
    let mut data = vec![0u8; len];
    Xoshiro256::seed_from_u64(len as u64).fill(&mut data);
    mem_a.bytes_mut(src.handle).copy_from_slice(&data);
    let sge = Sge {
        mr: src.handle,
        offset: 0,
        len: len as u32,
    };
    // B registers first with the same seed, so the STag is known: mirror it here.
    let mut probe = VecMemory::new(2);
    let target = probe.register(PD, Access::REMOTE_WRITE | rw, 0x10_000, len);
    let mut w = WorkRequest::new(1, WrOpcode::Write, vec![sge]);
    w.remote_stag = target.stag;
    w.remote_to = 0x10_000;
    a.post_send(w).unwrap();
    a.post_send(WorkRequest::new(2, WrOpcode::Send, vec![sge]))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9100];
    while let Some(n) = a.poll_fpdu(test_now(), emss, &mut mem_a, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    (out, data, target.stag.0, 0x10_000)
}

fn receive(markers: bool, len: usize, bytes: &[u8], seed: u64) -> (Qp, VecMemory, Vec<u8>) {
    let mut b = Qp::new(cfg(markers));
    b.establish();
    let mut mem = VecMemory::new(2);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let target = mem.register(PD, Access::REMOTE_WRITE | rw, 0x10_000, len);
    let recv = mem.register(PD, rw, 0, len);
    b.post_recv(RecvRequest {
        wr_id: 9,
        sges: vec![Sge {
            mr: recv.handle,
            offset: 0,
            len: len as u32,
        }],
    })
    .unwrap();
    let mut rng = Xoshiro256::seed_from_u64(seed);
    let mut i = 0;
    while i < bytes.len() {
        let k = (1 + rng.next_u64() % 700) as usize;
        let k = k.min(bytes.len() - i);
        assert_eq!(b.handle_stream(test_now(), &mut mem, &bytes[i..i + k]), k);
        i += k;
    }
    let mut placed = mem.bytes(target.handle).to_vec();
    placed.extend_from_slice(mem.bytes(recv.handle));
    (b, mem, placed)
}

#[test]
fn clean_stream_places_everything() {
    for markers in [false, true] {
        for (len, emss) in [(1usize, 1448usize), (5000, 1448), (20_000, 536), (3, 100)] {
            let (s, data, _, _) = stream(markers, len, emss);
            let (mut b, _, placed) = receive(markers, len, &s, len as u64);
            assert_eq!(b.local_error(), None, "markers {markers} len {len}");
            assert_eq!(&placed[..len], &data[..]);
            assert_eq!(&placed[len..], &data[..]);
            let c = b.poll_completion().unwrap();
            assert_eq!((c.wr_id, c.byte_len), (9, len as u64));
        }
    }
}

#[test]
fn any_corrupted_octet_is_a_crc_error() {
    for markers in [false, true] {
        let len = 3000;
        let (s, _, _, _) = stream(markers, len, 1448);
        // Every octet of the first FPDU and a sample of the rest, one at a time.
        let mut positions: Vec<usize> = (0..1448).collect();
        positions.extend((1448..s.len()).step_by(97));
        for pos in positions {
            let mut bad = s.clone();
            bad[pos] ^= 0x10;
            let (b, _, _) = receive(markers, len, &bad, pos as u64);
            let err = b.local_error();
            // A flipped length field or marker may be caught by the framing checks first;
            // a flipped header field by the DDP/RDMAP checks; every other octet by the CRC.
            assert!(
                err.is_some(),
                "markers {markers}: flip at {pos} went unnoticed"
            );
            assert!(matches!(b.state(), QpState::Terminate | QpState::Error));
            let crc: TermCode = LlpError::Crc.into();
            let hdr_end = 2 + 14 + 4 * usize::from(markers);
            let in_marker = markers && pos % 512 < 4;
            if pos >= hdr_end && pos < 1448 - 8 && !in_marker {
                assert_eq!(err, Some(crc), "markers {markers}: payload flip at {pos}");
            }
        }
    }
}
