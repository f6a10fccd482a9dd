//! Neighbour resolution through the public API at explicit times: ARP requests, retries,
//! failure, the negative cache, expiry and revalidation, routing via the gateway, and what
//! ARP traffic may (not) change in the cache.

use netcore::{Duration, Instant};
use tcp::iface::{DropReason, Iface, IfaceConfig, IfaceEvent, NeighborState, Resolve, RxAction};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const MAC_C: [u8; 6] = [0x02, 0, 0, 0, 0, 0x03];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const GW: [u8; 4] = [10, 0, 0, 254];

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn iface_a() -> Iface {
    let mut cfg = IfaceConfig::new(MAC_A, IP_A, 24);
    cfg.gateway = Some(GW);
    Iface::new(cfg)
}

/// An Ethernet/ARP frame (42 bytes, unpadded).
fn arp_frame(
    eth_dst: [u8; 6],
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&eth_dst);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&tpa);
    f
}

/// Drain `poll_transmit` at `now`; returns the frames.
fn drain(a: &mut Iface, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut tx = [0u8; 1514];
    while let Some(len) = a.poll_transmit(now, &mut tx) {
        out.push(tx[..len].to_vec());
        assert!(out.len() < 100, "poll_transmit never ends");
    }
    if let Some(t) = a.poll_timeout() {
        assert!(t > now, "poll_timeout {t:?} due at {now:?} after draining");
    }
    out
}

fn events(a: &mut Iface) -> Vec<IfaceEvent> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

/// The ARP request A sends for `tpa`, to `eth_dst`, padded to 60 bytes.
fn expected_request(eth_dst: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = arp_frame(eth_dst, 1, MAC_A, IP_A, [0; 6], tpa);
    f.resize(60, 0);
    f
}

#[test]
fn resolve_retries_at_explicit_times_then_fails() {
    let mut a = iface_a();
    assert_eq!(a.poll_timeout(), None);
    assert_eq!(a.resolve(ms(0), IP_B), Resolve::Pending);
    assert_eq!(a.poll_timeout(), Some(ms(0)));
    let bcast = [0xff; 6];
    // First request at once, then one per second: 1 + 3 retries.
    for t in [0, 1000, 2000, 3000] {
        assert_eq!(
            drain(&mut a, ms(t)),
            vec![expected_request(bcast, IP_B)],
            "at {t} ms"
        );
        assert_eq!(a.poll_timeout(), Some(ms(t + 1000)));
        assert!(drain(&mut a, ms(t + 999)).is_empty());
        assert_eq!(
            a.resolve(ms(t + 500), IP_B),
            Resolve::Pending,
            "no extra request"
        );
    }
    assert!(events(&mut a).is_empty());
    assert!(drain(&mut a, ms(4000)).is_empty());
    assert_eq!(events(&mut a), vec![IfaceEvent::NeighborFailed(IP_B)]);
    assert_eq!(a.neighbor(IP_B), Some(NeighborState::Failed));
    assert_eq!(a.stats().arp_request_tx, 4);
    assert_eq!(a.stats().neighbor_failed, 1);
    assert_eq!(a.poll_timeout(), None);
    // Negative cache for arp_failed_hold (3 s), then a fresh resolution.
    assert_eq!(a.resolve(ms(6999), IP_B), Resolve::Failed);
    assert!(drain(&mut a, ms(6999)).is_empty());
    assert_eq!(a.resolve(ms(7000), IP_B), Resolve::Pending);
    assert_eq!(drain(&mut a, ms(7000)).len(), 1);
}

#[test]
fn handle_timeout_alone_reports_failure() {
    let mut cfg = IfaceConfig::new(MAC_A, IP_A, 24);
    cfg.arp_max_retries = 0;
    cfg.arp_retry = Duration::from_millis(200);
    let mut a = Iface::new(cfg);
    assert_eq!(a.resolve(ms(0), IP_B), Resolve::Pending);
    assert_eq!(drain(&mut a, ms(0)).len(), 1);
    a.handle_timeout(ms(199));
    assert!(events(&mut a).is_empty());
    a.handle_timeout(ms(200));
    assert_eq!(events(&mut a), vec![IfaceEvent::NeighborFailed(IP_B)]);
    assert_eq!(a.resolve(ms(200), IP_B), Resolve::Failed);
}

#[test]
fn reply_resolves_pending_entry() {
    let mut a = iface_a();
    assert_eq!(a.resolve(ms(0), IP_B), Resolve::Pending);
    assert_eq!(drain(&mut a, ms(0)).len(), 1);
    let mut tx = [0u8; 64];
    let reply = arp_frame(MAC_A, 2, MAC_B, IP_B, MAC_A, IP_A);
    assert_eq!(a.handle_frame(ms(30), &reply, &mut tx), RxAction::Consumed);
    assert_eq!(a.resolve(ms(31), IP_B), Resolve::Known(MAC_B));
    assert_eq!(a.poll_timeout(), None, "retries stop once resolved");
    assert!(drain(&mut a, ms(5000)).is_empty());
    assert_eq!(a.stats().arp_reply_rx, 1);
}

#[test]
fn unsolicited_reply_does_not_create_an_entry() {
    let mut a = iface_a();
    let mut tx = [0u8; 64];
    let reply = arp_frame(MAC_A, 2, MAC_C, [10, 0, 0, 3], MAC_A, IP_A);
    assert_eq!(
        a.handle_frame(ms(0), &reply, &mut tx),
        RxAction::Consumed,
        "a reply to us is consumed"
    );
    assert_eq!(a.neighbor([10, 0, 0, 3]), None);
    assert_eq!(a.resolve(ms(0), [10, 0, 0, 3]), Resolve::Pending);
}

#[test]
fn gratuitous_arp_updates_only_known_entries() {
    let mut a = iface_a();
    let mut tx = [0u8; 64];
    // B asks for us: B is learned (RFC 826, we are the target).
    let req = arp_frame([0xff; 6], 1, MAC_B, IP_B, [0; 6], IP_A);
    assert_eq!(a.handle_frame(ms(0), &req, &mut tx), RxAction::Reply(60));
    assert_eq!(a.neighbor(IP_B), Some(NeighborState::Reachable(MAC_B)));
    // B moves to MAC_C and announces it (gratuitous request: spa == tpa).
    let garp = arp_frame([0xff; 6], 1, MAC_C, IP_B, [0; 6], IP_B);
    assert_eq!(a.handle_frame(ms(10), &garp, &mut tx), RxAction::Consumed);
    assert_eq!(a.resolve(ms(10), IP_B), Resolve::Known(MAC_C));
    // A gratuitous announcement from an unknown host is not learned.
    let other = arp_frame([0xff; 6], 2, MAC_C, [10, 0, 0, 7], [0xff; 6], [10, 0, 0, 7]);
    assert_eq!(
        a.handle_frame(ms(20), &other, &mut tx),
        RxAction::Dropped(DropReason::NotOurIp)
    );
    assert_eq!(a.neighbor([10, 0, 0, 7]), None);
    assert_eq!(a.stats().neighbor_learned, 2);
}

#[test]
fn expired_entry_is_revalidated_by_unicast_and_kept_meanwhile() {
    let mut a = iface_a();
    let mut tx = [0u8; 64];
    let req = arp_frame([0xff; 6], 1, MAC_B, IP_B, [0; 6], IP_A);
    a.handle_frame(ms(0), &req, &mut tx);
    assert_eq!(a.resolve(ms(59_999), IP_B), Resolve::Known(MAC_B));
    assert!(drain(&mut a, ms(59_999)).is_empty());
    // Expired (arp_timeout 60 s): still usable, revalidated with unicast requests.
    assert_eq!(a.resolve(ms(60_000), IP_B), Resolve::Known(MAC_B));
    assert_eq!(a.neighbor(IP_B), Some(NeighborState::Probing(MAC_B)));
    assert_eq!(
        drain(&mut a, ms(60_000)),
        vec![expected_request(MAC_B, IP_B)]
    );
    let reply = arp_frame(MAC_A, 2, MAC_B, IP_B, MAC_A, IP_A);
    assert_eq!(
        a.handle_frame(ms(60_005), &reply, &mut tx),
        RxAction::Consumed
    );
    assert_eq!(a.neighbor(IP_B), Some(NeighborState::Reachable(MAC_B)));
    assert_eq!(a.poll_timeout(), None);
    // Next expiry with a silent neighbour: 4 unicast requests, then failure.
    assert_eq!(a.resolve(ms(120_005), IP_B), Resolve::Known(MAC_B));
    for k in 0..4u64 {
        let t = 120_005 + k * 1000;
        assert_eq!(drain(&mut a, ms(t)), vec![expected_request(MAC_B, IP_B)]);
    }
    assert!(drain(&mut a, ms(124_005)).is_empty());
    assert_eq!(events(&mut a), vec![IfaceEvent::NeighborFailed(IP_B)]);
    assert_eq!(a.resolve(ms(124_005), IP_B), Resolve::Failed);
}

#[test]
fn off_link_goes_via_gateway_and_special_addresses() {
    let mut a = iface_a();
    assert_eq!(a.resolve(ms(0), [192, 0, 2, 9]), Resolve::Pending);
    assert_eq!(a.neighbor(GW), Some(NeighborState::Incomplete));
    assert_eq!(drain(&mut a, ms(0)), vec![expected_request([0xff; 6], GW)]);
    let mut tx = [0u8; 64];
    let reply = arp_frame(MAC_A, 2, MAC_C, GW, MAC_A, IP_A);
    a.handle_frame(ms(1), &reply, &mut tx);
    assert_eq!(a.resolve(ms(2), [8, 8, 8, 8]), Resolve::Known(MAC_C));
    assert_eq!(a.resolve(ms(2), [255; 4]), Resolve::Known([0xff; 6]));
    assert_eq!(a.resolve(ms(2), [10, 0, 0, 255]), Resolve::Known([0xff; 6]));
    assert_eq!(
        a.resolve(ms(2), [224, 0, 0, 251]),
        Resolve::Known([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb])
    );
    assert_eq!(a.resolve(ms(2), [0; 4]), Resolve::NoRoute);
    assert_eq!(a.resolve(ms(2), IP_A), Resolve::NoRoute, "no loopback path");
    assert_eq!(a.resolve(ms(2), [127, 0, 0, 1]), Resolve::NoRoute);
    assert_eq!(a.neighbor(IP_A), None);
    let mut no_gw = Iface::new(IfaceConfig::new(MAC_A, IP_A, 24));
    assert_eq!(no_gw.resolve(ms(0), [192, 0, 2, 9]), Resolve::NoRoute);
    assert!(drain(&mut no_gw, ms(0)).is_empty());
}

#[test]
fn cache_capacity_is_bounded() {
    let mut cfg = IfaceConfig::new(MAC_A, IP_A, 16);
    cfg.neighbor_capacity = 4;
    let mut a = Iface::new(cfg);
    let mut tx = [0u8; 64];
    for i in 0..10u8 {
        let mac = [0x02, 0, 0, 0, 1, i];
        let req = arp_frame([0xff; 6], 1, mac, [10, 0, 1, i], [0; 6], IP_A);
        assert_eq!(
            a.handle_frame(ms(u64::from(i)), &req, &mut tx),
            RxAction::Reply(60)
        );
    }
    assert_eq!(a.neighbors().count(), 4);
    assert_eq!(a.stats().neighbor_evicted, 6);
    // The most recent ones stay.
    assert_eq!(
        a.neighbor([10, 0, 1, 9]),
        Some(NeighborState::Reachable([0x02, 0, 0, 0, 1, 9]))
    );
    assert_eq!(a.neighbor([10, 0, 1, 0]), None);
}

/// Multi-queue: two instances share our addresses; ARP lands on the first one, the second
/// learns the answer to its own request through `observe_arp`.
#[test]
fn observe_arp_lets_a_sibling_instance_learn() {
    let mut a0 = iface_a();
    let mut a1 = iface_a();
    assert_eq!(a1.resolve(ms(0), IP_B), Resolve::Pending);
    assert_eq!(drain(&mut a1, ms(0)).len(), 1);
    let reply = arp_frame(MAC_A, 2, MAC_B, IP_B, MAC_A, IP_A);
    let mut tx = [0u8; 64];
    // Queue 0's instance never asked: it does not learn (anti-poisoning) ...
    assert_eq!(a0.handle_frame(ms(1), &reply, &mut tx), RxAction::Consumed);
    assert_eq!(a0.neighbor(IP_B), None);
    // ... the dataplane shows the frame to the sibling, which did ask.
    assert!(a1.observe_arp(ms(1), &reply));
    assert_eq!(a1.resolve(ms(2), IP_B), Resolve::Known(MAC_B));
    assert_eq!(a1.poll_timeout(), None);
    // A request for us is learned by the sibling but not answered, nor counted as received.
    let req = arp_frame([0xff; 6], 1, MAC_C, [10, 0, 0, 3], [0; 6], IP_A);
    assert!(a1.observe_arp(ms(3), &req));
    assert_eq!(
        a1.neighbor([10, 0, 0, 3]),
        Some(NeighborState::Reachable(MAC_C))
    );
    assert_eq!(a1.stats().arp_request_rx, 0);
    assert_eq!(a1.stats().tx_frames, 1);
    // Conflicts, unsolicited replies and non-ARP frames change nothing and raise no event.
    let conflict = arp_frame([0xff; 6], 1, MAC_C, IP_A, [0; 6], IP_B);
    assert!(!a1.observe_arp(ms(4), &conflict));
    let unsolicited = arp_frame(MAC_A, 2, MAC_C, [10, 0, 0, 9], MAC_A, IP_A);
    assert!(!a1.observe_arp(ms(4), &unsolicited));
    let mut not_arp = reply.clone();
    not_arp[12..14].copy_from_slice(&[0x08, 0x00]);
    assert!(!a1.observe_arp(ms(4), &not_arp));
    assert!(!a1.observe_arp(ms(4), &reply[..30]));
    assert!(events(&mut a1).is_empty());
}
