//! SYN cookies (RFC 4987 §3.6): when a listener's queue of half-open connections is full, the
//! SYN-ACK carries the connection state in its sequence number instead of a TCB, and the
//! connection is created only when the handshake's ACK returns a valid cookie.
//!
//! ISS layout (as Linux's, rearranged): `t` (5 bits, a 64-second counter), the index of the MSS
//! in a table (3 bits), and a 24-bit MAC (SipHash-2-4 with the endpoint's secret) over the
//! 4-tuple, the peer's ISN and `t`. A cookie is valid during the slot it was made in and the
//! next one (64 to 128 s). Window scale and SACK permission ride in the low 6 bits of our
//! TSval when the peer sent timestamps (the ACK echoes them in TSecr); without timestamps the
//! connection goes without window scaling and SACK (the trade-off RFC 4987 §3.6 describes).

use core::hash::Hasher;

use netcore::{Instant, Seq32};
use siphasher::sip::SipHasher24;
use smoltcp::wire::Ipv4Address;

/// MSS values a cookie can carry; the largest not above the peer's MSS is chosen.
const MSS_TABLE: [u16; 8] = [536, 1200, 1360, 1440, 1452, 1460, 4312, 8960];

/// Length of one cookie time slot in seconds.
const SLOT_SECS: u64 = 64;

/// Options carried in the low bits of TSval: bits 0-3 the peer's window scale (15: none),
/// bit 4 SACK permitted.
const TS_OPT_BITS: u32 = 6;
const TS_OPT_MASK: u32 = (1 << TS_OPT_BITS) - 1;
const WS_NONE: u32 = 0xf;

/// Options negotiated through a cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CookieOpts {
    /// MSS the peer announced, rounded down to the table.
    pub(crate) mss: u16,
    /// The peer's window scale, if both sides use window scaling.
    pub(crate) wscale: Option<u8>,
    /// Both sides use SACK.
    pub(crate) sack: bool,
}

/// Makes and checks cookies with a secret key.
#[derive(Clone)]
pub(crate) struct CookieJar {
    key: [u8; 16],
}

impl core::fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CookieJar{..}")
    }
}

fn slot(now: Instant) -> u32 {
    // Truncation intended: only the low 5 bits are kept.
    ((now.as_nanos() / 1_000_000_000 / SLOT_SECS) & 0x1f) as u32
}

impl CookieJar {
    /// A jar keyed by `key` (derived from the endpoint's ISN secret by the caller).
    pub(crate) fn new(key: [u8; 16]) -> Self {
        CookieJar { key }
    }

    fn mac(
        &self,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
        peer_isn: Seq32,
        t: u32,
    ) -> u32 {
        let mut h = SipHasher24::new_with_key(&self.key);
        h.write(&local.0.octets());
        h.write(&local.1.to_be_bytes());
        h.write(&remote.0.octets());
        h.write(&remote.1.to_be_bytes());
        h.write(&peer_isn.0.to_be_bytes());
        h.write(&t.to_be_bytes());
        // Truncation intended: a 24-bit MAC.
        (h.finish() as u32) & 0x00ff_ffff
    }

    /// The ISS for a SYN from `remote` to `local` with ISN `peer_isn` and MSS `peer_mss`;
    /// also returns the MSS the connection will use.
    pub(crate) fn make(
        &self,
        now: Instant,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
        peer_isn: Seq32,
        peer_mss: u16,
    ) -> (Seq32, u16) {
        let idx = MSS_TABLE.iter().rposition(|&m| m <= peer_mss).unwrap_or(0);
        let t = slot(now);
        let mac = self.mac(local, remote, peer_isn, t);
        // idx < 8 fits 3 bits.
        (
            Seq32((t << 27) | ((idx as u32) << 24) | mac),
            MSS_TABLE[idx],
        )
    }

    /// Check the cookie `iss` (SEG.ACK - 1 of the handshake's ACK) for the SYN with ISN
    /// `peer_isn` (SEG.SEQ - 1); returns the MSS it carries.
    pub(crate) fn check(
        &self,
        now: Instant,
        local: (Ipv4Address, u16),
        remote: (Ipv4Address, u16),
        peer_isn: Seq32,
        iss: Seq32,
    ) -> Option<u16> {
        let t = iss.0 >> 27;
        let age = slot(now).wrapping_sub(t) & 0x1f;
        if age > 1 {
            return None;
        }
        if self.mac(local, remote, peer_isn, t) != iss.0 & 0x00ff_ffff {
            return None;
        }
        Some(MSS_TABLE[((iss.0 >> 24) & 7) as usize])
    }
}

/// Our TSval for a cookie SYN-ACK: the clock value `tsval` with its low bits replaced by the
/// options, never above `tsval` (later TSvals must not go backwards, RFC 7323 §5.3).
pub(crate) fn encode_ts(tsval: u32, wscale: Option<u8>, sack: bool) -> u32 {
    let opts = wscale.map_or(WS_NONE, |w| u32::from(w.min(14))) | (u32::from(sack) << 4);
    let v = (tsval & !TS_OPT_MASK) | opts;
    if v > tsval && tsval > TS_OPT_MASK {
        v - (TS_OPT_MASK + 1)
    } else {
        v
    }
}

/// The options of [`encode_ts`] from the TSecr of the handshake's ACK.
pub(crate) fn decode_ts(tsecr: u32) -> (Option<u8>, bool) {
    let ws = tsecr & WS_NONE;
    // ws <= 14 fits a u8.
    let ws = (ws != WS_NONE).then_some(ws as u8);
    (ws, tsecr & 0x10 != 0)
}

impl CookieOpts {
    /// Options of a cookie connection: the MSS from the cookie, window scale and SACK from the
    /// TSecr when timestamps are in use (`tsecr`), else neither.
    pub(crate) fn new(mss: u16, tsecr: Option<u32>) -> Self {
        let (wscale, sack) = tsecr.map_or((None, false), decode_ts);
        CookieOpts { mss, wscale, sack }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: (Ipv4Address, u16) = (Ipv4Address::new(10, 0, 0, 1), 80);
    const R: (Ipv4Address, u16) = (Ipv4Address::new(10, 0, 0, 2), 40000);

    #[test]
    fn cookie_roundtrip_expiry_and_forgery() {
        let jar = CookieJar::new([3; 16]);
        let t0 = Instant::from_millis(5_000);
        let (iss, mss) = jar.make(t0, L, R, Seq32(77), 1460);
        assert_eq!(mss, 1460);
        assert_eq!(jar.check(t0, L, R, Seq32(77), iss), Some(1460));
        // Still valid in the next slot, not in the one after.
        assert_eq!(
            jar.check(Instant::from_millis(5_000 + 64_000), L, R, Seq32(77), iss),
            Some(1460)
        );
        assert_eq!(
            jar.check(Instant::from_millis(5_000 + 128_000), L, R, Seq32(77), iss),
            None
        );
        // Another peer ISN, tuple or key: rejected.
        assert_eq!(jar.check(t0, L, R, Seq32(78), iss), None);
        assert_eq!(jar.check(t0, L, (R.0, R.1 + 1), Seq32(77), iss), None);
        assert_eq!(
            CookieJar::new([4; 16]).check(t0, L, R, Seq32(77), iss),
            None
        );
        assert_eq!(jar.check(t0, L, R, Seq32(77), iss + 1u32), None);
        // MSS rounds down to the table.
        let (iss, mss) = jar.make(t0, L, R, Seq32(1), 1400);
        assert_eq!(mss, 1360);
        assert_eq!(jar.check(t0, L, R, Seq32(1), iss), Some(1360));
        assert_eq!(jar.make(t0, L, R, Seq32(1), 100).1, 536);
    }

    #[test]
    fn options_in_tsval() {
        for tsval in [0u32, 5, 63, 64, 1000, u32::MAX] {
            for (ws, sack) in [
                (None, false),
                (Some(7), true),
                (Some(14), false),
                (Some(0), true),
            ] {
                let v = encode_ts(tsval, ws, sack);
                assert!(v <= tsval || tsval < 64, "{tsval} -> {v}");
                assert_eq!(decode_ts(v), (ws, sack));
            }
        }
    }
}
