//! Fuzz a live TCP `Endpoint` fed a seeded stream of segments from a scripted peer.
//!
//! The input picks a configuration (SACK, timestamps, window scaling, congestion control,
//! RACK-TLP, delayed ACK, small windows, active or passive open), then a stream of operations:
//! peer segments built relative to what each side has sent (in order, old, ahead, with any
//! flags, options and SACK blocks), clock steps, application sends, reads, close and abort.
//! The peer's payload is always the pattern `P` at its stream offset and ours the pattern `Q`,
//! so besides "never panics" the target checks real outcomes: every byte delivered in order
//! equals `P` at its offset (reassembly, trimming, D-SACK paths), every payload byte we emit,
//! first transmission or retransmission, equals `Q` at its offset, `Acked` never passes what
//! was queued, and out-of-order holdings stay within their bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netcore::{Duration, Instant, Seq32};
use smoltcp::wire::Ipv4Address;
use tcp::{
    ChecksumMode, CongestionControl, ConnHandle, Dispatch, Endpoint, Event, TcpConfig,
    parse_segment,
};

const US: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const PEER: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const PORT: u16 = 80;
const PEER_PORT: u16 = 40000;
const PEER_ISS: u32 = 0xfff0_0000; // wraps within the first MiB

fn p(k: u64) -> u8 {
    (k % 251) as u8
}
fn q(k: u64) -> u8 {
    (k % 253) as u8 ^ 0x5a
}

struct Bytes<'a>(&'a [u8], usize);
impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
    fn done(&self) -> bool {
        self.1 >= self.0.len()
    }
}

/// What the peer knows: its own stream, and our ISS and highest sequence seen.
struct Peer {
    sent: u64,
    our_iss: Option<Seq32>,
    our_max: u32,
    ts: u32,
}

/// A TCP header (options padded to 32-bit words) followed by the pattern payload.
fn segment(b: &mut Bytes, peer: &mut Peer, mss: u16) -> Vec<u8> {
    let flags = b.u8();
    let (syn, fin, rst, ackf) = (
        flags & 1 != 0,
        flags & 2 != 0,
        flags & 4 != 0,
        flags & 8 == 0,
    );
    // Stream offset of the first payload byte: mostly the next one, sometimes old or ahead.
    let delta = i64::from(b.u8() as i8);
    let off = if flags & 0x30 == 0 {
        peer.sent as i64
    } else {
        peer.sent as i64 + delta * 97
    };
    // A SYN always carries the peer's ISS, so stream offsets stay those of the pattern.
    let off = if syn { 0 } else { off.max(0) as u64 };
    let len = if syn && flags & 0x40 == 0 {
        0
    } else {
        usize::from(b.u16()) % (usize::from(mss) + 64)
    };
    let seq = Seq32(PEER_ISS) + (off as u32) + if syn { 0u32 } else { 1 };
    let ack = peer
        .our_max
        .wrapping_add(i32::from(b.u8() as i8).wrapping_mul(64) as u32);
    let win = b.u16();
    let mut opts = Vec::new();
    let o = b.u8();
    if syn {
        opts.extend_from_slice(&[2, 4]);
        opts.extend_from_slice(&(u16::from(b.u8()) * 8 + 64).to_be_bytes());
        if o & 1 != 0 {
            opts.extend_from_slice(&[1, 3, 3, o >> 4]);
        }
        if o & 2 != 0 {
            opts.extend_from_slice(&[1, 1, 4, 2]);
        }
    }
    if o & 4 != 0 {
        peer.ts = peer.ts.wrapping_add(u32::from(b.u8()));
        opts.extend_from_slice(&[1, 1, 8, 10]);
        opts.extend_from_slice(&peer.ts.to_be_bytes());
        opts.extend_from_slice(&b.u16().to_be_bytes());
        opts.extend_from_slice(&[0, 0]);
    }
    if o & 8 != 0 && !syn {
        let n = (o >> 4) % 4;
        opts.extend_from_slice(&[1, 1, 5, 2 + 8 * n]);
        for _ in 0..n {
            let l = ack.wrapping_add(u32::from(b.u16()));
            opts.extend_from_slice(&l.to_be_bytes());
            opts.extend_from_slice(&l.wrapping_add(u32::from(b.u16())).to_be_bytes());
        }
    }
    while opts.len() % 4 != 0 {
        opts.push(0);
    }
    opts.truncate(40);
    let hl = 20 + opts.len();
    let mut s = vec![0u8; hl + len];
    s[0..2].copy_from_slice(&PEER_PORT.to_be_bytes());
    s[2..4].copy_from_slice(&PORT.to_be_bytes());
    s[4..8].copy_from_slice(&seq.0.to_be_bytes());
    s[8..12].copy_from_slice(&ack.to_be_bytes());
    s[12] = ((hl / 4) as u8) << 4;
    s[13] = u8::from(fin) | u8::from(syn) << 1 | u8::from(rst) << 2 | u8::from(ackf) << 4;
    s[14..16].copy_from_slice(&win.to_be_bytes());
    s[20..hl].copy_from_slice(&opts);
    for (i, x) in s[hl..].iter_mut().enumerate() {
        *x = p(off + i as u64);
    }
    if flags & 0x30 == 0 && !rst {
        peer.sent = off + len as u64;
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data, 0);
    let c = b.u8();
    let cfg = TcpConfig {
        sack: c & 1 != 0,
        timestamps: c & 2 != 0,
        window_scale: if c & 4 != 0 { Some(7) } else { Some(0) },
        cc: [
            CongestionControl::NewReno,
            CongestionControl::Cubic,
            CongestionControl::Bbr,
        ][usize::from(c >> 3 & 3) % 3],
        rack_tlp: c & 0x20 != 0,
        delayed_ack: (c & 0x40 != 0).then(|| Duration::from_millis(40)),
        recv_window: if c & 0x80 != 0 { 4096 } else { 65535 },
        send_window: 1 << 20,
        max_ooo_segments: 16,
        max_ooo_small_segments: 4,
        max_ooo_segments_total: 24,
        syn_backlog: 2,
        checksum: ChecksumMode::Offloaded,
        ..TcpConfig::default()
    };
    let (max_seg, max_total) = (cfg.max_ooo_segments, cfg.max_ooo_segments_total);
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, US, [7; 16]);
    ep.listen(PORT);
    let mut now = Instant::from_millis(1000);
    let mut peer = Peer {
        sent: 0,
        our_iss: None,
        our_max: 0,
        ts: 1,
    };
    // Active open from the listening port (the peer's segments match it first), or passive.
    let mut conn: Option<ConnHandle> = None;
    if b.u8() & 1 == 1 {
        conn = ep.connect(now, PORT, (PEER, PEER_PORT)).ok();
    }
    let (mut read, mut queued) = (0u64, 0u64);
    let mut buf = vec![0u8; 1600];
    let mut src = |off: u64, dst: &mut [u8]| {
        for (i, x) in dst.iter_mut().enumerate() {
            *x = q(off + i as u64);
        }
    };
    while !b.done() {
        match b.u8() % 10 {
            0..=4 => {
                let s = segment(&mut b, &mut peer, 1460);
                let n = s.len();
                match ep.handle_segment(now, PEER, US, s, 0..n) {
                    Dispatch::NewConn(h) | Dispatch::Conn(h) if conn != Some(h) => {
                        conn = Some(h);
                        (read, queued) = (0, 0);
                        peer.our_iss = None;
                    }
                    _ => {}
                }
            }
            5 => now += Duration::from_micros(u64::from(b.u16()) * 50),
            6 => {
                if let Some(c) = conn.and_then(|h| ep.conn_mut(h)) {
                    queued += c.send(u64::from(b.u16())).unwrap_or(0);
                }
            }
            7 => {
                let _ = b.u8();
                if let Some(c) = conn.and_then(|h| ep.conn_mut(h)) {
                    while let Some((seg, r)) = c.poll_readable() {
                        for (i, &x) in seg[r.clone()].iter().enumerate() {
                            assert_eq!(x, p(read + i as u64), "delivered byte {}", read + i as u64);
                        }
                        read += r.len() as u64;
                    }
                }
            }
            8 => {
                if let Some(c) = conn.and_then(|h| ep.conn_mut(h)) {
                    if b.u8() < 16 { c.abort() } else { c.close() }
                }
            }
            _ => {
                let _ = b.u8();
                ep.reap_closed();
            }
        }
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        while ep.poll_transmit(&mut buf).is_some() {}
        while let Some((h, t)) = ep.poll_transmit_all(now, &mut buf, &mut src) {
            let hdr = parse_segment(&buf, 0..t.len, US, PEER, ChecksumMode::Offloaded)
                .expect("our own segment parses");
            if hdr.syn {
                peer.our_iss = Some(hdr.seq);
            }
            let end = hdr.seq + hdr.seq_len();
            if end.diff(Seq32(peer.our_max)) > 0 || peer.our_max == 0 {
                peer.our_max = end.0;
            }
            if Some(h) == conn
                && let Some(iss) = peer.our_iss
                && !hdr.payload.is_empty()
            {
                let off = u64::from((hdr.seq - (iss + 1u32)).cast_unsigned());
                assert_eq!(off, t.payload.start);
                for (i, &x) in buf[hdr.payload.clone()].iter().enumerate() {
                    assert_eq!(x, q(off + i as u64), "sent byte {}", off + i as u64);
                }
            }
        }
        if let Some(c) = conn.and_then(|h| ep.conn_mut(h)) {
            assert!(c.ooo_segments() <= max_seg && c.ooo_segments() <= max_total);
            assert!(c.acked_offset() <= c.queued_offset() && c.queued_offset() == queued);
            while let Some(ev) = c.poll_event() {
                if let Event::Acked { upto } = ev {
                    assert!(upto <= queued);
                }
            }
        }
        while ep.accept().is_some() {}
    }
});
