//! perftest's `-R` exchange (perftest 4.5-0.17, `perftest_communication.c`; the wire view is
//! `../shared/siw-peer/README.md` §6): every message travels as one RDMA Send on the "comm"
//! connection; in each exchange the client sends first and the server answers with the same
//! kind of message. This module holds the message codecs and the order of exchanges per test
//! ([`script`]), as pure code; `session` drives it over verbs.

/// The version we announce: the perftest release whose protocol this is (Debian's
/// perftest 4.5+0.17 prints "6.06"). perftest refuses peers below 5.70.
pub const VERSION: &str = "6.06";
/// Size of a version message (`sizeof(user_param->rem_version)`).
pub const VERSION_LEN: usize = 16;
/// Size of `struct pingpong_dest` on the wire.
pub const DEST_LEN: usize = 56;

/// perftest's `struct pingpong_dest`, big-endian on the wire: `lid u32 | out_reads u32 | qpn
/// u32 | psn u32 | rkey u32 | 4 bytes padding | vaddr u64 | gid[16] | srqn u32 | gid_index u32`.
/// Only `rkey` and `vaddr` are used by the peer; `qpn`, `psn` and `gid` are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    /// LID (0 on iWARP).
    pub lid: u32,
    /// Outstanding reads.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// Packet sequence number (random, 24 bits; printed only).
    pub psn: u32,
    /// STag of the buffer the peer targets.
    pub rkey: u32,
    /// Tagged offset (virtual address) the peer targets.
    pub vaddr: u64,
    /// GID (perftest on siw: the MAC address in the first six bytes).
    pub gid: [u8; 16],
    /// SRQ number (XRC/DC only).
    pub srqn: u32,
    /// GID index (perftest sends it in host order inside a big-endian field: 0 either way).
    pub gid_index: u32,
}

impl Dest {
    /// The 56 wire bytes (padding zero).
    pub fn encode(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        b[0..4].copy_from_slice(&self.lid.to_be_bytes());
        b[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        b
    }

    /// Parse 56 bytes (the padding is ignored: perftest leaves stack garbage there).
    pub fn decode(b: &[u8]) -> Option<Dest> {
        if b.len() < DEST_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[24..32]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        Some(Dest {
            lid: u32_at(0),
            out_reads: u32_at(4),
            qpn: u32_at(8),
            psn: u32_at(12),
            rkey: u32_at(16),
            vaddr: u64::from_be_bytes(v),
            gid,
            srqn: u32_at(48),
            gid_index: u32_at(52),
        })
    }
}

/// The version message: the string NUL-padded to 16 bytes.
pub fn encode_version(v: &str) -> [u8; VERSION_LEN] {
    let mut b = [0u8; VERSION_LEN];
    let n = v.len().min(VERSION_LEN - 1);
    b[..n].copy_from_slice(&v.as_bytes()[..n]);
    b
}

/// The peer's version as C's `atof` reads it (leading number; 0.0 if none).
pub fn parse_version(b: &[u8]) -> f64 {
    let s: String = b
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as char)
        .collect();
    let s = s.trim_start();
    let end = s
        .char_indices()
        .take_while(|(i, c)| {
            c.is_ascii_digit() || (*c == '.') || (*i == 0 && (*c == '-' || *c == '+'))
        })
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    s[..end].parse().unwrap_or(0.0)
}

/// perftest stops when the peer's version is below this (`check_version_compatibility`).
pub const MIN_PEER_VERSION: f64 = 5.70;

/// A 4-byte big-endian integer message (cycle buffer, cache line size).
pub fn encode_u32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

/// Parse [`encode_u32`].
pub fn decode_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

/// The MTU message: the IB MTU enum (`IBV_MTU_1024` = 3) as decimal text in two bytes,
/// `"3\0"` (`check_mtu`, peers >= 5.31).
pub fn encode_mtu(ib_mtu_bytes: u32) -> [u8; 2] {
    let e = ib_mtu_enum(ib_mtu_bytes);
    [b'0' + e, 0]
}

/// Parse [`encode_mtu`] back to bytes (256..4096), `None` for an unknown value.
pub fn decode_mtu(b: &[u8]) -> Option<u32> {
    let d = *b.first()?;
    if !(b'1'..=b'5').contains(&d) {
        return None;
    }
    Some(128u32 << (d - b'0'))
}

/// `enum ibv_mtu`: 256 -> 1 ... 4096 -> 5.
pub fn ib_mtu_enum(bytes: u32) -> u8 {
    match bytes {
        ..=256 => 1,
        257..=512 => 2,
        513..=1024 => 3,
        1025..=2048 => 4,
        _ => 5,
    }
}

/// The five bandwidth-report exchanges (`xchg_bw_reports`, peers >= 5.33): size u64, iters
/// u64, then peak, average and message rate as IEEE doubles, each byte-swapped to big-endian.
pub fn encode_bw_report(size: u64, iters: u64, peak: f64, avg: f64, rate: f64) -> [[u8; 8]; 5] {
    [
        size.to_be_bytes(),
        iters.to_be_bytes(),
        peak.to_bits().to_be_bytes(),
        avg.to_bits().to_be_bytes(),
        rate.to_bits().to_be_bytes(),
    ]
}

/// Parse the five messages of [`encode_bw_report`].
pub fn decode_bw_report(m: &[Vec<u8>]) -> Option<(u64, u64, f64, f64, f64)> {
    let u = |i: usize| -> Option<u64> {
        Some(u64::from_be_bytes(m.get(i)?.get(..8)?.try_into().ok()?))
    };
    Some((
        u(0)?,
        u(1)?,
        f64::from_bits(u(2)?),
        f64::from_bits(u(3)?),
        f64::from_bits(u(4)?),
    ))
}

/// One step of a perftest `-R` session, in the order both sides run them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Exchange versions (16 bytes).
    Version,
    /// Exchange the cycle buffer (page size, 4 bytes).
    CycleBuffer,
    /// Exchange the cache line size (4 bytes).
    CacheLine,
    /// Exchange the MTU (2 bytes of text).
    Mtu,
    /// Exchange `my_dest[i]` (56 bytes; all zeros until [`Step::SetUp`]).
    Dest(usize),
    /// Open the data connection(s): the client connects (retrying while the server is not
    /// listening yet), the server listens, accepts every QP's connection, stops listening.
    ConnectData,
    /// Fill in `my_dest` (QP number, PSN, STag, tagged offset, GID).
    SetUp,
    /// Print the test information block.
    PrintInfo,
    /// Print our QPs' addresses.
    PrintLocal,
    /// Print the peer's address of QP `i` (after its exchange).
    PrintRemote(usize),
    /// Print the table header.
    TableHeader,
    /// Run the test at size index `i` of the size list and print its row.
    Run(usize),
    /// Exchange bandwidth reports (five 8-byte messages).
    BwReports,
    /// Server of a one-sided bandwidth test: print the client's report as our row.
    PrintPeerReport,
    /// Print the closing `RESULT_LINE`.
    TableEnd,
}

/// The steps of `test` for one role, as perftest 4.5-0.17's `main` of that test runs them
/// with `-R` (non-duplex, iterations or duration mode), for `qps` QPs and `sizes` sizes.
pub fn script(test: super::params::Test, client: bool, qps: usize, sizes: usize) -> Vec<Step> {
    use super::params::Test::*;
    use Step::*;
    let mut s = vec![
        Version,
        CycleBuffer,
        CacheLine,
        Mtu,
        Dest(0),
        ConnectData,
        Dest(0),
        SetUp,
        PrintInfo,
    ];
    let each = |v: &mut Vec<Step>| v.extend((0..qps).map(Dest));
    let remotes = |v: &mut Vec<Step>| {
        v.push(PrintLocal);
        for i in 0..qps {
            v.push(Dest(i));
            v.push(PrintRemote(i));
        }
    };
    match test {
        WriteBw | ReadBw | AtomicBw => {
            each(&mut s);
            remotes(&mut s);
            s.extend([Dest(0), TableHeader]);
            if client {
                s.extend((0..sizes).map(Run));
                s.extend([TableEnd, Dest(0), BwReports, Dest(0)]);
            } else {
                s.extend([Dest(0), BwReports, PrintPeerReport, Dest(0), TableEnd]);
            }
        }
        SendBw => {
            each(&mut s);
            s.push(Dest(0));
            remotes(&mut s);
            s.push(TableHeader);
            for i in 0..sizes {
                s.extend([Dest(0), Run(i)]);
                if sizes > 1 {
                    s.push(Dest(0));
                }
            }
            s.extend([TableEnd, Dest(0)]);
        }
        SendLat => {
            each(&mut s);
            s.push(Dest(0));
            remotes(&mut s);
            s.push(TableHeader);
            for i in 0..sizes {
                s.extend([Dest(0), Run(i)]);
            }
            s.extend([TableEnd, Dest(0)]);
        }
        WriteLat => {
            s.push(Dest(0));
            each(&mut s);
            remotes(&mut s);
            s.extend([Dest(0), TableHeader]);
            s.extend((0..sizes).map(Run));
            s.push(TableEnd);
        }
        ReadLat | AtomicLat => {
            s.push(Dest(0));
            each(&mut s);
            remotes(&mut s);
            s.push(Dest(0));
            if client {
                s.push(TableHeader);
                s.extend((0..sizes).map(Run));
                s.extend([TableEnd, Dest(0)]);
            } else {
                s.push(Dest(0));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::params::Test;

    #[test]
    fn codecs_round_trip() {
        let d = Dest {
            out_reads: 1,
            qpn: 2,
            psn: 0x56b56d,
            rkey: 0xfefb_e200,
            vaddr: 0x7f74_0420_8000,
            gid: [
                0x52, 0x54, 0, 0xe5, 0x29, 0xf4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            ..Dest::default()
        };
        assert_eq!(Dest::decode(&d.encode()), Some(d));
        assert_eq!(Dest::decode(&[0u8; 55]), None);
        assert_eq!(parse_version(&encode_version("6.06")), 6.06);
        assert_eq!(parse_version(b"5.70xyz\0"), 5.70);
        assert_eq!(parse_version(b"\0"), 0.0);
        assert_eq!(encode_mtu(1024), *b"3\0");
        assert_eq!(decode_mtu(b"3\0"), Some(1024));
        assert_eq!(decode_mtu(b"9\0"), None);
        let r = encode_bw_report(65536, 5, 7.2, 4.8, 0.009);
        let v: Vec<Vec<u8>> = r.iter().map(|m| m.to_vec()).collect();
        assert_eq!(decode_bw_report(&v), Some((65536, 5, 7.2, 4.8, 0.009)));
    }

    /// The number of comm-connection exchanges per test matches what siw's perftest did on
    /// the wire (write_bw: 16 Sends each way; write_lat: 10).
    #[test]
    fn exchange_counts() {
        let count = |t, c| {
            script(t, c, 1, 1)
                .iter()
                .map(|s| match s {
                    Step::BwReports => 5,
                    Step::Version
                    | Step::CycleBuffer
                    | Step::CacheLine
                    | Step::Mtu
                    | Step::Dest(_) => 1,
                    _ => 0,
                })
                .sum::<usize>()
        };
        for c in [true, false] {
            assert_eq!(count(Test::WriteBw, c), 16);
            assert_eq!(count(Test::ReadBw, c), 16);
            assert_eq!(count(Test::WriteLat, c), 10);
            assert_eq!(count(Test::SendLat, c), 11);
            assert_eq!(count(Test::SendBw, c), 11);
            assert_eq!(count(Test::ReadLat, c), 11);
        }
    }
}
