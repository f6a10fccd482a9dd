//! FPDUs from a pair of our QPs running every operation, written into a pcap behind a TCP
//! handshake and an MPA Request/Reply, must decode in tshark without "Malformed" and with
//! good CRCs. Skips loudly only when tshark is not installed.

mod common;

use common::{TcpScript, run_tshark, tshark};
use iwarp::mpa::wire::{FrameKind, IrdOrd, Repr};
use iwarp::rdmap::{QpConfig, QpState, RecvRequest, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, PdId, Stag};
use iwarp::testing::Pair;

const PD: PdId = PdId(1);

fn run_pair(crc: bool, markers: bool) -> Pair {
    let cfg = QpConfig {
        pd: PD,
        crc,
        markers_rx: markers,
        markers_tx: markers,
        ..Default::default()
    };
    let mut p = Pair::new(cfg, cfg, 77);
    p.emss = vec![1448];
    let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
    let a = p.mem_a.register(PD, rw, 0x1000, 32 * 1024);
    let b_recv = p.mem_b.register(PD, rw, 0, 16 * 1024);
    let b_mem = p.mem_b.register(PD, Access::ALL, 0x9000, 16 * 1024);
    for i in 0..4 {
        p.b.post_recv(RecvRequest {
            wr_id: i,
            sges: vec![Sge {
                mr: b_recv.handle,
                offset: i * 4096,
                len: 4096,
            }],
        })
        .unwrap();
    }
    let sge = |offset, len| {
        vec![Sge {
            mr: a.handle,
            offset,
            len,
        }]
    };
    p.a.post_send(WorkRequest::new(1, WrOpcode::Send, sge(0, 3000)))
        .unwrap();
    let mut wr = WorkRequest::new(2, WrOpcode::Write, sge(0, 10_000));
    wr.remote_stag = b_mem.stag;
    wr.remote_to = 0x9000;
    p.a.post_send(wr).unwrap();
    let mut wr = WorkRequest::new(3, WrOpcode::Read, sge(12_000, 5000));
    wr.remote_stag = b_mem.stag;
    wr.remote_to = 0x9000;
    p.a.post_send(wr).unwrap();
    p.drive();
    assert_eq!(p.b.state(), QpState::Rts);
    let mut wr = WorkRequest::new(4, WrOpcode::SendInvalidate, sge(0, 17));
    wr.invalidate = Stag(0x4444_4400); // B cannot invalidate it: B answers with a Terminate.
    p.a.post_send(wr).unwrap();
    p.drive();
    assert_eq!(p.b.state(), QpState::Error);
    p
}

#[test]
fn tshark_decodes_our_rdmap_messages() {
    let Some(ts) = tshark() else {
        eprintln!(
            "\n!!!!! tshark NOT INSTALLED: tshark_decodes_our_rdmap_messages SKIPPED !!!!!\n"
        );
        return;
    };
    // Markers are left out: with markers on, an FPDU that starts exactly at a marker position
    // (stream offset a multiple of 512) is read by Wireshark 4.0 as if the marker closed the
    // previous FPDU, while our framer/deframer put it in front of the new one (FPDUPTR 0).
    // Reported to the MPA owner; our own deframer accepts these streams (tests/pair.rs).
    for (crc, markers) in [(false, false), (true, false)] {
        let p = run_pair(crc, markers);
        let mut t = TcpScript::new(([10, 9, 0, 1], 40_000), ([10, 9, 0, 2], 7174));
        let req = Repr {
            kind: FrameKind::Request,
            markers,
            crc,
            reject: false,
            revision: 2,
            ird_ord: Some(IrdOrd {
                ird: 16,
                ord: 16,
                ..Default::default()
            }),
            ulp_data: &[],
        };
        let rep = Repr {
            kind: FrameKind::Reply,
            ..req
        };
        for (from_client, r) in [(true, req), (false, rep)] {
            let mut b = vec![0u8; r.buffer_len()];
            r.emit(&mut b).unwrap();
            t.send(from_client, &b);
        }
        for f in &p.sent_a {
            t.send(true, f);
        }
        for f in &p.sent_b {
            t.send(false, f);
        }
        let path = std::env::temp_dir().join(format!(
            "iwarp-rdmap-tshark-{}-{crc}-{markers}.pcap",
            std::process::id()
        ));
        std::fs::write(&path, t.pcap.bytes()).unwrap();
        let v = run_tshark(&ts, &path, &["-V"]);
        let label = format!("crc={crc} markers={markers} ({})", path.display());
        assert!(!v.contains("Malformed"), "{label}: malformed");
        assert!(!v.contains("Bad CRC"), "{label}: bad CRC");
        let fpdus = p.sent_a.len() + p.sent_b.len();
        if crc {
            assert_eq!(v.matches("Good CRC32").count(), fpdus, "{label}");
        }
        for op in [
            "Send (0x3)",
            "Write (0x0)",
            "Read Request (0x1)",
            "Read Response (0x2)",
            "Terminate (0x7)",
        ] {
            assert!(v.contains(op), "{label}: no {op}");
        }
        // The Terminate reads as RDMAP / Remote Protection / STag cannot be Invalidated.
        assert!(v.contains("STag cannot be Invalidated"), "{label}");
        if std::env::var("KEEP_PCAP").is_err() {
            std::fs::remove_file(&path).ok();
        }
    }
}
