//! Golden bytes: DDP/RDMAP messages as Linux siw put them on the wire
//! (`../shared/siw-peer/pcaps/cap_rping.txt`, `cap_read_bw.txt`, tshark decodes), and our
//! QP's FPDUs for the same operations.

use iwarp::ddp::wire::DdpBuf;
use iwarp::error::AccessError;
use iwarp::mpa::{Deframed, Deframer, DeframerConfig};
use iwarp::rdmap::wire::{AtomicRequest, AtomicResponse, Header, Opcode, RdmapPart, ReadRequest};
use iwarp::rdmap::{Qp, QpConfig, RecvRequest, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, AtomicOp, MemoryTable, MrHandle, MrInfo, PdId, Placer, Stag};
use iwarp::testing::test_now;
use netcore::crc::Crc32c;

/// cap_rping frame 8: Send, MSN 1, 16 bytes (the payload is rping's start buffer; any 16
/// bytes do). ULPDU length 34, CRC off (zero).
fn siw_send_fpdu(payload: &[u8; 16]) -> Vec<u8> {
    let mut v = vec![
        0x00, 0x22, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
    ];
    v.extend_from_slice(payload);
    v.extend_from_slice(&[0, 0, 0, 0]);
    v
}

/// cap_rping frame 9: Read Request, QN 1, MSN 1, sink 0xed6d6c00 @ 0x5612aca20b20, 64 bytes,
/// source 0x3e475000 @ 0x5606241f9e20. ULPDU length 46.
const SIW_READ_REQ: [u8; 46] = [
    0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, // DDP untagged
    0xed, 0x6d, 0x6c, 0x00, 0, 0, 0x56, 0x12, 0xac, 0xa2, 0x0b, 0x20, // sink
    0, 0, 0, 64, // size
    0x3e, 0x47, 0x50, 0x00, 0, 0, 0x56, 0x06, 0x24, 0x1f, 0x9e, 0x20, // source
];

/// cap_rping frame 13: RDMA Write header, STag 0xc858fc00, TO 0x5606241f6b20.
const SIW_WRITE_HDR: [u8; 14] = [
    0xc1, 0x40, 0xc8, 0x58, 0xfc, 0x00, 0, 0, 0x56, 0x06, 0x24, 0x1f, 0x6b, 0x20,
];

/// A memory table with fixed STags, so our frames can be compared with siw's.
struct FixedMem {
    regions: Vec<(MrInfo, Vec<u8>)>,
}

impl FixedMem {
    fn add(&mut self, stag: u32, base_to: u64, len: usize, access: Access) -> MrHandle {
        let handle = MrHandle(self.regions.len() as u32);
        let info = MrInfo {
            stag: Stag(stag),
            handle,
            pd: PdId(1),
            access,
            base_to,
            len: len as u64,
            valid: true,
            remote_invalidate: false,
        };
        self.regions
            .push((info, (0..len).map(|i| i as u8).collect()));
        handle
    }
}

impl MemoryTable for FixedMem {
    fn lookup(&self, stag: Stag) -> Option<MrInfo> {
        self.regions.iter().map(|r| r.0).find(|i| i.stag == stag)
    }
    fn by_handle(&self, mr: MrHandle) -> Option<MrInfo> {
        self.regions.get(mr.0 as usize).map(|r| r.0)
    }
    fn invalidate(&mut self, _: Stag) -> Result<(), AccessError> {
        Err(AccessError::InvalidStag)
    }
}

impl Placer for FixedMem {
    fn place(&mut self, mr: MrHandle, offset: u64, data: &[u8], crc: Option<&mut Crc32c>) {
        if let Some(c) = crc {
            c.update(data);
        }
        let o = offset as usize;
        self.regions[mr.0 as usize].1[o..o + data.len()].copy_from_slice(data);
    }
    fn read(&self, mr: MrHandle, offset: u64, dst: &mut [u8]) {
        let o = offset as usize;
        dst.copy_from_slice(&self.regions[mr.0 as usize].1[o..o + dst.len()]);
    }
    fn atomic(&mut self, _: MrHandle, _: u64, _: AtomicOp) -> u64 {
        0
    }
}

fn qp(crc: bool) -> Qp {
    let mut q = Qp::new(QpConfig {
        pd: PdId(1),
        crc,
        ird: 128,
        ord: 128,
        ..Default::default()
    });
    q.establish();
    q
}

fn ulpdus(stream: &[u8], crc: bool) -> Vec<Vec<u8>> {
    let mut d = Deframer::new(DeframerConfig {
        crc,
        ..Default::default()
    });
    let (mut i, mut out, mut cur) = (0, Vec::new(), Vec::new());
    while i < stream.len() {
        let (n, ev) = d.deframe(&stream[i..]);
        i += n;
        match ev {
            Some(Ok(Deframed::Start { .. })) => cur.clear(),
            Some(Ok(Deframed::Data(x))) => cur.extend_from_slice(x),
            Some(Ok(Deframed::End)) => out.push(cur.clone()),
            None => break,
            Some(Err(e)) => panic!("{e:?}"),
        }
    }
    out
}

#[test]
fn send_fpdu_is_byte_identical_to_siw() {
    let mut mem = FixedMem {
        regions: Vec::new(),
    };
    let src = mem.add(0x1111_1100, 0, 16, Access::LOCAL_READ);
    let mut q = qp(false);
    q.post_send(WorkRequest::new(
        1,
        WrOpcode::Send,
        vec![Sge {
            mr: src,
            offset: 0,
            len: 16,
        }],
    ))
    .unwrap();
    let mut out = [0u8; 1500];
    let n = q.poll_fpdu(test_now(), 1448, &mut mem, &mut out).unwrap();
    let payload: [u8; 16] = core::array::from_fn(|i| i as u8);
    assert_eq!(&out[..n], &siw_send_fpdu(&payload)[..]);
    let h = Header::parse(&out[2..n]).unwrap();
    assert_eq!(h.to_string(), "RDMAP Send | DDP U qn=0 msn=1 mo=0 L");
}

#[test]
fn read_request_is_byte_identical_to_siw() {
    let h = Header::parse(&SIW_READ_REQ).unwrap();
    let rr = ReadRequest {
        sink_stag: Stag(0xed6d6c00),
        sink_to: 0x5612_aca2_0b20,
        size: 64,
        src_stag: Stag(0x3e475000),
        src_to: 0x5606_241f_9e20,
    };
    assert_eq!(h.rdmap, RdmapPart::ReadRequest(rr));
    assert_eq!(
        h.ddp.buf,
        DdpBuf::Untagged {
            ulp_word: 0,
            qn: 1,
            msn: 1,
            mo: 0
        }
    );
    let mut out = [0u8; 46];
    assert_eq!(h.emit(&mut out), 46);
    assert_eq!(out, SIW_READ_REQ);
    assert_eq!(
        h.to_string(),
        "RDMAP ReadRequest | DDP U qn=1 msn=1 mo=0 L | sink=0xed6d6c00@0x5612aca20b20 size=64 \
         src=0x3e475000@0x5606241f9e20"
    );
    // Our QP builds the same bytes for the same Read.
    let mut mem = FixedMem {
        regions: Vec::new(),
    };
    let sink = mem.add(0xed6d6c00, 0x5612_aca2_0b00, 4096, Access::LOCAL_WRITE);
    let mut q = qp(false);
    let mut wr = WorkRequest::new(
        1,
        WrOpcode::Read,
        vec![Sge {
            mr: sink,
            offset: 0x20,
            len: 64,
        }],
    );
    wr.remote_stag = rr.src_stag;
    wr.remote_to = rr.src_to;
    q.post_send(wr).unwrap();
    let mut fpdu = [0u8; 1500];
    let n = q.poll_fpdu(test_now(), 1448, &mut mem, &mut fpdu).unwrap();
    assert_eq!(n, 2 + 46 + 4);
    assert_eq!(&fpdu[..2], &[0, 46]);
    assert_eq!(&fpdu[2..48], &SIW_READ_REQ[..]);
}

#[test]
fn tagged_headers_match_siw() {
    let h = Header::parse(&SIW_WRITE_HDR).unwrap();
    assert_eq!(h.opcode, Opcode::Write);
    assert_eq!(
        h.ddp.buf,
        DdpBuf::Tagged {
            stag: Stag(0xc858fc00),
            to: 0x5606_241f_6b20
        }
    );
    let mut out = [0u8; 14];
    h.emit(&mut out);
    assert_eq!(out, SIW_WRITE_HDR);
    assert_eq!(
        h.to_string(),
        "RDMAP Write | DDP T stag=0xc858fc00 to=0x5606241f6b20 L"
    );
}

/// cap_read_bw frames 35, 42, 45, 124: a 64 KiB Read answered in 46 FPDUs of 1448 bytes
/// (ULPDU 1442 = 14 + 1428), TO advancing by 1428, the last carrying 1276 bytes with L.
#[test]
fn read_response_segmentation_matches_siw() {
    let mut mem = FixedMem {
        regions: Vec::new(),
    };
    let src = mem.add(0x5439e400, 0x7f40_9667_4000, 65536, Access::REMOTE_READ);
    let mut q = qp(true);
    q.post_recv(RecvRequest {
        wr_id: 0,
        sges: vec![],
    })
    .unwrap();
    let rr = ReadRequest {
        sink_stag: Stag(0xcbb88c00),
        sink_to: 0x7fed_539b_e000,
        size: 65536,
        src_stag: Stag(0x5439e400),
        src_to: 0x7f40_9667_4000,
    };
    let req = Header {
        opcode: Opcode::ReadRequest,
        ddp: iwarp::rdmap::wire::untagged(true, 1, 1, 0, 0),
        rdmap: RdmapPart::ReadRequest(rr),
    };
    let mut u = [0u8; 46];
    req.emit(&mut u);
    let mut f = iwarp::mpa::Framer::new(iwarp::mpa::FramerConfig {
        crc: true,
        ..Default::default()
    });
    let mut fpdu = [0u8; 64];
    let n = f.frame(&[&u], &mut fpdu).unwrap();
    assert_eq!(q.handle_stream(test_now(), &mut mem, &fpdu[..n]), n);
    let mut stream = Vec::new();
    let mut sizes = Vec::new();
    let mut out = [0u8; 1448];
    while let Some(n) = q.poll_fpdu(test_now(), 1448, &mut mem, &mut out) {
        sizes.push(n);
        stream.extend_from_slice(&out[..n]);
    }
    assert_eq!(sizes.len(), 46);
    assert!(sizes[..45].iter().all(|&s| s == 1448));
    let segs = ulpdus(&stream, true);
    let mut data = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        let h = Header::parse(s).unwrap();
        let last = i == 45;
        assert_eq!(s.len(), if last { 1290 } else { 1442 });
        assert_eq!(h.ddp.last, last);
        let to = 0x7fed_539b_e000 + 1428 * i as u64;
        assert_eq!(
            h.ddp.buf,
            DdpBuf::Tagged {
                stag: Stag(0xcbb88c00),
                to
            }
        );
        data.extend_from_slice(&s[14..]);
    }
    assert_eq!(data, mem.regions[0].1);
    let _ = src;
}

#[test]
fn atomic_and_immediate_headers_round_trip() {
    let a = AtomicRequest {
        aopcode: 2,
        req_id: 7,
        stag: Stag(0x0102_0300),
        to: 0x1000,
        add_swap: 99,
        add_swap_mask: !0,
        compare: 15,
        compare_mask: !0,
    };
    for (op, part, q) in [
        (Opcode::AtomicRequest, RdmapPart::AtomicRequest(a), 1),
        (
            Opcode::AtomicResponse,
            RdmapPart::AtomicResponse(AtomicResponse {
                req_id: 7,
                orig: 15,
            }),
            3,
        ),
        (Opcode::ImmediateData, RdmapPart::Immediate(0xdead_beef), 0),
        (Opcode::ImmediateDataSe, RdmapPart::Immediate(1), 0),
    ] {
        let mut h = Header {
            opcode: op,
            ddp: iwarp::rdmap::wire::untagged(true, q, 3, 0, 0),
            rdmap: part,
        };
        h.ddp.ulp_ctrl = op.ctrl();
        let mut b = vec![0u8; h.buffer_len()];
        assert_eq!(h.emit(&mut b), b.len());
        assert_eq!(b[1], 0x40 | op as u8);
        assert_eq!(Header::parse(&b).unwrap(), h);
        for k in 0..b.len() {
            assert!(Header::parse(&b[..k]).is_err(), "{op:?} truncated to {k}");
        }
    }
}

/// cap_send_bw frames 35, 36, 37, 96: a 64 KiB Send in FPDUs of ULPDU 1442 (18 + 1424), MSN 1
/// throughout, MO 0, 1424, 2848, ..., the last one at MO 65504 with 32 bytes and L.
#[test]
fn send_segmentation_matches_siw() {
    let mut mem = FixedMem {
        regions: Vec::new(),
    };
    let src = mem.add(0x2222_2200, 0, 65536, Access::LOCAL_READ);
    let mut q = qp(false);
    q.post_send(WorkRequest::new(
        1,
        WrOpcode::Send,
        vec![Sge {
            mr: src,
            offset: 0,
            len: 65536,
        }],
    ))
    .unwrap();
    let mut stream = Vec::new();
    let mut out = [0u8; 1448];
    while let Some(n) = q.poll_fpdu(test_now(), 1448, &mut mem, &mut out) {
        stream.extend_from_slice(&out[..n]);
    }
    let segs = ulpdus(&stream, false);
    assert_eq!(segs.len(), 47);
    for (i, s) in segs.iter().enumerate() {
        let h = Header::parse(s).unwrap();
        let last = i == 46;
        assert_eq!(s.len(), if last { 50 } else { 1442 });
        assert_eq!(h.ddp.last, last);
        let mo = 1424 * i as u32;
        assert_eq!(
            h.ddp.buf,
            DdpBuf::Untagged {
                ulp_word: 0,
                qn: 0,
                msn: 1,
                mo
            }
        );
    }
    assert_eq!(q.poll_completion().map(|c| c.byte_len), Some(65536));
}

/// Golden bytes for the header of every RDMAP message type, written out by hand from the
/// RFC layouts: DDP control (RFC 5041 §4: T 0x80, L 0x40, DV 1), RDMAP control (RFC 5040
/// §4.2: RV 1 in the top bits, opcode in the low nibble), tagged STag+TO or untagged
/// RsvdULP/Invalidate STag + QN + MSN + MO, then the Read Request (RFC 5040 §4.4), Terminate
/// control (RFC 5040 §4.8), Immediate Data, Atomic Request and Atomic Response (RFC 7306)
/// fields. Each must emit exactly and parse back.
#[test]
fn every_message_type_golden_bytes() {
    use iwarp::error::{RdmapError, TermCode};
    use iwarp::rdmap::TerminateHdr;
    use iwarp::rdmap::wire::{tagged, untagged};
    let t = |last, stag, to| tagged(last, Stag(stag), to);
    let u = |last, qn, msn, mo, ulp| untagged(last, qn, msn, mo, ulp);
    let h = |opcode, ddp, rdmap| Header { opcode, ddp, rdmap };
    let none = RdmapPart::None;
    let cases: Vec<(Header, &str)> = vec![
        (
            h(
                Opcode::Write,
                t(true, 0x1122_3344, 0x0102_0304_0506_0708),
                none,
            ),
            "c140 11223344 0102030405060708",
        ),
        (
            h(Opcode::Write, t(false, 0x1122_3344, 0x10), none),
            "8140 11223344 0000000000000010",
        ),
        (
            h(Opcode::ReadResponse, t(true, 0xa1b2_c300, 0x20), none),
            "c142 a1b2c300 0000000000000020",
        ),
        (
            h(Opcode::Send, u(false, 0, 5, 0x10, 0), none),
            "0143 00000000 00000000 00000005 00000010",
        ),
        (
            h(Opcode::SendInvalidate, u(true, 0, 5, 0, 0xaabb_cc01), none),
            "4144 aabbcc01 00000000 00000005 00000000",
        ),
        (
            h(Opcode::SendSe, u(true, 0, 6, 0, 0), none),
            "4145 00000000 00000000 00000006 00000000",
        ),
        (
            h(
                Opcode::SendSeInvalidate,
                u(true, 0, 7, 0, 0xaabb_cc02),
                none,
            ),
            "4146 aabbcc02 00000000 00000007 00000000",
        ),
        (
            h(
                Opcode::ReadRequest,
                u(true, 1, 2, 0, 0),
                RdmapPart::ReadRequest(ReadRequest {
                    sink_stag: Stag(0x0000_1100),
                    sink_to: 0x5581_b78c_2480,
                    size: 65536,
                    src_stag: Stag(0x0000_2200),
                    src_to: 0x559f_66df_ae50,
                }),
            ),
            "4141 00000000 00000001 00000002 00000000 \
             00001100 00005581b78c2480 00010000 00002200 0000559f66dfae50",
        ),
        (
            h(
                Opcode::Terminate,
                u(true, 2, 1, 0, 0),
                RdmapPart::Terminate(TerminateHdr::new(
                    TermCode::from(RdmapError::UnexpectedOpcode),
                    None,
                    None,
                )),
            ),
            // Layer 0 | EType 2, ECode 0x06, M/D/R clear, reserved.
            "4147 00000000 00000002 00000001 00000000 02060000",
        ),
        (
            h(
                Opcode::ImmediateData,
                u(true, 0, 8, 0, 0),
                RdmapPart::Immediate(0x0102_0304_0506_0708),
            ),
            "4148 00000000 00000000 00000008 00000000 0102030405060708",
        ),
        (
            h(
                Opcode::ImmediateDataSe,
                u(true, 0, 9, 0, 0),
                RdmapPart::Immediate(0xdead_beef),
            ),
            "4149 00000000 00000000 00000009 00000000 00000000deadbeef",
        ),
        (
            h(
                Opcode::AtomicRequest,
                u(true, 1, 3, 0, 0),
                RdmapPart::AtomicRequest(AtomicRequest {
                    aopcode: 2,
                    req_id: 0x77,
                    stag: Stag(0x0102_0300),
                    to: 0x7008,
                    add_swap: 99,
                    add_swap_mask: u64::MAX,
                    compare: 42,
                    compare_mask: u64::MAX,
                }),
            ),
            "414a 00000000 00000001 00000003 00000000 \
             00000002 00000077 01020300 0000000000007008 \
             0000000000000063 ffffffffffffffff 000000000000002a ffffffffffffffff",
        ),
        (
            h(
                Opcode::AtomicResponse,
                u(true, 3, 1, 0, 0),
                RdmapPart::AtomicResponse(AtomicResponse {
                    req_id: 0x77,
                    orig: 42,
                }),
            ),
            "414b 00000000 00000003 00000001 00000000 00000077 000000000000002a",
        ),
    ];
    for (mut hdr, hex) in cases {
        let want: Vec<u8> = {
            let s: String = hex.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let mut b = vec![0u8; hdr.buffer_len()];
        assert_eq!(hdr.emit(&mut b), want.len(), "{:?}", hdr.opcode);
        assert_eq!(b, want, "{:?}", hdr.opcode);
        hdr.ddp.ulp_ctrl = hdr.opcode.ctrl();
        let back = Header::parse(&b).unwrap();
        assert_eq!(
            (back.opcode, back.ddp.buf, back.ddp.last),
            (hdr.opcode, hdr.ddp.buf, hdr.ddp.last)
        );
        if hdr.opcode != Opcode::Terminate {
            assert_eq!(back.rdmap, hdr.rdmap, "{:?}", hdr.opcode);
        }
    }
}
