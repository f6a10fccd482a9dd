//! The transmit contract with `QpConfig::complete_on_ack`: a Send/Write completes only when
//! the caller reports its last FPDU acknowledged (the segment's token), completions stay in
//! posting order, and a QP that fails flushes the WRs still waiting for their ACK. Also the
//! `abort` path the dataplane's timers use.

use iwarp::error::{LlpError, TermCode};
use iwarp::rdmap::{
    CqOpcode, Qp, QpConfig, QpState, RecvRequest, Sge, SqToken, TxSegment, WcStatus, WorkRequest,
    WrOpcode,
};
use iwarp::stag::{Access, PdId};
use iwarp::testing::{VecMemory, test_now};

const PD: PdId = PdId(5);

fn qp() -> (Qp, VecMemory, Sge) {
    let mut q = Qp::new(QpConfig {
        pd: PD,
        crc: true,
        complete_on_ack: true,
        ..Default::default()
    });
    q.establish();
    let mut mem = VecMemory::new(3);
    let src = mem.register(PD, Access::LOCAL_READ | Access::LOCAL_WRITE, 0, 10_000);
    let sge = Sge {
        mr: src.handle,
        offset: 0,
        len: 3000,
    };
    (q, mem, sge)
}

fn drain(q: &mut Qp, mem: &mut VecMemory) -> Vec<TxSegment> {
    std::iter::from_fn(|| q.poll_segment(1442, mem)).collect()
}

fn write(id: u64, sge: Sge) -> WorkRequest {
    let mut w = WorkRequest::new(id, WrOpcode::Write, vec![sge]);
    w.remote_stag = iwarp::stag::Stag(0x1234);
    w.remote_to = 0;
    w
}

#[test]
fn completions_wait_for_the_ack_and_keep_posting_order() {
    let (mut q, mut mem, sge) = qp();
    q.post_send(write(1, sge)).unwrap();
    q.post_send(WorkRequest::new(2, WrOpcode::Send, vec![sge]))
        .unwrap();
    let mut imm = write(3, sge);
    imm.opcode = WrOpcode::WriteImm;
    imm.imm = 77;
    q.post_send(imm).unwrap();
    let segs = drain(&mut q, &mut mem);
    // 3000 bytes in 1442-byte ULPDUs: 3 segments per message, plus the Immediate Data.
    assert_eq!(segs.len(), 3 + 3 + 3 + 1);
    let tokens: Vec<(usize, SqToken)> = segs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.completion().map(|t| (i, t)))
        .collect();
    // Only each WR's last segment carries a token (the Write with Immediate: the Immediate).
    assert_eq!(
        tokens.iter().map(|t| t.0).collect::<Vec<_>>(),
        vec![2, 5, 9]
    );
    assert!(q.poll_completion().is_none(), "nothing is acknowledged yet");
    assert_eq!(q.awaiting_ack(), 3);
    // ACKs for the second and third first: still nothing (the first WR is older).
    q.handle_acked(tokens[1].1);
    q.handle_acked(tokens[2].1);
    assert!(q.poll_completion().is_none());
    q.handle_acked(tokens[0].1);
    let c: Vec<_> = std::iter::from_fn(|| q.poll_completion()).collect();
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(c.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(c[1].opcode, CqOpcode::Send);
    assert_eq!(c[2].byte_len, 3000);
    // A stale or repeated token is ignored.
    q.handle_acked(tokens[0].1);
    assert!(q.poll_completion().is_none());
    assert!(q.is_quiescent());
}

#[test]
fn abort_flushes_sent_but_unacknowledged_work_in_order() {
    let (mut q, mut mem, sge) = qp();
    let rbuf = Sge {
        offset: 5000,
        ..sge
    };
    q.post_recv(RecvRequest {
        wr_id: 50,
        sges: vec![rbuf],
    })
    .unwrap();
    q.post_send(write(1, sge)).unwrap();
    q.post_send(WorkRequest::new(2, WrOpcode::Send, vec![sge]))
        .unwrap();
    let segs = drain(&mut q, &mut mem);
    let t1 = segs.iter().find_map(|s| s.completion()).unwrap();
    q.post_send(write(3, sge)).unwrap();
    // Only the first is acknowledged; the second is out but not acked, the third queued.
    q.handle_acked(t1);
    assert_eq!(q.poll_completion().unwrap().wr_id, 1);
    assert!(!q.is_quiescent());
    let code: TermCode = LlpError::StreamLost.into();
    q.abort(code);
    assert_eq!(q.state(), QpState::Terminate);
    assert_eq!(q.local_error(), Some(code));
    let t = q.poll_segment(1442, &mut mem).unwrap();
    assert!(t.is_terminate());
    assert_eq!(q.state(), QpState::Error);
    let c: Vec<_> = std::iter::from_fn(|| q.poll_completion()).collect();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![
            (2, WcStatus::Flushed),
            (3, WcStatus::Flushed),
            (50, WcStatus::Flushed)
        ]
    );
    // A second abort changes nothing (the first error wins, RFC 5040 §7.1).
    q.abort(LlpError::Crc.into());
    assert_eq!(q.local_error(), Some(code));
}

#[test]
fn a_half_received_fpdu_is_visible() {
    let (mut q, mut mem, _) = qp();
    assert!(!q.rx_in_progress());
    // The first 5 octets of an FPDU with a 20-octet ULPDU.
    q.handle_stream(test_now(), &mut mem, &[0, 20, 0x41, 0x40, 0]);
    assert!(q.rx_in_progress());
}
