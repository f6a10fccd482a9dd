//! Software Toeplitz hash, so an active open can choose a source port whose return traffic the
//! NIC's RSS steers to the opening thread's own queue (as F-Stack and mTCP do; DESIGN.md §1).

use crate::port::RSS_KEY;

/// Toeplitz hash of `input` under `key` (Microsoft RSS specification). The key must be at
/// least `input.len() + 4` bytes long.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let mut hash = 0u32;
    // The 32-bit window of the key that lines up with the current input bit.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().enumerate() {
        let next = key.get(i + 4).copied().unwrap_or(0);
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                hash ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - b)) & 1);
        }
    }
    hash
}

/// RSS hash of an IPv4/TCP packet as the NIC computes it on receive: source address,
/// destination address, source port, destination port, all as they appear in that packet.
pub fn ipv4_tcp_hash(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> u32 {
    let mut input = [0u8; 12];
    input[..4].copy_from_slice(&src);
    input[4..8].copy_from_slice(&dst);
    input[8..10].copy_from_slice(&sport.to_be_bytes());
    input[10..12].copy_from_slice(&dport.to_be_bytes());
    toeplitz(&RSS_KEY, &input)
}

/// How the port spreads flows: queues, redirection-table size, and the ephemeral port range
/// active opens draw from.
#[derive(Debug, Clone)]
pub struct RssSteering {
    /// RX queues (one per dataplane thread).
    pub queues: u16,
    /// Entries of the redirection table (default table: entry i -> queue i mod `queues`).
    pub reta_size: u32,
    /// Ports for active opens.
    pub ephemeral: std::ops::RangeInclusive<u16>,
}

impl RssSteering {
    /// The queue the NIC steers a hash to.
    pub fn queue_of(&self, hash: u32) -> u16 {
        let entry = hash % self.reta_size.max(1);
        (entry % u32::from(self.queues.max(1))) as u16
    }

    /// A local port such that the peer's packets (src = remote, dst = local) land on `queue`;
    /// the search starts at `start` to spread successive opens. None if no free port fits.
    pub fn pick_source_port(
        &self,
        (local, remote, remote_port): ([u8; 4], [u8; 4], u16),
        queue: u16,
        start: u16,
        in_use: impl Fn(u16) -> bool,
    ) -> Option<u16> {
        let (lo, hi) = (*self.ephemeral.start(), *self.ephemeral.end());
        let n = u32::from(hi - lo) + 1;
        (0..n).find_map(|i| {
            let port = lo + ((u32::from(start.wrapping_sub(lo)) + i) % n) as u16;
            let h = ipv4_tcp_hash(remote, local, remote_port, port);
            (self.queue_of(h) == queue && !in_use(port)).then_some(port)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 vectors of Microsoft's "Verifying the RSS Hash Calculation" (same key as ours).
    #[test]
    fn microsoft_verification_vectors() {
        type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);
        let v: [Vector; 5] = [
            (
                [66, 9, 149, 187],
                2794,
                [161, 142, 100, 80],
                1766,
                0x323e_8fc2,
                0x51cc_c178,
            ),
            (
                [199, 92, 111, 2],
                14230,
                [65, 69, 140, 83],
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
            (
                [24, 19, 198, 95],
                12898,
                [12, 22, 207, 184],
                38024,
                0xd2d0_a5de,
                0x5c2b_394a,
            ),
            (
                [38, 27, 205, 30],
                48228,
                [209, 142, 163, 6],
                2217,
                0x8298_9176,
                0xafc7_327f,
            ),
            (
                [153, 39, 163, 191],
                44251,
                [202, 188, 127, 2],
                1303,
                0x5d18_09c5,
                0x10e8_28a2,
            ),
        ];
        for (src, sport, dst, dport, ip_only, with_tcp) in v {
            let mut ips = [0u8; 8];
            ips[..4].copy_from_slice(&src);
            ips[4..].copy_from_slice(&dst);
            assert_eq!(toeplitz(&RSS_KEY, &ips), ip_only, "{src:?}");
            assert_eq!(ipv4_tcp_hash(src, dst, sport, dport), with_tcp, "{src:?}");
        }
    }

    #[test]
    fn picked_ports_land_on_the_queue() {
        let (local, remote) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let s = RssSteering {
            queues: 4,
            reta_size: 128,
            ephemeral: 49152..=65535,
        };
        for q in 0..4u16 {
            let p = s
                .pick_source_port((local, remote, 5201), q, 50000, |_| false)
                .expect("a port");
            assert_eq!(s.queue_of(ipv4_tcp_hash(remote, local, 5201, p)), q);
        }
        // Ports in use are skipped; a full range yields None.
        let one = RssSteering {
            queues: 1,
            reta_size: 128,
            ephemeral: 1000..=1001,
        };
        assert_eq!(
            one.pick_source_port((local, remote, 1), 0, 1000, |_| true),
            None
        );
        assert_eq!(
            one.pick_source_port((local, remote, 1), 0, 1000, |p| p == 1000),
            Some(1001)
        );
    }
}
