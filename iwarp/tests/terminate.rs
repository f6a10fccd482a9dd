//! Every malformed or unauthorised input produces the specified TERMINATE triple
//! (RFC 5040 §7, RFC 5041 §7, RFC 5044 §8), with the offending headers where required, and
//! a received Terminate moves the peer to ERROR with everything flushed.

use iwarp::ddp::wire as ddp;
use iwarp::error::{DdpError, LlpError, RdmapError, TermCode};
use iwarp::mpa::{Deframed, Deframer, DeframerConfig, Framer, FramerConfig};
use iwarp::rdmap::wire::{self as rw, AtomicRequest, Header, Opcode, RdmapPart, ReadRequest, qn};
use iwarp::rdmap::{
    CqOpcode, Qp, QpConfig, QpState, RecvRequest, Sge, TermLayout, TerminateHdr, WcStatus,
    WorkRequest, WrOpcode,
};
use iwarp::stag::{Access, MemoryTable, MrInfo, PdId, Stag};
use iwarp::testing::{Pair, VecMemory, test_now};

const PD: PdId = PdId(3);

struct Env {
    w: MrInfo,
    ro: MrInfo,
    other_pd: MrInfo,
    inv: MrInfo,
    at: MrInfo,
}

fn setup() -> (Qp, VecMemory, Env) {
    let mut qp = Qp::new(QpConfig {
        pd: PD,
        ird: 2,
        ord: 2,
        crc: true,
        ..Default::default()
    });
    qp.establish();
    let mut mem = VecMemory::new(5);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let w = mem.register(PD, Access::REMOTE_WRITE | rw, 0x1000, 4096);
    let ro = mem.register(PD, Access::REMOTE_READ | rw, 0x9000, 4096);
    let other_pd = mem.register(PdId(99), Access::ALL, 0x5_0000, 4096);
    let inv = mem.register(PD, Access::ALL, 0x7_0000, 4096);
    mem.invalidate(inv.stag).unwrap();
    let at = mem.register(PD, Access::REMOTE_ATOMIC | rw, 0x2_0000, 64);
    (
        qp,
        mem,
        Env {
            w,
            ro,
            other_pd,
            inv,
            at,
        },
    )
}

fn ulpdu(h: Header, payload_len: usize) -> Vec<u8> {
    let mut v = vec![0u8; h.buffer_len() + payload_len];
    h.emit(&mut v);
    v
}

fn write(stag: Stag, to: u64, len: usize) -> Vec<u8> {
    ulpdu(
        Header {
            opcode: Opcode::Write,
            ddp: rw::tagged(true, stag, to),
            rdmap: RdmapPart::None,
        },
        len,
    )
}

fn send(op: Opcode, q: u32, msn: u32, mo: u32, inv: u32, len: usize) -> Vec<u8> {
    ulpdu(
        Header {
            opcode: op,
            ddp: rw::untagged(true, q, msn, mo, inv),
            rdmap: RdmapPart::None,
        },
        len,
    )
}

fn read_req(msn: u32, src: Stag, src_to: u64, size: u32) -> Vec<u8> {
    let rr = ReadRequest {
        sink_stag: Stag(0x1234_5600),
        sink_to: 0,
        size,
        src_stag: src,
        src_to,
    };
    ulpdu(
        Header {
            opcode: Opcode::ReadRequest,
            ddp: rw::untagged(true, qn::READ_REQ, msn, 0, 0),
            rdmap: RdmapPart::ReadRequest(rr),
        },
        0,
    )
}

fn frame(ulpdus: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Framer::new(FramerConfig {
        crc: true,
        markers: false,
        stream_pos: 0,
    });
    let mut out = Vec::new();
    for u in ulpdus {
        let mut buf = vec![0u8; u.len() + 16];
        let n = f.frame(&[u], &mut buf).unwrap();
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Feed `stream` to the QP and return the Terminate it sends (decoded as an RFC one).
fn terminate_for(qp: &mut Qp, mem: &mut VecMemory, stream: &[u8]) -> TerminateHdr {
    let now = test_now();
    assert_eq!(qp.handle_stream(now, mem, stream), stream.len());
    let mut out = vec![0u8; 1500];
    let n = qp
        .poll_fpdu(now, 1460, mem, &mut out)
        .expect("a Terminate is sent");
    assert_eq!(
        qp.state(),
        QpState::Error,
        "ERROR once the Terminate is out"
    );
    assert!(
        qp.poll_fpdu(now, 1460, mem, &mut out[n..]).is_none(),
        "nothing after it"
    );
    let mut d = Deframer::new(DeframerConfig {
        crc: true,
        ..Default::default()
    });
    let mut u = Vec::new();
    let mut i = 0;
    loop {
        let (k, ev) = d.deframe(&out[i..n]);
        i += k;
        match ev {
            Some(Ok(Deframed::Data(x))) => u.extend_from_slice(x),
            Some(Ok(Deframed::End)) => break,
            Some(Ok(Deframed::Start { .. })) => {}
            other => panic!("bad Terminate FPDU: {other:?}"),
        }
    }
    let h = Header::parse(&u).unwrap();
    assert_eq!(h.opcode, Opcode::Terminate);
    // RFC 5040 §5.5: QN 2, MSN 1, MO 0, L set.
    assert_eq!(
        h.ddp.buf,
        ddp::DdpBuf::Untagged {
            ulp_word: 0,
            qn: 2,
            msn: 1,
            mo: 0
        }
    );
    assert!(h.ddp.last);
    match h.rdmap {
        RdmapPart::Terminate(t) => {
            assert_eq!(t.layout, TermLayout::Rfc);
            t
        }
        other => panic!("{other:?}"),
    }
}

struct Row {
    name: &'static str,
    post_recv: bool,
    stream: fn(&Env) -> Vec<u8>,
    code: TermCode,
    /// Expected (M/D, R) flags: offending DDP header included, RDMA header included.
    hdrs: (bool, bool),
}

fn rows() -> Vec<Row> {
    use DdpError::*;
    use RdmapError::*;
    let r = |name, post_recv, stream: fn(&Env) -> Vec<u8>, code: TermCode, hdrs| Row {
        name,
        post_recv,
        stream,
        code,
        hdrs,
    };
    vec![
        r(
            "write unknown stag",
            true,
            |_| frame(&[write(Stag(0xdead_0001), 0x1000, 8)]),
            TaggedInvalidStag.into(),
            (true, false),
        ),
        r(
            "zero-length write unknown stag",
            true,
            |_| frame(&[write(Stag(0xdead_0001), 0, 0)]),
            TaggedInvalidStag.into(),
            (true, false),
        ),
        r(
            "write wrong key",
            true,
            |e| frame(&[write(Stag(e.w.stag.0 ^ 1), 0x1000, 8)]),
            TaggedInvalidStag.into(),
            (true, false),
        ),
        r(
            "write past the end",
            true,
            |e| frame(&[write(e.w.stag, 0x1000 + 4090, 8)]),
            TaggedBaseBounds.into(),
            (true, false),
        ),
        r(
            "write below the base",
            true,
            |e| frame(&[write(e.w.stag, 0xff0, 8)]),
            TaggedBaseBounds.into(),
            (true, false),
        ),
        r(
            "write other pd",
            true,
            |e| frame(&[write(e.other_pd.stag, 0x5_0000, 8)]),
            TaggedStagNotAssociated.into(),
            (true, false),
        ),
        r(
            "write TO wrap",
            true,
            |e| frame(&[write(e.w.stag, u64::MAX - 3, 8)]),
            TaggedToWrap.into(),
            (true, false),
        ),
        r(
            "write invalidated stag",
            true,
            |e| frame(&[write(e.inv.stag, 0x7_0000, 8)]),
            TaggedInvalidStag.into(),
            (true, false),
        ),
        r(
            "write without remote write right",
            true,
            |e| frame(&[write(e.ro.stag, 0x9000, 8)]),
            AccessRights.into(),
            (true, false),
        ),
        r(
            "tagged DDP version 2",
            true,
            |e| {
                let mut u = write(e.w.stag, 0x1000, 8);
                u[0] = (u[0] & !3) | 2;
                frame(&[u])
            },
            TaggedInvalidVersion.into(),
            (false, false),
        ),
        r(
            "untagged DDP version 0",
            true,
            |_| {
                let mut u = send(Opcode::Send, 0, 1, 0, 0, 8);
                u[0] &= !3;
                frame(&[u])
            },
            UntaggedInvalidVersion.into(),
            (false, false),
        ),
        r(
            "send on QN 1",
            true,
            |_| frame(&[send(Opcode::Send, 1, 1, 0, 0, 8)]),
            UntaggedInvalidQn.into(),
            (true, false),
        ),
        r(
            "send on QN 9",
            true,
            |_| frame(&[send(Opcode::Send, 9, 1, 0, 0, 8)]),
            UntaggedInvalidQn.into(),
            (true, false),
        ),
        r(
            "send without posted receive",
            false,
            |_| frame(&[send(Opcode::Send, 0, 1, 0, 0, 8)]),
            UntaggedNoBuffer.into(),
            (true, false),
        ),
        r(
            "send MSN far ahead",
            true,
            |_| frame(&[send(Opcode::Send, 0, 7, 0, 0, 8)]),
            UntaggedMsnRange.into(),
            (true, false),
        ),
        r(
            "send first segment with MO 100",
            true,
            |_| frame(&[send(Opcode::Send, 0, 1, 100, 0, 8)]),
            UntaggedInvalidMo.into(),
            (true, false),
        ),
        r(
            "send MO gap",
            true,
            |_| {
                let mut a = send(Opcode::Send, 0, 1, 0, 0, 8);
                a[0] &= !ddp::FLAG_LAST;
                frame(&[a, send(Opcode::Send, 0, 1, 16, 0, 8)])
            },
            UntaggedInvalidMo.into(),
            (true, false),
        ),
        r(
            "send longer than the receive",
            true,
            |_| frame(&[send(Opcode::Send, 0, 1, 0, 0, 65)]),
            UntaggedTooLong.into(),
            (true, false),
        ),
        r(
            "RDMAP version 2",
            true,
            |_| {
                let mut u = send(Opcode::Send, 0, 1, 0, 0, 8);
                u[1] = 2 << 6 | 3;
                frame(&[u])
            },
            InvalidVersion.into(),
            (false, false),
        ),
        r(
            "opcode 0xC",
            true,
            |_| {
                let mut u = send(Opcode::Send, 0, 1, 0, 0, 8);
                u[1] = 1 << 6 | 0xc;
                frame(&[u])
            },
            UnexpectedOpcode.into(),
            (false, false),
        ),
        r(
            "send opcode on a tagged segment",
            true,
            |e| {
                let mut u = write(e.w.stag, 0x1000, 8);
                u[1] = Opcode::Send.ctrl();
                frame(&[u])
            },
            UnexpectedOpcode.into(),
            (false, false),
        ),
        r(
            "read response with no read outstanding",
            true,
            |e| {
                let h = Header {
                    opcode: Opcode::ReadResponse,
                    ddp: rw::tagged(true, e.w.stag, 0x1000),
                    rdmap: RdmapPart::None,
                };
                frame(&[ulpdu(h, 8)])
            },
            UnexpectedOpcode.into(),
            (true, false),
        ),
        r(
            "read request unknown source stag",
            true,
            |_| frame(&[read_req(1, Stag(0xbad0_0000), 0, 64)]),
            InvalidStag.into(),
            (true, true),
        ),
        r(
            "read request past the end",
            true,
            |e| frame(&[read_req(1, e.ro.stag, 0x9000 + 4000, 200)]),
            BaseBounds.into(),
            (true, true),
        ),
        r(
            "read request without remote read right",
            true,
            |e| frame(&[read_req(1, e.w.stag, 0x1000, 8)]),
            AccessRights.into(),
            (true, true),
        ),
        r(
            "read request other pd",
            true,
            |e| frame(&[read_req(1, e.other_pd.stag, 0x5_0000, 8)]),
            StagNotAssociated.into(),
            (true, true),
        ),
        r(
            "read requests beyond IRD",
            true,
            |e| {
                frame(&[
                    read_req(1, e.ro.stag, 0x9000, 8),
                    read_req(2, e.ro.stag, 0x9000, 8),
                    read_req(3, e.ro.stag, 0x9000, 8),
                ])
            },
            CatastrophicStream.into(),
            (true, false),
        ),
        r(
            "send with invalidate of unknown stag",
            true,
            |_| frame(&[send(Opcode::SendInvalidate, 0, 1, 0, 0xbad0_0000, 8)]),
            CannotInvalidateOperation.into(),
            (true, false),
        ),
        r(
            "send with invalidate of other pd",
            true,
            |e| frame(&[send(Opcode::SendInvalidate, 0, 1, 0, e.other_pd.stag.0, 8)]),
            CannotInvalidate.into(),
            (true, false),
        ),
        r(
            "immediate data with payload after its 8 bytes",
            true,
            |_| {
                frame(&[ulpdu(
                    Header {
                        opcode: Opcode::ImmediateData,
                        ddp: rw::untagged(true, qn::SEND, 1, 0, 0),
                        rdmap: RdmapPart::Immediate(7),
                    },
                    4,
                )])
            },
            UnspecifiedOperation.into(),
            (true, false),
        ),
        r(
            "atomic misaligned",
            true,
            |e| {
                let a = AtomicRequest {
                    aopcode: 0,
                    req_id: 1,
                    stag: e.at.stag,
                    to: 0x2_0004,
                    add_swap: 1,
                    add_swap_mask: !0,
                    compare: 0,
                    compare_mask: !0,
                };
                let h = Header {
                    opcode: Opcode::AtomicRequest,
                    ddp: rw::untagged(true, qn::READ_REQ, 1, 0, 0),
                    rdmap: RdmapPart::AtomicRequest(a),
                };
                frame(&[ulpdu(h, 0)])
            },
            BaseBounds.into(),
            (true, false),
        ),
        r(
            "atomic without atomic right",
            true,
            |e| {
                let a = AtomicRequest {
                    aopcode: 0,
                    req_id: 1,
                    stag: e.w.stag,
                    to: 0x1000,
                    add_swap: 1,
                    add_swap_mask: !0,
                    compare: 0,
                    compare_mask: !0,
                };
                let h = Header {
                    opcode: Opcode::AtomicRequest,
                    ddp: rw::untagged(true, qn::READ_REQ, 1, 0, 0),
                    rdmap: RdmapPart::AtomicRequest(a),
                };
                frame(&[ulpdu(h, 0)])
            },
            AccessRights.into(),
            (true, false),
        ),
        r(
            "bad CRC",
            true,
            |_| {
                let mut f = frame(&[send(Opcode::Send, 0, 1, 0, 0, 8)]);
                let n = f.len();
                f[n - 1] ^= 0x5a;
                f
            },
            LlpError::Crc.into(),
            (false, false),
        ),
        r(
            "ULPDU shorter than the DDP minimum",
            true,
            |_| {
                let mut f = frame(&[send(Opcode::Send, 0, 1, 0, 0, 8)]);
                f[0] = 0;
                f[1] = 6;
                f
            },
            LlpError::MarkerMismatch.into(),
            (false, false),
        ),
        r(
            "ULPDU shorter than the untagged header",
            true,
            |_| {
                let u = send(Opcode::Send, 0, 1, 0, 0, 0);
                frame(&[u[..14].to_vec()])
            },
            DdpError::LocalCatastrophic.into(),
            (false, false),
        ),
    ]
}

#[test]
fn terminate_table() {
    for row in rows() {
        let (mut qp, mut mem, env) = setup();
        if row.post_recv {
            let buf = mem.register(PD, Access::LOCAL_WRITE, 0x10_0000, 64);
            qp.post_recv(RecvRequest {
                wr_id: 1,
                sges: vec![Sge {
                    mr: buf.handle,
                    offset: 0,
                    len: 64,
                }],
            })
            .unwrap();
        }
        let stream = (row.stream)(&env);
        let t = terminate_for(&mut qp, &mut mem, &stream);
        assert_eq!(t.code(), row.code, "{}", row.name);
        assert_eq!(qp.local_error(), Some(row.code), "{}", row.name);
        assert_eq!((t.m && t.d, t.r), row.hdrs, "{}: flags", row.name);
        if t.d {
            // The echoed DDP header is the offending segment's (the last FPDU of the stream,
            // whose ULPDU length is the echoed segment length).
            let n = usize::from(t.ddp_len);
            let at = stream.len()
                - usize::from(t.seg_len)
                - 2
                - 4
                - (4 - (2 + usize::from(t.seg_len)) % 4) % 4;
            assert_eq!(
                &stream[at..at + 2],
                &t.seg_len.to_be_bytes(),
                "{}: seg len",
                row.name
            );
            assert_eq!(
                &t.ddp_hdr[..n],
                &stream[at + 2..at + 2 + n],
                "{}: echoed header",
                row.name
            );
        }
        if t.r {
            let at = stream.len() - usize::from(t.seg_len) - 2 - 4;
            assert_eq!(
                &t.rdma_hdr[..],
                &stream[at + 2 + 18..at + 2 + 18 + 28],
                "{}",
                row.name
            );
        }
        // Every posted receive was flushed.
        let c: Vec<_> = std::iter::from_fn(|| qp.poll_completion()).collect();
        if row.post_recv && row.code != DdpError::UntaggedTooLong.into() {
            assert!(
                c.iter()
                    .any(|c| c.wr_id == 1 && c.status == WcStatus::Flushed),
                "{}",
                row.name
            );
        }
    }
}

#[test]
fn placement_stops_at_the_first_error() {
    let (mut qp, mut mem, env) = setup();
    // A good Write, then a bad one, then another good one: only the first lands.
    let mut good = write(env.w.stag, 0x1000, 4);
    good[14..18].copy_from_slice(b"good");
    let bad = write(Stag(1), 0, 4);
    let mut late = write(env.w.stag, 0x1004, 4);
    late[14..18].copy_from_slice(b"late");
    let t = terminate_for(&mut qp, &mut mem, &frame(&[good, bad, late]));
    assert_eq!(t.code(), DdpError::TaggedInvalidStag.into());
    assert_eq!(&mem.bytes(env.w.handle)[..8], b"good\0\0\0\0");
}

#[test]
fn received_terminate_moves_peer_to_error_and_flushes() {
    let cfg = QpConfig {
        pd: PD,
        ..Default::default()
    };
    let mut p = Pair::new(cfg, cfg, 1);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_buf = p.mem_a.register(PD, rw, 0, 4096);
    // A posts a receive, a Read, and a Write to an STag B does not have.
    p.a.post_recv(RecvRequest {
        wr_id: 10,
        sges: vec![Sge {
            mr: a_buf.handle,
            offset: 0,
            len: 64,
        }],
    })
    .unwrap();
    let mut wr = WorkRequest::new(
        1,
        WrOpcode::Write,
        vec![Sge {
            mr: a_buf.handle,
            offset: 0,
            len: 32,
        }],
    );
    wr.remote_stag = Stag(0x4242_4200);
    p.a.post_send(wr).unwrap();
    let mut wr = WorkRequest::new(
        2,
        WrOpcode::Read,
        vec![Sge {
            mr: a_buf.handle,
            offset: 100,
            len: 32,
        }],
    );
    wr.remote_stag = Stag(0x4242_4200);
    p.a.post_send(wr).unwrap();
    p.drive();
    assert_eq!(p.b.local_error(), Some(DdpError::TaggedInvalidStag.into()));
    assert_eq!(p.b.state(), QpState::Error);
    assert_eq!(p.a.state(), QpState::Error);
    let t = p.a.remote_terminate().expect("A saw the Terminate");
    assert_eq!(
        (t.code(), t.layout, t.ambiguous),
        (DdpError::TaggedInvalidStag.into(), TermLayout::Rfc, false)
    );
    let c = p.completions_a();
    // The Write left before the error (completed), the Read and the receive are flushed.
    assert_eq!(
        c.iter().find(|c| c.wr_id == 1).map(|c| c.status),
        Some(WcStatus::Success)
    );
    assert_eq!(
        c.iter()
            .find(|c| c.wr_id == 2)
            .map(|c| (c.status, c.opcode)),
        Some((WcStatus::Flushed, CqOpcode::Read))
    );
    assert_eq!(
        c.iter().find(|c| c.wr_id == 10).map(|c| c.status),
        Some(WcStatus::Flushed)
    );
    assert!(
        p.a.post_send(WorkRequest::new(3, WrOpcode::Send, vec![]))
            .is_err()
    );
}

#[test]
fn siw_layout_terminate_is_recognised() {
    let (mut qp, mut mem, _) = setup();
    // siw's "Write to an unknown STag": 11000300 + seg len + the offending tagged header.
    let mut u = send(Opcode::Terminate, qn::TERMINATE, 1, 0, 0, 0);
    u.extend_from_slice(&[0x11, 0x00, 0x03, 0x00, 0x00, 0x08]);
    u.extend_from_slice(&write(Stag(0xdead_0000), 0x1000, 0)[..14]);
    let now = test_now();
    let s = frame(&[u]);
    assert_eq!(qp.handle_stream(now, &mut mem, &s), s.len());
    assert_eq!(qp.state(), QpState::Error);
    let t = qp.remote_terminate().unwrap();
    assert_eq!(t.layout, TermLayout::Siw);
    assert_eq!(t.code(), DdpError::TaggedInvalidStag.into());
    assert!(t.m && t.d && !t.r);
    assert_eq!(t.seg_len, 8);
    assert_eq!(&t.ddp_hdr[2..6], &0xdead_0000u32.to_be_bytes());
    let mut out = [0u8; 100];
    assert!(
        qp.poll_fpdu(now, 1460, &mut mem, &mut out).is_none(),
        "no Terminate answers a Terminate"
    );
}
