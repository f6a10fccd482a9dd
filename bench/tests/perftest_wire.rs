//! Our `-R` exchange against real perftest runs on Linux siw (`../shared/siw-peer/`): the
//! messages we send must equal, byte for byte, those perftest sent in the captured session
//! (given the same QP numbers, keys and results), and our printed output must equal
//! perftest's printed output of the recorded runs.

use bench::perf::params::Test;
use bench::perf::report::{BwRow, LatRow, TestInfo};
use bench::perf::session::{Comm, DriveCfg, Engine, Row, drive};
use bench::perf::wire::{Dest, script};
use std::collections::VecDeque;

fn shared(rel: &str) -> String {
    bench::fixtures::siw_peer_dir()
        .join(rel)
        .display()
        .to_string()
}

/// Link-layer frames of a pcapng file (little-endian sections; Enhanced Packet Blocks) or
/// of a classic little-endian pcap.
fn frames(b: &[u8]) -> Vec<&[u8]> {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    if b[..4] == [0xd4, 0xc3, 0xb2, 0xa1] {
        let mut off = 24;
        while off + 16 <= b.len() {
            let incl = u32_at(off + 8);
            out.push(&b[off + 16..off + 16 + incl]);
            off += 16 + incl;
        }
        return out;
    }
    assert_eq!(&b[..4], &[0x0a, 0x0d, 0x0d, 0x0a], "pcapng");
    assert_eq!(&b[8..12], &[0x4d, 0x3c, 0x2b, 0x1a], "little-endian pcapng");
    let mut off = 0;
    while off + 12 <= b.len() {
        let (kind, len) = (u32_at(off), u32_at(off + 4));
        if kind == 6 {
            let cap = u32_at(off + 20);
            out.push(&b[off + 28..off + 28 + cap]);
        }
        off += len;
    }
    out
}

/// TCP payloads of a pcap (Ethernet, IPv4), per direction of the first connection to `port`,
/// in sequence order without duplicates: (client->server stream, server->client stream).
fn streams(pcap: &str, port: u16) -> (Vec<u8>, Vec<u8>) {
    let b = std::fs::read(pcap).unwrap_or_else(|e| panic!("{pcap}: {e}"));
    let mut client_port = None;
    let mut segs: [Vec<(u32, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
    for f in frames(&b) {
        if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
            continue;
        }
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let ip_len = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let t = &f[14 + ihl..14 + ip_len];
        let (sp, dp) = (
            u16::from_be_bytes([t[0], t[1]]),
            u16::from_be_bytes([t[2], t[3]]),
        );
        let seq = u32::from_be_bytes(t[4..8].try_into().unwrap());
        let doff = usize::from(t[12] >> 4) * 4;
        let syn = t[13] & 0x02 != 0;
        if client_port.is_none() && syn && dp == port {
            client_port = Some(sp);
        }
        let Some(cp) = client_port else { continue };
        let dir = if sp == cp && dp == port {
            0
        } else if sp == port && dp == cp {
            1
        } else {
            continue;
        };
        let payload = &t[doff..];
        if !payload.is_empty() && !segs[dir].iter().any(|(s, _)| *s == seq) {
            segs[dir].push((seq, payload.to_vec()));
        }
    }
    let join = |mut v: Vec<(u32, Vec<u8>)>| {
        v.sort_by_key(|(s, _)| *s);
        v.into_iter().flat_map(|(_, p)| p).collect::<Vec<u8>>()
    };
    let [a, c] = segs;
    (join(a), join(c))
}

/// The Send payloads of an MPA stream (markers off): the MPA Request/Reply is skipped, then
/// each FPDU is `len | ULPDU | pad | CRC`, the ULPDU an 18-byte untagged DDP/RDMAP header
/// and the message.
fn sends(stream: &[u8]) -> Vec<Vec<u8>> {
    assert!(stream.starts_with(b"MPA ID Re"), "MPA frame first");
    let pd_len = usize::from(u16::from_be_bytes([stream[18], stream[19]]));
    let mut p = 20 + pd_len;
    let mut out = Vec::new();
    while p + 2 <= stream.len() {
        let len = usize::from(u16::from_be_bytes([stream[p], stream[p + 1]]));
        let ulpdu = &stream[p + 2..p + 2 + len];
        assert_eq!(ulpdu[1] & 0x0f, 3, "RDMAP Send");
        out.push(ulpdu[18..].to_vec());
        p += (2 + len).div_ceil(4) * 4 + 4;
    }
    out
}

/// perftest leaves stack garbage in the 4 padding bytes of `pingpong_dest`.
fn mask(mut m: Vec<u8>) -> Vec<u8> {
    if m.len() == 56 {
        m[20..24].fill(0);
    }
    m
}

struct Replay {
    incoming: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
}

impl Comm for Replay {
    fn send(&mut self, msg: &[u8]) -> anyhow::Result<()> {
        self.sent.push(msg.to_vec());
        Ok(())
    }
    fn recv(&mut self) -> anyhow::Result<Vec<u8>> {
        self.incoming
            .pop_front()
            .ok_or_else(|| anyhow::anyhow!("replay exhausted"))
    }
}

struct Fake {
    dest: Dest,
    row: Option<Row>,
    text: String,
}

impl Engine for Fake {
    fn connect_data(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    fn set_up(&mut self) -> anyhow::Result<Vec<Dest>> {
        Ok(vec![self.dest])
    }
    fn run(&mut self, _i: usize, _remote: &[Dest]) -> anyhow::Result<Option<Row>> {
        Ok(self.row)
    }
    fn cpu_util(&self) -> Option<f64> {
        None
    }
    fn out(&mut self, text: &str) {
        self.text.push_str(text);
    }
}

fn info(test: Test, client: bool, ro: bool, gid: bool) -> TestInfo {
    TestInfo {
        test,
        client,
        device: "siw0".into(),
        num_qps: 1,
        pcie_relax_order: Some(ro),
        tx_depth: test.default_tx_depth(),
        rx_depth: 512,
        cq_mod: 1,
        mtu: 1024,
        gid_index: gid.then_some(0),
        inline_size: 0,
        out_reads: 128,
        rdma_cm: true,
        atomic_fetch_add: true,
    }
}

fn cfg(info: TestInfo) -> DriveCfg {
    DriveCfg {
        info,
        page_size: 4096,
        cache_line: 64,
        gbits: true,
        duration: false,
    }
}

#[test]
fn write_bw_messages_equal_perftests_on_the_wire() {
    let (c2s, s2c) = streams(&shared("pcaps/cap_write_bw.pcap"), 18515);
    let (client_msgs, server_msgs) = (sends(&c2s), sends(&s2c));
    assert_eq!(client_msgs.len(), 16, "perftest sent 16 messages each way");
    assert_eq!(server_msgs.len(), 16);
    let client_dest = Dest::decode(&client_msgs[6]).unwrap();
    let server_dest = Dest::decode(&server_msgs[6]).unwrap();
    let report = bench::perf::wire::decode_bw_report(&client_msgs[10..15]).unwrap();
    assert_eq!(
        (report.0, report.1),
        (65536, 5),
        "ib_write_bw -s 65536 -n 5"
    );

    // We as the client, perftest's server replayed.
    let mut comm = Replay {
        incoming: server_msgs.clone().into(),
        sent: Vec::new(),
    };
    let row = BwRow {
        size: report.0,
        iters: report.1,
        bw_peak: report.2,
        bw_avg: report.3,
        msg_rate: report.4,
    };
    let mut eng = Fake {
        dest: client_dest,
        row: Some(Row::Bw(row)),
        text: String::new(),
    };
    let steps = script(Test::WriteBw, true, 1, 1);
    let o = drive(
        &steps,
        true,
        &cfg(info(Test::WriteBw, true, true, false)),
        &mut comm,
        &mut eng,
    )
    .unwrap();
    let want: Vec<Vec<u8>> = client_msgs.iter().cloned().map(mask).collect();
    assert_eq!(comm.sent, want, "client messages differ from perftest's");
    assert_eq!(o.remote[0].rkey, server_dest.rkey);
    assert_eq!(o.remote[0].vaddr, server_dest.vaddr);
    assert!((o.peer_version - 6.06).abs() < 1e-9);
    assert_eq!(o.mtu, 1024);

    // We as the server, perftest's client replayed. perftest's server sends uninitialised
    // memory as its bandwidth report; ours sends zeros. Everything else is equal.
    let mut comm = Replay {
        incoming: client_msgs.clone().into(),
        sent: Vec::new(),
    };
    let mut eng = Fake {
        dest: server_dest,
        row: None,
        text: String::new(),
    };
    let steps = script(Test::WriteBw, false, 1, 1);
    let o = drive(
        &steps,
        false,
        &cfg(info(Test::WriteBw, false, true, false)),
        &mut comm,
        &mut eng,
    )
    .unwrap();
    assert_eq!(comm.sent.len(), 16);
    for (i, (ours, theirs)) in comm.sent.iter().zip(&server_msgs).enumerate() {
        if (10..15).contains(&i) {
            assert_eq!(ours, &vec![0u8; 8], "report message {i}");
        } else {
            assert_eq!(ours, &mask(theirs.clone()), "server message {i}");
        }
    }
    assert_eq!(o.peer_report, Some(row));
    assert!(eng.text.contains(&row.render(true, None)));
}

#[test]
fn write_lat_messages_equal_perftests_on_the_wire() {
    let (c2s, s2c) = streams(&shared("pcaps/cap_write_lat.pcap"), 18515);
    let (client_msgs, server_msgs) = (sends(&c2s), sends(&s2c));
    assert_eq!(client_msgs.len(), 10, "{client_msgs:?}");
    let client_dest = Dest::decode(&client_msgs[6]).unwrap();
    let server_dest = Dest::decode(&server_msgs[6]).unwrap();
    for (client, mine, theirs, dest) in [
        (true, &client_msgs, &server_msgs, client_dest),
        (false, &server_msgs, &client_msgs, server_dest),
    ] {
        let mut comm = Replay {
            incoming: theirs.clone().into(),
            sent: Vec::new(),
        };
        let mut eng = Fake {
            dest,
            row: None,
            text: String::new(),
        };
        let steps = script(Test::WriteLat, client, 1, 1);
        drive(
            &steps,
            client,
            &cfg(info(Test::WriteLat, client, false, true)),
            &mut comm,
            &mut eng,
        )
        .unwrap();
        let want: Vec<Vec<u8>> = mine.iter().cloned().map(mask).collect();
        assert_eq!(comm.sent, want, "client={client}");
    }
}

/// A perftest results file's address lines as `Dest`s: (local, remote).
fn dests_of(text: &str) -> (Dest, Dest) {
    let mut ds = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l
            .trim_start()
            .strip_prefix("local address: ")
            .or(l.trim_start().strip_prefix("remote address: "))
        {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let gid: Vec<u8> = lines[i + 1]
                .trim()
                .trim_start_matches("GID: ")
                .split(':')
                .map(|x| x.parse().unwrap())
                .collect();
            ds.push(Dest {
                lid: hex(f[1]),
                qpn: hex(f[3]),
                psn: hex(f[5]),
                gid: gid.try_into().unwrap(),
                ..Dest::default()
            });
        }
    }
    (ds[0], ds[1])
}

/// Our whole printed output, given the values of a recorded run, equals perftest's.
#[test]
fn printed_output_equals_perftests() {
    let cases: [(&str, Test, bool, bool, bool); 4] = [
        ("write_bw.client.txt", Test::WriteBw, true, true, true),
        ("write_bw.server.txt", Test::WriteBw, false, true, true),
        ("write_lat.client.txt", Test::WriteLat, true, false, true),
        ("write_lat.server.txt", Test::WriteLat, false, false, true),
    ];
    for (file, test, client, ro, gid) in cases {
        let text = std::fs::read_to_string(shared(&format!("results/{file}"))).unwrap();
        let (local, remote) = dests_of(&text);
        let row_line = text.lines().rev().nth(1).unwrap();
        let v: Vec<f64> = row_line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let row = if test.is_bw() {
            Row::Bw(BwRow {
                size: v[0] as u64,
                iters: v[1] as u64,
                bw_peak: v[2],
                bw_avg: v[3],
                msg_rate: v[4],
            })
        } else {
            Row::Lat(LatRow {
                size: v[0] as u64,
                iters: v[1] as u64,
                t_min: v[2],
                t_max: v[3],
                t_typical: v[4],
                t_avg: v[5],
                t_stdev: v[6],
                p99: v[7],
                p99_9: v[8],
            })
        };
        // The peer's side of the exchange: its dest at every Dest step, its report.
        let steps = script(test, client, 1, 1);
        let mut incoming = VecDeque::new();
        let peer_report = match row {
            Row::Bw(b) => bench::perf::wire::encode_bw_report(
                b.size, b.iters, b.bw_peak, b.bw_avg, b.msg_rate,
            ),
            _ => [[0u8; 8]; 5],
        };
        for s in &steps {
            use bench::perf::wire::{Step, encode_mtu, encode_u32, encode_version};
            match s {
                Step::Version => incoming.push_back(encode_version("6.06").to_vec()),
                Step::CycleBuffer => incoming.push_back(encode_u32(4096).to_vec()),
                Step::CacheLine => incoming.push_back(encode_u32(64).to_vec()),
                Step::Mtu => incoming.push_back(encode_mtu(1024).to_vec()),
                Step::Dest(_) => incoming.push_back(remote.encode().to_vec()),
                Step::BwReports => incoming.extend(peer_report.iter().map(|m| m.to_vec())),
                _ => {}
            }
        }
        let mut comm = Replay {
            incoming,
            sent: Vec::new(),
        };
        let run_row = if client {
            Some(row)
        } else if test.is_bw() {
            None
        } else {
            Some(row)
        };
        let mut eng = Fake {
            dest: local,
            row: run_row,
            text: String::new(),
        };
        drive(
            &steps,
            client,
            &cfg(info(test, client, ro, gid)),
            &mut comm,
            &mut eng,
        )
        .unwrap();
        assert_eq!(eng.text, text, "{file}");
    }
}
