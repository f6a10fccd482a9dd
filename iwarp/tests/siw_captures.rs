//! Every real Linux siw capture in `siw-peer/pcaps`: find the MPA Request/Reply of each
//! connection, deframe every FPDU of both directions with our deframer (CRC checked where
//! negotiated), and compare the ULPDU lengths with what tshark decodes from the same file.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{Connection, Direction, connections, read_capture, run_tshark, siw_pcaps, tshark};
use iwarp::mpa::wire::{FrameKind, KEY_REP, KEY_REQ, Repr, WireError};
use iwarp::mpa::{Deframed, Deframer, DeframerConfig, MpaError};

/// What our deframer found in one direction.
#[derive(Debug, Default)]
struct DirResult {
    ulpdu_lens: Vec<u16>,
    crc_checked: usize,
    /// Octets of a partial FPDU left at the end (capture cut mid-FPDU).
    trailing_partial: bool,
    error: Option<MpaError>,
    /// ULPDU octets of the first contiguous run, as deframed segment by segment.
    first_run_payload: Vec<u8>,
}

fn deframe_dir(dir: &Direction, start: usize, crc: bool, markers: bool) -> DirResult {
    let mut r = DirResult::default();
    let mut runs = vec![(
        start,
        dir.stream.get(start..).unwrap_or(&[]),
        &dir.segments[..],
    )];
    for run in &dir.later_runs {
        // Segments are missing from the capture before this run. siw aligns FPDUs with TCP
        // segments (README §5.9), so deframing restarts at the run's first segment, as
        // tshark's heuristic does.
        runs.push((run.offset, &run.data[..], &run.segments[..]));
    }
    for (run_idx, (offset, data, segments)) in runs.into_iter().enumerate() {
        let pos = (offset - start) as u32;
        let cfg = DeframerConfig {
            crc,
            markers,
            stream_pos: pos,
            ..Default::default()
        };
        let mut d = Deframer::new(cfg);
        // Feed segment by segment as TCP would hand them over, to exercise straddling.
        let mut cuts: Vec<usize> = segments
            .iter()
            .map(|s| s.0)
            .filter(|&o| o > offset)
            .map(|o| o - offset)
            .collect();
        cuts.push(data.len());
        let mut at = 0;
        for cut in cuts {
            let mut chunk = &data[at..cut];
            at = cut;
            loop {
                let (used, ev) = d.deframe(chunk);
                chunk = &chunk[used..];
                match ev {
                    None => break,
                    Some(Ok(Deframed::Start { ulpdu_len })) => r.ulpdu_lens.push(ulpdu_len),
                    Some(Ok(Deframed::Data(x))) => {
                        if run_idx == 0 {
                            r.first_run_payload.extend_from_slice(x);
                        }
                    }
                    Some(Ok(Deframed::End)) => {
                        if crc {
                            r.crc_checked += 1;
                        }
                    }
                    Some(Err(e)) => {
                        r.error = Some(e);
                        return r;
                    }
                }
            }
        }
        r.trailing_partial = !d.at_boundary();
        // A run cut short by a gap would leave a partial FPDU; siw's alignment means it never
        // does except at the very end of the capture.
    }
    // The first run again, cut at pseudo-random points instead of segment boundaries: FPDUs
    // now straddle slices and share them; the ULPDUs must come out the same.
    let data = dir.stream.get(start..).unwrap_or(&[]);
    let mut d = Deframer::new(DeframerConfig {
        crc,
        markers,
        ..Default::default()
    });
    let (mut lens, mut payload_a, mut seed) = (Vec::new(), Vec::new(), 0x9e37_79b9u32);
    let mut at = 0;
    while at < data.len() {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let n = 1 + (seed >> 16) as usize % 3000;
        let mut chunk = &data[at..(at + n).min(data.len())];
        at += chunk.len();
        loop {
            let (used, ev) = d.deframe(chunk);
            chunk = &chunk[used..];
            match ev {
                None => break,
                Some(Ok(Deframed::Start { ulpdu_len })) => lens.push(ulpdu_len),
                Some(Ok(Deframed::Data(x))) => payload_a.extend_from_slice(x),
                Some(Ok(Deframed::End)) => {}
                Some(Err(e)) => panic!("random cuts: {e}"),
            }
        }
    }
    let first_run_fpdus = lens.len();
    assert_eq!(
        &lens[..],
        &r.ulpdu_lens[..first_run_fpdus],
        "random cuts changed the FPDUs"
    );
    assert!(
        payload_a == r.first_run_payload,
        "random cuts changed the ULPDU bytes"
    );
    r
}

/// Per-connection outcome.
struct ConnResult {
    client_port: u16,
    server_port: u16,
    c2s: DirResult,
    s2c: DirResult,
}

fn check_connection(name: &str, c: &Connection) -> Option<ConnResult> {
    if !c.c2s.stream.starts_with(KEY_REQ) {
        return None;
    }
    let (req, req_len) = match Repr::parse_bytes(&c.c2s.stream) {
        Ok(x) => x,
        Err(WireError::Truncated) => {
            // e.g. the 300-octet private data probe: siw resets before it is all sent.
            eprintln!(
                "{name}: truncated MPA Request at frame {} (peer reset)",
                c.first_frame
            );
            return None;
        }
        Err(e) => panic!("{name}: bad MPA Request at frame {}: {e}", c.first_frame),
    };
    assert_eq!(req.kind, FrameKind::Request);
    if !c.s2c.stream.starts_with(KEY_REP) {
        // rev > 2 or a reset: the responder never replied.
        eprintln!("{name}: {req} got no Reply");
        return None;
    }
    let (rep, rep_len) =
        Repr::parse_bytes(&c.s2c.stream).unwrap_or_else(|e| panic!("{name}: bad MPA Reply: {e}"));
    assert_eq!(rep.kind, FrameKind::Reply);
    eprintln!("{name}: {}:{} {req} / {rep}", c.client.1, c.server.1);
    if rep.reject {
        return None;
    }
    // RFC 5044 §7.1: CRC is used if either side asks; markers go towards whoever asked.
    let crc = req.crc || rep.crc;
    let c2s = deframe_dir(&c.c2s, req_len, crc, rep.markers);
    let s2c = deframe_dir(&c.s2c, rep_len, crc, req.markers);
    for (dir, r) in [("c2s", &c2s), ("s2c", &s2c)] {
        assert!(
            r.error.is_none(),
            "{name} {dir}: deframer error {:?}",
            r.error
        );
        if crc {
            assert_eq!(
                r.crc_checked,
                r.ulpdu_lens.len() - usize::from(r.trailing_partial)
            );
        }
    }
    Some(ConnResult {
        client_port: c.client.1,
        server_port: c.server.1,
        c2s,
        s2c,
    })
}

type PerDir = BTreeMap<(u16, u16), Vec<u16>>;

fn tshark_ulpdu_lengths(ts: &Path, file: &Path) -> (PerDir, usize) {
    let out = run_tshark(
        ts,
        file,
        &[
            "-T",
            "fields",
            "-E",
            "separator=/t",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "iwarp_mpa.ulpdulength",
            "-e",
            "iwarp_mpa.crc_check",
        ],
    );
    let mut per: PerDir = BTreeMap::new();
    let mut crc_good = 0;
    for line in out.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 3 || f[2].is_empty() {
            continue;
        }
        let key = (f[0].parse().unwrap(), f[1].parse().unwrap());
        for v in f[2].split(',') {
            per.entry(key).or_default().push(v.parse().unwrap());
        }
        if let Some(c) = f.get(3) {
            crc_good += c.split(',').filter(|s| !s.is_empty()).count();
        }
    }
    (per, crc_good)
}

#[test]
fn every_siw_capture_deframes_and_matches_tshark() {
    let pcaps = siw_pcaps();
    assert!(
        pcaps.len() >= 20,
        "expected the siw captures, found {}",
        pcaps.len()
    );
    let ts = tshark();
    if ts.is_none() {
        eprintln!(
            "\n!!!!! tshark NOT INSTALLED: skipping the tshark comparison (apt install tshark) !!!!!\n"
        );
    }
    let mut total_fpdus = 0usize;
    let mut total_crc = 0usize;
    let mut compared = 0usize;
    for path in &pcaps {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let bytes = std::fs::read(path).unwrap();
        let frames = read_capture(&bytes);
        assert!(!frames.is_empty(), "{name}: no frames");
        let conns = connections(&frames);
        let mut ours: PerDir = BTreeMap::new();
        let mut partial_dirs = Vec::new();
        let mut our_crc = 0;
        for c in &conns {
            if c.c2s.gap || c.s2c.gap {
                eprintln!("{name}: segments missing from the capture; resyncing after gaps");
            }
            let Some(r) = check_connection(&name, c) else {
                continue;
            };
            for (key, d) in [
                ((r.client_port, r.server_port), &r.c2s),
                ((r.server_port, r.client_port), &r.s2c),
            ] {
                total_fpdus += d.ulpdu_lens.len();
                our_crc += d.crc_checked;
                if d.trailing_partial {
                    partial_dirs.push(key);
                }
                ours.entry(key)
                    .or_default()
                    .extend_from_slice(&d.ulpdu_lens);
            }
        }
        ours.retain(|_, v| !v.is_empty());
        total_crc += our_crc;
        let Some(ts) = ts.as_deref() else { continue };
        let (theirs, their_crc) = tshark_ulpdu_lengths(ts, path);
        for (key, ours_v) in &ours {
            let theirs_v = theirs.get(key).cloned().unwrap_or_default();
            if partial_dirs.contains(key) {
                // The capture was cut inside the last FPDU: tshark cannot decode it.
                assert_eq!(&ours_v[..ours_v.len() - 1], &theirs_v[..], "{name} {key:?}");
            } else {
                assert_eq!(
                    ours_v, &theirs_v,
                    "{name} {key:?}: ULPDU lengths differ from tshark"
                );
            }
        }
        for key in theirs.keys() {
            assert!(
                ours.contains_key(key),
                "{name}: tshark decoded FPDUs on {key:?}, we did not"
            );
        }
        assert_eq!(
            our_crc, their_crc,
            "{name}: CRC-verified FPDUs vs tshark's Good CRC32"
        );
        compared += 1;
    }
    eprintln!(
        "siw captures: {} files, {total_fpdus} FPDUs deframed, {total_crc} CRCs verified, \
         {compared} compared with tshark",
        pcaps.len()
    );
    assert!(total_fpdus > 1500);
    assert!(total_crc > 400);
}
