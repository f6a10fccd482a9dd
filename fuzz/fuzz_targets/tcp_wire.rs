//! Fuzz the TCP segment parser (`tcp::wire`): arbitrary bytes at an arbitrary range, both
//! checksum modes. It must never panic; a parsed payload lies inside the range handed in and
//! ends where it ends; software-mode success implies the same header in offloaded mode; the
//! tcpdump-like rendering never panics; the one's-complement sum is the same whole or split at
//! an even offset (RFC 1071 §2 (B)).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smoltcp::wire::Ipv4Address;
use tcp::{ChecksumMode, parse_segment, wire};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (cut, bytes) = data.split_at(2);
    // The segment occupies bytes[start..], as after an IPv4 header in a frame.
    let start = usize::from(cut[0]).min(bytes.len());
    let range = start..bytes.len();
    let (src, dst) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
    let off = parse_segment(bytes, range.clone(), src, dst, ChecksumMode::Offloaded);
    let sw = parse_segment(bytes, range.clone(), src, dst, ChecksumMode::Software);
    if let Ok(h) = &off {
        assert!(h.payload.start >= range.start + 20 && h.payload.end == range.end);
        assert!(h.wscale.is_none_or(|w| w <= 14));
        let _ = h.to_string();
    }
    if let Ok(h) = &sw {
        assert_eq!(Some(h), off.as_ref().ok());
    }
    // Out-of-range ranges are errors, not panics.
    let _ = parse_segment(
        bytes,
        range.end..range.end + 1 + usize::from(cut[1]),
        src,
        dst,
        ChecksumMode::Offloaded,
    );
    let mid = (usize::from(cut[1]) * 2).min(bytes.len() & !1);
    let whole = wire::ones_complement_sum(bytes);
    let split = wire::combine(
        wire::ones_complement_sum(&bytes[..mid]),
        wire::ones_complement_sum(&bytes[mid..]),
    );
    // 0x0000 and 0xffff are the same value in one's complement.
    assert!(whole == split || (whole | split) == 0xffff && (whole & split) == 0);
});
