//! MPA end to end over an in-memory byte pipe: negotiation, then FPDUs framed with the
//! negotiated settings, delivered in random slices that mix the Reply with the first FPDUs.

use iwarp::mpa::startup::{CrcPolicy, Outcome, Role, Startup, StartupConfig};
use iwarp::mpa::{Deframed, Deframer, Framer};
use netcore::rng::{Rng, Xoshiro256};
use netcore::{Duration, Instant};

/// Deliver `bytes` to a startup machine then a deframer, in random slices; returns the
/// ULPDUs received.
fn receive(
    st: &mut Startup,
    df: &mut Option<Deframer>,
    bytes: &[u8],
    rng: &mut Xoshiro256,
    now: Instant,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = 1 + (rng.next_u32() as usize) % 700;
        let mut slice = &bytes[at..(at + n).min(bytes.len())];
        at += slice.len();
        if st.outcome().is_none() {
            let used = st.handle_stream(now, slice);
            slice = &slice[used..];
            if let Some(Outcome::Established(e)) = st.outcome() {
                *df = Some(Deframer::new(e.deframer_config()));
            }
        }
        let Some(d) = df.as_mut() else {
            assert!(slice.is_empty(), "bytes before setup finished");
            continue;
        };
        while !slice.is_empty() {
            let (used, ev) = d.deframe(slice);
            slice = &slice[used..];
            match ev {
                None => break,
                Some(Ok(Deframed::Data(x))) => cur.extend_from_slice(x),
                Some(Ok(Deframed::End)) => out.push(std::mem::take(&mut cur)),
                Some(Ok(Deframed::Start { .. })) => {}
                Some(Err(e)) => panic!("deframer: {e}"),
            }
        }
    }
    out
}

fn msgs(rng: &mut Xoshiro256, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut v = vec![0u8; 14 + (rng.next_u32() as usize) % 1400];
            rng.fill(&mut v);
            v
        })
        .collect()
}

#[test]
fn negotiate_then_exchange_fpdus() {
    let now = Instant::from_millis(10);
    for (seed, (crc_i, crc_r, m_i, m_r)) in [
        (CrcPolicy::IfPeerAsks, CrcPolicy::IfPeerAsks, false, false),
        (CrcPolicy::Always, CrcPolicy::IfPeerAsks, false, false),
        (CrcPolicy::IfPeerAsks, CrcPolicy::Always, true, false),
        (CrcPolicy::Always, CrcPolicy::Always, true, true),
        (CrcPolicy::Never, CrcPolicy::IfPeerAsks, false, true),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = Xoshiro256::seed_from_u64(seed as u64 + 100);
        let ic = StartupConfig {
            crc: crc_i,
            markers_rx: m_i,
            ..StartupConfig::new(Role::Initiator)
        };
        let rc = StartupConfig {
            crc: crc_r,
            markers_rx: m_r,
            ..StartupConfig::new(Role::Responder)
        };
        let mut i = Startup::new(ic.clone(), now).unwrap();
        let mut r = Startup::new(rc.clone(), now).unwrap();
        let (mut i_df, mut r_df) = (None, None);

        // Initiator -> responder: the Request.
        let req = i.poll_transmit().unwrap();
        assert!(receive(&mut r, &mut r_df, &req, &mut rng, now).is_empty());
        let Some(Outcome::Established(re)) = r.outcome().cloned() else {
            panic!()
        };

        // Responder -> initiator: the Reply (the responder sends no FPDU first).
        let rep = r.poll_transmit().unwrap();
        assert!(receive(&mut i, &mut i_df, &rep, &mut rng, now).is_empty());
        let Some(Outcome::Established(ie)) = i.outcome().cloned() else {
            panic!()
        };
        assert_eq!(ie.crc, re.crc);
        assert_eq!(
            (ie.markers_tx, ie.markers_rx),
            (re.markers_rx, re.markers_tx)
        );

        // Initiator's FPDUs (after its 50 ms delay), then the responder's.
        let mut fi = Framer::new(ie.framer_config());
        let mut fr = Framer::new(re.framer_config());
        let frame_all = |f: &mut Framer, m: &[Vec<u8>]| -> Vec<u8> {
            let mut s = Vec::new();
            for u in m {
                let mut buf = vec![0u8; f.fpdu_len(u.len())];
                assert!(buf.len() <= 1448);
                f.frame(&[u], &mut buf).unwrap();
                s.extend_from_slice(&buf);
            }
            s
        };
        let im = msgs(&mut rng, 30);
        let rm = msgs(&mut rng, 30);
        let later = now + Duration::from_millis(60);
        let got = receive(&mut r, &mut r_df, &frame_all(&mut fi, &im), &mut rng, later);
        assert_eq!(got, im, "case {seed}: initiator -> responder");
        let got = receive(&mut i, &mut i_df, &frame_all(&mut fr, &rm), &mut rng, later);
        assert_eq!(got, rm, "case {seed}: responder -> initiator");

        // Again with fresh machines that see each whole direction as one stream: the
        // Request/Reply and the first FPDUs now share slices.
        for (cfg, head, fpdus, want) in [
            (
                rc,
                &req,
                frame_all(&mut Framer::new(ie.framer_config()), &im),
                &im,
            ),
            (
                ic,
                &rep,
                frame_all(&mut Framer::new(re.framer_config()), &rm),
                &rm,
            ),
        ] {
            let mut st = Startup::new(cfg, now).unwrap();
            let _ = st.poll_transmit();
            let mut stream = head.clone();
            stream.extend_from_slice(&fpdus);
            let mut df = None;
            assert_eq!(
                &receive(&mut st, &mut df, &stream, &mut rng, now),
                want,
                "case {seed}"
            );
        }
    }
}

#[test]
fn request_and_first_fpdus_in_one_slice() {
    // A peer-to-peer initiator may send its RTR right after the Request; the responder's
    // startup must leave those octets for the deframer even when they arrive together.
    let now = Instant::from_millis(1);
    let mut rng = Xoshiro256::seed_from_u64(5);
    let ic = StartupConfig {
        crc: CrcPolicy::Always,
        p2p: true,
        ..StartupConfig::new(Role::Initiator)
    };
    let mut i = Startup::new(ic, now).unwrap();
    let mut r = Startup::new(
        StartupConfig {
            p2p: true,
            ..StartupConfig::new(Role::Responder)
        },
        now,
    )
    .unwrap();
    let mut wire = i.poll_transmit().unwrap();
    // Pretend the Reply arrived so the initiator can frame with the negotiated settings.
    let mut r2 = Startup::new(
        StartupConfig {
            p2p: true,
            ..StartupConfig::new(Role::Responder)
        },
        now,
    )
    .unwrap();
    assert_eq!(r2.handle_stream(now, &wire), wire.len());
    i.handle_stream(now, &r2.poll_transmit().unwrap());
    let Some(Outcome::Established(ie)) = i.outcome().cloned() else {
        panic!()
    };
    let mut f = Framer::new(ie.framer_config());
    let m = msgs(&mut rng, 5);
    for u in &m {
        let mut buf = vec![0u8; f.fpdu_len(u.len())];
        f.frame(&[u], &mut buf).unwrap();
        wire.extend_from_slice(&buf);
    }
    // All in one slice: the startup takes exactly the Request.
    assert_eq!(r.handle_stream(now, &wire), 24);
    let Some(Outcome::Established(re)) = r.outcome().cloned() else {
        panic!()
    };
    assert_eq!(re.rtr, Some(iwarp::mpa::wire::RtrKind::Write));
    let mut d = Deframer::new(re.deframer_config());
    let (mut got, mut cur, mut rest) = (Vec::new(), Vec::new(), &wire[24..]);
    while !rest.is_empty() {
        let (used, ev) = d.deframe(rest);
        rest = &rest[used..];
        match ev {
            Some(Ok(Deframed::Data(x))) => cur.extend_from_slice(x),
            Some(Ok(Deframed::End)) => got.push(std::mem::take(&mut cur)),
            Some(Ok(Deframed::Start { .. })) | None => {}
            Some(Err(e)) => panic!("{e}"),
        }
    }
    assert_eq!(got, m);
}
