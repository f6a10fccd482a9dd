//! Peer-to-peer RTR (RFC 6581 §5) at the QP level: every RTR kind in both roles over a pair
//! with random segmentation, the responder holding its sends until the RTR, a wrong first
//! FPDU refused with "no matching RTR", and golden bytes against Linux siw (its Write RTR,
//! and its zero-length Read Response to a Read RTR).

use iwarp::error::{LlpError, TermCode};
use iwarp::mpa::startup::{Established, FirstSend, Role};
use iwarp::mpa::wire::RtrKind;
use iwarp::mpa::{Deframed, Deframer, DeframerConfig};
use iwarp::rdmap::wire::qn;
use iwarp::rdmap::{
    CqOpcode, Header, Opcode, Qp, QpConfig, QpState, RdmapPart, RecvRequest, Rtr, Sge, WcStatus,
    WorkRequest, WrOpcode,
};
use iwarp::stag::{Access, PdId, Stag};
use iwarp::testing::{Pair, VecMemory, test_now};

const PD: PdId = PdId(4);

fn cfg(rtr: Option<Rtr>, crc: bool) -> QpConfig {
    QpConfig {
        pd: PD,
        ird: 2,
        ord: 2,
        crc,
        rtr,
        ..Default::default()
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The ULPDU of one FPDU.
fn ulpdu(fpdu: &[u8], crc: bool) -> Vec<u8> {
    let mut d = Deframer::new(DeframerConfig {
        crc,
        ..Default::default()
    });
    let mut input = fpdu;
    let mut out = Vec::new();
    loop {
        let (n, ev) = d.deframe(input);
        input = &input[n..];
        match ev {
            Some(Ok(Deframed::Data(b))) => out.extend_from_slice(b),
            Some(Ok(Deframed::End)) => return out,
            Some(Ok(Deframed::Start { .. })) => {}
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn every_rtr_kind_in_both_roles() {
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    for kind in [RtrKind::Write, RtrKind::Read, RtrKind::Send] {
        for crc in [false, true] {
            let label = format!("{kind:?} crc={crc}");
            let mut p = Pair::new(
                cfg(Some(Rtr::Send(kind)), crc),
                cfg(Some(Rtr::Expect(kind)), crc),
                11,
            );
            let a_mem = p.mem_a.register(PD, rw, 0x1000, 4096);
            let b_mem = p.mem_b.register(PD, rw, 0x2000, 4096);
            p.mem_a.bytes_mut(a_mem.handle)[..50].fill(0xaa);
            p.mem_b.bytes_mut(b_mem.handle)[..100].fill(0xbb);
            let sge = |mr, offset, len| vec![Sge { mr, offset, len }];
            p.a.post_recv(RecvRequest {
                wr_id: 100,
                sges: sge(a_mem.handle, 1024, 1024),
            })
            .unwrap();
            p.b.post_recv(RecvRequest {
                wr_id: 200,
                sges: sge(b_mem.handle, 1024, 1024),
            })
            .unwrap();
            // The responder's Send is posted first but must wait for the RTR.
            p.b.post_send(WorkRequest::new(
                2,
                WrOpcode::Send,
                sge(b_mem.handle, 0, 100),
            ))
            .unwrap();
            let mut buf = vec![0u8; 2000];
            assert_eq!(
                p.b.poll_fpdu(test_now(), 1448, &mut p.mem_b, &mut buf),
                None,
                "{label}: responder sent before the RTR"
            );
            p.a.post_send(WorkRequest::new(
                1,
                WrOpcode::Send,
                sge(a_mem.handle, 0, 50),
            ))
            .unwrap();
            p.drive();
            assert_eq!(p.a.state(), QpState::Rts, "{label}");
            assert_eq!(p.b.state(), QpState::Rts, "{label}");

            // The initiator's first FPDU is the RTR.
            let h = Header::parse(&ulpdu(&p.sent_a[0], crc)).unwrap();
            assert!(h.ddp.last, "{label}");
            match kind {
                RtrKind::Write => {
                    assert_eq!(h.opcode, Opcode::Write);
                    assert_eq!(h.ddp.buf, iwarp::rdmap::wire::tagged(true, Stag(1), 0).buf);
                    assert_eq!(ulpdu(&p.sent_a[0], crc).len(), 14);
                }
                RtrKind::Read => {
                    assert_eq!(h.opcode, Opcode::ReadRequest);
                    let RdmapPart::ReadRequest(r) = h.rdmap else {
                        panic!()
                    };
                    assert_eq!(r.size, 0);
                    assert_eq!(
                        h.ddp.buf,
                        iwarp::rdmap::wire::untagged(true, qn::READ_REQ, 1, 0, 0).buf
                    );
                    // The responder's first FPDU answers it with a zero-length Read Response.
                    let rr = ulpdu(&p.sent_b[0], crc);
                    let h = Header::parse(&rr).unwrap();
                    assert_eq!(h.opcode, Opcode::ReadResponse);
                    assert!(h.ddp.last);
                    assert_eq!(
                        h.ddp.buf,
                        iwarp::rdmap::wire::tagged(true, r.sink_stag, r.sink_to).buf
                    );
                    assert_eq!(rr.len(), 14);
                }
                RtrKind::Send => {
                    assert_eq!(h.opcode, Opcode::Send);
                    assert_eq!(
                        h.ddp.buf,
                        iwarp::rdmap::wire::untagged(true, qn::SEND, 1, 0, 0).buf
                    );
                    assert_eq!(ulpdu(&p.sent_a[0], crc).len(), 18);
                }
            }

            // Neither side saw the RTR as a message: the Sends used the posted receives.
            let ca = p.completions_a();
            let cb = p.completions_b();
            let ok = |c: &iwarp::rdmap::Completion| c.status == WcStatus::Success;
            assert!(
                ca.iter().all(ok) && cb.iter().all(ok),
                "{label}: {ca:?} {cb:?}"
            );
            let mut ops_a: Vec<_> = ca.iter().map(|c| (c.wr_id, c.opcode, c.byte_len)).collect();
            ops_a.sort_by_key(|x| x.0);
            assert_eq!(
                ops_a,
                vec![(1, CqOpcode::Send, 50), (100, CqOpcode::Recv, 100)],
                "{label}"
            );
            let mut ops_b: Vec<_> = cb.iter().map(|c| (c.wr_id, c.opcode, c.byte_len)).collect();
            ops_b.sort_by_key(|x| x.0);
            assert_eq!(
                ops_b,
                vec![(2, CqOpcode::Send, 100), (200, CqOpcode::Recv, 50)],
                "{label}"
            );
            assert_eq!(&p.mem_b.bytes(b_mem.handle)[1024..1074], &[0xaa; 50][..]);
            assert_eq!(&p.mem_a.bytes(a_mem.handle)[1024..1124], &[0xbb; 100][..]);
            assert!(p.a.is_quiescent() && p.b.is_quiescent(), "{label}");
        }
    }
}

#[test]
fn wrong_first_fpdu_is_no_matching_rtr() {
    let expect_nmr = |a: Option<Rtr>, b: RtrKind| {
        let mut p = Pair::new(cfg(a, true), cfg(Some(Rtr::Expect(b)), true), 3);
        let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
        let m = p.mem_a.register(PD, rw, 0, 64);
        let mb = p.mem_b.register(PD, rw, 0, 64);
        p.b.post_recv(RecvRequest {
            wr_id: 1,
            sges: vec![Sge {
                mr: mb.handle,
                offset: 0,
                len: 64,
            }],
        })
        .unwrap();
        p.a.post_send(WorkRequest::new(
            1,
            WrOpcode::Send,
            vec![Sge {
                mr: m.handle,
                offset: 0,
                len: 8,
            }],
        ))
        .unwrap();
        p.drive();
        assert_eq!(
            p.b.local_error(),
            Some(TermCode::from(LlpError::NoMatchingRtr)),
            "{a:?} -> expect {b:?}"
        );
        assert_eq!(p.b.state(), QpState::Error);
        // The initiator got the Terminate and reports it.
        assert_eq!(p.a.state(), QpState::Error);
        assert_eq!(
            p.a.remote_terminate().map(|t| t.code()),
            Some(TermCode::from(LlpError::NoMatchingRtr))
        );
    };
    expect_nmr(Some(Rtr::Send(RtrKind::Write)), RtrKind::Read);
    expect_nmr(Some(Rtr::Send(RtrKind::Read)), RtrKind::Send);
    expect_nmr(Some(Rtr::Send(RtrKind::Send)), RtrKind::Write);
    // No RTR at all: the first FPDU is an ordinary 8-byte Send.
    expect_nmr(None, RtrKind::Send);
}

/// Our Write RTR is byte for byte Linux siw's (`pcaps/variant_p2p_rping.pcap` frame 8, siw
/// initiator, CRC off), and our responder accepts it.
#[test]
fn write_rtr_matches_siw() {
    let siw_rtr = hex("000ec14000000001000000000000000000000000");
    let mut a = Qp::new(cfg(Some(Rtr::Send(RtrKind::Write)), false));
    a.establish();
    let mut mem = VecMemory::new(1);
    let mut buf = vec![0u8; 1500];
    let n = a.poll_fpdu(test_now(), 1448, &mut mem, &mut buf).unwrap();
    assert_eq!(&buf[..n], &siw_rtr[..]);
    assert_eq!(a.poll_fpdu(test_now(), 1448, &mut mem, &mut buf), None);

    let mut b = Qp::new(cfg(Some(Rtr::Expect(RtrKind::Write)), false));
    b.establish();
    assert_eq!(
        b.handle_stream(test_now(), &mut mem, &siw_rtr),
        siw_rtr.len()
    );
    assert_eq!(b.state(), QpState::Rts);
    assert_eq!(b.local_error(), None);
    assert_eq!(b.poll_completion(), None);
}

/// A Read RTR from an RFC-based initiator and siw's answer to it, CRC on
/// (`pcaps/mpa_rping_p2p_read_crc.pcap` frames 8 and 9): our responder answers the same
/// Read RTR with the same bytes siw sent.
#[test]
fn read_rtr_answer_matches_siw() {
    let rtr = hex(
        "002e4141000000000000000100000001000000000000001100000000000000000000000000000022\
         000000000000000082a4fbfc",
    );
    let siw_answer = hex("000ec142000000110000000000000000fe30e34b");
    let mut b = Qp::new(cfg(Some(Rtr::Expect(RtrKind::Read)), true));
    b.establish();
    let mut mem = VecMemory::new(1);
    assert_eq!(b.handle_stream(test_now(), &mut mem, &rtr), rtr.len());
    assert_eq!(b.local_error(), None);
    let mut buf = vec![0u8; 1500];
    let n = b.poll_fpdu(test_now(), 1448, &mut mem, &mut buf).unwrap();
    assert_eq!(&buf[..n], &siw_answer[..]);
    assert_eq!(b.poll_completion(), None);
}

/// `QpConfig::from_established` gives the initiator `Rtr::Send` and the responder
/// `Rtr::Expect` of the negotiated kind, with CRC, markers and IRD/ORD carried over.
#[test]
fn config_from_established() {
    let e = Established {
        revision: 2,
        crc: true,
        markers_rx: true,
        markers_tx: false,
        ird: 8,
        ord: 4,
        rtr: Some(RtrKind::Read),
        peer_private_data: Vec::new(),
        first_send: FirstSend::AfterPeerFpdu,
    };
    let i = QpConfig::from_established(&e, Role::Initiator, PD);
    assert_eq!(i.rtr, Some(Rtr::Send(RtrKind::Read)));
    assert_eq!(
        (i.ird, i.ord, i.crc, i.markers_rx, i.markers_tx),
        (8, 4, true, true, false)
    );
    assert_eq!(i.pd, PD);
    let r = QpConfig::from_established(&e, Role::Responder, PD);
    assert_eq!(r.rtr, Some(Rtr::Expect(RtrKind::Read)));
    let none = Established { rtr: None, ..e };
    assert_eq!(
        QpConfig::from_established(&none, Role::Responder, PD).rtr,
        None
    );
}
