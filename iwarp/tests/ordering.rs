//! Fencing (RFC 5040 §5 ordering rules, the Read fence: a fenced operation is not started before
//! every earlier RDMA Read and atomic completed) and Send with Solicited Event and Invalidate
//! (RFC 5040 §4 opcode 0x6), driven step by step between two QPs.

use iwarp::mpa::{Deframed, Deframer, DeframerConfig};
use iwarp::rdmap::{
    CqOpcode, Header, Opcode, Qp, QpConfig, QpState, RecvRequest, Sge, WcStatus, WorkRequest,
    WrFlags, WrOpcode,
};
use iwarp::stag::{Access, MemoryTable, PdId};
use iwarp::testing::{VecMemory, test_now};

const PD: PdId = PdId(9);

fn qp() -> Qp {
    let mut q = Qp::new(QpConfig {
        pd: PD,
        crc: true,
        ..Default::default()
    });
    q.establish();
    q
}

/// Every FPDU `q` has to send now, concatenated, and their RDMAP opcodes.
fn drain(q: &mut Qp, mem: &mut VecMemory) -> (Vec<u8>, Vec<Opcode>) {
    let mut buf = vec![0u8; 1500];
    let mut bytes = Vec::new();
    let mut ops = Vec::new();
    while let Some(n) = q.poll_fpdu(test_now(), 1448, mem, &mut buf) {
        bytes.extend_from_slice(&buf[..n]);
        let mut d = Deframer::new(DeframerConfig {
            crc: true,
            ..Default::default()
        });
        let mut input = &buf[..n];
        let mut u = Vec::new();
        loop {
            let (k, ev) = d.deframe(input);
            input = &input[k..];
            match ev {
                Some(Ok(Deframed::Data(x))) => u.extend_from_slice(x),
                Some(Ok(Deframed::End)) => break,
                Some(Ok(_)) => {}
                other => panic!("{other:?}"),
            }
        }
        ops.push(Header::parse(&u).unwrap().opcode);
    }
    (bytes, ops)
}

fn sge(mr: iwarp::stag::MrHandle, offset: u64, len: u32) -> Vec<Sge> {
    vec![Sge { mr, offset, len }]
}

/// A Read, then a fenced Send, then an unfenced Write: the Send (and the Write queued behind
/// it) leave only after the Read Response arrived. Without the fence all three leave at once.
#[test]
fn fenced_wr_waits_for_the_read() {
    for fence in [true, false] {
        let (mut a, mut b) = (qp(), qp());
        let (mut ma, mut mb) = (VecMemory::new(1), VecMemory::new(2));
        let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
        let la = ma.register(PD, rw, 0, 8192);
        let src = mb.register(PD, Access::REMOTE_READ | rw, 0x4000, 4096);
        let dst = mb.register(PD, Access::REMOTE_WRITE | rw, 0x8000, 4096);
        let recv = mb.register(PD, rw, 0, 4096);
        mb.bytes_mut(src.handle).fill(0x11);
        b.post_recv(RecvRequest {
            wr_id: 90,
            sges: sge(recv.handle, 0, 4096),
        })
        .unwrap();
        let mut rd = WorkRequest::new(1, WrOpcode::Read, sge(la.handle, 0, 3000));
        rd.remote_stag = src.stag;
        rd.remote_to = 0x4000;
        a.post_send(rd).unwrap();
        let mut s = WorkRequest::new(2, WrOpcode::Send, sge(la.handle, 4096, 64));
        s.flags = WrFlags {
            signaled: true,
            fence,
            solicited: false,
        };
        a.post_send(s).unwrap();
        let mut w = WorkRequest::new(3, WrOpcode::Write, sge(la.handle, 4096, 128));
        w.remote_stag = dst.stag;
        w.remote_to = 0x8000;
        a.post_send(w).unwrap();

        let (out1, ops1) = drain(&mut a, &mut ma);
        if !fence {
            assert_eq!(
                ops1,
                vec![Opcode::ReadRequest, Opcode::Send, Opcode::Write],
                "unfenced"
            );
            continue;
        }
        assert_eq!(ops1, vec![Opcode::ReadRequest], "the fenced Send must wait");
        b.handle_stream(test_now(), &mut mb, &out1);
        let (resp, rops) = drain(&mut b, &mut mb);
        assert!(rops.iter().all(|o| *o == Opcode::ReadResponse) && !rops.is_empty());
        // Still nothing from A until the response is in.
        assert_eq!(drain(&mut a, &mut ma).1, vec![]);
        a.handle_stream(test_now(), &mut ma, &resp);
        assert_eq!(&ma.bytes(la.handle)[..3000], &[0x11; 3000][..]);
        let (out2, ops2) = drain(&mut a, &mut ma);
        assert_eq!(ops2, vec![Opcode::Send, Opcode::Write]);
        b.handle_stream(test_now(), &mut mb, &out2);
        let ca: Vec<_> = std::iter::from_fn(|| a.poll_completion())
            .map(|c| (c.wr_id, c.opcode, c.status))
            .collect();
        assert_eq!(
            ca,
            vec![
                (1, CqOpcode::Read, WcStatus::Success),
                (2, CqOpcode::Send, WcStatus::Success),
                (3, CqOpcode::Write, WcStatus::Success),
            ]
        );
        assert_eq!(
            b.poll_completion().map(|c| (c.wr_id, c.byte_len)),
            Some((90, 64))
        );
        assert_eq!(a.state(), QpState::Rts);
        assert_eq!(b.state(), QpState::Rts);
    }
}

/// Send with Solicited Event and Invalidate: opcode 0x6 on the wire, the receive completes
/// with `solicited` and the invalidated STag, and the STag is dead afterwards (a Write to it
/// is refused with a Terminate).
#[test]
fn send_with_se_and_invalidate() {
    let (mut a, mut b) = (qp(), qp());
    let (mut ma, mut mb) = (VecMemory::new(3), VecMemory::new(4));
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let la = ma.register(PD, rw, 0, 4096);
    let recv = mb.register(PD, rw, 0, 4096);
    let target = mb.register(PD, Access::REMOTE_WRITE | rw, 0x9000, 256);
    b.post_recv(RecvRequest {
        wr_id: 7,
        sges: sge(recv.handle, 0, 4096),
    })
    .unwrap();
    let mut s = WorkRequest::new(1, WrOpcode::SendInvalidate, sge(la.handle, 0, 33));
    s.invalidate = target.stag;
    s.flags.solicited = true;
    a.post_send(s).unwrap();
    let (out, ops) = drain(&mut a, &mut ma);
    assert_eq!(ops, vec![Opcode::SendSeInvalidate]);
    assert_eq!(Opcode::SendSeInvalidate as u8, 0x6);
    b.handle_stream(test_now(), &mut mb, &out);
    let c = b.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.opcode, c.byte_len, c.solicited, c.invalidated),
        (7, CqOpcode::Recv, 33, true, Some(target.stag))
    );
    assert!(!mb.lookup(target.stag).unwrap().valid);
    // A Write to the invalidated STag is refused.
    let mut w = WorkRequest::new(2, WrOpcode::Write, sge(la.handle, 0, 16));
    w.remote_stag = target.stag;
    w.remote_to = 0x9000;
    a.post_send(w).unwrap();
    let (out, _) = drain(&mut a, &mut ma);
    b.handle_stream(test_now(), &mut mb, &out);
    assert_eq!(
        b.local_error(),
        Some(iwarp::error::DdpError::TaggedInvalidStag.into())
    );
}
