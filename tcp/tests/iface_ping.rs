//! Two interfaces wired back to back: the diagnostic ping resolves its neighbour with ARP,
//! sends echo requests at an interval, matches replies and reports RTTs and totals.

use std::collections::VecDeque;

use netcore::rng::Xoshiro256;
use netcore::{Duration, Instant, Rng};
use tcp::iface::{Iface, IfaceConfig, IfaceEvent, NeighborState, RxAction};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];

/// A link with a fixed one-way delay between two interfaces, driven by explicit time.
struct Pair {
    a: Iface,
    b: Iface,
    now: Instant,
    delay: Duration,
    /// (arrival time, to_b, frame)
    wire: VecDeque<(Instant, bool, Vec<u8>)>,
    /// Drop frames sent by B (to simulate a peer that does not answer).
    b_mute: bool,
    frames: Vec<Vec<u8>>,
    /// Seeded random loss: (rng, percent of frames lost in either direction).
    loss: Option<(Xoshiro256, u32)>,
}

impl Pair {
    fn new(delay: Duration) -> Self {
        Pair {
            a: Iface::new(IfaceConfig::new(MAC_A, IP_A, 24)),
            b: Iface::new(IfaceConfig::new(MAC_B, IP_B, 24)),
            now: Instant::from_millis(10_000),
            delay,
            wire: VecDeque::new(),
            b_mute: false,
            frames: Vec::new(),
            loss: None,
        }
    }

    fn send(&mut self, from_a: bool, frame: &[u8]) {
        self.frames.push(frame.to_vec());
        if !from_a && self.b_mute {
            return;
        }
        if let Some((rng, pct)) = self.loss.as_mut()
            && rng.next_u32() % 100 < *pct
        {
            return;
        }
        self.wire
            .push_back((self.now + self.delay, from_a, frame.to_vec()));
    }

    /// Deliver what has arrived by `now`, and let both sides transmit.
    fn step(&mut self) {
        let mut tx = [0u8; 1514];
        while self.wire.front().is_some_and(|(t, _, _)| *t <= self.now) {
            let Some((_, to_b, f)) = self.wire.pop_front() else {
                break;
            };
            let dst = if to_b { &mut self.b } else { &mut self.a };
            let act = dst.handle_frame(self.now, &f, &mut tx);
            assert!(!matches!(act, RxAction::Tcp { .. }), "unexpected {act:?}");
            if let RxAction::Reply(len) = act {
                let reply = tx[..len].to_vec();
                self.send(!to_b, &reply);
            }
        }
        for side_a in [true, false] {
            loop {
                let ifc = if side_a { &mut self.a } else { &mut self.b };
                let Some(len) = ifc.poll_transmit(self.now, &mut tx) else {
                    break;
                };
                let f = tx[..len].to_vec();
                self.send(side_a, &f);
            }
        }
    }

    /// Advance to the next timer or arrival, up to `until`. Returns false when idle.
    fn advance(&mut self, until: Instant) -> bool {
        let next = [
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            self.wire.front().map(|(t, _, _)| *t),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) if t <= until => {
                assert!(t >= self.now, "timer in the past: {t:?} < {:?}", self.now);
                self.now = t;
                self.step();
                true
            }
            _ => false,
        }
    }

    fn run(&mut self, until: Instant) {
        self.step();
        let mut n = 0;
        while self.advance(until) {
            n += 1;
            assert!(n < 100_000, "simulation does not settle");
        }
    }
}

fn events(a: &mut Iface) -> Vec<IfaceEvent> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

#[test]
fn ping_between_two_ifaces() {
    let mut p = Pair::new(Duration::from_micros(250));
    let start = p.now;
    p.a.start_ping(start, IP_B, 5, 56, Duration::from_millis(100));
    p.run(start + Duration::from_secs(10));

    let ev = events(&mut p.a);
    let replies: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            IfaceEvent::EchoReply {
                from,
                seq,
                rtt,
                bytes,
                ttl,
            } => Some((*from, *seq, *rtt, *bytes, *ttl)),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 5, "{ev:?}");
    for (i, (from, seq, rtt, bytes, ttl)) in replies.iter().enumerate() {
        assert_eq!(*from, IP_B);
        assert_eq!(usize::from(*seq), i);
        assert_eq!(*bytes, 56);
        assert_eq!(*ttl, 64);
        // Two link delays; the first request waited for ARP, but its RTT starts when sent.
        assert_eq!(*rtt, Duration::from_micros(500), "seq {seq}");
    }
    assert_eq!(
        ev.last(),
        Some(&IfaceEvent::PingDone {
            dst: IP_B,
            sent: 5,
            received: 5
        })
    );
    // Done as soon as the last reply came: 4 intervals after the first send + RTT.
    // The first send waited for one ARP round trip (0.5 ms).
    assert_eq!(
        p.now,
        start
            + Duration::from_micros(500)
            + Duration::from_millis(400)
            + Duration::from_micros(500)
    );
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.b.poll_timeout(), None);

    // Both learned each other with a single ARP exchange.
    assert_eq!(p.a.neighbor(IP_B), Some(NeighborState::Reachable(MAC_B)));
    assert_eq!(p.b.neighbor(IP_A), Some(NeighborState::Reachable(MAC_A)));
    let (sa, sb) = (p.a.stats(), p.b.stats());
    assert_eq!(
        (sa.arp_request_tx, sb.arp_reply_tx, sb.arp_request_tx),
        (1, 1, 0)
    );
    assert_eq!((sa.icmp_echo_request_tx, sb.icmp_echo_request_rx), (5, 5));
    assert_eq!((sb.icmp_echo_reply_tx, sa.icmp_echo_reply_rx), (5, 5));
    assert_eq!(sa.dropped_total() + sb.dropped_total(), 0);
    // 1 ARP request + 1 ARP reply + 5 requests + 5 replies, all at least 60 bytes.
    assert_eq!(p.frames.len(), 12);
    assert!(p.frames.iter().all(|f| f.len() >= 60));
    // Echo frames: 14 + 20 + 8 + 56 bytes.
    assert_eq!(p.frames.iter().filter(|f| f.len() == 98).count(), 10);
}

/// Over a lossy link (seeded), ARP retries and the ping still account for every request:
/// one reply event per received reply, totals consistent, and the run ends.
#[test]
fn ping_over_lossy_link_accounts_for_everything() {
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7u64);
    for round in 0..20u64 {
        let mut p = Pair::new(Duration::from_micros(300));
        p.loss = Some((Xoshiro256::seed_from_u64(seed ^ round), 30));
        let start = p.now;
        p.a.start_ping(start, IP_B, 50, 32, Duration::from_millis(20));
        p.run(start + Duration::from_secs(60));
        let ev = events(&mut p.a);
        let replies = ev
            .iter()
            .filter(|e| matches!(e, IfaceEvent::EchoReply { .. }))
            .count() as u32;
        let Some(IfaceEvent::PingDone { sent, received, .. }) = ev.last().cloned() else {
            panic!("no PingDone (seed {seed} round {round}): {ev:?}");
        };
        assert_eq!(received, replies, "seed {seed} round {round}");
        assert_eq!(u64::from(received), p.a.stats().icmp_echo_reply_rx);
        assert!(received <= sent && sent <= 50);
        // Either resolution failed (4 lost ARP exchanges in a row) or all 50 were sent.
        if sent == 0 {
            assert!(ev.contains(&IfaceEvent::NeighborFailed(IP_B)), "{ev:?}");
        } else {
            assert_eq!(sent, 50);
            // With 30 % loss each way about half the requests get an answer.
            assert!(
                (10..=45).contains(&received),
                "received {received} (seed {seed})"
            );
        }
        assert_eq!(p.a.poll_timeout(), None);
        assert!(p.now < start + Duration::from_secs(60));
    }
}

#[test]
fn ping_without_replies_reports_loss_after_timeout() {
    let mut p = Pair::new(Duration::from_micros(100));
    // B answers ARP (so A can send) but then goes mute.
    let start = p.now;
    p.b.start_ping(start, IP_A, 1, 0, Duration::ZERO); // makes both learn each other
    p.run(start + Duration::from_secs(5));
    events(&mut p.b);
    p.b_mute = true;
    let start = p.now;
    p.a.start_ping(start, IP_B, 3, 16, Duration::from_millis(200));
    p.run(start + Duration::from_secs(10));
    let ev = events(&mut p.a);
    assert_eq!(
        ev,
        vec![IfaceEvent::PingDone {
            dst: IP_B,
            sent: 3,
            received: 0
        }]
    );
    // Last request at +400 ms, reply wait 1 s.
    assert_eq!(p.now, start + Duration::from_millis(1400));
}

#[test]
fn ping_to_absent_host_fails_resolution() {
    let mut p = Pair::new(Duration::from_micros(100));
    let start = p.now;
    p.a.start_ping(start, [10, 0, 0, 77], 3, 8, Duration::from_millis(100));
    p.run(start + Duration::from_secs(10));
    assert_eq!(
        events(&mut p.a),
        vec![
            IfaceEvent::NeighborFailed([10, 0, 0, 77]),
            IfaceEvent::PingDone {
                dst: [10, 0, 0, 77],
                sent: 0,
                received: 0
            },
        ]
    );
    // 4 ARP requests, failure one retry interval after the last.
    assert_eq!(p.a.stats().arp_request_tx, 4);
    assert_eq!(p.now, start + Duration::from_secs(4));
    // B saw the broadcasts but they were not for it.
    assert_eq!(p.b.stats().arp_request_rx, 4);
}

#[test]
fn late_duplicate_and_foreign_replies_are_not_counted() {
    let mut p = Pair::new(Duration::from_micros(100));
    let start = p.now;
    p.a.start_ping(start, IP_B, 1, 8, Duration::ZERO);
    p.run(start + Duration::from_secs(5));
    let ev = events(&mut p.a);
    assert_eq!(ev.len(), 2, "{ev:?}");
    // Replay B's echo reply (the last frame sent): the ping is over, so it is unmatched.
    let reply = p.frames.last().cloned().expect("frames");
    let mut tx = [0u8; 1514];
    let act = p.a.handle_frame(p.now, &reply, &mut tx);
    assert_eq!(
        act,
        RxAction::Dropped(tcp::iface::DropReason::UnmatchedEchoReply)
    );

    // A new ping: a duplicate of its reply is dropped, the totals count it once.
    let start = p.now;
    p.a.start_ping(start, IP_B, 2, 8, Duration::from_millis(50));
    p.step();
    let req = p.frames.last().cloned().expect("request");
    let mut btx = [0u8; 1514];
    let RxAction::Reply(len) = p.b.handle_frame(p.now, &req, &mut btx) else {
        panic!("B must answer");
    };
    let dup = btx[..len].to_vec();
    assert_eq!(p.a.handle_frame(p.now, &dup, &mut tx), RxAction::Consumed);
    assert_eq!(
        p.a.handle_frame(p.now, &dup, &mut tx),
        RxAction::Dropped(tcp::iface::DropReason::UnmatchedEchoReply)
    );
    // A reply with altered data (checksum fixed) is not accepted either.
    let mut bad = dup.clone();
    bad[42] ^= 0xff;
    bad[36] = 0;
    bad[37] = 0;
    let mut sum = 0u32;
    for c in bad[34..50].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    bad[36..38].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    assert_eq!(
        p.a.handle_frame(p.now, &bad, &mut tx),
        RxAction::Dropped(tcp::iface::DropReason::UnmatchedEchoReply)
    );
    let ev = events(&mut p.a);
    assert_eq!(ev.len(), 1, "one reply event: {ev:?}");
    // Starting another ping ends this one with its totals.
    p.a.start_ping(p.now, IP_B, 1, 8, Duration::ZERO);
    assert_eq!(
        events(&mut p.a),
        vec![IfaceEvent::PingDone {
            dst: IP_B,
            sent: 1,
            received: 1
        }]
    );
}

#[test]
fn ping_size_is_clamped_to_mtu() {
    let mut p = Pair::new(Duration::from_micros(100));
    let start = p.now;
    p.a.start_ping(start, IP_B, 1, 100_000, Duration::ZERO);
    p.run(start + Duration::from_secs(5));
    let ev = events(&mut p.a);
    assert!(
        matches!(ev.first(), Some(IfaceEvent::EchoReply { bytes: 1472, .. })),
        "{ev:?}"
    );
    assert!(p.frames.iter().any(|f| f.len() == 1514));
}

#[test]
fn zero_count_ping_finishes_at_once() {
    let mut a = Iface::new(IfaceConfig::new(MAC_A, IP_A, 24));
    a.start_ping(Instant::ZERO, IP_B, 0, 8, Duration::ZERO);
    assert_eq!(
        events(&mut a),
        vec![IfaceEvent::PingDone {
            dst: IP_B,
            sent: 0,
            received: 0
        }]
    );
    assert_eq!(a.poll_timeout(), None);
}

/// Write `frames` as a classic pcap (LINKTYPE_ETHERNET), 1 ms apart.
fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len()).expect("frame len");
        out.extend_from_slice(&(i as u32 / 1000).to_le_bytes());
        out.extend_from_slice(&((i as u32 % 1000) * 1000).to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out)
}

/// tshark (when installed) decodes every frame we emit (ARP both ways, echo requests and
/// replies, a TCP header from `emit_ipv4_header`) without a malformed packet, with good IPv4
/// and ICMP checksums.
#[test]
fn tshark_decodes_emitted_frames() {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("tshark not installed: skipped");
        return;
    }
    let mut p = Pair::new(Duration::from_micros(100));
    let start = p.now;
    p.a.start_ping(start, IP_B, 3, 100, Duration::from_millis(10));
    p.run(start + Duration::from_secs(5));
    let mut frames = p.frames.clone();
    // A bare TCP SYN header behind our Ethernet/IPv4 headers (TCP checksum left 0).
    let mut f = vec![0u8; 54];
    let n = p.a.emit_ipv4_header(MAC_B, IP_B, 6, 20, &mut f);
    f[n..n + 20].copy_from_slice(&[
        0x30, 0x39, 0x11, 0x5c, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f.resize(60, 0);
    frames.push(f);
    let dir = std::env::temp_dir().join(format!("iface-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("iface.pcap");
    write_pcap(&path, &frames).expect("write pcap");
    let out = std::process::Command::new("tshark")
        .args(["-n", "-V", "-o", "ip.check_checksum:TRUE", "-r"])
        .arg(&path)
        .output()
        .expect("run tshark");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("Malformed"), "{text}");
    assert!(!text.contains("[Expert Info (Error"), "{text}");
    let count = |s: &str| text.matches(s).count();
    assert_eq!(count("Address Resolution Protocol (request)"), 1, "{text}");
    assert_eq!(count("Address Resolution Protocol (reply)"), 1, "{text}");
    assert_eq!(count("Type: 8 (Echo (ping) request)"), 3, "{text}");
    assert_eq!(count("Type: 0 (Echo (ping) reply)"), 3, "{text}");
    assert_eq!(count("[Header checksum status: Good]"), 7, "{text}");
    // ICMP checksum status is reported for the 6 echo messages.
    assert_eq!(count("[Checksum Status: Good]"), 6, "{text}");
    assert_eq!(count("Transmission Control Protocol"), 1, "{text}");
}
