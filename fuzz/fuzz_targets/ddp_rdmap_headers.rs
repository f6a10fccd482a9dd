//! Fuzz the DDP/RDMAP/Terminate header parsers and the queue pair's receive path.
//!
//! Header parsing must never panic, and whatever parses must emit and re-parse to the same
//! value. The input is then also cut into ULPDUs (a length byte each), framed as FPDUs and fed
//! to a QP with a few registered regions, in arbitrary slices: no panic, every byte consumed,
//! and at most one Terminate comes out (also for a responder waiting for a peer-to-peer RTR).
#![no_main]

use iwarp::mpa::{Framer, FramerConfig};
use iwarp::rdmap::wire::{Header, Opcode};
use iwarp::mpa::wire::RtrKind;
use iwarp::rdmap::{Qp, QpConfig, QpState, RecvRequest, Rtr, Sge, TermLayout, TerminateHdr};
use iwarp::stag::{Access, PdId};
use iwarp::testing::{VecMemory, test_now};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for layout in [TermLayout::Rfc, TermLayout::Siw] {
        if let Ok(t) = TerminateHdr::parse(data, layout) {
            let mut out = vec![0u8; t.buffer_len()];
            t.emit(&mut out);
            if t.layout == TermLayout::Rfc {
                assert_eq!(TerminateHdr::parse(&out, layout).map(|x| x.code()), Ok(t.code()));
            }
        }
    }
    if let Ok(h) = Header::parse(data) {
        let _ = h.to_string();
        if h.opcode != Opcode::Terminate {
            let mut out = vec![0u8; h.buffer_len()];
            h.emit(&mut out);
            let back = Header::parse(&out).expect("emitted header parses");
            assert_eq!((back.opcode, back.ddp.buf, back.rdmap), (h.opcode, h.ddp.buf, h.rdmap));
        }
    }

    let Some((&flags, rest)) = data.split_first() else { return };
    let crc = flags & 1 != 0;
    // Bits 6-7: a responder waiting for a peer-to-peer RTR (RFC 6581) or none.
    let rtr = match flags >> 6 {
        1 => Some(Rtr::Expect(RtrKind::Write)),
        2 => Some(Rtr::Expect(RtrKind::Read)),
        3 => Some(Rtr::Expect(RtrKind::Send)),
        _ => None,
    };
    let mut qp = Qp::new(QpConfig { pd: PdId(1), ird: 2, ord: 2, crc, rtr, ..Default::default() });
    qp.establish();
    let mut mem = VecMemory::new(u64::from(flags));
    mem.register(PdId(1), Access::ALL, 0, 4096);
    mem.register(PdId(2), Access::ALL, 0x1000, 4096);
    let r = mem.register(PdId(1), Access::LOCAL_WRITE, 0, 512);
    let _ = qp.post_recv(RecvRequest { wr_id: 1, sges: vec![Sge { mr: r.handle, offset: 0, len: 512 }] });
    let mut framer = Framer::new(FramerConfig { crc, ..Default::default() });
    let mut stream = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let n = usize::from(rest[i]).min(rest.len() - i - 1);
        let u = &rest[i + 1..i + 1 + n];
        let mut out = vec![0u8; n + 16];
        if let Ok(k) = framer.frame(&[u], &mut out) {
            stream.extend_from_slice(&out[..k]);
        }
        i += 1 + n;
    }
    let cut = 1 + usize::from(flags >> 1);
    for chunk in stream.chunks(cut) {
        assert_eq!(qp.handle_stream(test_now(), &mut mem, chunk), chunk.len());
    }
    let mut out = [0u8; 1500];
    let mut terms = 0;
    while let Some(n) = qp.poll_fpdu(test_now(), 1460, &mut mem, &mut out) {
        assert!(n <= 1460);
        terms += usize::from(out[3] & 0xf == Opcode::Terminate as u8);
    }
    assert!(terms <= 1);
    assert!(matches!(qp.state(), QpState::Rts | QpState::Error));
});
