//! Fuzz the interface layer (`tcp::iface`: Ethernet, ARP, IPv4, ICMP): a sequence of frames
//! cut from the input, interleaved with time steps, resolutions and the interface's own
//! output. It must never panic; a reply fits the TX buffer; a TCP range lies inside its
//! frame; the neighbour cache stays within its capacity.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netcore::{Duration, Instant};
use tcp::iface::{Iface, IfaceConfig, RxAction};

fuzz_target!(|data: &[u8]| {
    let mut cfg = IfaceConfig::new([2, 0, 0, 0, 0, 1], [10, 0, 0, 1], 24);
    cfg.neighbor_capacity = 8;
    if data.first().is_some_and(|b| b & 1 == 1) {
        cfg.gateway = Some([10, 0, 0, 254]);
    }
    let mut iface = Iface::new(cfg);
    let mut now = Instant::from_millis(1);
    let mut tx = vec![0u8; 1514];
    let mut at = 1;
    while at < data.len() {
        let op = data[at];
        at += 1;
        match op % 8 {
            // A frame: the next byte gives its length.
            0..=4 => {
                let n = usize::from(data.get(at).copied().unwrap_or(0)) * 2;
                at += 1;
                let frame = &data[at.min(data.len())..(at + n).min(data.len())];
                at += n;
                match iface.handle_frame(now, frame, &mut tx) {
                    RxAction::Reply(len) => assert!(len <= tx.len()),
                    RxAction::Tcp { payload, .. } => assert!(payload.end <= frame.len()),
                    _ => {}
                }
            }
            5 => now += Duration::from_millis(u64::from(op) * 40),
            6 => {
                let ip = [10, 0, 0, data.get(at).copied().unwrap_or(2)];
                at += 1;
                let _ = iface.resolve(now, ip);
            }
            _ => {
                let ip = [10, 0, 1, data.get(at).copied().unwrap_or(2)];
                at += 1;
                let _ = iface.resolve(now, ip);
            }
        }
        while let Some(len) = iface.poll_transmit(now, &mut tx) {
            assert!(len <= tx.len());
        }
        if iface.poll_timeout().is_some_and(|t| t <= now) {
            iface.handle_timeout(now);
        }
        while iface.poll_event().is_some() {}
        assert!(iface.neighbors().count() <= 8);
    }
});
