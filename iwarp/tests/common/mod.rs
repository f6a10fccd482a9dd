//! Shared test helpers: a tiny pcap/pcapng reader and classic-pcap writer, Ethernet/IPv4/TCP
//! parsing and building, per-direction TCP stream reassembly, and a tshark runner.
//!
//! Test-only code: it may panic on malformed captures (they are fixtures we control).
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../tests/support/siw_peer.rs"]
mod siw_peer;

/// A real Linux siw capture: `shared/siw-peer/pcaps/FILE` beside the repository (as on developer
/// machines and in CI; found from a git worktree too).
pub fn siw_pcap(file: &str) -> PathBuf {
    siw_peer::siw_peer_dir().join("pcaps").join(file)
}

/// One captured link-layer frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// 1-based frame number, as tshark counts.
    pub number: usize,
    /// Timestamp in microseconds (as given by the capture's resolution; approximate).
    pub ts_us: u64,
    /// Ethernet frame bytes.
    pub data: Vec<u8>,
}

fn rd_u16(b: &[u8], at: usize, le: bool) -> u16 {
    let x = [b[at], b[at + 1]];
    if le {
        u16::from_le_bytes(x)
    } else {
        u16::from_be_bytes(x)
    }
}

fn rd_u32(b: &[u8], at: usize, le: bool) -> u32 {
    let x = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if le {
        u32::from_le_bytes(x)
    } else {
        u32::from_be_bytes(x)
    }
}

/// Read a classic pcap or a pcapng file (Ethernet link type only).
pub fn read_capture(bytes: &[u8]) -> Vec<Frame> {
    assert!(bytes.len() >= 24, "capture too short");
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    match magic {
        0x0a0d_0d0a => read_pcapng(bytes),
        0xa1b2_c3d4 | 0xa1b2_3c4d => read_pcap(bytes, true),
        0xd4c3_b2a1 | 0x4d3c_b2a1 => read_pcap(bytes, false),
        m => panic!("unknown capture magic {m:#x}"),
    }
}

fn read_pcap(b: &[u8], le: bool) -> Vec<Frame> {
    assert_eq!(rd_u32(b, 20, le), 1, "only Ethernet captures");
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let sec = u64::from(rd_u32(b, at, le));
        let usec = u64::from(rd_u32(b, at + 4, le));
        let incl = rd_u32(b, at + 8, le) as usize;
        at += 16;
        let data = b[at..at + incl].to_vec();
        at += incl;
        out.push(Frame {
            number: out.len() + 1,
            ts_us: sec * 1_000_000 + usec,
            data,
        });
    }
    out
}

fn read_pcapng(b: &[u8]) -> Vec<Frame> {
    let mut at = 0;
    let mut le = true;
    let mut out = Vec::new();
    let mut linktypes: Vec<u16> = Vec::new();
    while at + 12 <= b.len() {
        let btype_le = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if btype_le == 0x0a0d_0d0a {
            // Section header: byte-order magic decides endianness for the section.
            let bom = u32::from_le_bytes([b[at + 8], b[at + 9], b[at + 10], b[at + 11]]);
            le = bom == 0x1a2b_3c4d;
            linktypes.clear();
        }
        let btype = rd_u32(b, at, le);
        let blen = rd_u32(b, at + 4, le) as usize;
        assert!(
            blen >= 12 && at + blen <= b.len(),
            "bad pcapng block at {at}"
        );
        let body = &b[at + 8..at + blen - 4];
        match btype {
            1 => linktypes.push(rd_u16(body, 0, le)),
            6 => {
                let ifid = rd_u32(body, 0, le) as usize;
                assert_eq!(linktypes.get(ifid), Some(&1), "only Ethernet captures");
                let ts = (u64::from(rd_u32(body, 4, le)) << 32) | u64::from(rd_u32(body, 8, le));
                let caplen = rd_u32(body, 12, le) as usize;
                let data = body[20..20 + caplen].to_vec();
                out.push(Frame {
                    number: out.len() + 1,
                    ts_us: ts,
                    data,
                });
            }
            3 => {
                let caplen = blen - 16;
                let olen = rd_u32(body, 0, le) as usize;
                let data = body[4..4 + caplen.min(olen)].to_vec();
                out.push(Frame {
                    number: out.len() + 1,
                    ts_us: 0,
                    data,
                });
            }
            _ => {}
        }
        at += blen;
    }
    out
}

/// An endpoint: IPv4 address and TCP port.
pub type Endpoint = ([u8; 4], u16);

/// TCP flag bits.
pub mod tcpflags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

/// A parsed TCP segment.
#[derive(Debug, Clone)]
pub struct Segment {
    pub frame: usize,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: Vec<u8>,
}

/// Parse an Ethernet (optionally 802.1Q) / IPv4 / TCP frame.
pub fn parse_tcp(frame: &Frame) -> Option<Segment> {
    let d = &frame.data;
    let mut et_at = 12;
    let mut ethertype = u16::from_be_bytes([*d.get(12)?, *d.get(13)?]);
    if ethertype == 0x8100 {
        et_at += 4;
        ethertype = u16::from_be_bytes([*d.get(16)?, *d.get(17)?]);
    }
    if ethertype != 0x0800 {
        return None;
    }
    let ip = d.get(et_at + 2..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    if *ip.get(9)? != 6 || ihl < 20 || total > ip.len() {
        return None;
    }
    let src_ip: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
    let dst_ip: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
    let tcp = ip.get(ihl..total)?;
    let doff = usize::from(tcp.get(12)? >> 4) * 4;
    Some(Segment {
        frame: frame.number,
        src: (src_ip, u16::from_be_bytes([tcp[0], tcp[1]])),
        dst: (dst_ip, u16::from_be_bytes([tcp[2], tcp[3]])),
        seq: u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?),
        ack: u32::from_be_bytes(tcp.get(8..12)?.try_into().ok()?),
        flags: *tcp.get(13)?,
        payload: tcp.get(doff..)?.to_vec(),
    })
}

/// One direction of a TCP connection, reassembled.
#[derive(Debug, Clone, Default)]
pub struct Direction {
    /// Initial sequence number (from the SYN) if seen.
    pub isn: Option<u32>,
    /// In-order payload up to the first gap.
    pub stream: Vec<u8>,
    /// True if a hole was found (segments missing from the capture).
    pub gap: bool,
    /// (stream offset, frame number) of the first octet of each distinct data segment, in
    /// stream order (retransmissions of already-seen data are not listed).
    pub segments: Vec<(usize, usize)>,
    /// Contiguous runs after each gap, in stream order.
    pub later_runs: Vec<Run>,
}

/// A contiguous run of stream octets that follows a gap in the capture.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Stream offset of `data[0]`.
    pub offset: usize,
    pub data: Vec<u8>,
    /// (stream offset, frame number) of each distinct data segment in the run.
    pub segments: Vec<(usize, usize)>,
}

/// A TCP connection (one SYN), both directions.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The active opener (sender of the SYN), or the first sender seen.
    pub client: Endpoint,
    pub server: Endpoint,
    /// Client -> server.
    pub c2s: Direction,
    /// Server -> client.
    pub s2c: Direction,
    /// Frame number of the first segment.
    pub first_frame: usize,
}

#[derive(Default)]
struct DirBuilder {
    isn: Option<u32>,
    base: Option<u32>,
    segs: BTreeMap<u64, (usize, Vec<u8>)>,
}

impl DirBuilder {
    fn add(&mut self, s: &Segment) {
        if s.flags & tcpflags::SYN != 0 {
            self.isn = Some(s.seq);
            self.base = Some(s.seq.wrapping_add(1));
        }
        if s.payload.is_empty() {
            return;
        }
        let base = *self.base.get_or_insert(s.seq);
        let mut seq = s.seq;
        if s.flags & tcpflags::SYN != 0 {
            seq = seq.wrapping_add(1);
        }
        let off = u64::from(seq.wrapping_sub(base));
        // keep the longest segment at a given offset (retransmissions may be coalesced)
        let e = self.segs.entry(off).or_insert((s.frame, Vec::new()));
        if s.payload.len() > e.1.len() {
            *e = (e.0, s.payload.clone());
        }
    }

    fn build(self) -> Direction {
        let mut runs: Vec<Run> = vec![Run::default()];
        for (off, (frame, data)) in self.segs {
            let off = off as usize;
            let mut run = runs.last_mut().unwrap();
            let run_end = run.offset + run.data.len();
            if off > run_end {
                runs.push(Run {
                    offset: off,
                    ..Default::default()
                });
                run = runs.last_mut().unwrap();
            }
            let run_end = run.offset + run.data.len();
            let end = off + data.len();
            if end > run_end {
                if off == run_end || run.segments.last().is_none_or(|l| l.0 < off) {
                    run.segments.push((off, frame));
                }
                run.data.extend_from_slice(&data[run_end - off..]);
            }
        }
        let first = runs.remove(0);
        Direction {
            isn: self.isn,
            stream: first.data,
            gap: !runs.is_empty(),
            segments: first.segments,
            later_runs: runs,
        }
    }
}

/// Group the TCP segments of a capture into connections and reassemble both directions.
pub fn connections(frames: &[Frame]) -> Vec<Connection> {
    struct Builder {
        client: Endpoint,
        server: Endpoint,
        first: usize,
        c2s: DirBuilder,
        s2c: DirBuilder,
        closed: bool,
    }
    let mut conns: Vec<Builder> = Vec::new();
    for f in frames {
        let Some(s) = parse_tcp(f) else { continue };
        let syn_only = s.flags & (tcpflags::SYN | tcpflags::ACK) == tcpflags::SYN;
        // find the latest connection on this 4-tuple
        let idx = conns.iter().rposition(|c| {
            (c.client == s.src && c.server == s.dst) || (c.client == s.dst && c.server == s.src)
        });
        let idx = match idx {
            Some(i)
                if !(syn_only
                    && conns[i].closed
                    && conns[i].c2s.isn.is_some_and(|isn| isn != s.seq)) =>
            {
                i
            }
            _ => {
                let (client, server) =
                    if s.flags & tcpflags::SYN != 0 && s.flags & tcpflags::ACK != 0 {
                        (s.dst, s.src)
                    } else {
                        (s.src, s.dst)
                    };
                conns.push(Builder {
                    client,
                    server,
                    first: f.number,
                    c2s: DirBuilder::default(),
                    s2c: DirBuilder::default(),
                    closed: false,
                });
                conns.len() - 1
            }
        };
        let c = &mut conns[idx];
        if s.flags & (tcpflags::FIN | tcpflags::RST) != 0 {
            c.closed = true;
        }
        if s.src == c.client {
            c.c2s.add(&s);
        } else {
            c.s2c.add(&s);
        }
    }
    conns
        .into_iter()
        .map(|b| Connection {
            client: b.client,
            server: b.server,
            c2s: b.c2s.build(),
            s2c: b.s2c.build(),
            first_frame: b.first,
        })
        .collect()
}

/// All `*.pcap` files of the siw capture directory, sorted.
pub fn siw_pcaps() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(siw_pcap(""))
        .expect("siw pcaps directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    v.sort();
    v
}

/// Path of tshark if installed.
pub fn tshark() -> Option<PathBuf> {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
        let p = Path::new(dir).join("tshark");
        if p.exists() {
            return Some(p);
        }
    }
    None
}

/// Run tshark with `args` on `file`; returns stdout. Panics if tshark fails.
pub fn run_tshark(tshark: &Path, file: &Path, args: &[&str]) -> String {
    let out = Command::new(tshark)
        .arg("-r")
        .arg(file)
        .args(["--disable-protocol", "rpcordma"])
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

// ---------------------------------------------------------------------------------------------
// Writing

/// Internet checksum (RFC 1071) over `data`, starting from `sum`.
fn csum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Build an Ethernet/IPv4/TCP frame with correct checksums.
#[allow(clippy::too_many_arguments)]
pub fn build_tcp_frame(
    src: Endpoint,
    dst: Endpoint,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    mss_option: Option<u16>,
    payload: &[u8],
) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(24 + payload.len());
    tcp.extend_from_slice(&src.1.to_be_bytes());
    tcp.extend_from_slice(&dst.1.to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&ack.to_be_bytes());
    let hlen = if mss_option.is_some() { 24 } else { 20 };
    tcp.push(((hlen / 4) as u8) << 4);
    tcp.push(flags);
    tcp.extend_from_slice(&window.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent
    if let Some(mss) = mss_option {
        tcp.extend_from_slice(&[2, 4]);
        tcp.extend_from_slice(&mss.to_be_bytes());
    }
    tcp.extend_from_slice(payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.0);
    pseudo.extend_from_slice(&dst.0);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
    let c = csum_fold(csum_add(csum_add(0, &pseudo), &tcp));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());

    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&src.0);
    ip.extend_from_slice(&dst.0);
    let c = csum_fold(csum_add(0, &ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());

    let mut eth = vec![
        0x02, 0, 0, 0, 0, dst.0[3], 0x02, 0, 0, 0, 0, src.0[3], 0x08, 0x00,
    ];
    eth.extend_from_slice(&ip);
    eth.extend_from_slice(&tcp);
    eth
}

/// Classic pcap writer (microsecond timestamps, Ethernet).
pub struct PcapWriter {
    buf: Vec<u8>,
    t_us: u64,
}

impl PcapWriter {
    pub fn new() -> Self {
        let mut buf = Vec::new();
        buf.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        buf.extend_from_slice(&2u16.to_le_bytes());
        buf.extend_from_slice(&4u16.to_le_bytes());
        buf.extend_from_slice(&0i32.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&65535u32.to_le_bytes());
        buf.extend_from_slice(&1u32.to_le_bytes());
        PcapWriter {
            buf,
            t_us: 1_700_000_000_000_000,
        }
    }

    pub fn push(&mut self, frame: &[u8]) {
        self.t_us += 100;
        let (s, us) = (self.t_us / 1_000_000, self.t_us % 1_000_000);
        self.buf.extend_from_slice(&(s as u32).to_le_bytes());
        self.buf.extend_from_slice(&(us as u32).to_le_bytes());
        self.buf
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.buf
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(frame);
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// A scripted TCP conversation written to a pcap: handshake, data segments (each ACKed), FIN.
pub struct TcpScript {
    pub pcap: PcapWriter,
    pub client: Endpoint,
    pub server: Endpoint,
    c_seq: u32,
    s_seq: u32,
}

impl TcpScript {
    /// Handshake between `client` and `server`.
    pub fn new(client: Endpoint, server: Endpoint) -> Self {
        let mut t = TcpScript {
            pcap: PcapWriter::new(),
            client,
            server,
            c_seq: 1000,
            s_seq: 5000,
        };
        let (c, s) = (client, server);
        t.pcap.push(&build_tcp_frame(
            c,
            s,
            t.c_seq,
            0,
            tcpflags::SYN,
            64240,
            Some(1460),
            &[],
        ));
        let f = tcpflags::SYN | tcpflags::ACK;
        t.pcap.push(&build_tcp_frame(
            s,
            c,
            t.s_seq,
            t.c_seq + 1,
            f,
            65160,
            Some(1460),
            &[],
        ));
        t.c_seq += 1;
        t.s_seq += 1;
        t.pcap.push(&build_tcp_frame(
            c,
            s,
            t.c_seq,
            t.s_seq,
            tcpflags::ACK,
            64240,
            None,
            &[],
        ));
        t
    }

    /// One data segment from the client (`from_client`) or the server, then a bare ACK.
    pub fn send(&mut self, from_client: bool, payload: &[u8]) {
        let (src, dst, seq, ack) = if from_client {
            (self.client, self.server, &mut self.c_seq, self.s_seq)
        } else {
            (self.server, self.client, &mut self.s_seq, self.c_seq)
        };
        let f = tcpflags::ACK | tcpflags::PSH;
        let frame = build_tcp_frame(src, dst, *seq, ack, f, 65000, None, payload);
        *seq = seq.wrapping_add(payload.len() as u32);
        let back = build_tcp_frame(dst, src, ack, *seq, tcpflags::ACK, 65000, None, &[]);
        self.pcap.push(&frame);
        self.pcap.push(&back);
    }
}
