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
