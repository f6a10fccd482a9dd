//! The tests and their parameters, with perftest's defaults (`perftest_parameters.h`:
//! `DEF_SIZE_BW` 65536, `DEF_SIZE_LAT` 2, `DEF_ITERS` 1000, `DEF_ITERS_WB` 5000, `DEF_TX_BW`
//! 128, `DEF_TX_LAT` 1, `DEF_RX_SEND` 512, `DEF_CQ_MOD` 100, `DEF_PORT` 18515, `MAX_SIZE` 8 MiB).

/// perftest's `DEF_PORT`.
pub const DEF_PORT: u16 = 18515;
/// perftest's `MAX_SIZE`: the largest size of a `-a` sweep (2^23).
pub const MAX_SIZE: u64 = 8 * 1024 * 1024;
/// perftest's `MSG_SIZE_CQ_MOD_LIMIT`: above it CQ moderation is off unless asked for.
pub const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
/// perftest's `DEF_PAGE_SIZE` (the "cycle buffer").
pub const DEF_PAGE_SIZE: u32 = 4096;
/// perftest's `DEF_CACHE_LINE_SIZE`.
pub const DEF_CACHE_LINE_SIZE: u32 = 64;

/// The RDMA operation a test measures (perftest's `VerbType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Send/Receive.
    Send,
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// Atomic (RFC 7306).
    Atomic,
}

impl Verb {
    /// perftest's `testsStr`.
    pub fn perftest_name(self) -> &'static str {
        match self {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Atomic => "Atomic",
        }
    }
}

/// One of perftest's tests, plus our kernel-TCP baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Test {
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_bw`.
    ReadBw,
    /// `ib_read_lat`.
    ReadLat,
    /// `ib_send_bw`.
    SendBw,
    /// `ib_send_lat`.
    SendLat,
    /// `ib_atomic_bw`.
    AtomicBw,
    /// `ib_atomic_lat`.
    AtomicLat,
}

impl Test {
    /// Every RDMA test.
    pub const ALL: [Test; 8] = [
        Test::WriteBw,
        Test::WriteLat,
        Test::ReadBw,
        Test::ReadLat,
        Test::SendBw,
        Test::SendLat,
        Test::AtomicBw,
        Test::AtomicLat,
    ];

    /// The verb it measures.
    pub fn verb(self) -> Verb {
        match self {
            Test::WriteBw | Test::WriteLat => Verb::Write,
            Test::ReadBw | Test::ReadLat => Verb::Read,
            Test::SendBw | Test::SendLat => Verb::Send,
            Test::AtomicBw | Test::AtomicLat => Verb::Atomic,
        }
    }

    /// Bandwidth (true) or latency test.
    pub fn is_bw(self) -> bool {
        matches!(
            self,
            Test::WriteBw | Test::ReadBw | Test::SendBw | Test::AtomicBw
        )
    }

    /// Sub-command name (`write_bw`).
    pub fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write_bw",
            Test::WriteLat => "write_lat",
            Test::ReadBw => "read_bw",
            Test::ReadLat => "read_lat",
            Test::SendBw => "send_bw",
            Test::SendLat => "send_lat",
            Test::AtomicBw => "atomic_bw",
            Test::AtomicLat => "atomic_lat",
        }
    }

    /// perftest's JSON `test` value, e.g. `RDMA_Write_BW_Test`, `Atomic_FETCH_AND_ADD_Latency_Test`.
    pub fn json_name(self, fetch_add: bool) -> String {
        let mut s = format!("{}_", self.verb().perftest_name());
        if self.verb() == Verb::Atomic {
            s.push_str(if fetch_add {
                "FETCH_AND_ADD_"
            } else {
                "CMP_AND_SWAP_"
            });
        }
        s.push_str(if self.is_bw() { "BW_" } else { "Latency_" });
        s.push_str("Test");
        s
    }

    /// Latency is half the round trip for ping-pong tests (Write, Send) and the whole
    /// operation for Read and atomics, which are round trips by themselves (perftest's
    /// `rtt_factor`).
    pub fn rtt_factor(self) -> f64 {
        match self.verb() {
            Verb::Read | Verb::Atomic => 1.0,
            Verb::Send | Verb::Write => 2.0,
        }
    }

    /// Default message size.
    pub fn default_size(self) -> u64 {
        match (self.verb(), self.is_bw()) {
            (Verb::Atomic, _) => 8,
            (_, true) => 65536,
            (_, false) => 2,
        }
    }

    /// Default iterations.
    pub fn default_iters(self) -> u64 {
        if self == Test::WriteBw { 5000 } else { 1000 }
    }

    /// Default send-queue depth.
    pub fn default_tx_depth(self) -> u32 {
        if self.is_bw() { 128 } else { 1 }
    }
}

/// The sizes of a `-a` sweep: 2 B to 8 MiB by powers of two (atomics: 8 B only).
pub fn sweep_sizes(test: Test) -> Vec<u64> {
    if test.verb() == Verb::Atomic {
        return vec![8];
    }
    (1..24).map(|i| 1u64 << i).collect()
}

/// CQ moderation as perftest settles it: 100 by default, off (1) for messages above 8 KiB
/// unless asked for, never more than the send-queue depth.
pub fn cq_moderation(requested: Option<u32>, size: u64, sweep: bool, tx_depth: u32) -> u32 {
    let mut m = requested.unwrap_or(100);
    if requested.is_none() && size > MSG_SIZE_CQ_MOD_LIMIT && !sweep {
        m = 1;
    }
    m.clamp(1, tx_depth.max(1))
}

/// The IB path MTU perftest prints for a link whose TCP MSS is `mss`: the largest of
/// 256..4096 that fits (siw on a 1500-byte link reports 1024).
pub fn ib_mtu_for(ip_mtu: u32) -> u32 {
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m + 40 + 20 < ip_mtu)
        .unwrap_or(256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_as_perftest() {
        assert_eq!(Test::WriteBw.default_iters(), 5000);
        assert_eq!(Test::ReadBw.default_iters(), 1000);
        assert_eq!(Test::WriteLat.default_size(), 2);
        assert_eq!(Test::AtomicBw.default_size(), 8);
        assert_eq!(sweep_sizes(Test::WriteBw).first(), Some(&2));
        assert_eq!(sweep_sizes(Test::WriteBw).last(), Some(&MAX_SIZE));
        assert_eq!(cq_moderation(None, 65536, false, 128), 1);
        assert_eq!(cq_moderation(None, 4096, false, 128), 100);
        assert_eq!(cq_moderation(None, 4096, false, 16), 16);
        assert_eq!(ib_mtu_for(1500), 1024);
        assert_eq!(ib_mtu_for(9000), 4096);
        assert_eq!(
            Test::AtomicLat.json_name(true),
            "Atomic_FETCH_AND_ADD_Latency_Test"
        );
        assert_eq!(Test::WriteBw.json_name(false), "RDMA_Write_BW_Test");
    }
}
