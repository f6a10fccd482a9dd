//! Interop with the Linux kernel's TCP over a TUN device: our endpoint on one side, a
//! `std::net` socket on the other, with random loss injected at the TUN boundary.
//!
//! Needs root (CAP_NET_ADMIN) and `/dev/net/tun`, so it is ignored by default:
//! `cargo test -p tcp --test linux -- --ignored --nocapture` (`LINUX_TRACE=1` prints every
//! segment). Unlike the simulator this test
//! runs in real time (the kernel does), so it reads the wall clock and runs the Linux
//! socket on a thread: the only places in this crate allowed to.
#![allow(
    clippy::disallowed_methods,
    clippy::collapsible_if,
    reason = "real-kernel interop: wall clock and a thread for the Linux socket"
)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use netcore::Instant;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use smoltcp::phy::{Device, Medium, RxToken, TunTapInterface, TxToken};
use smoltcp::wire::{IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr};
use tcp::{Dispatch, Endpoint, Event, TcpConfig};

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

fn run(
    loss: f64,
    cfg: TcpConfig,
    subnet: u8,
    passive: bool,
    read_delay: StdDuration,
) -> tcp::TcpStats {
    let name = format!("tcplx{}{}", std::process::id() % 1000, subnet);
    let mut tun = TunTapInterface::new(&name, Medium::Ip).expect("open tun (needs root)");
    let linux_ip = format!("10.231.{subnet}.1");
    ip(&["addr", "add", &format!("{linux_ip}/24"), "dev", &name]);
    ip(&["link", "set", &name, "up"]);
    let ours = Ipv4Address::new(10, 231, subnet, 2);
    let theirs = Ipv4Address::new(10, 231, subnet, 1);

    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(subnet));
    let up: Vec<u8> = (0..(4 << 20)).map(|_| rng.r#gen()).collect();
    let down: Vec<u8> = (0..(1 << 20)).map(|_| rng.r#gen()).collect();

    // Linux side: read everything (after `read_delay`), write `down` concurrently, report
    // what arrived.
    let (tx, rx) = mpsc::channel();
    let down2 = down.clone();
    let linux_side = move |mut s: std::net::TcpStream| {
        s.set_read_timeout(Some(StdDuration::from_secs(60)))
            .unwrap();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            w.write_all(&down2).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        std::thread::sleep(read_delay);
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        tx.send(got).unwrap();
    };
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(cfg, ours, [0x5a; 16]);
    let start = StdInstant::now();
    let clock = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let mut conn = None;
    if passive {
        // Linux connects to our listener.
        ep.listen(7777);
        let target = format!("10.231.{subnet}.2:7777");
        std::thread::spawn(move || {
            let s = std::net::TcpStream::connect_timeout(
                &target.parse().unwrap(),
                StdDuration::from_secs(10),
            )
            .unwrap();
            linux_side(s);
        });
    } else {
        let listener = TcpListener::bind(format!("{linux_ip}:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            linux_side(s);
        });
        conn = Some(ep.connect(clock(), 0, (theirs, port)).unwrap());
    }
    let mut queued = 0u64;
    let mut got = Vec::new();
    let mut peer_closed = false;
    let mut closed = false;
    let mut buf = vec![0u8; 1600];
    let (mut dropped_in, mut dropped_out) = (0u32, 0u32);
    loop {
        assert!(
            start.elapsed() < StdDuration::from_secs(90),
            "timeout: sent {queued}, got {}",
            got.len()
        );
        let now = clock();
        // Receive from the kernel.
        while let Some((rxt, _)) = tun.receive(smoltcp::time::Instant::from_micros(0)) {
            let pkt = rxt.consume(|b| b.to_vec());
            if rng.gen_bool(loss) {
                dropped_in += 1;
                continue;
            }
            let Ok(p) = Ipv4Packet::new_checked(&pkt[..]) else {
                continue;
            };
            let Ok(r) = Ipv4Repr::parse(&p, &smoltcp::phy::ChecksumCapabilities::default()) else {
                continue;
            };
            if r.next_header != IpProtocol::Tcp || r.dst_addr != ours {
                continue;
            }
            let hl = usize::from(p.header_len());
            if std::env::var("LINUX_TRACE").is_ok() {
                if let Ok(h) = tcp::parse_segment(
                    &pkt,
                    hl..hl + r.payload_len,
                    r.src_addr,
                    r.dst_addr,
                    tcp::ChecksumMode::Offloaded,
                ) {
                    eprintln!("{:?} in  {h}", start.elapsed());
                }
            }
            let d = ep.handle_segment(now, r.src_addr, r.dst_addr, pkt, hl..hl + r.payload_len);
            if let Dispatch::NewConn(h) = d {
                conn = Some(h);
            }
        }
        ep.handle_timeout(now);
        // Application.
        if let Some(c) = conn.and_then(|h| ep.conn_mut(h)) {
            while let Some(ev) = c.poll_event() {
                match ev {
                    Event::PeerClosed => peer_closed = true,
                    Event::Closed(why) => {
                        assert!(matches!(why, tcp::CloseReason::Normal), "closed: {why:?}");
                        closed = true;
                    }
                    _ => {}
                }
            }
            while let Some((b, r)) = c.poll_readable() {
                got.extend_from_slice(&b[r]);
            }
            if c.state().is_synchronized() && queued < up.len() as u64 {
                let emss = u64::from(c.emss());
                while queued < up.len() as u64 {
                    let len = (emss * 2).min(up.len() as u64 - queued);
                    if c.send_record(len).is_err() {
                        break;
                    }
                    queued += len;
                }
                if queued == up.len() as u64 {
                    c.close();
                }
            }
        }
        // Transmit to the kernel.
        let data = &up;
        let mut src = |off: u64, dst: &mut [u8]| {
            dst.copy_from_slice(&data[off as usize..off as usize + dst.len()])
        };
        while let Some((_, t)) = ep.poll_transmit_all(now, &mut buf, &mut src) {
            if std::env::var("LINUX_TRACE").is_ok() {
                if let Ok(h) =
                    tcp::parse_segment(&buf, 0..t.len, t.src, t.dst, tcp::ChecksumMode::Offloaded)
                {
                    eprintln!("{:?} out {h}", start.elapsed());
                }
            }
            if rng.gen_bool(loss) {
                dropped_out += 1;
                continue;
            }
            let repr = Ipv4Repr {
                src_addr: t.src,
                dst_addr: t.dst,
                next_header: IpProtocol::Tcp,
                payload_len: t.len,
                hop_limit: 64,
            };
            let txt = tun
                .transmit(smoltcp::time::Instant::from_micros(0))
                .unwrap();
            txt.consume(repr.buffer_len() + t.len, |out| {
                repr.emit(
                    &mut Ipv4Packet::new_unchecked(&mut out[..]),
                    &smoltcp::phy::ChecksumCapabilities::default(),
                );
                out[repr.buffer_len()..].copy_from_slice(&buf[..t.len]);
            });
        }
        if peer_closed
            && conn
                .and_then(|h| ep.conn(h))
                .is_none_or(|c| matches!(c.state(), tcp::State::TimeWait | tcp::State::Closed))
        {
            break;
        }
        let _ = closed;
        std::thread::sleep(StdDuration::from_micros(200));
    }
    let linux_got = rx
        .recv_timeout(StdDuration::from_secs(30))
        .expect("linux side result");
    let st = ep.stats();
    eprintln!(
        "loss {loss}: {:?} in {:?}; dropped {dropped_in} in / {dropped_out} out; negotiated {:?}; stats {st:?}",
        conn.and_then(|h| ep.conn(h)).map(|c| c.state()),
        start.elapsed(),
        conn.and_then(|h| ep.conn(h)).map(|c| c.negotiated())
    );
    assert_eq!(
        Sha256::digest(&linux_got),
        Sha256::digest(&up),
        "Linux received corrupted data"
    );
    assert_eq!(
        Sha256::digest(&got),
        Sha256::digest(&down),
        "we received corrupted data"
    );
    if loss > 0.0 {
        assert!(st.retransmissions > 0);
    }
    st
}

/// Clean link: 4 MiB up, 1 MiB down, orderly close (RFC 9293 end to end against Linux).
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_clean() {
    run(0.0, TcpConfig::default(), 77, false, StdDuration::ZERO);
}

/// 2 % loss both ways: SACK recovery, RTO, timestamps against Linux.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_lossy() {
    run(0.02, TcpConfig::default(), 78, false, StdDuration::ZERO);
}

/// NewReno without SACK or timestamps, 1 % loss.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_newreno_no_sack() {
    let cfg = TcpConfig {
        sack: false,
        timestamps: false,
        cc: tcp::CongestionControl::NewReno,
        ..TcpConfig::default()
    };
    run(0.01, cfg, 79, false, StdDuration::ZERO);
}

/// Passive open: Linux connects to our listener (RFC 9293 §3.5), 1 % loss.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_connects_to_us() {
    run(0.01, TcpConfig::default(), 80, true, StdDuration::ZERO);
}

/// A Linux reader that sleeps 1.5 s: its window closes, we probe (RFC 9293 §3.8.6.1) and
/// resume when it reads.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_slow_reader_zero_window() {
    let st = run(
        0.0,
        TcpConfig::default(),
        81,
        false,
        StdDuration::from_millis(1500),
    );
    assert!(st.window_probes > 0, "no zero-window probes: {st:?}");
}

/// Our endpoint on one TUN device, without impairments (for the reset tests).
struct Wire {
    tun: TunTapInterface,
    ours: Ipv4Address,
    theirs: Ipv4Address,
    buf: Vec<u8>,
}

impl Wire {
    fn new(subnet: u8) -> Self {
        let name = format!("tcplx{}{}", std::process::id() % 1000, subnet);
        let tun = TunTapInterface::new(&name, Medium::Ip).expect("open tun (needs root)");
        ip(&[
            "addr",
            "add",
            &format!("10.231.{subnet}.1/24"),
            "dev",
            &name,
        ]);
        ip(&["link", "set", &name, "up"]);
        Wire {
            tun,
            ours: Ipv4Address::new(10, 231, subnet, 2),
            theirs: Ipv4Address::new(10, 231, subnet, 1),
            buf: vec![0u8; 1600],
        }
    }

    /// Move packets both ways once.
    fn pump(&mut self, ep: &mut Endpoint<Vec<u8>>, now: Instant, src: &mut dyn tcp::SendSource) {
        while let Some((rxt, _)) = self.tun.receive(smoltcp::time::Instant::from_micros(0)) {
            let pkt = rxt.consume(|b| b.to_vec());
            let Ok(p) = Ipv4Packet::new_checked(&pkt[..]) else {
                continue;
            };
            let Ok(r) = Ipv4Repr::parse(&p, &smoltcp::phy::ChecksumCapabilities::default()) else {
                continue;
            };
            if r.next_header == IpProtocol::Tcp && r.dst_addr == self.ours {
                let hl = usize::from(p.header_len());
                let _ = ep.handle_segment(now, r.src_addr, r.dst_addr, pkt, hl..hl + r.payload_len);
            }
        }
        ep.handle_timeout(now);
        loop {
            let t = match ep.poll_transmit(&mut self.buf) {
                Some(t) => t,
                None => match ep.poll_transmit_all(now, &mut self.buf, src) {
                    Some((_, t)) => t,
                    None => break,
                },
            };
            let repr = Ipv4Repr {
                src_addr: t.src,
                dst_addr: t.dst,
                next_header: IpProtocol::Tcp,
                payload_len: t.len,
                hop_limit: 64,
            };
            let txt = self
                .tun
                .transmit(smoltcp::time::Instant::from_micros(0))
                .unwrap();
            let seg = &self.buf[..t.len];
            txt.consume(repr.buffer_len() + t.len, |out| {
                repr.emit(
                    &mut Ipv4Packet::new_unchecked(&mut out[..]),
                    &smoltcp::phy::ChecksumCapabilities::default(),
                );
                out[repr.buffer_len()..].copy_from_slice(seg);
            });
        }
    }
}

/// RFC 9293 §3.10.7.4 / RFC 5961 §3.2 against Linux: Linux closes a socket with unread data,
/// which sends a RST (RFC 2525 §2.17); our connection reports `Closed(Reset)`.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn linux_reset_reaches_us() {
    let mut w = Wire::new(82);
    let listener = TcpListener::bind(format!("{}:0", w.theirs)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        std::thread::sleep(StdDuration::from_millis(300));
        drop(s); // unread data queued: the kernel answers with RST
    });
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), w.ours, [1; 16]);
    let start = StdInstant::now();
    let clock = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let h = ep.connect(clock(), 0, (w.theirs, port)).unwrap();
    let mut sent = false;
    let mut reason = None;
    while start.elapsed() < StdDuration::from_secs(10) && reason.is_none() {
        let c = ep.conn_mut(h).unwrap();
        if c.state().is_synchronized() && !sent {
            c.send(10_000).unwrap();
            sent = true;
        }
        while let Some(e) = c.poll_event() {
            if let Event::Closed(why) = e {
                reason = Some(why);
            }
        }
        w.pump(&mut ep, clock(), &mut |_: u64, d: &mut [u8]| d.fill(1));
        std::thread::sleep(StdDuration::from_micros(200));
    }
    assert_eq!(reason, Some(tcp::CloseReason::Reset));
    assert_eq!(ep.stats().resets_received, 1);
}

/// RFC 9293 §3.10.5 against Linux: our ABORT's RST makes the Linux reader fail with
/// ECONNRESET.
#[test]
#[ignore = "needs root and /dev/net/tun"]
fn our_abort_resets_linux() {
    let mut w = Wire::new(83);
    let listener = TcpListener::bind(format!("{}:0", w.theirs)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(StdDuration::from_secs(10)))
            .unwrap();
        let mut b = [0u8; 4096];
        let res = loop {
            match s.read(&mut b) {
                Ok(0) => break Ok(()),
                Ok(_) => continue,
                Err(e) => break Err(e.kind()),
            }
        };
        tx.send(res).unwrap();
    });
    let mut ep: Endpoint<Vec<u8>> = Endpoint::new(TcpConfig::default(), w.ours, [1; 16]);
    let start = StdInstant::now();
    let clock = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let h = ep.connect(clock(), 0, (w.theirs, port)).unwrap();
    let mut phase = 0;
    while start.elapsed() < StdDuration::from_secs(10) {
        let c = ep.conn_mut(h).unwrap();
        if phase == 0 && c.state().is_synchronized() {
            c.send(50_000).unwrap();
            phase = 1;
        }
        if phase == 1 && c.acked_offset() == 50_000 {
            c.abort();
            phase = 2;
        }
        w.pump(&mut ep, clock(), &mut |_: u64, d: &mut [u8]| d.fill(2));
        if phase == 2 {
            break;
        }
        std::thread::sleep(StdDuration::from_micros(200));
    }
    assert_eq!(phase, 2, "transfer did not complete");
    let res = rx
        .recv_timeout(StdDuration::from_secs(10))
        .expect("linux reader result");
    assert_eq!(res, Err(std::io::ErrorKind::ConnectionReset));
}
