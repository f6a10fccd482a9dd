//! Endpoint-level behaviour: demultiplexing, accept queue, backlog, ISNs (RFC 6528),
//! and aggregate statistics.

#![allow(clippy::collapsible_if)]

#[path = "script/mod.rs"]
mod script;

use netcore::Instant;
use script::{Hdr, LOCAL, REMOTE, build_segment};
use tcp::{ChecksumMode, Dispatch, Endpoint, NoData, State, TcpConfig};

fn syn(sport: u16, seq: u32) -> Vec<u8> {
    let h = Hdr {
        src_port: sport,
        dst_port: 80,
        seq,
        ack: None,
        syn: true,
        fin: false,
        rst: false,
        psh: false,
        window: 65535,
        mss: Some(1460),
        ws: None,
        sack_perm: false,
        sack: [None; 3],
        ts: None,
    };
    build_segment(&h, &[], false)
}

/// RFC 9293 §3.10.7.2: each SYN on a listening port creates its own connection, keyed by
/// the 4-tuple; RFC 6528: the ISNs differ per tuple.
#[test]
fn listener_demuxes_by_tuple_with_distinct_isns() {
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), LOCAL, [9; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    let mut handles = Vec::new();
    for port in 1000..1010 {
        let s = syn(port, 77);
        let n = s.len();
        match ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) {
            Dispatch::NewConn(h) => handles.push(h),
            d => panic!("unexpected {d:?}"),
        }
    }
    let isns: std::collections::HashSet<u32> = handles
        .iter()
        .map(|h| ep.conn(*h).unwrap().iss().0)
        .collect();
    assert_eq!(isns.len(), 10);
    for h in &handles {
        assert_eq!(ep.conn(*h).unwrap().state(), State::SynReceived);
    }
    // Not accepted before the handshake completes.
    assert_eq!(ep.accept(), None);
    // A duplicate SYN goes to the existing connection.
    let s = syn(1000, 77);
    let n = s.len();
    assert_eq!(
        ep.handle_segment(now, REMOTE, LOCAL, s, 0..n),
        Dispatch::Conn(handles[0])
    );
    // Each emits its SYN-ACK.
    let mut buf = vec![0u8; 1600];
    let mut count = 0;
    while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {
        count += 1;
    }
    assert_eq!(count, 10);
    assert_eq!(ep.stats().segs_out, 10);
    // Abort them all: the RSTs are sent, the Closed events must be polled before reaping.
    for h in &handles {
        ep.conn_mut(*h).unwrap().abort();
    }
    while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {}
    assert_eq!(ep.reap_closed(), 0);
    for h in &handles {
        let c = ep.conn_mut(*h).unwrap();
        assert_eq!(
            c.poll_event(),
            Some(tcp::Event::Closed(tcp::CloseReason::Aborted))
        );
    }
    assert_eq!(ep.reap_closed(), 10);
    assert!(ep.handles().is_empty());
    // Counters survive reaping.
    assert_eq!(ep.stats().resets_sent, 10);
}

/// `syn_backlog` bounds half-open connections; with SYN cookies off, extra SYNs are dropped.
#[test]
fn backlog_bounds_half_open() {
    let cfg = TcpConfig {
        syn_backlog: 3,
        syn_cookies: false,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [1; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    let mut created = 0;
    for port in 2000..2010 {
        let s = syn(port, 1);
        let n = s.len();
        if let Dispatch::NewConn(_) = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) {
            created += 1;
        }
    }
    assert_eq!(created, 3);
}

/// Segments for another local address are dropped, never answered (RFC 9293 §3.10.7.1 only
/// applies to segments addressed to us).
#[test]
fn foreign_destination_dropped() {
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(
        TcpConfig {
            checksum: ChecksumMode::Offloaded,
            ..TcpConfig::default()
        },
        LOCAL,
        [1; 16],
    );
    let s = syn(3000, 1);
    let n = s.len();
    let other = smoltcp::wire::Ipv4Address::new(10, 9, 9, 9);
    assert_eq!(
        ep.handle_segment(Instant::ZERO, REMOTE, other, s, 0..n),
        Dispatch::Dropped
    );
    let mut buf = vec![0u8; 100];
    assert!(ep.poll_transmit(&mut buf).is_none());
}

/// Malformed input (truncated header, bad data offset) is dropped and counted, never panics.
#[test]
fn malformed_segments_counted() {
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), LOCAL, [1; 16]);
    ep.listen(80);
    let mut s = syn(4000, 1);
    let n = s.len();
    assert_eq!(
        ep.handle_segment(Instant::ZERO, REMOTE, LOCAL, s.clone(), 0..10),
        Dispatch::Dropped
    );
    assert_eq!(
        ep.handle_segment(Instant::ZERO, REMOTE, LOCAL, s.clone(), 0..n + 5),
        Dispatch::Dropped
    );
    s[12] = 0xf0; // data offset 60 > length
    assert_eq!(
        ep.handle_segment(Instant::ZERO, REMOTE, LOCAL, s, 0..n),
        Dispatch::Dropped
    );
    let st = ep.stats();
    assert_eq!(st.malformed + st.bad_checksum, 3);
}

/// Untrusted bytes never panic: random mutations of valid segments (checksums not
/// verified, so they reach the state machine) against a listener and its connections.
#[test]
fn random_segments_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let cfg = TcpConfig {
        checksum: ChecksumMode::Offloaded,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [3; 16]);
    ep.listen(80);
    let mut buf = vec![0u8; 1600];
    let mut now = Instant::ZERO;
    for i in 0..20_000u32 {
        now += netcore::Duration::from_micros(300);
        let mut h = Hdr {
            src_port: 5000 + (i % 4) as u16,
            dst_port: 80,
            seq: rng.r#gen(),
            ack: if rng.gen_bool(0.7) {
                Some(rng.r#gen())
            } else {
                None
            },
            syn: rng.gen_bool(0.2),
            fin: false,
            rst: false,
            psh: false,
            window: rng.r#gen(),
            mss: if rng.gen_bool(0.3) {
                Some(rng.r#gen())
            } else {
                None
            },
            ws: if rng.gen_bool(0.3) {
                Some(rng.gen_range(0..20))
            } else {
                None
            },
            sack_perm: rng.gen_bool(0.3),
            sack: [None; 3],
            ts: if rng.gen_bool(0.5) {
                Some((rng.r#gen(), rng.r#gen()))
            } else {
                None
            },
        };
        if !h.syn {
            h.fin = rng.gen_bool(0.1);
            h.rst = !h.fin && rng.gen_bool(0.05);
            if rng.gen_bool(0.3) {
                h.sack[0] = Some((rng.r#gen(), rng.r#gen()));
            }
        }
        let payload: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.r#gen()).collect();
        let mut seg = build_segment(&h, &payload, false);
        for _ in 0..rng.gen_range(0..3) {
            let j = rng.gen_range(0..seg.len());
            seg[j] = rng.r#gen();
        }
        let n = seg.len();
        let cut = if rng.gen_bool(0.1) {
            rng.gen_range(0..n)
        } else {
            n
        };
        let _ = ep.handle_segment(now, REMOTE, LOCAL, seg, 0..cut);
        ep.handle_timeout(now);
        while ep.poll_transmit(&mut buf).is_some() {}
        while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {}
        for h in ep.handles() {
            if let Some(c) = ep.conn_mut(h) {
                while c.poll_readable().is_some() {}
                while c.poll_event().is_some() {}
                if c.is_closed() {
                    ep.reap(h);
                }
            }
        }
    }
}

/// Deeper fuzzing: after a real handshake, random segments with sequence and
/// acknowledgment numbers near the live window (so they pass the acceptability tests and
/// drive every state), random flags, options, SACK blocks, data and app calls.
/// Checks invariants instead of exact output; never panics.
#[test]
fn random_in_window_segments_keep_invariants() {
    use rand::{Rng, SeedableRng};
    for seed in 0..20u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cfg = TcpConfig {
            checksum: ChecksumMode::Offloaded,
            recv_window: 20_000,
            max_ooo_bytes: 30_000,
            time_wait: netcore::Duration::from_millis(50),
            ..TcpConfig::default()
        };
        let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [5; 16]);
        ep.listen(80);
        let peer_isn: u32 = rng.r#gen();
        let mut now = Instant::from_millis(1);
        let s = syn(7000, peer_isn);
        let n = s.len();
        let Dispatch::NewConn(hd) = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) else {
            panic!("no conn")
        };
        let iss = ep.conn(hd).unwrap().iss().0;
        let mut buf = vec![0u8; 1600];
        let mut src = |_: u64, d: &mut [u8]| d.fill(0xab);
        let mut peer_nxt = peer_isn.wrapping_add(1);
        for _ in 0..3000 {
            now += netcore::Duration::from_micros(rng.gen_range(0..3000));
            let c = match ep.conn_mut(hd) {
                Some(c) if !c.is_closed() => c,
                _ => break,
            };
            match rng.gen_range(0..20) {
                0 => {
                    let _ = c.send(rng.gen_range(0..5000));
                }
                1 => {
                    let _ = c.send_record(rng.gen_range(1..3000));
                }
                2 if rng.gen_bool(0.05) => c.close(),
                3 if rng.gen_bool(0.01) => c.abort(),
                _ => {}
            }
            let acked = c.acked_offset();
            let queued = c.queued_offset();
            let len = rng.gen_range(0..1500usize);
            let h = Hdr {
                src_port: 7000,
                dst_port: 80,
                seq: peer_nxt
                    .wrapping_add(rng.gen_range(0..4000))
                    .wrapping_sub(rng.gen_range(0..2000)),
                ack: Some(
                    iss.wrapping_add(1)
                        .wrapping_add((acked + rng.gen_range(0..=queued - acked + 1)) as u32),
                ),
                syn: rng.gen_bool(0.02),
                fin: rng.gen_bool(0.05),
                rst: rng.gen_bool(0.01),
                psh: false,
                window: rng.r#gen(),
                mss: None,
                ws: None,
                sack_perm: false,
                sack: if rng.gen_bool(0.3) {
                    let l = iss
                        .wrapping_add(1)
                        .wrapping_add(rng.gen_range(0..(queued as u32 + 2)));
                    [
                        Some((l, l.wrapping_add(rng.gen_range(0..3000)))),
                        None,
                        None,
                    ]
                } else {
                    [None; 3]
                },
                ts: None,
            };
            let (h, payload) = if h.syn {
                (
                    Hdr {
                        fin: false,
                        rst: false,
                        ..h
                    },
                    vec![],
                )
            } else {
                (h, vec![7u8; len])
            };
            let h = if h.fin && h.rst {
                Hdr { rst: false, ..h }
            } else {
                h
            };
            if rng.gen_bool(0.5) {
                peer_nxt = h.seq.wrapping_add(payload.len() as u32);
            }
            let seg = build_segment(&h, &payload, false);
            let n = seg.len();
            let _ = ep.handle_segment(now, REMOTE, LOCAL, seg, 0..n);
            ep.handle_timeout(now);
            while ep.poll_transmit(&mut buf).is_some() {}
            if let Some(c) = ep.conn_mut(hd) {
                while let Some(t) = c.poll_transmit(now, &mut buf, &mut src) {
                    assert!(t.len <= buf.len());
                }
                assert!(c.acked_offset() <= c.queued_offset());
                assert!(
                    c.readable_bytes() <= 20_000 + 1500,
                    "seed {seed}: receive buffer overrun"
                );
                assert!(c.ooo_bytes() <= 30_000);
                if rng.gen_bool(0.3) {
                    while c.poll_readable().is_some() {}
                }
                while c.poll_event().is_some() {}
            }
        }
    }
}

/// Generational handles (issue 7): a closed connection whose events were never polled keeps
/// its slot and its events when a new SYN reuses the 4-tuple; the new connection gets its own
/// handle; once the old one is reaped its handle finds nothing, even after the slot is reused.
#[test]
fn stale_handles_never_reach_another_connection() {
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), LOCAL, [5; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    let s = syn(3000, 10);
    let n = s.len();
    let Dispatch::NewConn(old) = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) else {
        panic!("no connection")
    };
    ep.conn_mut(old).unwrap().abort();
    let mut buf = vec![0u8; 1600];
    while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {}
    // A new SYN on the same 4-tuple while the old one's Closed event is unpolled.
    let s = syn(3000, 5000);
    let n = s.len();
    let Dispatch::NewConn(new) = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) else {
        panic!("no new connection")
    };
    assert_ne!(old, new);
    assert_eq!(ep.conn(new).unwrap().state(), State::SynReceived);
    // The old handle still reaches the old connection and its event.
    assert_eq!(
        ep.conn_mut(old).unwrap().poll_event(),
        Some(tcp::Event::Closed(tcp::CloseReason::Aborted))
    );
    // Segments of the 4-tuple go to the new connection.
    let s = syn(3000, 5000);
    let n = s.len();
    assert_eq!(
        ep.handle_segment(now, REMOTE, LOCAL, s, 0..n),
        Dispatch::Conn(new)
    );
    assert!(ep.reap(old).is_some());
    assert!(ep.conn(old).is_none() && ep.reap(old).is_none());
    // The freed slot is reused by the next connection: the stale handle still finds nothing.
    let s = syn(3001, 1);
    let n = s.len();
    let Dispatch::NewConn(third) = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n) else {
        panic!("no third connection")
    };
    assert_eq!(third.index(), old.index());
    assert_ne!(third.generation(), old.generation());
    assert!(ep.conn(old).is_none() && ep.conn_mut(old).is_none());
    assert_eq!(ep.conn(new).unwrap().state(), State::SynReceived);
    assert_eq!(ep.handles().len(), 2);
}

/// Segments of two connections interleaved reach each its own connection, and the tuple of
/// a reaped connection reaches nothing, not the connection that took its slot (the endpoint
/// remembers the last tuple it dispatched by).
#[test]
fn dispatch_follows_the_tuple_through_reaps() {
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), LOCAL, [5; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    // A SYN from `port` (a new connection, or a duplicate one of an existing connection).
    let syn_from = |ep: &mut Endpoint<Vec<u8>>, port| {
        let s = syn(port, 10);
        let n = s.len();
        ep.handle_segment(now, REMOTE, LOCAL, s, 0..n)
    };
    let open = |ep: &mut Endpoint<Vec<u8>>, port| match syn_from(ep, port) {
        Dispatch::NewConn(h) => h,
        d => panic!("no connection: {d:?}"),
    };
    let a = open(&mut ep, 3000);
    let b = open(&mut ep, 3001);
    for (port, h) in [
        (3000, a),
        (3000, a),
        (3001, b),
        (3000, a),
        (3001, b),
        (3001, b),
    ] {
        assert_eq!(syn_from(&mut ep, port), Dispatch::Conn(h));
    }
    // `a` was the last dispatched: abort it, and a new SYN on its tuple opens `a2`, which
    // then gets the tuple's segments.
    assert_eq!(syn_from(&mut ep, 3000), Dispatch::Conn(a));
    ep.conn_mut(a).unwrap().abort();
    let mut buf = vec![0u8; 1600];
    while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {}
    let a2 = open(&mut ep, 3000);
    for _ in 0..2 {
        assert_eq!(syn_from(&mut ep, 3000), Dispatch::Conn(a2));
    }
    // Reap both: a new connection takes a slot of theirs.
    ep.conn_mut(a2).unwrap().abort();
    while ep.poll_transmit_all(now, &mut buf, &mut NoData).is_some() {}
    assert!(ep.reap(a).is_some() && ep.reap(a2).is_some());
    let c = open(&mut ep, 3002);
    assert!(c.index() == a.index() || c.index() == a2.index());
    // A bare ACK on the reaped tuple: answered with a reset by the endpoint, never `c`'s.
    let h = Hdr {
        src_port: 3000,
        dst_port: 80,
        seq: 11,
        ack: Some(1),
        ..Default::default()
    };
    let s = build_segment(&h, &[], false);
    let n = s.len();
    let d = ep.handle_segment(now, REMOTE, LOCAL, s, 0..n);
    assert!(
        !matches!(d, Dispatch::Conn(_) | Dispatch::NewConn(_)),
        "{d:?}"
    );
    assert_eq!(syn_from(&mut ep, 3002), Dispatch::Conn(c));
}

fn seg(
    sport: u16,
    seq: u32,
    ack: Option<u32>,
    syn: bool,
    ts: Option<(u32, u32)>,
    payload: &[u8],
) -> Vec<u8> {
    let h = Hdr {
        src_port: sport,
        dst_port: 80,
        seq,
        ack,
        syn,
        fin: false,
        rst: false,
        psh: false,
        window: 1000,
        mss: syn.then_some(1460),
        ws: syn.then_some(5),
        sack_perm: syn,
        sack: [None; 3],
        ts,
    };
    build_segment(&h, payload, false)
}

fn deliver(ep: &mut Endpoint<Vec<u8>>, now: Instant, s: Vec<u8>) -> Dispatch {
    let n = s.len();
    ep.handle_segment(now, REMOTE, LOCAL, s, 0..n)
}

/// The endpoint-level segments queued (cookie SYN-ACKs, resets), parsed.
fn endpoint_out(ep: &mut Endpoint<Vec<u8>>) -> Vec<tcp::SegmentHeader> {
    let mut buf = vec![0u8; 100];
    let mut v = Vec::new();
    while let Some(t) = ep.poll_transmit(&mut buf) {
        v.push(tcp::parse_segment(&buf, 0..t.len, LOCAL, REMOTE, ChecksumMode::Software).unwrap());
    }
    v
}

/// RFC 4987 §3.6: once `syn_backlog` half-open connections wait, SYNs are answered with a
/// cookie SYN-ACK and no state; the handshake's ACK creates the connection, with the MSS,
/// window scale and SACK the cookie and the timestamp echo remember, and its data is taken.
/// A forged ACK is answered with a reset (RFC 9293 §3.10.7.2).
#[test]
fn syn_cookies_once_the_half_open_queue_is_full() {
    let cfg = TcpConfig {
        syn_backlog: 3,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [6; 16]);
    ep.listen(80);
    let now = Instant::from_millis(10_000);
    for port in 5000..5003 {
        let d = deliver(&mut ep, now, seg(port, 100, None, true, Some((7, 0)), &[]));
        assert!(matches!(d, Dispatch::NewConn(_)), "{d:?}");
    }
    for port in 5003..5005 {
        let d = deliver(&mut ep, now, seg(port, 100, None, true, Some((7, 0)), &[]));
        assert_eq!(d, Dispatch::Cookie);
    }
    let out = endpoint_out(&mut ep);
    assert_eq!(out.len(), 2);
    let sa = &out[0];
    assert!(sa.syn && sa.ack == Some(netcore::Seq32(101)));
    assert_eq!(
        (sa.mss, sa.wscale, sa.sack_permitted),
        (Some(1460), Some(7), true)
    );
    let (tsval, tsecr) = sa.timestamp.unwrap();
    assert_eq!(tsecr, 7);
    assert_eq!(ep.handles().len(), 3, "no state for cookie SYNs");
    assert_eq!(ep.stats().syn_cookies_sent, 2);
    // The handshake's ACK, with data: a connection appears, established, with the options.
    let iss = sa.seq.0;
    let later = Instant::from_millis(10_050);
    let d = deliver(
        &mut ep,
        later,
        seg(
            5003,
            101,
            Some(iss.wrapping_add(1)),
            false,
            Some((8, tsval)),
            b"hello",
        ),
    );
    let Dispatch::NewConn(h) = d else {
        panic!("cookie ACK not accepted: {d:?}")
    };
    let c = ep.conn_mut(h).unwrap();
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.negotiated(), (true, true, 5, 7));
    assert_eq!(c.emss(), 1448);
    let (b, r) = c.poll_readable().unwrap();
    assert_eq!(&b[r], b"hello");
    assert_eq!(ep.accept(), Some(h));
    assert_eq!(ep.stats().syn_cookies_accepted, 1);
    // A forged cookie (wrong ACK) is reset; so is the right cookie for another peer ISN.
    let d = deliver(
        &mut ep,
        later,
        seg(5004, 101, Some(iss.wrapping_add(2)), false, None, &[]),
    );
    assert_eq!(d, Dispatch::Reset);
    let d = deliver(
        &mut ep,
        later,
        seg(5004, 555, Some(iss.wrapping_add(1)), false, None, &[]),
    );
    assert_eq!(d, Dispatch::Reset);
    assert_eq!(ep.stats().syn_cookies_accepted, 1);
}

/// Without timestamps a cookie cannot remember window scale and SACK: the SYN-ACK offers
/// neither (RFC 4987 §3.6), and the connection uses neither. With cookies off, the SYN is
/// dropped and counted.
#[test]
fn syn_cookie_without_timestamps_and_cookies_off() {
    let cfg = TcpConfig {
        syn_backlog: 1,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg.clone(), LOCAL, [6; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    assert!(matches!(
        deliver(&mut ep, now, seg(6000, 1, None, true, None, &[])),
        Dispatch::NewConn(_)
    ));
    assert_eq!(
        deliver(&mut ep, now, seg(6001, 1, None, true, None, &[])),
        Dispatch::Cookie
    );
    let sa = endpoint_out(&mut ep).remove(0);
    assert_eq!(
        (sa.wscale, sa.sack_permitted, sa.timestamp),
        (None, false, None)
    );
    let d = deliver(
        &mut ep,
        now,
        seg(6001, 2, Some(sa.seq.0.wrapping_add(1)), false, None, &[]),
    );
    let Dispatch::NewConn(h) = d else {
        panic!("{d:?}")
    };
    assert_eq!(ep.conn(h).unwrap().negotiated(), (false, false, 0, 0));
    assert_eq!(ep.conn(h).unwrap().emss(), 1460);

    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(
        TcpConfig {
            syn_cookies: false,
            ..cfg
        },
        LOCAL,
        [6; 16],
    );
    ep.listen(80);
    deliver(&mut ep, now, seg(6000, 1, None, true, None, &[]));
    assert_eq!(
        deliver(&mut ep, now, seg(6001, 1, None, true, None, &[])),
        Dispatch::Dropped
    );
    assert_eq!(ep.stats().syn_dropped, 1);
    assert!(endpoint_out(&mut ep).is_empty());
}

/// Limits on connections per endpoint and per listener refuse SYNs and connects, counted.
#[test]
fn connection_limits_counted() {
    let cfg = TcpConfig {
        max_connections: 3,
        max_listener_connections: 2,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [6; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    let mut made = Vec::new();
    for port in 7000..7003 {
        if let Dispatch::NewConn(h) = deliver(&mut ep, now, seg(port, 1, None, true, None, &[])) {
            made.push(h);
        }
    }
    assert_eq!(made.len(), 2);
    assert_eq!(ep.stats().listener_limit_drops, 1);
    let c = ep.connect(now, 0, (REMOTE, 9)).unwrap();
    assert_eq!(
        ep.connect(now, 0, (REMOTE, 10)),
        Err(tcp::ConnectError::Limit)
    );
    assert_eq!(ep.stats().conn_limit_drops, 1);
    // Reaping frees room for the listener again.
    ep.conn_mut(made[0]).unwrap().abort();
    let _ = ep.conn_mut(made[0]).unwrap().poll_event();
    assert_eq!(ep.reap_closed(), 1);
    assert!(matches!(
        deliver(&mut ep, now, seg(7005, 1, None, true, None, &[])),
        Dispatch::NewConn(_)
    ));
    assert!(ep.conn(c).is_some());
}

/// The per-endpoint budget of out-of-order segments (each pins a receive buffer, an mbuf)
/// holds over all connections; the refused segments are counted and acknowledged, and the
/// budget returns when the holes fill.
#[test]
fn out_of_order_budget_per_endpoint() {
    let cfg = TcpConfig {
        max_ooo_segments_total: 3,
        ..TcpConfig::default()
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, LOCAL, [6; 16]);
    ep.listen(80);
    let now = Instant::from_millis(1);
    let mut buf = vec![0u8; 1600];
    let mut conns = Vec::new();
    for port in [8000u16, 8001] {
        let Dispatch::NewConn(h) = deliver(&mut ep, now, seg(port, 0, None, true, None, &[]))
        else {
            panic!()
        };
        let t = ep
            .conn_mut(h)
            .unwrap()
            .poll_transmit(now, &mut buf, &mut NoData)
            .unwrap();
        let sa = tcp::parse_segment(&buf, 0..t.len, LOCAL, REMOTE, ChecksumMode::Software).unwrap();
        let iss = sa.seq.0;
        deliver(
            &mut ep,
            now,
            seg(port, 1, Some(iss.wrapping_add(1)), false, None, &[]),
        );
        conns.push((port, iss, h));
    }
    // Two out-of-order segments on each connection: the fourth exceeds the budget.
    for (port, iss, _) in &conns {
        for k in 1..3u32 {
            deliver(
                &mut ep,
                now,
                seg(
                    *port,
                    1 + 1000 * k,
                    Some(iss.wrapping_add(1)),
                    false,
                    None,
                    &[7; 500],
                ),
            );
        }
    }
    let s = ep.stats();
    assert_eq!((s.ooo_held, s.ooo_dropped_budget), (3, 1));
    // The first connection's hole fills: its held segments are released, room again.
    let (port, iss, h) = conns[0];
    deliver(
        &mut ep,
        now,
        seg(port, 1, Some(iss.wrapping_add(1)), false, None, &[7; 2000]),
    );
    assert_eq!(ep.conn(h).unwrap().ooo_segments(), 0);
    let (port, iss, _) = conns[1];
    deliver(
        &mut ep,
        now,
        seg(
            port,
            1 + 3000,
            Some(iss.wrapping_add(1)),
            false,
            None,
            &[7; 500],
        ),
    );
    assert_eq!(ep.stats().ooo_held, 4);
    assert_eq!(ep.stats().ooo_dropped_budget, 1);
}
