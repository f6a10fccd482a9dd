//! MPA negotiation: our initiator against our responder over an in-memory pipe, and each of
//! them against the real bytes Linux siw sent in the captures.

mod common;

use common::{connections, read_capture, siw_pcap};
use iwarp::mpa::MpaError;
use iwarp::mpa::startup::{
    CrcPolicy, Established, FirstSend, Outcome, RejectReason, Role, RtrSet, Startup, StartupConfig,
    StartupError,
};
use iwarp::mpa::wire::{KEY_REP, KEY_REQ, Repr, RtrKind, WireError};
use netcore::{Duration, Instant};

const T0: Instant = Instant::from_millis(1000);

/// Run both sides to completion, delivering bytes in `chunk`-sized pieces. Returns both
/// outcomes and what was on the wire each way.
fn pair(
    ic: StartupConfig,
    rc: StartupConfig,
    chunk: usize,
) -> (Option<Outcome>, Option<Outcome>, Vec<u8>, Vec<u8>) {
    let mut i = Startup::new(ic, T0).unwrap();
    let mut r = Startup::new(rc, T0).unwrap();
    let (mut c2s, mut s2c) = (Vec::new(), Vec::new());
    let now = T0 + Duration::from_millis(1);
    for _ in 0..10 {
        if let Some(b) = i.poll_transmit() {
            c2s.extend_from_slice(&b);
            let mut at = 0;
            while at < b.len() {
                let end = (at + chunk).min(b.len());
                let used = r.handle_stream(now, &b[at..end]);
                if used < end - at {
                    break;
                }
                at = end;
            }
        }
        if let Some(b) = r.poll_transmit() {
            s2c.extend_from_slice(&b);
            for piece in b.chunks(chunk) {
                assert_eq!(i.handle_stream(now, piece), piece.len());
            }
        }
    }
    (i.outcome().cloned(), r.outcome().cloned(), c2s, s2c)
}

fn est(o: Option<Outcome>) -> Established {
    match o {
        Some(Outcome::Established(e)) => e,
        other => panic!("not established: {other:?}"),
    }
}

fn init() -> StartupConfig {
    StartupConfig::new(Role::Initiator)
}

fn resp() -> StartupConfig {
    StartupConfig::new(Role::Responder)
}

#[test]
fn default_pair_establishes() {
    for chunk in [1, 3, 24, 1000] {
        let (io, ro, c2s, s2c) = pair(init(), resp(), chunk);
        let (i, r) = (est(io), est(ro));
        assert!(!i.crc && !r.crc && !i.markers_tx && !r.markers_rx);
        assert_eq!((i.ird, i.ord, r.ird, r.ord), (1, 1, 1, 1));
        assert_eq!(i.rtr, None);
        // The initiator waits 50 ms after the Reply; the responder never sends first.
        assert_eq!(
            i.first_send,
            FirstSend::NotBefore(T0 + Duration::from_millis(51))
        );
        assert_eq!(r.first_send, FirstSend::AfterPeerFpdu);
        // Same bytes as siw's rping Request/Reply.
        let mut want = KEY_REQ.to_vec();
        want.extend_from_slice(&[0x10, 2, 0, 4, 0, 1, 0, 1]);
        assert_eq!(c2s, want);
        assert_eq!(&s2c[..16], KEY_REP);
        assert_eq!(&s2c[16..], &want[16..]);
    }
}

#[test]
fn fpdu_bytes_after_the_frame_are_not_consumed() {
    let mut r = Startup::new(resp(), T0).unwrap();
    let mut i = Startup::new(init(), T0).unwrap();
    let mut req = i.poll_transmit().unwrap();
    req.extend_from_slice(&[0, 14, 1, 2, 3]);
    assert_eq!(r.handle_stream(T0, &req), 24);
    let mut rep = r.poll_transmit().unwrap();
    rep.extend_from_slice(&[9, 9]);
    assert_eq!(i.handle_stream(T0, &rep[..10]), 10);
    assert_eq!(i.handle_stream(T0, &rep[10..]), 14);
    assert!(matches!(i.outcome(), Some(Outcome::Established(_))));
    assert_eq!(i.handle_stream(T0, &[1, 2]), 0);
}

#[test]
fn crc_policy_matrix() {
    use CrcPolicy::*;
    for (ip, rp, want) in [
        (Never, Never, Some(false)),
        (Never, IfPeerAsks, Some(false)),
        (IfPeerAsks, IfPeerAsks, Some(false)),
        (Always, IfPeerAsks, Some(true)),
        (IfPeerAsks, Always, Some(true)),
        (Always, Always, Some(true)),
        (Always, Never, None),
        (Never, Always, None),
        (Require, IfPeerAsks, Some(true)),
        (Require, Always, Some(true)),
        (IfPeerAsks, Require, None),
        (Always, Require, Some(true)),
        (Require, Never, None),
    ] {
        let (io, ro, _, _) = pair(
            StartupConfig { crc: ip, ..init() },
            StartupConfig { crc: rp, ..resp() },
            7,
        );
        match want {
            Some(crc) => {
                assert_eq!(est(io).crc, crc, "{ip:?}/{rp:?}");
                assert_eq!(est(ro).crc, crc, "{ip:?}/{rp:?}");
            }
            None => {
                let failed = [io, ro].into_iter().any(|o| {
                    matches!(
                        o,
                        Some(Outcome::Failed(
                            StartupError::Refused(RejectReason::Crc)
                                | StartupError::Incompatible(RejectReason::Crc)
                        ))
                    )
                });
                assert!(failed, "{ip:?}/{rp:?}");
            }
        }
    }
}

#[test]
fn markers_per_direction() {
    let (io, ro, _, _) = pair(
        StartupConfig {
            markers_rx: true,
            ..init()
        },
        resp(),
        5,
    );
    let (i, r) = (est(io), est(ro));
    assert!(i.markers_rx && !i.markers_tx && r.markers_tx && !r.markers_rx);
    // Responder that cannot send markers refuses (as siw does); the initiator sees a Reject.
    let (io, ro, _, s2c) = pair(
        StartupConfig {
            markers_rx: true,
            ..init()
        },
        StartupConfig {
            markers_tx_supported: false,
            ..resp()
        },
        5,
    );
    assert_eq!(
        io,
        Some(Outcome::Rejected {
            peer_private_data: vec![]
        })
    );
    assert_eq!(
        ro,
        Some(Outcome::Failed(StartupError::Refused(
            RejectReason::Markers
        )))
    );
    // Same Reject bytes as siw's (mpa_negotiation.pcap frame 26).
    assert_eq!(&s2c[16..], &[0x30, 2, 0, 4, 0, 0, 0, 0]);
}

#[test]
fn peer_to_peer_rtr_choice() {
    let p2p = |rtr| StartupConfig {
        p2p: true,
        rtr,
        ..init()
    };
    let all = RtrSet::default();
    let only = |w, r, s| RtrSet {
        write: w,
        read: r,
        send: s,
    };
    // Offer everything: Write wins (siw's preference).
    let (io, ro, c2s, s2c) = pair(
        p2p(all),
        StartupConfig {
            p2p: true,
            ..resp()
        },
        24,
    );
    assert_eq!(&c2s[20..], &[0xc0, 0x01, 0xc0, 0x01]); // P+S, W+R
    assert_eq!(&s2c[20..], &[0x80, 0x01, 0x80, 0x01]); // P, W
    assert_eq!(est(io).rtr, Some(RtrKind::Write));
    assert_eq!(est(ro).rtr, Some(RtrKind::Write));
    // Responder accepting only Read.
    let (io, ro, _, _) = pair(
        p2p(all),
        StartupConfig {
            p2p: true,
            rtr: only(false, true, false),
            ..resp()
        },
        24,
    );
    assert_eq!(
        (est(io).rtr, est(ro).rtr),
        (Some(RtrKind::Read), Some(RtrKind::Read))
    );
    // Send only, both sides.
    let (io, ro, _, _) = pair(
        p2p(only(false, false, true)),
        StartupConfig {
            p2p: true,
            rtr: only(false, false, true),
            ..resp()
        },
        24,
    );
    assert_eq!(
        (est(io).rtr, est(ro).rtr),
        (Some(RtrKind::Send), Some(RtrKind::Send))
    );
    // Nothing in common: refused with "no matching RTR" (RFC 6581 ecode 0x07).
    let (io, ro, _, _) = pair(
        p2p(only(false, false, true)),
        StartupConfig {
            p2p: true,
            rtr: only(true, true, false),
            ..resp()
        },
        24,
    );
    assert_eq!(
        io,
        Some(Outcome::Rejected {
            peer_private_data: vec![]
        })
    );
    assert_eq!(
        ro,
        Some(Outcome::Failed(StartupError::Mpa(MpaError::NoMatchingRtr)))
    );
    // Responder not doing p2p: no RTR either side.
    let (io, ro, _, _) = pair(p2p(all), resp(), 24);
    assert_eq!((est(io).rtr, est(ro).rtr), (None, None));
}

#[test]
fn ird_ord_negotiation() {
    // siw: 200/200 -> 128/128 (responder caps at 128 and swaps).
    let (io, ro, _, s2c) = pair(
        StartupConfig {
            ird: 200,
            ord: 200,
            ..init()
        },
        StartupConfig { ord: 128, ..resp() },
        9,
    );
    assert_eq!(&s2c[20..], &[0, 128, 0, 128]);
    let (i, r) = (est(io), est(ro));
    assert_eq!((r.ird, r.ord), (128, 128));
    assert_eq!((i.ird, i.ord), (200, 128));
    // rsockets: request 0/1 -> reply 1/0.
    let (io, ro, _, s2c) = pair(
        StartupConfig {
            ird: 0,
            ord: 1,
            ..init()
        },
        StartupConfig { ird: 0, ..resp() },
        9,
    );
    assert_eq!(&s2c[20..], &[0, 1, 0, 0]);
    let (i, r) = (est(io), est(ro));
    assert_eq!((r.ird, r.ord), (1, 0));
    assert_eq!((i.ird, i.ord), (0, 1));
    // Strict responder refuses an ORD above its IRD cap.
    let (io, ro, _, _) = pair(
        StartupConfig { ord: 300, ..init() },
        StartupConfig {
            strict_ird: true,
            ird_cap: 16,
            ..resp()
        },
        9,
    );
    assert_eq!(
        io,
        Some(Outcome::Rejected {
            peer_private_data: vec![]
        })
    );
    assert_eq!(
        ro,
        Some(Outcome::Failed(StartupError::Mpa(
            MpaError::InsufficientIrd
        )))
    );
}

#[test]
fn revisions() {
    // Revision 1: no IRD/ORD words, reply echoes revision 1.
    let (io, ro, c2s, s2c) = pair(
        StartupConfig {
            revision: 1,
            ..init()
        },
        resp(),
        4,
    );
    assert_eq!(&c2s[16..], &[0, 1, 0, 0]);
    assert_eq!(&s2c[16..], &[0, 1, 0, 0]);
    assert_eq!(est(io).revision, 1);
    assert_eq!(est(ro).revision, 1);
    // Revision 3 refused by a revision-2 responder.
    let (io, ro, _, _) = pair(
        StartupConfig {
            revision: 3,
            ..init()
        },
        resp(),
        4,
    );
    assert_eq!(
        io,
        Some(Outcome::Rejected {
            peer_private_data: vec![]
        })
    );
    assert_eq!(
        ro,
        Some(Outcome::Failed(StartupError::Refused(
            RejectReason::Revision(3)
        )))
    );
    // Revision-2 initiator against a revision-1-only responder.
    let (_, ro, _, _) = pair(
        init(),
        StartupConfig {
            revision: 1,
            ..resp()
        },
        4,
    );
    assert_eq!(
        ro,
        Some(Outcome::Failed(StartupError::Refused(
            RejectReason::Revision(2)
        )))
    );
}

#[test]
fn application_accept_and_reject_with_private_data() {
    let ic = StartupConfig {
        private_data: b"hello".to_vec(),
        ..init()
    };
    let rc = StartupConfig {
        auto_accept: false,
        ..resp()
    };
    let mut i = Startup::new(ic.clone(), T0).unwrap();
    let mut r = Startup::new(rc.clone(), T0).unwrap();
    let req = i.poll_transmit().unwrap();
    assert_eq!(r.handle_stream(T0, &req), req.len());
    assert_eq!(r.peer_request().unwrap().private_data, b"hello");
    assert!(r.poll_transmit().is_none());
    assert!(r.accept(&[7u8; 253]).is_err(), "more than 252 octets");
    r.accept(b"world").unwrap();
    let rep = r.poll_transmit().unwrap();
    i.handle_stream(T0, &rep);
    assert_eq!(est(i.outcome().cloned()).peer_private_data, b"world");
    assert_eq!(est(r.outcome().cloned()).peer_private_data, b"hello");

    let mut i = Startup::new(ic, T0).unwrap();
    let mut r = Startup::new(rc, T0).unwrap();
    r.handle_stream(T0, &i.poll_transmit().unwrap());
    r.reject(b"go away").unwrap();
    assert!(r.accept(b"").is_err());
    i.handle_stream(T0, &r.poll_transmit().unwrap());
    assert_eq!(
        i.outcome(),
        Some(&Outcome::Rejected {
            peer_private_data: b"go away".to_vec()
        })
    );
    // Outgoing private data above the limit is refused up front.
    let big = StartupConfig {
        private_data: vec![0; 253],
        ..init()
    };
    assert!(Startup::new(big, T0).is_err());
}

#[test]
fn accept_time_crc_choice_sets_c_in_the_reply() {
    // A listener that only follows the peer, an initiator that does not ask (stock siw), and
    // an application that asks for CRC when accepting: the Reply carries C and both use CRC
    // (RFC 5044 §7.1). Seen live: siw's rping -c against iwarp-rping -s --crc on.
    let rc = StartupConfig {
        auto_accept: false,
        crc: CrcPolicy::IfPeerAsks,
        ..resp()
    };
    let mut i = Startup::new(init(), T0).unwrap();
    let mut r = Startup::new(rc, T0).unwrap();
    assert!(
        r.set_crc_policy(CrcPolicy::Always).is_err(),
        "no request yet"
    );
    r.handle_stream(T0, &i.poll_transmit().unwrap());
    r.set_crc_policy(CrcPolicy::Always).unwrap();
    r.accept(b"").unwrap();
    let rep = r.poll_transmit().unwrap();
    assert_eq!(rep[16] & 0x40, 0x40, "C bit of the Reply");
    i.handle_stream(T0, &rep);
    assert!(est(i.outcome().cloned()).crc);
    assert!(est(r.outcome().cloned()).crc);
}

#[test]
fn timeouts() {
    let i = Startup::new(init(), T0).unwrap();
    assert_eq!(i.poll_timeout(), Some(T0 + Duration::from_secs(5)));
    let mut i = i;
    i.handle_timeout(T0 + Duration::from_millis(4999));
    assert!(i.outcome().is_none());
    i.handle_timeout(T0 + Duration::from_secs(5));
    assert_eq!(i.outcome(), Some(&Outcome::Failed(StartupError::Timeout)));
    assert_eq!(i.poll_timeout(), None);
    let mut r = Startup::new(resp(), T0).unwrap();
    assert_eq!(r.poll_timeout(), Some(T0 + Duration::from_secs(10)));
    r.handle_timeout(T0 + Duration::from_secs(10));
    assert_eq!(r.outcome(), Some(&Outcome::Failed(StartupError::Timeout)));
}

#[test]
fn malformed_input() {
    // Not MPA at all.
    let mut r = Startup::new(resp(), T0).unwrap();
    r.handle_stream(T0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        r.outcome(),
        Some(&Outcome::Failed(StartupError::Malformed(WireError::BadKey)))
    );
    // A Reply sent to a responder.
    let mut r = Startup::new(resp(), T0).unwrap();
    let mut rep = KEY_REP.to_vec();
    rep.extend_from_slice(&[0, 1, 0, 0]);
    r.handle_stream(T0, &rep);
    assert!(matches!(
        r.outcome(),
        Some(Outcome::Failed(StartupError::Malformed(_)))
    ));
    // Private data above the limit: responder rejects without reading it.
    let mut r = Startup::new(
        StartupConfig {
            max_peer_private_data: 256,
            ..resp()
        },
        T0,
    )
    .unwrap();
    let mut req = KEY_REQ.to_vec();
    req.extend_from_slice(&[0x10, 2, 0x01, 0x2c]); // 300
    assert_eq!(r.handle_stream(T0, &req), 20);
    assert_eq!(
        r.outcome(),
        Some(&Outcome::Failed(StartupError::Refused(
            RejectReason::PrivateDataTooLong(300)
        )))
    );
    assert!(
        r.poll_transmit().unwrap()[16] & 0x20 != 0,
        "a Reject is sent"
    );
    // Enhanced with pd_len < 4: Reject (siw does the same).
    let mut r = Startup::new(resp(), T0).unwrap();
    let mut req = KEY_REQ.to_vec();
    req.extend_from_slice(&[0x10, 2, 0, 2, 0, 1]);
    r.handle_stream(T0, &req);
    assert_eq!(
        r.outcome(),
        Some(&Outcome::Failed(StartupError::Refused(
            RejectReason::MissingIrdOrd
        )))
    );
}

/// Our responder, fed every Request that siw's initiator (or the independent initiator) sent
/// in the captures, answers exactly as siw's responder did whenever siw accepted.
#[test]
fn responder_matches_siw_replies() {
    let mut n = 0;
    for path in common::siw_pcaps() {
        let bytes = std::fs::read(&path).unwrap();
        for c in connections(&read_capture(&bytes)) {
            let (Ok((q, ql)), Ok((p, pl))) = (
                Repr::parse_bytes(&c.c2s.stream),
                Repr::parse_bytes(&c.s2c.stream),
            ) else {
                continue;
            };
            if p.reject || q.ird_ord.is_none() {
                continue;
            }
            // siw's responder: IRD at least the app's responder resources (perftest/rping
            // use what the initiator asks), cap 128, ORD up to 128, p2p with Write/Read.
            // The mpa_resp_* captures have the independent responder, run with --crc there.
            let crc = if p.crc && !q.crc {
                CrcPolicy::Always
            } else {
                CrcPolicy::IfPeerAsks
            };
            let cfg = StartupConfig {
                crc,
                ird: 0,
                ord: 128,
                p2p: true,
                rtr: RtrSet {
                    write: true,
                    read: true,
                    send: false,
                },
                private_data: p.ulp_data.to_vec(),
                ..resp()
            };
            let mut r = Startup::new(cfg, T0).unwrap();
            assert_eq!(r.handle_stream(T0, &c.c2s.stream[..ql]), ql);
            let ours = r.poll_transmit().unwrap();
            assert_eq!(
                ours,
                &c.s2c.stream[..pl],
                "{}: {q} -> siw {p}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 20, "only {n} exchanges compared");
}

/// Our initiator accepts every Reply siw sent and derives the same parameters.
#[test]
fn initiator_accepts_siw_replies() {
    let bytes = std::fs::read(siw_pcap("mpa_negotiation.pcap")).unwrap();
    let mut n = 0;
    for c in connections(&read_capture(&bytes)) {
        let (Ok((q, ql)), Ok((_, pl))) = (
            Repr::parse_bytes(&c.c2s.stream),
            Repr::parse_bytes(&c.s2c.stream),
        ) else {
            continue;
        };
        let io = q.ird_ord.unwrap_or_default();
        let cfg = StartupConfig {
            revision: q.revision,
            enhanced: q.ird_ord.is_some(),
            crc: if q.crc {
                CrcPolicy::Always
            } else {
                CrcPolicy::IfPeerAsks
            },
            markers_rx: q.markers,
            ird: io.ird,
            ord: io.ord,
            p2p: io.p2p,
            rtr: RtrSet {
                write: io.rtr_write,
                read: io.rtr_read,
                send: io.rtr_send,
            },
            private_data: q.ulp_data.to_vec(),
            ..init()
        };
        let mut i = Startup::new(cfg, T0).unwrap();
        // Our Request is byte-identical to the one in the capture.
        assert_eq!(i.poll_transmit().unwrap(), &c.c2s.stream[..ql]);
        assert_eq!(i.handle_stream(T0, &c.s2c.stream), pl);
        match i.outcome().unwrap() {
            Outcome::Established(e) => {
                assert_eq!(e.crc, q.crc);
                if io.p2p {
                    // siw picks Write when offered, else Read.
                    let want = if io.rtr_write {
                        RtrKind::Write
                    } else {
                        RtrKind::Read
                    };
                    assert_eq!(e.rtr, Some(want));
                }
            }
            Outcome::Rejected { .. } => assert!(q.markers, "siw rejects only the M=1 request"),
            o => panic!("{o:?}"),
        }
        n += 1;
    }
    assert!(n >= 8);
}
