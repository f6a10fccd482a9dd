//! The engine end to end in memory (see `sim`): the diagnostic service between two engines,
//! with and without loss, CRC and markers; FIN and a stall inside an FPDU against a raw TCP
//! peer; an out-of-bounds Write.

use iwarp::error::{Layer, LlpError, TermCode};
use iwarp::mpa::wire::{FrameKind, IrdOrd, Repr};
use iwarp::rdmap::{RecvRequest, Sge, WcStatus};
use iwarp::stag::{Access, PdId};
use netcore::Duration;
use tcp::ConnHandle;

use super::api::{
    CrcMode, EngineCmd, EngineConfig, EngineEvent, LocalQueues, MpaPolicy, QpBinding,
    QpErrorReason, QpQueues,
};
use super::diag::{DiagOp, DiagRdmaConfig};
use super::ids::{ClientId, QpNum};
use super::memory::{HeapMemory, MrRequest};
use super::sim::{Host, Sim};

const PORT: u16 = 7174;

fn diag(
    listen: Option<u16>,
    connect: Option<std::net::SocketAddrV4>,
    policy: MpaPolicy,
) -> DiagRdmaConfig {
    DiagRdmaConfig {
        listen_port: listen,
        connect,
        ops: vec![DiagOp::Write, DiagOp::Send, DiagOp::Read],
        sizes: vec![0, 1, 4096, 100_000, 256 * 1024],
        iterations: 1,
        buffer: 256 * 1024,
        policy,
        sha256: true,
        exit_when_done: false,
        connect_timeout: Duration::from_secs(5),
    }
}

fn diag_pair(policy: MpaPolicy, seed: u64, loss_ppm: u64) -> Sim {
    let b = Host::new(
        2,
        EngineConfig::default(),
        Some(diag(Some(PORT), None, policy.clone())),
    );
    let target = b.addr(PORT);
    let a = Host::new(
        1,
        EngineConfig::default(),
        Some(diag(None, Some(target), policy)),
    );
    let mut s = Sim::new(a, b, seed);
    s.loss_ppm = loss_ppm;
    s
}

fn run_diag(s: &mut Sim) -> (u32, u32) {
    let done = s.run_until(Duration::from_secs(120), |s| {
        s.a.engine.diag.as_ref().is_some_and(|d| d.report.done)
    });
    assert!(done, "generator did not finish");
    let r = &s.a.engine.diag.as_ref().unwrap().report;
    (r.ok, r.failed)
}

#[test]
fn every_operation_checks_out_crc_off_and_on() {
    for (crc, seed) in [(CrcMode::Off, 1), (CrcMode::On, 2), (CrcMode::Require, 3)] {
        let policy = MpaPolicy {
            crc,
            ..Default::default()
        };
        let mut s = diag_pair(policy, seed, 0);
        assert_eq!(run_diag(&mut s), (15, 0), "crc {crc:?}");
    }
}

#[test]
fn markers_and_loss() {
    let policy = MpaPolicy {
        crc: CrcMode::On,
        markers: true,
        ..Default::default()
    };
    let mut s = diag_pair(policy, 4, 0);
    assert_eq!(run_diag(&mut s), (15, 0), "markers");
    // 2 % loss both ways: retransmissions and tail-loss probes read FPDUs back from the log.
    let policy = MpaPolicy {
        crc: CrcMode::On,
        ..Default::default()
    };
    let mut s = diag_pair(policy, 5, 20_000);
    assert_eq!(run_diag(&mut s), (15, 0), "loss");
    assert!(s.dropped > 10, "dropped {}", s.dropped);
    let stats = s.a.tcp.stats();
    assert!(stats.retransmissions > 0);
}

#[test]
fn out_of_bounds_write_draws_the_terminate_and_leaves_the_guard_intact() {
    let policy = MpaPolicy {
        crc: CrcMode::On,
        ..Default::default()
    };
    let b = Host::new(
        2,
        EngineConfig::default(),
        Some(diag(Some(PORT), None, policy.clone())),
    );
    let mut gen_cfg = diag(None, Some(b.addr(PORT)), policy);
    gen_cfg.ops = vec![DiagOp::Write, DiagOp::Oob, DiagOp::Read];
    gen_cfg.sizes = vec![8192];
    let a = Host::new(1, EngineConfig::default(), Some(gen_cfg));
    let mut s = Sim::new(a, b, 6);
    // Write ok, oob answered with DDP/tagged/base-or-bounds, then a new connection for Read.
    assert_eq!(run_diag(&mut s), (3, 0));
}

#[test]
fn every_flavour_and_atomic_checks_out() {
    // Send with Invalidate, Send with SE, Write with Immediate, FetchAdd, CompareSwap, each
    // checked by the sink (invalidated STag, SE flag, immediate, the atomic word); twice, so
    // the invalidated STag must have been revalidated and the atomics build on each other.
    let policy = MpaPolicy {
        crc: CrcMode::On,
        ..Default::default()
    };
    let mut s = diag_pair(policy.clone(), 11, 0);
    let ops = vec![
        DiagOp::SendInv,
        DiagOp::SendSe,
        DiagOp::WriteImm,
        DiagOp::FetchAdd,
        DiagOp::CmpSwap,
        DiagOp::Send,
    ];
    let g = s.a.engine.diag.as_mut().unwrap();
    g.set_plan(ops, vec![1, 4096], 2);
    assert_eq!(run_diag(&mut s), (24, 0));
}

#[test]
fn fault_switches_end_the_stream_as_the_peer_must() {
    use super::api::TxFault;
    let policy = MpaPolicy {
        crc: CrcMode::On,
        ..Default::default()
    };
    let cfg = EngineConfig {
        rx_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let b = Host::new(2, cfg.clone(), Some(diag(Some(PORT), None, policy.clone())));
    let mut gen_cfg = diag(None, Some(b.addr(PORT)), policy);
    gen_cfg.ops = vec![
        DiagOp::Write,
        DiagOp::Fault(TxFault::Truncate),
        DiagOp::Fault(TxFault::BadCrc),
        DiagOp::Fault(TxFault::FinInside),
        DiagOp::Fault(TxFault::RstInside),
        DiagOp::Read,
    ];
    gen_cfg.sizes = vec![8192];
    let a = Host::new(1, cfg, Some(gen_cfg));
    let mut s = Sim::new(a, b, 12);
    assert_eq!(run_diag(&mut s), (6, 0));
}

/// A control-owned listener on `b` with one posted receive; `a` is a raw TCP peer.
struct RawPeer {
    s: Sim,
    h: ConnHandle,
    queues: LocalQueues,
    /// The 64 KiB region's lkey (set by `establish`).
    lkey: iwarp::stag::MrHandle,
    /// That region's memory (set by `establish`).
    heap: Option<std::sync::Arc<HeapMemory>>,
}

/// `len` bytes of heap memory registered on `host` for client 5 in PD 1 with `access`.
fn heap_region(
    host: &Host,
    len: usize,
    access: Access,
) -> (std::sync::Arc<HeapMemory>, super::memory::MrKeys) {
    let heap = HeapMemory::new(len);
    let k = host
        .handle
        .mem
        .register(MrRequest {
            owner: ClientId(5),
            pd: PdId(1),
            mem: heap.clone(),
            offset: 0,
            len,
            base_to: 0,
            access,
            remote_invalidate: false,
        })
        .unwrap();
    (heap, k)
}

fn raw_peer(rx_timeout: Duration) -> RawPeer {
    let a = Host::new(1, EngineConfig::default(), None);
    let cfg = EngineConfig {
        rx_timeout,
        ..Default::default()
    };
    let b = Host::new(2, cfg, None);
    let l = b.handle.ids.listener();
    b.handle
        .send(
            0,
            EngineCmd::Listen {
                listener: l,
                port: PORT,
                policy: MpaPolicy::default(),
            },
        )
        .unwrap();
    let mut s = Sim::new(a, b, 9);
    s.step();
    let remote = (s.b.ip, PORT);
    let now = s.now;
    let h = s.a.tcp.connect(now, 0, remote).unwrap();
    s.a.raw.insert(h, Vec::new());
    s.a.touch(h);
    RawPeer {
        s,
        h,
        queues: LocalQueues::default(),
        lkey: iwarp::stag::MrHandle(0),
        heap: None,
    }
}

impl RawPeer {
    /// Queue `bytes` on the raw connection and let the sim run a little.
    fn send(&mut self, bytes: &[u8]) {
        self.s
            .a
            .raw
            .entry(self.h)
            .or_default()
            .extend_from_slice(bytes);
        let c = self.s.a.tcp.conn_mut(self.h).unwrap();
        c.send_record(bytes.len() as u64).unwrap();
        self.s.a.touch(self.h);
        self.flush();
    }

    fn flush(&mut self) {
        for _ in 0..200 {
            self.s.step();
        }
    }

    /// Everything the engine sent us so far.
    fn received(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        while let Some(c) = self.s.a.tcp.conn_mut(self.h)
            && let Some((b, r)) = c.poll_readable()
        {
            v.extend_from_slice(&b[r]);
        }
        v
    }

    /// MPA rev 2 Request, CRC off, IRD/ORD 1/1; the engine's control side accepts with a QP
    /// bound to `self.queues` and one posted 64 KiB receive.
    fn establish(&mut self) -> QpNum {
        let r = Repr {
            kind: FrameKind::Request,
            markers: false,
            crc: false,
            reject: false,
            revision: 2,
            ird_ord: Some(IrdOrd {
                ird: 1,
                ord: 1,
                ..Default::default()
            }),
            ulp_data: &[],
        };
        let mut req = vec![0u8; r.buffer_len()];
        r.emit(&mut req).unwrap();
        self.send(&req);
        let ev = self.s.b.handle.try_recv().expect("connect request");
        let EngineEvent::ConnectRequest { conn, .. } = ev else {
            panic!("{ev:?}");
        };
        let (heap, k) = heap_region(&self.s.b, 65536, Access::LOCAL_WRITE | Access::LOCAL_READ);
        self.lkey = k.lkey;
        self.heap = Some(heap);
        self.queues.post_recv(RecvRequest {
            wr_id: 77,
            sges: vec![Sge {
                mr: k.lkey,
                offset: 0,
                len: 65536,
            }],
        });
        let qp = QpNum(42);
        self.s
            .b
            .handle
            .send(
                0,
                EngineCmd::Accept {
                    conn,
                    qp: local_binding(qp, &self.queues),
                    private_data: Vec::new(),
                    ird: 1,
                    ord: 1,
                    crc: None,
                },
            )
            .unwrap();
        self.flush();
        let ev = self.s.b.handle.try_recv().expect("established");
        assert!(matches!(ev, EngineEvent::Established { .. }), "{ev:?}");
        let reply = self.received();
        assert_eq!(&reply[..16], b"MPA ID Rep Frame");
        qp
    }

    /// The first bytes of an FPDU carrying a Send of 1000 bytes (untagged QN 0, MSN 1).
    fn half_send(&mut self) {
        // ULPDU_LENGTH 1018: an 18-byte untagged header and 1000 bytes; only 200 follow.
        let mut f = 1018u16.to_be_bytes().to_vec();
        f.extend_from_slice(&[0x41, 0x43]); // DDP untagged, L, DV 1; RDMAP RV 1, Send
        f.extend_from_slice(&[0; 4]); // reserved
        f.extend_from_slice(&0u32.to_be_bytes()); // QN 0
        f.extend_from_slice(&1u32.to_be_bytes()); // MSN 1
        f.extend_from_slice(&0u32.to_be_bytes()); // MO 0
        f.extend_from_slice(&[0x5a; 200]);
        self.send(&f);
    }
}

#[test]
fn fin_inside_an_fpdu_flushes_every_work_request_with_an_error() {
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    p.half_send();
    assert!(p.queues.poll_cq().is_none());
    p.s.a.tcp.conn_mut(p.h).unwrap().close();
    p.s.a.touch(p.h);
    p.flush();
    let ev = p.s.b.handle.try_recv();
    let ev = ev.unwrap_or_else(|| panic!("no event; completions {:?}", p.queues.poll_cq()));
    assert!(
        matches!(ev, EngineEvent::QpError { qp: q, reason: QpErrorReason::StreamBroken, .. } if q == qp),
        "{ev:?}"
    );
    let c = p.queues.poll_cq().expect("flushed receive");
    assert_eq!((c.wr_id, c.status), (77, WcStatus::Flushed));
    // Never a silent graceful close: the TERMINATE (LLP, stream lost) went out before FIN.
    let rx = p.received();
    assert!(is_terminate(&rx, LlpError::StreamLost.into()), "{rx:02x?}");
}

#[test]
fn a_half_received_fpdu_times_out_into_a_terminate() {
    let mut p = raw_peer(Duration::from_millis(300));
    let qp = p.establish();
    let before = p.s.now;
    p.half_send();
    let mut ev = p.s.b.handle.try_recv();
    let got = p.s.run_until(Duration::from_secs(2), |s| {
        if ev.is_none() {
            ev = s.b.handle.try_recv();
        }
        ev.is_some()
    });
    assert!(got, "no event after the receive timeout");
    assert!(p.s.now >= before + Duration::from_millis(300));
    let ev = ev.unwrap();
    assert!(
        matches!(ev, EngineEvent::QpError { qp: q, reason: QpErrorReason::RxTimeout, .. } if q == qp),
        "{ev:?}"
    );
    p.flush();
    let rx = p.received();
    assert!(is_terminate(&rx, LlpError::StreamLost.into()), "{rx:02x?}");
    assert_eq!(p.queues.poll_cq().unwrap().status, WcStatus::Flushed);
}

#[test]
fn flush_qp_moves_a_running_qp_to_error_with_every_wr_flushed() {
    use iwarp::error::RdmapError;
    use iwarp::rdmap::{WorkRequest, WrOpcode};
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    // A Read the raw peer never answers stays outstanding on the send queue.
    let mut rd = WorkRequest::new(
        5,
        WrOpcode::Read,
        vec![Sge {
            mr: p.lkey,
            offset: 0,
            len: 100,
        }],
    );
    rd.remote_stag = iwarp::stag::Stag(0x1234_5600);
    p.queues.post_send(rd);
    p.flush();
    assert!(p.queues.poll_cq().is_none());
    p.received();
    p.s.b.handle.send(0, EngineCmd::FlushQp { qp }).unwrap();
    p.flush();
    let code = TermCode::from(RdmapError::LocalCatastrophic);
    let ev = p.s.b.handle.try_recv().expect("QpError");
    assert!(
        matches!(ev, EngineEvent::QpError { qp: q, reason: QpErrorReason::TerminateSent(c), .. } if q == qp && c == code),
        "{ev:?}"
    );
    let mut done: Vec<(u64, WcStatus)> = std::iter::from_fn(|| p.queues.poll_cq())
        .map(|c| (c.wr_id, c.status))
        .collect();
    done.sort_by_key(|d| d.0);
    assert_eq!(done, vec![(5, WcStatus::Flushed), (77, WcStatus::Flushed)]);
    // The peer was told: a TERMINATE (RDMAP, local catastrophic) before the FIN.
    let rx = p.received();
    assert!(rx.len() >= 24, "{rx:02x?}");
    assert_eq!(rx[3] & 0x0f, 0x7, "not a Terminate: {rx:02x?}");
    assert_eq!((rx[20] >> 4, rx[20] & 0x0f, rx[21]), (0, 0, 0), "{rx:02x?}");
    // Work posted afterwards completes flushed too.
    p.queues.post_recv(RecvRequest {
        wr_id: 78,
        sges: vec![],
    });
    p.flush();
    let c = p.queues.poll_cq().expect("late receive flushed");
    assert_eq!((c.wr_id, c.status), (78, WcStatus::Flushed));
}

/// Whether `fpdu` (CRC off) is a Terminate FPDU carrying `code` (RFC 5040 §4.8 layout).
fn is_terminate(fpdu: &[u8], code: TermCode) -> bool {
    // len(2) | DDP untagged hdr: ctrl, rdmap ctrl, rsvd(4), QN(4), MSN(4), MO(4) | term ctrl
    if fpdu.len() < 2 + 18 + 4 {
        return false;
    }
    let op = fpdu[3] & 0x0f;
    let qn = u32::from_be_bytes(fpdu[8..12].try_into().unwrap());
    let t = &fpdu[20..24];
    let layer = t[0] >> 4;
    let etype = t[0] & 0x0f;
    op == 0x7
        && qn == 2
        && layer == code.layer as u8
        && etype == code.etype
        && t[1] == code.ecode
        && code.layer == Layer::Llp
}

/// `count` Writes of `size` bytes, one outstanding at a time, from the engine to the raw peer
/// (whose TCP delays its ACKs by 1 ms, `TcpConfig::default`); each Write's buffer is
/// overwritten as soon as it completes. Returns the simulated time taken and the stream the
/// peer received (checked FPDU by FPDU: CRC off, tagged header, payload = the Write's number).
fn lone_writes(count: u32, size: usize) -> (Duration, u64) {
    use iwarp::rdmap::{WorkRequest, WrOpcode};
    let mut p = raw_peer(Duration::from_secs(60));
    p.establish();
    let heap = p.heap.clone().unwrap();
    // RFC 5044 §7.1.2: the responder's first FPDU waits for the initiator's (or a grace).
    p.s.run_until(Duration::from_millis(300), |_| false);
    let start = p.s.now;
    let mut stream = Vec::new();
    for i in 0..count {
        heap.fill(0, &vec![(i % 251) as u8; size]);
        let mut w = WorkRequest::new(
            u64::from(i),
            WrOpcode::Write,
            vec![Sge {
                mr: p.lkey,
                offset: 0,
                len: size as u32,
            }],
        );
        w.remote_stag = iwarp::stag::Stag(0x1234_5600);
        p.queues.post_send(w);
        let mut c = None;
        let done = p.s.run_until(Duration::from_secs(1), |_| {
            c = c.take().or_else(|| p.queues.poll_cq());
            c.is_some()
        });
        assert!(done, "Write {i} did not complete");
        let c = c.unwrap();
        assert_eq!((c.wr_id, c.status), (u64::from(i), WcStatus::Success));
        // The buffer is the application's again: scribble over it at once.
        heap.fill(0, &vec![0xee; size]);
        stream.extend(p.received());
    }
    let took = p.s.now - start;
    p.flush();
    stream.extend(p.received());
    // CRC off: length(2) | DDP tagged + RDMAP header (14) | payload | pad to 4 | CRC field
    // (zero, RFC 5044 §4: present whether or not CRCs are used).
    let (mut at, mut n) = (0usize, 0u32);
    while at + 2 <= stream.len() {
        let ulpdu = usize::from(u16::from_be_bytes([stream[at], stream[at + 1]]));
        let payload = &stream[at + 16..at + 2 + ulpdu];
        assert_eq!(
            payload,
            &vec![(n % 251) as u8; size][..],
            "Write {n}'s payload"
        );
        at += (2 + ulpdu).next_multiple_of(4) + 4;
        n += 1;
    }
    assert_eq!(n, count, "FPDUs received");
    (took, p.s.a.tcp.stats().bytes_in)
}

/// Issue #8: a lone small Write completes when it is transmitted (its bytes copied into the
/// transmit log), not when the peer's delayed ACK arrives: 2000 of them take a small fraction
/// of the 2 s that 1 ms delayed-ACK pacing would need (simulated time: not a timing test). A
/// Write above the inline limit still completes on the ACK (zero-copy), and the pacing shows.
#[test]
fn lone_small_writes_complete_at_transmission_not_at_the_delayed_ack() {
    let (took, _) = lone_writes(2000, 2);
    assert!(
        took < Duration::from_millis(400),
        "2000 lone 2 B Writes took {took:?}"
    );
    let (took, _) = lone_writes(20, super::conn::INLINE_MAX + 1);
    assert!(
        took >= Duration::from_millis(20),
        "20 lone zero-copy Writes took only {took:?}: no longer paced by the ACK?"
    );
}

/// QP `qp` of client 5 in PD 1, queues of 16 on `queues` (the tests' usual binding).
fn local_binding(qp: QpNum, queues: &LocalQueues) -> QpBinding {
    QpBinding {
        qp,
        owner: ClientId(5),
        pd: PdId(1),
        sq_depth: 16,
        rq_depth: 16,
        queues: QpQueues::Local(queues.clone()),
    }
}

/// An active open of `conn` to `remote` with the default policy and no private data.
fn connect_cmd(
    conn: crate::rdma::ConnId,
    remote: std::net::SocketAddrV4,
    qp: QpBinding,
) -> EngineCmd {
    EngineCmd::Connect {
        conn,
        remote,
        policy: MpaPolicy::default(),
        private_data: Vec::new(),
        qp,
    }
}

/// Everything completed so far on `q`, as (wr_id, status).
fn drained(q: &LocalQueues) -> Vec<(u64, WcStatus)> {
    let mut v: Vec<(u64, WcStatus)> = std::iter::from_fn(|| q.poll_cq())
        .map(|c| (c.wr_id, c.status))
        .collect();
    v.sort_by_key(|d| d.0);
    v
}

/// A Read (never answered by a raw peer) and a receive, posted to `q`.
fn post_read_and_recv(q: &LocalQueues, lkey: iwarp::stag::MrHandle, read_id: u64, recv_id: u64) {
    use iwarp::rdmap::{WorkRequest, WrOpcode};
    let mut rd = WorkRequest::new(
        read_id,
        WrOpcode::Read,
        vec![Sge {
            mr: lkey,
            offset: 0,
            len: 100,
        }],
    );
    rd.remote_stag = iwarp::stag::Stag(0x1234_5600);
    q.post_send(rd);
    q.post_recv(RecvRequest {
        wr_id: recv_id,
        sges: vec![],
    });
}

/// Issue #7 follow-up: a QP whose connection ended is in ERROR; work posted to it afterwards
/// completes flushed (`IBV_WC_WR_FLUSH_ERR`), before TCP let go of the connection and after
/// it was reaped, until `DestroyQp` releases the queues.
#[test]
fn work_posted_after_the_connection_is_gone_completes_flushed() {
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    // The peer resets the connection: QpError, the posted receive flushed.
    p.s.a.tcp.conn_mut(p.h).unwrap().abort();
    p.s.a.touch(p.h);
    p.flush();
    let ev = p.s.b.handle.try_recv().expect("QpError");
    assert!(
        matches!(ev, EngineEvent::QpError { qp: q, .. } if q == qp),
        "{ev:?}"
    );
    assert_eq!(drained(&p.queues), vec![(77, WcStatus::Flushed)]);
    // Posted after the end: flushed, although no connection runs the QP.
    post_read_and_recv(&p.queues, p.lkey, 5, 78);
    p.flush();
    assert_eq!(
        drained(&p.queues),
        vec![(5, WcStatus::Flushed), (78, WcStatus::Flushed)]
    );
    assert_eq!(p.s.b.engine.connections(), 0, "the connection was reaped");
    // Still flushed later, in posting order per queue.
    post_read_and_recv(&p.queues, p.lkey, 6, 79);
    post_read_and_recv(&p.queues, p.lkey, 7, 80);
    p.flush();
    assert_eq!(
        drained(&p.queues),
        vec![
            (6, WcStatus::Flushed),
            (7, WcStatus::Flushed),
            (79, WcStatus::Flushed),
            (80, WcStatus::Flushed)
        ]
    );
    // DestroyQp: released, and nothing touches the queues any more.
    p.s.b.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    p.flush();
    let ev = p.s.b.handle.try_recv().expect("QpReleased");
    assert!(
        matches!(ev, EngineEvent::QpReleased { qp: q, .. } if q == qp),
        "{ev:?}"
    );
    post_read_and_recv(&p.queues, p.lkey, 8, 81);
    p.flush();
    assert!(drained(&p.queues).is_empty());
    assert!(p.queues.has_work(), "the released queues were read");
}

/// After a graceful close the QP is in ERROR too (verbs: `rdma_disconnect` moves it there):
/// a receive posted during TCP's TIME-WAIT completes flushed at once.
#[test]
fn work_posted_after_a_graceful_close_completes_flushed() {
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    // The peer closes at an FPDU boundary: the engine closes too, Disconnected.
    p.s.a.tcp.conn_mut(p.h).unwrap().close();
    p.s.a.touch(p.h);
    p.flush();
    let ev = p.s.b.handle.try_recv().expect("Disconnected");
    assert!(
        matches!(ev, EngineEvent::Disconnected { qp: Some(q), .. } if q == qp),
        "{ev:?}"
    );
    assert_eq!(drained(&p.queues), vec![(77, WcStatus::Flushed)]);
    post_read_and_recv(&p.queues, p.lkey, 5, 78);
    p.flush();
    assert_eq!(
        drained(&p.queues),
        vec![(5, WcStatus::Flushed), (78, WcStatus::Flushed)]
    );
}

/// A QP that is the initiator of a connection still in MPA startup (the peer accepted TCP but
/// never answers the MPA Request): FlushQp ends the attempt (ConnectFailed, Aborted) and
/// flushes the work posted before (a receive and a Read) and after.
#[test]
fn flush_during_mpa_startup_flushes_the_queues() {
    use super::api::ConnectFailure;
    let a = Host::new(1, EngineConfig::default(), None);
    let mut b = Host::new(2, EngineConfig::default(), None);
    b.tcp.listen(PORT);
    let target = b.addr(PORT);
    let mut s = Sim::new(a, b, 13);
    let (_heap, k) = heap_region(&s.a, 4096, Access::LOCAL_WRITE | Access::LOCAL_READ);
    let queues = LocalQueues::default();
    post_read_and_recv(&queues, k.lkey, 5, 77);
    let qp = QpNum(43);
    let conn = s.a.handle.ids.conn();
    s.a.handle
        .send(0, connect_cmd(conn, target, local_binding(qp, &queues)))
        .unwrap();
    // TCP connects and the MPA Request goes out; no Reply ever comes.
    s.run_until(Duration::from_millis(50), |_| false);
    assert_eq!(s.a.engine.connections(), 1);
    assert!(s.a.handle.try_recv().is_none(), "no event yet");
    assert!(drained(&queues).is_empty());
    s.a.handle.send(0, EngineCmd::FlushQp { qp }).unwrap();
    s.run_until(Duration::from_millis(10), |_| false);
    let ev = s.a.handle.try_recv().expect("ConnectFailed");
    assert!(
        matches!(ev, EngineEvent::ConnectFailed { conn: c, reason: ConnectFailure::Aborted } if c == conn),
        "{ev:?}"
    );
    assert_eq!(
        drained(&queues),
        vec![(5, WcStatus::Flushed), (77, WcStatus::Flushed)]
    );
    // Posted afterwards: flushed as well, until DestroyQp.
    post_read_and_recv(&queues, k.lkey, 6, 78);
    s.run_until(Duration::from_millis(10), |_| false);
    assert_eq!(
        drained(&queues),
        vec![(6, WcStatus::Flushed), (78, WcStatus::Flushed)]
    );
    s.a.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    s.run_until(Duration::from_millis(10), |_| false);
    let ev = s.a.handle.try_recv().expect("QpReleased");
    assert!(
        matches!(ev, EngineEvent::QpReleased { qp: q, .. } if q == qp),
        "{ev:?}"
    );
}

/// FlushQp before the active open even started (next-hop resolution pending is modelled by
/// the command arriving in the same poll as the Connect): the queues flush too.
#[test]
fn flush_before_the_active_open_flushes_the_queues() {
    let a = Host::new(1, EngineConfig::default(), None);
    let b = Host::new(2, EngineConfig::default(), None);
    let target = b.addr(PORT);
    let mut s = Sim::new(a, b, 14);
    let queues = LocalQueues::default();
    queues.post_recv(RecvRequest {
        wr_id: 77,
        sges: vec![],
    });
    let qp = QpNum(44);
    let conn = s.a.handle.ids.conn();
    for cmd in [
        connect_cmd(conn, target, local_binding(qp, &queues)),
        EngineCmd::FlushQp { qp },
    ] {
        s.a.handle.send(0, cmd).unwrap();
    }
    s.run_until(Duration::from_millis(10), |_| false);
    let ev = s.a.handle.try_recv().expect("ConnectFailed");
    assert!(matches!(ev, EngineEvent::ConnectFailed { .. }), "{ev:?}");
    assert_eq!(drained(&queues), vec![(77, WcStatus::Flushed)]);
    assert_eq!(s.a.engine.connections(), 0);
}

/// ModifyQp to ERROR of a QP that was never connected (`FlushUnbound`): what was posted and
/// what is posted later completes flushed, until `DestroyQp`.
#[test]
fn an_unconnected_qp_moved_to_error_flushes_its_queues() {
    let a = Host::new(1, EngineConfig::default(), None);
    let b = Host::new(2, EngineConfig::default(), None);
    let mut s = Sim::new(a, b, 15);
    let queues = LocalQueues::default();
    queues.post_recv(RecvRequest {
        wr_id: 77,
        sges: vec![],
    });
    let qp = QpNum(45);
    let binding = local_binding(qp, &queues);
    s.a.handle
        .send(0, EngineCmd::FlushUnbound { qp: binding })
        .unwrap();
    s.run_until(Duration::from_millis(5), |_| false);
    assert_eq!(drained(&queues), vec![(77, WcStatus::Flushed)]);
    queues.post_recv(RecvRequest {
        wr_id: 78,
        sges: vec![],
    });
    s.run_until(Duration::from_millis(5), |_| false);
    assert_eq!(drained(&queues), vec![(78, WcStatus::Flushed)]);
    s.a.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    s.run_until(Duration::from_millis(5), |_| false);
    let ev = s.a.handle.try_recv().expect("QpReleased");
    assert!(
        matches!(ev, EngineEvent::QpReleased { qp: q, .. } if q == qp),
        "{ev:?}"
    );
    queues.post_recv(RecvRequest {
        wr_id: 79,
        sges: vec![],
    });
    s.run_until(Duration::from_millis(5), |_| false);
    assert!(drained(&queues).is_empty());
}

/// A tagged RDMA Write FPDU (CRC off, RFC 5044 §4 / RFC 5041 §4.2): `payload` at `to` of
/// `stag`, DDP L flag when `last`.
fn write_fpdu(stag: iwarp::stag::Stag, to: u64, payload: &[u8], last: bool) -> Vec<u8> {
    let ulpdu = 14 + payload.len();
    let mut f = (ulpdu as u16).to_be_bytes().to_vec();
    // DDP tagged, DV 1 (L when last); RDMAP RV 1, opcode 0 (RDMA Write).
    f.extend_from_slice(&[if last { 0xc1 } else { 0x81 }, 0x40]);
    f.extend_from_slice(&stag.0.to_be_bytes());
    f.extend_from_slice(&to.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize((2 + ulpdu).next_multiple_of(4), 0);
    f.extend_from_slice(&[0; 4]); // CRC field, zero with CRC off
    f
}

impl RawPeer {
    /// Queue each FPDU as its own TCP segment (one record each), without running the sim.
    fn queue_fpdus(&mut self, fpdus: &[Vec<u8>]) -> u64 {
        for f in fpdus {
            self.s.a.raw.entry(self.h).or_default().extend_from_slice(f);
            let c = self.s.a.tcp.conn_mut(self.h).unwrap();
            c.send_record(f.len() as u64).unwrap();
        }
        self.s.a.touch(self.h);
        self.s.a.tcp.conn(self.h).unwrap().queued_offset()
    }

    /// Step the sim for at most `limit` of simulated time, until our stream is acknowledged up
    /// to `upto`; returns whether it was.
    fn acked_within(&mut self, upto: u64, limit: Duration) -> bool {
        let h = self.h;
        self.s.run_until(limit, |s| {
            s.a.tcp.conn(h).is_some_and(|c| c.acked_offset() >= upto)
        })
    }
}

/// Issue #8 note ("lone Writes > 256 B are paced by the delayed ACK"): the engine asks TCP for
/// an immediate ACK when a received FPDU ends a message (DDP L flag) and nothing more of the
/// stream is waiting, because the Write's sender completes it only on that ACK. A lone 4 KiB
/// Write in three segments, each delivered in its own receive burst (so the every-second-
/// segment rule does not cover the last one), is acknowledged in full well within the 1 ms
/// delayed-ACK timeout (simulated time) and counted as a quick ACK; an FPDU that does not end
/// its message still waits for the timer.
#[test]
fn a_lone_write_is_acknowledged_at_its_last_fpdu_not_at_the_delayed_ack() {
    let mut p = raw_peer(Duration::from_secs(60));
    p.establish();
    let (heap, k) = heap_region(&p.s.b, 65536, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    p.flush();
    p.s.burst = 1;
    let delack = tcp::TcpConfig::default().delayed_ack.unwrap();
    let quick = |p: &RawPeer| p.s.b.tcp.stats().quick_acks;
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
    let fpdus = [
        write_fpdu(k.rkey, 0, &data[..1400], false),
        write_fpdu(k.rkey, 1400, &data[1400..2800], false),
        write_fpdu(k.rkey, 2800, &data[2800..], true),
    ];
    let q0 = quick(&p);
    let end = p.queue_fpdus(&fpdus);
    assert!(
        p.acked_within(end, delack / 2),
        "the lone Write's last segment waited for the delayed ACK"
    );
    assert_eq!(quick(&p), q0 + 1, "quick ACKs");
    let mut placed = vec![0u8; 4096];
    assert!(heap.copy_out(0, &mut placed));
    assert_eq!(placed, data, "Write placed");

    // The first FPDU of a two-FPDU Write: no message end, so the delayed ACK applies.
    let end = p.queue_fpdus(&[write_fpdu(k.rkey, 8192, &data[..1000], false)]);
    assert!(
        !p.acked_within(end, delack / 2),
        "a segment without a message end was acknowledged before the delayed ACK"
    );
    assert!(p.acked_within(end, delack * 2), "delayed ACK");
    assert_eq!(quick(&p), q0 + 1, "no quick ACK without the L flag");
    // Its last FPDU ends the message: at once again.
    let end = p.queue_fpdus(&[write_fpdu(k.rkey, 9192, &data[1000..2000], true)]);
    assert!(p.acked_within(end, delack / 2), "second Write's end");
    assert_eq!(quick(&p), q0 + 2, "quick ACKs");
}

/// Issue #8, bar (b): the ACK a message end asks for waits one loop step, so that a reply the
/// application posts in between (a ping-pong driven by the application thread itself,
/// `crate::pump`) carries it: one segment instead of a pure ACK and then the reply.
#[test]
fn a_reply_posted_before_the_next_step_carries_the_quick_ack() {
    use iwarp::rdmap::{WorkRequest, WrOpcode};
    let mut p = raw_peer(Duration::from_secs(60));
    p.establish();
    let (heap, k) = heap_region(&p.s.b, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    // RFC 5044 §7.1.2: the responder's first FPDU waits for the initiator's (or a grace).
    p.s.run_until(Duration::from_millis(300), |_| false);
    let segs = p.s.b.tcp.stats().segs_out;
    let end = p.queue_fpdus(&[write_fpdu(k.rkey, 0, b"hi", true)]);
    // Up to the step that placed it.
    let placed = p.s.run_until(Duration::from_millis(100), |_| {
        let mut b = [0u8; 2];
        heap.copy_out(0, &mut b) && &b == b"hi"
    });
    assert!(placed, "the Write was not placed");
    // The application answers before the loop steps again.
    let mut w = WorkRequest::new(
        7,
        WrOpcode::Write,
        vec![Sge {
            mr: p.lkey,
            offset: 0,
            len: 2,
        }],
    );
    w.remote_stag = iwarp::stag::Stag(0x1234_5600);
    p.queues.post_send(w);
    let acked = p.s.run_until(Duration::from_millis(100), |s| {
        s.a.tcp.conn(p.h).is_some_and(|c| c.acked_offset() >= end)
    });
    assert!(acked, "the Write was not acknowledged");
    assert_eq!(
        p.s.b.tcp.stats().segs_out,
        segs + 1,
        "the reply and the ACK in one segment"
    );
    let reply = p.received();
    assert_eq!(
        &reply[16..18],
        &[0u8; 2][..],
        "the reply's payload arrived with it"
    );
}

/// `MpaPolicy::first_fpdu_delay` (`mpa.first_fpdu_delay_ms`) holds the initiator's first FPDU
/// back by exactly what it says (siw's responder race, `siw-peer` README §5.10), and 0 sends
/// it at once: the same seeded run, data checked, ends that much later.
#[test]
fn first_fpdu_delay_is_what_the_policy_says() {
    let run = |ms: u64| {
        let policy = MpaPolicy {
            first_fpdu_delay: Duration::from_millis(ms),
            ..Default::default()
        };
        let mut s = diag_pair(policy, 7, 0);
        let t0 = s.now;
        assert_eq!(run_diag(&mut s), (15, 0), "delay {ms} ms");
        s.now - t0
    };
    let (none, long) = (run(0), run(300));
    assert!(
        long >= none + Duration::from_millis(290),
        "300 ms delay: {long:?}, none: {none:?}"
    );
    assert!(
        none < Duration::from_millis(300),
        "without the delay the run took {none:?}"
    );
}

/// The counters of a QP destroyed right after its traffic reach the control thread whole:
/// `QpReleased` carries them as they were at the destruction (the periodic publication runs
/// only every 100 ms, and a `write_bw` of a few milliseconds ended before it), and a
/// destroyed QP's connection no longer publishes under its number (the control thread may
/// give it to a new QP).
#[test]
fn qp_released_carries_the_counters_of_the_last_writes() {
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    let (heap, k) = heap_region(&p.s.b, 65536, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    p.flush();
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let fpdus = [
        write_fpdu(k.rkey, 0, &data[..1400], false),
        write_fpdu(k.rkey, 1400, &data[1400..], true),
    ];
    let end = p.queue_fpdus(&fpdus);
    assert!(p.acked_within(end, Duration::from_millis(5)));
    let mut placed = vec![0u8; data.len()];
    assert!(heap.copy_out(0, &mut placed) && placed == data);
    p.s.b.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    p.flush();
    let counters = std::iter::from_fn(|| p.s.b.handle.try_recv())
        .find_map(|ev| match ev {
            EngineEvent::QpReleased { qp: q, counters } if q == qp => Some(counters),
            _ => None,
        })
        .expect("QpReleased");
    let c = counters.expect("the QP's counters");
    assert_eq!(c.bytes_placed, data.len() as u64);
    assert_eq!(c.fpdus_rx, 2);
    // Later publications (and the reaping of the connection) leave the number alone.
    p.s.b.engine.publish();
    p.flush();
    assert!(!p.s.b.handle.qp_stats().contains_key(&qp));
}

/// After `DestroyQp` the control thread has closed the QP's CM id and forgotten the
/// connection and the number (which it may give to a new QP): the connection's end reports
/// nothing more. Here the QP has a Read outstanding, so the destruction aborts it: the peer
/// gets the TERMINATE, then the FIN, TCP closes and reaps the connection, and the only event
/// is `QpReleased` (before, a `QpError` and a `Disconnected` followed as orphans).
#[test]
fn nothing_is_reported_for_a_connection_after_destroy_qp() {
    use iwarp::rdmap::{WorkRequest, WrOpcode};
    let mut p = raw_peer(Duration::from_secs(60));
    let qp = p.establish();
    let sge = Sge {
        mr: p.lkey,
        offset: 0,
        len: 100,
    };
    let mut rd = WorkRequest::new(5, WrOpcode::Read, vec![sge]);
    rd.remote_stag = iwarp::stag::Stag(0x1234_5600);
    p.queues.post_send(rd);
    p.flush();
    p.received();
    p.s.b.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    p.flush();
    let rx = p.received();
    assert!(rx.len() >= 24, "{rx:02x?}");
    assert_eq!(rx[3] & 0x0f, 0x7, "not a Terminate: {rx:02x?}");
    // The stream ends with that one FPDU (MPA length, ULPDU, pad to 4, CRC field; RFC 5044
    // §4), then the FIN (RFC 5040 §7: the TERMINATE is the last message, then the stream
    // closes): the peer's TCP has received everything up to the FIN.
    let ulpdu = usize::from(u16::from_be_bytes([rx[0], rx[1]]));
    assert_eq!(rx.len(), (2 + ulpdu).next_multiple_of(4) + 4, "{rx:02x?}");
    assert_eq!(
        p.s.a.tcp.conn_mut(p.h).unwrap().state(),
        tcp::State::CloseWait,
        "no FIN after the TERMINATE"
    );
    // The peer closes too; the engine's side lets go of the connection (TIME-WAIT included).
    p.s.a.tcp.conn_mut(p.h).unwrap().close();
    p.s.a.touch(p.h);
    p.s.run_until(Duration::from_secs(180), |s| s.b.engine.connections() == 0);
    assert_eq!(p.s.b.engine.connections(), 0, "the connection was reaped");
    let events: Vec<EngineEvent> = std::iter::from_fn(|| p.s.b.handle.try_recv()).collect();
    let [EngineEvent::QpReleased { qp: q, counters }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*q, qp);
    // The abort's TERMINATE, sent after the destruction, is in the QP's final counters.
    let code = iwarp::error::TermCode::from(iwarp::error::RdmapError::LocalCatastrophic);
    let key = (code.layer as u8, code.etype, code.ecode);
    let c = counters.as_deref().expect("the QP's counters");
    assert_eq!(c.terminates_tx.get(&key), Some(&1), "{c:?}");
    assert_eq!(c.terminates_tx.values().sum::<u64>(), 1, "{c:?}");
}

/// A connect still waiting to start (the same poll as the `Connect`) that is destroyed ends
/// silently too: the control thread closed its CM id with the QP.
#[test]
fn destroy_qp_of_a_connect_not_started_reports_only_the_release() {
    let a = Host::new(1, EngineConfig::default(), None);
    let b = Host::new(2, EngineConfig::default(), None);
    let target = b.addr(PORT);
    let mut s = Sim::new(a, b, 17);
    let qp = QpNum(46);
    let conn = s.a.handle.ids.conn();
    let binding = local_binding(qp, &LocalQueues::default());
    let connect = connect_cmd(conn, target, binding);
    s.a.handle.send(0, connect).unwrap();
    s.a.handle.send(0, EngineCmd::DestroyQp { qp }).unwrap();
    s.run_until(Duration::from_millis(50), |_| false);
    let events: Vec<EngineEvent> = std::iter::from_fn(|| s.a.handle.try_recv()).collect();
    assert!(
        matches!(events[..], [EngineEvent::QpReleased { qp: q, .. }] if q == qp),
        "{events:?}"
    );
    assert_eq!(s.a.engine.connections(), 0);
}
