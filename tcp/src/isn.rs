//! Initial sequence numbers from a keyed hash (RFC 6528 §3):
//! `ISN = M + F(localip, localport, remoteip, remoteport, secretkey)`, with M a 4 µs timer.

use core::hash::Hasher;
use netcore::{Instant, Seq32};
use siphasher::sip::SipHasher24;
use smoltcp::wire::Ipv4Address;

/// Generates ISNs; the 128-bit key comes from the caller (the dataplane draws it from the OS).
#[derive(Clone)]
pub struct IsnGenerator {
    key: [u8; 16],
}

impl core::fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IsnGenerator{..}")
    }
}

impl IsnGenerator {
    /// A generator with secret `key`.
    pub fn new(key: [u8; 16]) -> Self {
        IsnGenerator { key }
    }

    /// The ISN for this 4-tuple at `now`.
    pub fn isn(
        &self,
        now: Instant,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
    ) -> Seq32 {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(&local.0.octets());
        h.write(&local.1.to_be_bytes());
        h.write(&remote.0.octets());
        h.write(&remote.1.to_be_bytes());
        // Truncation is intended: F is 32 bits wide.
        let f = h.finish() as u32;
        // RFC 6528 §3: M is a timer that ticks every 4 microseconds.
        let m = (now.as_nanos() / 4000) as u32;
        Seq32(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_and_time_dependent() {
        let a = (Ipv4Address::new(10, 0, 0, 1), 1000);
        let b = (Ipv4Address::new(10, 0, 0, 2), 80);
        let g1 = IsnGenerator::new([1; 16]);
        let g2 = IsnGenerator::new([2; 16]);
        let t = Instant::from_millis(5);
        assert_ne!(g1.isn(t, a, b), g2.isn(t, a, b));
        assert_ne!(g1.isn(t, a, b), g1.isn(t, b, a));
        // 4 µs tick.
        let later = g1.isn(Instant::from_nanos(t.as_nanos() + 8000), a, b);
        assert_eq!(later.diff(g1.isn(t, a, b)), 2);
    }
}
