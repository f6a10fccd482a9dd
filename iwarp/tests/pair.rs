//! Two queue pairs over an in-memory byte pipe with seeded random segmentation: every
//! operation, data checked byte for byte, CRC on/off, markers on/off.

use iwarp::rdmap::{
    CqOpcode, QpConfig, QpState, RecvRequest, Sge, WcStatus, WorkRequest, WrFlags, WrOpcode,
};
use iwarp::stag::{Access, MemoryTable, PdId};
use iwarp::testing::Pair;
use netcore::Rng;
use netcore::rng::Xoshiro256;

const PD: PdId = PdId(7);

fn cfg(crc: bool, markers: bool) -> QpConfig {
    QpConfig {
        pd: PD,
        ird: 4,
        ord: 4,
        crc,
        markers_rx: markers,
        markers_tx: markers,
        ..Default::default()
    }
}

fn random_bytes(rng: &mut Xoshiro256, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v);
    v
}

fn run_all_operations(crc: bool, markers: bool, seed: u64) {
    run_all_operations_with(cfg(crc, markers), seed);
}

fn run_all_operations_with(c: QpConfig, seed: u64) {
    let mut p = Pair::new(c, c, seed);
    let mut rng = Xoshiro256::seed_from_u64(seed ^ 0x55);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;

    // A's local buffers.
    let a_src = p.mem_a.register(PD, rw, 0x1000_0000, 64 * 1024);
    let a_sink = p.mem_a.register(PD, rw, 0x2000_0000, 64 * 1024);
    let a_atomic = p.mem_a.register(PD, rw, 0x3000_0000, 64);
    let a_recv = p.mem_a.register(PD, rw, 0x4000_0000, 8 * 1024);
    let data = random_bytes(&mut rng, 64 * 1024);
    p.mem_a.bytes_mut(a_src.handle).copy_from_slice(&data);

    // B's buffers: receives, a Write target, a Read source, an atomic word, an STag to
    // invalidate.
    let b_recv = p.mem_b.register(PD, rw, 0, 48 * 1024);
    let b_wr = p
        .mem_b
        .register(PD, Access::REMOTE_WRITE | rw, 0x5000_0000, 32 * 1024);
    let b_rd = p
        .mem_b
        .register(PD, Access::REMOTE_READ | rw, 0x6000_0000, 32 * 1024);
    let b_at = p
        .mem_b
        .register(PD, Access::REMOTE_ATOMIC | rw, 0x7000_0000, 64);
    let b_inv = p
        .mem_b
        .register(PD, Access::REMOTE_WRITE | rw, 0x8000_0000, 64);
    let rd_data = random_bytes(&mut rng, 32 * 1024);
    p.mem_b.bytes_mut(b_rd.handle).copy_from_slice(&rd_data);
    p.mem_b.bytes_mut(b_at.handle)[8..16].copy_from_slice(&10u64.to_le_bytes());

    // Receives on B: 5 buffers of 8 KiB, the first split over 3 SGEs.
    let sge = |mr, offset, len| Sge { mr, offset, len };
    p.b.post_recv(RecvRequest {
        wr_id: 100,
        sges: vec![
            sge(b_recv.handle, 0, 1000),
            sge(b_recv.handle, 1000, 3000),
            sge(b_recv.handle, 4000, 4192),
        ],
    })
    .unwrap();
    for i in 1..5u64 {
        p.b.post_recv(RecvRequest {
            wr_id: 100 + i,
            sges: vec![sge(b_recv.handle, i * 8192, 8192)],
        })
        .unwrap();
    }
    p.a.post_recv(RecvRequest {
        wr_id: 200,
        sges: vec![sge(a_recv.handle, 0, 8192)],
    })
    .unwrap();

    let signaled = WrFlags {
        signaled: true,
        ..Default::default()
    };
    // 1. Send of 5000 bytes gathered from two SGEs.
    p.a.post_send(WorkRequest::new(
        1,
        WrOpcode::Send,
        vec![sge(a_src.handle, 0, 2000), sge(a_src.handle, 10_000, 3000)],
    ))
    .unwrap();
    // 2. Send with SE.
    let mut wr = WorkRequest::new(2, WrOpcode::Send, vec![sge(a_src.handle, 20_000, 100)]);
    wr.flags = WrFlags {
        solicited: true,
        ..signaled
    };
    p.a.post_send(wr).unwrap();
    // 3. Send with Invalidate of b_inv.
    let mut wr = WorkRequest::new(3, WrOpcode::SendInvalidate, vec![sge(a_src.handle, 0, 10)]);
    wr.invalidate = b_inv.stag;
    p.a.post_send(wr).unwrap();
    // 4. RDMA Write of 10000 bytes at offset 100 of b_wr.
    let mut wr = WorkRequest::new(4, WrOpcode::Write, vec![sge(a_src.handle, 30_000, 10_000)]);
    wr.remote_stag = b_wr.stag;
    wr.remote_to = b_wr.base_to + 100;
    p.a.post_send(wr).unwrap();
    // 5. Write with Immediate.
    let mut wr = WorkRequest::new(5, WrOpcode::WriteImm, vec![sge(a_src.handle, 40_000, 3000)]);
    wr.remote_stag = b_wr.stag;
    wr.remote_to = b_wr.base_to + 20_000;
    wr.imm = 0xdead_beef;
    p.a.post_send(wr).unwrap();
    // 6. RDMA Read of 7000 bytes.
    let mut wr = WorkRequest::new(6, WrOpcode::Read, vec![sge(a_sink.handle, 500, 7000)]);
    wr.remote_stag = b_rd.stag;
    wr.remote_to = b_rd.base_to + 1234;
    p.a.post_send(wr).unwrap();
    // 7. FetchAdd 5, then (fenced) CmpSwap 15 -> 99.
    let mut wr = WorkRequest::new(
        7,
        WrOpcode::FetchAdd { add: 5 },
        vec![sge(a_atomic.handle, 0, 8)],
    );
    wr.remote_stag = b_at.stag;
    wr.remote_to = b_at.base_to + 8;
    p.a.post_send(wr).unwrap();
    let mut wr = WorkRequest::new(
        8,
        WrOpcode::CmpSwap {
            compare: 15,
            swap: 99,
        },
        vec![sge(a_atomic.handle, 8, 8)],
    );
    wr.remote_stag = b_at.stag;
    wr.remote_to = b_at.base_to + 8;
    wr.flags.fence = true;
    p.a.post_send(wr).unwrap();
    // 9. Zero-length Send.
    p.a.post_send(WorkRequest::new(9, WrOpcode::Send, vec![]))
        .unwrap();
    // 10. B -> A Send.
    p.b.post_send(WorkRequest::new(
        50,
        WrOpcode::Send,
        vec![sge(b_rd.handle, 0, 4000)],
    ))
    .unwrap();

    p.drive();
    assert_eq!(
        p.a.state(),
        QpState::Rts,
        "A: {:?} {:?} B: {:?} {:?}",
        p.a.local_error(),
        p.a.remote_terminate(),
        p.b.local_error(),
        p.b.remote_terminate()
    );
    assert_eq!(p.b.state(), QpState::Rts, "B: {:?}", p.b.local_error());

    let all_a = p.completions_a();
    let cb = p.completions_b();
    assert!(all_a.iter().all(|c| c.status == WcStatus::Success));
    let recv_a: Vec<_> = all_a.iter().filter(|c| c.wr_id == 200).collect();
    assert_eq!(
        (recv_a[0].opcode, recv_a[0].byte_len),
        (CqOpcode::Recv, 4000)
    );
    // Send-queue completions come in posting order (RFC 5040 §6.3).
    let ca: Vec<_> = all_a.iter().filter(|c| c.wr_id < 100).collect();
    let ids: Vec<u64> = ca.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        ids,
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
        "A completions in order: {all_a:?}"
    );
    assert_eq!((ca[0].opcode, ca[0].byte_len), (CqOpcode::Send, 5000));
    assert_eq!((ca[3].opcode, ca[3].byte_len), (CqOpcode::Write, 10_000));
    assert_eq!((ca[4].opcode, ca[4].byte_len), (CqOpcode::Write, 3000));
    assert_eq!((ca[5].opcode, ca[5].byte_len), (CqOpcode::Read, 7000));
    assert_eq!(ca[6].opcode, CqOpcode::FetchAdd);
    assert_eq!(ca[7].opcode, CqOpcode::CmpSwap);

    // Send data, scattered over three SGEs.
    let mut expect = data[..2000].to_vec();
    expect.extend_from_slice(&data[10_000..13_000]);
    assert_eq!(&p.mem_b.bytes(b_recv.handle)[..5000], &expect[..]);
    assert_eq!(
        &p.mem_b.bytes(b_recv.handle)[8192..8292],
        &data[20_000..20_100]
    );
    // Write and Write with Immediate data.
    assert_eq!(
        &p.mem_b.bytes(b_wr.handle)[100..10_100],
        &data[30_000..40_000]
    );
    assert!(p.mem_b.bytes(b_wr.handle)[..100].iter().all(|&x| x == 0));
    assert_eq!(
        &p.mem_b.bytes(b_wr.handle)[20_000..23_000],
        &data[40_000..43_000]
    );
    // Read data.
    assert_eq!(
        &p.mem_a.bytes(a_sink.handle)[500..7500],
        &rd_data[1234..8234]
    );
    // Atomics: FetchAdd returned 10, CmpSwap saw 15 and stored 99.
    let word = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    assert_eq!(word(p.mem_a.bytes(a_atomic.handle), 0), 10);
    assert_eq!(word(p.mem_a.bytes(a_atomic.handle), 8), 15);
    assert_eq!(word(p.mem_b.bytes(b_at.handle), 8), 99);
    // B -> A Send.
    assert_eq!(&p.mem_a.bytes(a_recv.handle)[..4000], &rd_data[..4000]);

    // B: receives in order: Send, Send SE, Send Inv, Immediate, zero-length Send.
    let recvs: Vec<_> = cb.iter().filter(|c| c.wr_id >= 100).collect();
    assert_eq!(recvs.len(), 5, "{cb:?}");
    assert_eq!(
        (recvs[0].wr_id, recvs[0].byte_len, recvs[0].solicited),
        (100, 5000, false)
    );
    assert_eq!((recvs[1].byte_len, recvs[1].solicited), (100, true));
    assert_eq!(recvs[2].invalidated, Some(b_inv.stag));
    assert_eq!(
        (recvs[3].opcode, recvs[3].imm),
        (CqOpcode::RecvImm, Some(0xdead_beef))
    );
    assert_eq!((recvs[4].opcode, recvs[4].byte_len), (CqOpcode::Recv, 0));
    assert!(
        !p.mem_b.lookup(b_inv.stag).unwrap().valid,
        "Send with Invalidate invalidated"
    );
    assert!(
        cb.iter()
            .any(|c| c.wr_id == 50 && c.status == WcStatus::Success)
    );
}

#[test]
fn every_operation_crc_on_markers_off() {
    for seed in 0..6 {
        run_all_operations(true, false, seed);
    }
}

#[test]
fn every_operation_crc_off_markers_off() {
    for seed in 10..16 {
        run_all_operations(false, false, seed);
    }
}

#[test]
fn every_operation_crc_on_markers_on() {
    for seed in 20..26 {
        run_all_operations(true, true, seed);
    }
}

#[test]
fn every_operation_with_the_crc_computed_by_the_placer() {
    for (seed, markers) in [(40, false), (41, true), (42, false), (43, true)] {
        let c = QpConfig {
            crc_by_placer: true,
            ..cfg(true, markers)
        };
        run_all_operations_with(c, seed);
    }
}

#[test]
fn every_operation_crc_off_markers_on() {
    for seed in 30..36 {
        run_all_operations(false, true, seed);
    }
}

#[test]
fn ord_limits_outstanding_reads_and_fifo_holds() {
    let mut c = cfg(true, false);
    c.ord = 1;
    let mut p = Pair::new(c, cfg(true, false), 99);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_sink = p.mem_a.register(PD, rw, 0, 4096);
    let b_rd = p.mem_b.register(PD, Access::REMOTE_READ | rw, 0x100, 4096);
    for i in 0..4u64 {
        let mut wr = WorkRequest::new(
            i,
            WrOpcode::Read,
            vec![Sge {
                mr: a_sink.handle,
                offset: i * 1024,
                len: 1024,
            }],
        );
        wr.remote_stag = b_rd.stag;
        wr.remote_to = 0x100 + i * 1024;
        p.a.post_send(wr).unwrap();
    }
    p.mem_b
        .bytes_mut(b_rd.handle)
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    // With ORD 1, A's first poll emits one Read Request only.
    let mut buf = [0u8; 2000];
    let now = iwarp::testing::test_now();
    let n = p.a.poll_fpdu(now, 1460, &mut p.mem_a, &mut buf).unwrap();
    let mut other = [0u8; 2000];
    assert!(p.a.poll_fpdu(now, 1460, &mut p.mem_a, &mut other).is_none());
    // Push the request to B by hand, then let the pair run.
    p.inject_to_b(&buf[..n]);
    p.drive();
    let ca = p.completions_a();
    assert_eq!(ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(p.mem_a.bytes(a_sink.handle), p.mem_b.bytes(b_rd.handle));
}

#[test]
fn bad_local_sge_fails_the_wr_only() {
    let mut p = Pair::new(cfg(true, false), cfg(true, false), 7);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_src = p.mem_a.register(PD, rw, 0, 100);
    let b_recv = p.mem_b.register(PD, rw, 0, 100);
    p.b.post_recv(RecvRequest {
        wr_id: 9,
        sges: vec![Sge {
            mr: b_recv.handle,
            offset: 0,
            len: 100,
        }],
    })
    .unwrap();
    // Past the end of the region: refused locally, nothing goes on the wire for it.
    p.a.post_send(WorkRequest::new(
        1,
        WrOpcode::Send,
        vec![Sge {
            mr: a_src.handle,
            offset: 90,
            len: 20,
        }],
    ))
    .unwrap();
    p.a.post_send(WorkRequest::new(
        2,
        WrOpcode::Send,
        vec![Sge {
            mr: a_src.handle,
            offset: 0,
            len: 10,
        }],
    ))
    .unwrap();
    p.drive();
    let c = p.completions_a();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::LocalError), (2, WcStatus::Success)]
    );
    assert_eq!(p.a.state(), QpState::Rts);
    let cb = p.completions_b();
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (9, 10));
}

#[test]
fn unsignaled_wrs_complete_silently_in_order() {
    let mut p = Pair::new(cfg(false, false), cfg(false, false), 8);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_src = p.mem_a.register(PD, rw, 0, 100);
    let b_wr = p.mem_b.register(PD, Access::REMOTE_WRITE | rw, 0x10, 100);
    for i in 0..4u64 {
        let mut wr = WorkRequest::new(
            i,
            WrOpcode::Write,
            vec![Sge {
                mr: a_src.handle,
                offset: i,
                len: 10,
            }],
        );
        wr.remote_stag = b_wr.stag;
        wr.remote_to = 0x10 + 10 * i;
        wr.flags.signaled = i == 3;
        p.a.post_send(wr).unwrap();
    }
    p.drive();
    let c = p.completions_a();
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [3]);
    assert!(
        p.completions_b().is_empty(),
        "Writes consume nothing at the sink"
    );
}

/// A completed Write leaves its SGE vector for the next work request (`Qp::spare_sges`:
/// emptied, its capacity kept); the data of Writes posted with reused vectors arrives intact.
#[test]
fn completed_work_requests_leave_their_sge_vectors() {
    let mut p = Pair::new(cfg(true, false), cfg(true, false), 9);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_src = p.mem_a.register(PD, rw, 0, 4000);
    let b_wr = p.mem_b.register(PD, Access::REMOTE_WRITE | rw, 0x10, 4000);
    let data: Vec<u8> = (0..4000u32).map(|i| (i * 7 + 3) as u8).collect();
    p.mem_a.bytes_mut(a_src.handle).copy_from_slice(&data);
    assert_eq!(p.a.spare_sges().capacity(), 0, "nothing completed yet");
    for i in 0..4u64 {
        let mut sges = p.a.spare_sges();
        assert!(sges.is_empty());
        if i > 0 {
            assert!(sges.capacity() >= 2, "round {i}: the last Write's vector");
        }
        sges.push(Sge {
            mr: a_src.handle,
            offset: 1000 * i,
            len: 600,
        });
        sges.push(Sge {
            mr: a_src.handle,
            offset: 1000 * i + 600,
            len: 400,
        });
        let mut wr = WorkRequest::new(i, WrOpcode::Write, sges);
        wr.remote_stag = b_wr.stag;
        wr.remote_to = 0x10 + 1000 * i;
        p.a.post_send(wr).unwrap();
        p.drive();
        let c = p.completions_a();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].wr_id, c[0].status, c[0].byte_len),
            (i, WcStatus::Success, 1000)
        );
    }
    assert_eq!(p.mem_b.bytes(b_wr.handle), &data[..]);
}

#[test]
fn graceful_close_and_abortive_close() {
    let mut p = Pair::new(cfg(true, false), cfg(true, false), 9);
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a_src = p.mem_a.register(PD, rw, 0, 100);
    let b_recv = p.mem_b.register(PD, rw, 0, 100);
    for id in [1, 2] {
        p.b.post_recv(RecvRequest {
            wr_id: id,
            sges: vec![Sge {
                mr: b_recv.handle,
                offset: 0,
                len: 100,
            }],
        })
        .unwrap();
    }
    p.a.post_send(WorkRequest::new(
        5,
        WrOpcode::Send,
        vec![Sge {
            mr: a_src.handle,
            offset: 0,
            len: 10,
        }],
    ))
    .unwrap();
    p.a.close();
    assert_eq!(p.a.state(), QpState::Closing);
    assert!(
        p.a.post_send(WorkRequest::new(6, WrOpcode::Send, vec![]))
            .is_err()
    );
    p.drive();
    assert!(p.a.is_quiescent());
    let now = iwarp::testing::test_now();
    p.a.handle_stream_closed(now);
    assert_eq!(p.a.state(), QpState::Idle);
    assert_eq!(
        p.completions_a()
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect::<Vec<_>>(),
        [(5, WcStatus::Success)]
    );
    // B was not closing: the close is abortive for it; its unused receive is flushed.
    p.b.handle_stream_closed(now);
    assert_eq!(p.b.state(), QpState::Error);
    let cb = p.completions_b();
    assert_eq!(
        cb.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Flushed)]
    );
}
