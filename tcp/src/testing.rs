//! Test harness (feature `testing`): two [`Endpoint`]s wired back to back in memory, with
//! latency and seeded loss, driven in simulated time (quinn's `Pair`, neqo's simulator).
//! For testing code above TCP (the dataplane glue, MPA) without a NIC.

use std::collections::VecDeque;

use netcore::rng::Xoshiro256;
use netcore::{Duration, Instant, Rng};
use smoltcp::wire::Ipv4Address;

use crate::config::TcpConfig;
use crate::conn::{Connection, SendSource};
use crate::endpoint::{ConnHandle, Dispatch, Endpoint};

/// Client address in a [`Pair`].
pub const A_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
/// Server address in a [`Pair`].
pub const B_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
/// Server port in a [`Pair`].
pub const B_PORT: u16 = 5000;

/// Two endpoints and the wire between them. `a` connects to `b`.
#[derive(Debug)]
pub struct Pair {
    /// Client endpoint.
    pub a: Endpoint<Vec<u8>>,
    /// Server endpoint.
    pub b: Endpoint<Vec<u8>>,
    /// The client's connection.
    pub a_conn: ConnHandle,
    /// The server's connection, once the SYN arrived.
    pub b_conn: Option<ConnHandle>,
    /// Simulated time.
    pub now: Instant,
    /// One-way delay.
    pub latency: Duration,
    /// Probability (per mille) that a segment is lost.
    pub loss_permille: u32,
    /// Poll as the dataplane does: skip a connection [`Connection::poll_nothing`] says has
    /// nothing, stop at a segment marked [`crate::Transmit::last`] (default); else poll each
    /// until `None`.
    pub stop_at_last: bool,
    /// Every segment sent, with its time and whether the client sent it (when `trace`).
    pub trace: Option<Vec<(Instant, bool, Vec<u8>)>>,
    rng: Xoshiro256,
    a_to_b: VecDeque<(Instant, Vec<u8>)>,
    b_to_a: VecDeque<(Instant, Vec<u8>)>,
    buf: Vec<u8>,
}

impl Pair {
    /// A pair whose client has started connecting (drive it to complete the handshake).
    pub fn new(cfg_a: TcpConfig, cfg_b: TcpConfig, seed: u64) -> Self {
        let mut a = Endpoint::new(
            cfg_a,
            A_IP,
            seed.to_le_bytes().repeat(2).try_into().unwrap_or([1; 16]),
        );
        let mut b = Endpoint::new(cfg_b, B_IP, [0x42; 16]);
        b.listen(B_PORT);
        let now = Instant::from_millis(1);
        let a_conn = match a.connect(now, 0, (B_IP, B_PORT)) {
            Ok(h) => h,
            Err(e) => panic!("connect in a fresh endpoint failed: {e:?}"),
        };
        Pair {
            a,
            b,
            a_conn,
            b_conn: None,
            now,
            latency: Duration::from_micros(50),
            loss_permille: 0,
            stop_at_last: true,
            trace: None,
            rng: Xoshiro256::seed_from_u64(seed),
            a_to_b: VecDeque::new(),
            b_to_a: VecDeque::new(),
            buf: vec![0u8; 65536 + 60],
        }
    }

    /// The client's connection.
    pub fn client(&mut self) -> &mut Connection<Vec<u8>> {
        match self.a.conn_mut(self.a_conn) {
            Some(c) => c,
            None => panic!("client connection reaped"),
        }
    }

    /// The server's connection, once it exists.
    pub fn server(&mut self) -> Option<&mut Connection<Vec<u8>>> {
        let h = self.b_conn?;
        self.b.conn_mut(h)
    }

    fn lose(&mut self) -> bool {
        self.loss_permille > 0 && (self.rng.next_u32() % 1000) < self.loss_permille
    }

    /// Deliver what is due, run timers, transmit; then advance time to the next event if
    /// nothing happened now. Returns false when nothing is pending at all.
    pub fn step(&mut self, src_a: &mut dyn SendSource, src_b: &mut dyn SendSource) -> bool {
        let now = self.now;
        while self.a_to_b.front().is_some_and(|(t, _)| *t <= now) {
            let Some((_, seg)) = self.a_to_b.pop_front() else {
                break;
            };
            let n = seg.len();
            if let Dispatch::NewConn(h) = self.b.handle_segment(now, A_IP, B_IP, seg, 0..n) {
                self.b_conn = Some(h);
            }
        }
        while self.b_to_a.front().is_some_and(|(t, _)| *t <= now) {
            let Some((_, seg)) = self.b_to_a.pop_front() else {
                break;
            };
            let n = seg.len();
            let _ = self.a.handle_segment(now, B_IP, A_IP, seg, 0..n);
        }
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        let mut sent = false;
        let mut segs = Vec::new();
        transmit(
            &mut self.a,
            now,
            &mut self.buf,
            src_a,
            self.stop_at_last,
            &mut segs,
        );
        for seg in segs.drain(..) {
            sent = true;
            if let Some(tr) = self.trace.as_mut() {
                tr.push((now, true, seg.clone()));
            }
            if !self.lose() {
                self.a_to_b.push_back((now + self.latency, seg));
            }
        }
        while let Some(t) = self.a.poll_transmit(&mut self.buf) {
            let seg = self.buf[..t.len].to_vec();
            self.a_to_b.push_back((now + self.latency, seg));
        }
        transmit(
            &mut self.b,
            now,
            &mut self.buf,
            src_b,
            self.stop_at_last,
            &mut segs,
        );
        for seg in segs.drain(..) {
            sent = true;
            if let Some(tr) = self.trace.as_mut() {
                tr.push((now, false, seg.clone()));
            }
            if !self.lose() {
                self.b_to_a.push_back((now + self.latency, seg));
            }
        }
        while let Some(t) = self.b.poll_transmit(&mut self.buf) {
            let seg = self.buf[..t.len].to_vec();
            self.b_to_a.push_back((now + self.latency, seg));
        }
        if sent {
            return true;
        }
        let next = [
            self.a_to_b.front().map(|x| x.0),
            self.b_to_a.front().map(|x| x.0),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                self.now = self.now.max(t);
                true
            }
            None => false,
        }
    }

    /// Step until `done` holds or `max_steps` pass; returns whether `done` held.
    pub fn drive(
        &mut self,
        src_a: &mut dyn SendSource,
        src_b: &mut dyn SendSource,
        max_steps: usize,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        for _ in 0..max_steps {
            if done(self) {
                return true;
            }
            if !self.step(src_a, src_b) {
                return done(self);
            }
        }
        done(self)
    }
}

/// Poll every connection of `ep` (in order, each until it has nothing) into `out`.
fn transmit(
    ep: &mut Endpoint<Vec<u8>>,
    now: Instant,
    buf: &mut [u8],
    src: &mut dyn SendSource,
    stop_at_last: bool,
    out: &mut Vec<Vec<u8>>,
) {
    for h in ep.handles() {
        let Some(c) = ep.conn_mut(h) else { continue };
        if stop_at_last && c.poll_nothing(now) {
            continue;
        }
        while let Some(t) = c.poll_transmit(now, buf, src) {
            out.push(buf[..t.len].to_vec());
            if stop_at_last && t.last {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::{Event, NoData, State};

    #[test]
    fn pair_transfers_records_with_loss() {
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 7);
        p.loss_permille = 20;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let mut src = |off: u64, dst: &mut [u8]| {
            dst.copy_from_slice(&data[off as usize..off as usize + dst.len()]);
        };
        assert!(
            p.drive(&mut src, &mut NoData, 10_000, |p| p.client().state()
                == State::Established)
        );
        let mut queued = 0u64;
        let mut got = Vec::new();
        let ok = p.drive(&mut src, &mut NoData, 1_000_000, |p| {
            let c = p.client();
            while let Some(_e) = c.poll_event() {}
            while queued < data.len() as u64 {
                let len = (u64::from(c.emss())).min(data.len() as u64 - queued);
                if c.send_record(len).is_err() {
                    break;
                }
                queued += len;
            }
            if let Some(s) = p.server() {
                while let Some((b, r)) = s.poll_readable() {
                    got.extend_from_slice(&b[r]);
                }
            }
            got.len() == data.len()
        });
        assert!(ok, "transfer stalled at {} bytes", got.len());
        assert_eq!(got, data);
        p.client().close();
        let closed = p.drive(&mut src, &mut NoData, 100_000, |p| {
            let mut peer_closed = false;
            if let Some(s) = p.server() {
                while let Some(e) = s.poll_event() {
                    peer_closed |= e == Event::PeerClosed;
                }
                if peer_closed {
                    s.close();
                }
                s.is_closed()
            } else {
                false
            }
        });
        assert!(closed);
    }

    /// Queue `total` bytes on the client in EMSS records as room allows; the server reads
    /// when `read` says so. Runs until everything is acknowledged or `max_steps` pass.
    fn bulk(p: &mut Pair, total: u64, mut read: impl FnMut(Instant) -> bool) -> bool {
        let data = vec![0x5au8; 1 << 16];
        let mut src = |off: u64, dst: &mut [u8]| {
            let o = (off % (1 << 16)) as usize;
            for (i, b) in dst.iter_mut().enumerate() {
                *b = data[(o + i) % data.len()];
            }
        };
        assert!(
            p.drive(&mut src, &mut NoData, 10_000, |p| p.client().state()
                == State::Established)
        );
        let mut queued = 0u64;
        p.drive(&mut src, &mut NoData, 1_000_000, |p| {
            let now = p.now;
            let c = p.client();
            while let Some(_e) = c.poll_event() {}
            while queued < total {
                let len = u64::from(c.emss()).min(total - queued);
                if c.send_record(len).is_err() {
                    break;
                }
                queued += len;
            }
            let done = c.acked_offset() >= total;
            if read(now)
                && let Some(s) = p.server()
            {
                while s.poll_readable().is_some() {}
            }
            done
        })
    }

    #[test]
    fn chrono_counts_a_receive_window_limited_sender() {
        // The server reads nothing for 50 ms through a 32 KiB window: the client waits on
        // the peer's window, not on cwnd.
        let b = TcpConfig {
            recv_window: 32 << 10,
            ..TcpConfig::default()
        };
        let mut p = Pair::new(TcpConfig::default(), b, 3);
        let until = Instant::from_millis(50);
        assert!(bulk(&mut p, 1 << 20, |now| now >= until));
        let s = *p.client().stats();
        assert!(
            s.rwnd_limited_ns >= 40_000_000 && s.cwnd_limited_ns < s.rwnd_limited_ns / 10,
            "{s:?}"
        );
        assert!(s.busy_ns >= s.rwnd_limited_ns + s.cwnd_limited_ns + s.app_limited_ns);
        assert!(s.acks_in > 0);
    }

    #[test]
    fn chrono_counts_a_congestion_window_limited_sender() {
        // Large windows, a reader that keeps up: slow start holds the sender by cwnd.
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 4);
        p.latency = Duration::from_millis(1);
        assert!(bulk(&mut p, 1 << 20, |_| true));
        let s = *p.client().stats();
        assert!(s.cwnd_limited_ns > 0 && s.rwnd_limited_ns == 0, "{s:?}");
        assert!(s.cwnd_limited_ns > s.busy_ns / 2, "{s:?}");
        // Every ACK acknowledged new data; the server sent them as pure ACKs.
        let acks_out = p.server().map_or(0, |c| c.stats().acks_out);
        assert!(s.acks_in > 0 && acks_out >= s.acks_in, "{s:?} {acks_out}");
        assert!(
            s.segs_out >= 2 * s.acks_in - 2,
            "ACK for every second segment: {s:?}"
        );
    }

    /// Stretch ACKs (`TcpConfig::ack_stretch_segments`) between two of our stacks: 32 MiB
    /// over a 50 us link, against RFC 9293 §3.8.6.3's every second segment (2). This sender's
    /// flight settles near 160 segments. With a stretch of 128 it is acknowledged by
    /// count on the way; only its last flight, shorter than the stretch and with nothing to
    /// mark it (no FIN yet, no message end), waits for the delayed-ACK timer. With 256, above
    /// its flight, it also waits once past the quick start (the first 512 segments), which
    /// cuts the stretch to half its flight, and again each time the stretch has doubled back
    /// (after 16, 32, ... ACKs): a few delayed ACKs in all, and no more ACKs than with 2.
    #[test]
    fn stretch_acks_against_a_sender_with_a_small_flight() {
        let run = |stretch| {
            let b = TcpConfig {
                ack_stretch_segments: stretch,
                ..TcpConfig::default()
            };
            let mut p = Pair::new(TcpConfig::default(), b, 6);
            p.latency = Duration::from_micros(50);
            assert!(bulk(&mut p, 32 << 20, |_| true));
            let s = *p.server().unwrap().stats();
            (p.now, s)
        };
        let delack = TcpConfig::default().delayed_ack.unwrap();
        let (t2, s2) = run(2);
        assert_eq!(s2.ack_stretch_cuts, 0, "{s2:?}");
        let (t, s) = run(128);
        assert_eq!(s.ack_stretch_cuts, 1, "{s:?}");
        assert!(t <= t2 + delack, "{t:?} against {t2:?}");
        assert!(s.acks_out <= s2.acks_out, "{s:?} {s2:?}");
        let (t, s) = run(256);
        assert!((2..=4).contains(&s.ack_stretch_cuts), "{s:?}");
        assert!(t <= t2 + delack * 4, "{t:?} against {t2:?}");
        assert!(s.acks_out <= s2.acks_out, "{s:?} {s2:?}");
    }

    #[test]
    fn chrono_counts_an_application_limited_sender() {
        // One small record, then nothing: the client waits on its own application while the
        // record is in flight (a round trip plus the peer's delayed ACK).
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 5);
        assert!(bulk(&mut p, 100, |_| true));
        let s = *p.client().stats();
        assert!(s.app_limited_ns >= 100_000, "{s:?}");
        assert_eq!(
            s.cwnd_limited_ns + s.rwnd_limited_ns + s.sndbuf_limited_ns,
            0
        );
    }

    /// What one run left: every segment (time, from the client, bytes) and both
    /// connections' whole state (`Debug`, hashed) after every step.
    type Record = (Vec<(Instant, bool, Vec<u8>)>, Vec<u64>);

    /// Run `app` (called before each step; true when done) on a fresh pair, with the short cut
    /// of [`crate::Transmit::last`] / [`Connection::poll_nothing`] on or off (polling until
    /// `None`, the reference).
    fn record(
        shortcut: bool,
        cfg: TcpConfig,
        loss: u32,
        mut app: impl FnMut(&mut Pair) -> bool,
    ) -> Record {
        use std::hash::{DefaultHasher, Hash, Hasher};
        crate::conn::NO_SHORTCUT.with(|c| c.set(!shortcut));
        // The whole state is compared: timers armed after every poll, as the reference polls
        // (`deferred_arming_*` compare the arming once per burst with that).
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(true));
        let mut p = Pair::new(cfg.clone(), cfg, 11);
        p.loss_permille = loss;
        p.stop_at_last = shortcut;
        p.trace = Some(Vec::new());
        let mut src_a = |off: u64, dst: &mut [u8]| {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = (off as usize + i) as u8;
            }
        };
        let mut src_b = |off: u64, dst: &mut [u8]| dst.fill(off as u8 ^ 0x5a);
        let mut states = Vec::new();
        for _ in 0..200_000 {
            let done = app(&mut p);
            let mut h = DefaultHasher::new();
            format!("{:?}", p.client()).hash(&mut h);
            format!("{:?}", p.server()).hash(&mut h);
            p.now.hash(&mut h);
            states.push(h.finish());
            if done || !p.step(&mut src_a, &mut src_b) {
                break;
            }
        }
        crate::conn::NO_SHORTCUT.with(|c| c.set(false));
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(false));
        let trace = p.trace.take().unwrap_or_default();
        (trace, states)
    }

    /// The client sends `rounds` 2-byte records, each answered with 2 bytes by the server
    /// (the RDMA Write latency test's pattern), then both close.
    fn ping_pong(rounds: u32) -> impl FnMut(&mut Pair) -> bool {
        let (mut done, mut waiting, mut closed) = (0u32, false, false);
        move |p: &mut Pair| {
            if let Some(s) = p.server() {
                let mut n = 0;
                while let Some((_, r)) = s.poll_readable() {
                    n += r.len();
                }
                while let Some(e) = s.poll_event() {
                    if e == Event::PeerClosed {
                        s.close();
                    }
                }
                for _ in 0..n / 2 {
                    let _ = s.send_record(2);
                }
            }
            let c = p.client();
            while c.poll_event().is_some() {}
            let mut got = 0;
            while let Some((_, r)) = c.poll_readable() {
                got += r.len();
            }
            if waiting && got >= 2 {
                waiting = false;
                done += 1;
            }
            if !waiting && done < rounds {
                waiting = c.send_record(2).is_ok();
            }
            if done == rounds && !closed {
                c.close();
                closed = true;
            }
            closed && c.is_closed()
        }
    }

    /// The client sends `total` bytes in EMSS records, the server reads; then both close.
    fn bulk_then_close(total: u64) -> impl FnMut(&mut Pair) -> bool {
        let (mut queued, mut closed) = (0u64, false);
        move |p: &mut Pair| {
            if let Some(s) = p.server() {
                while s.poll_readable().is_some() {}
                while let Some(e) = s.poll_event() {
                    if e == Event::PeerClosed {
                        s.close();
                    }
                }
            }
            let c = p.client();
            while c.poll_event().is_some() {}
            while queued < total && c.state() == State::Established {
                let len = u64::from(c.emss()).min(total - queued);
                if c.send_record(len).is_err() {
                    break;
                }
                queued += len;
            }
            if queued == total && c.acked_offset() >= total && !closed {
                c.close();
                closed = true;
            }
            closed && c.is_closed()
        }
    }

    fn same_with_and_without_short_cut(
        cfg: TcpConfig,
        loss: u32,
        app: impl Fn() -> Box<dyn FnMut(&mut Pair) -> bool>,
    ) {
        let (ref_trace, ref_states) = record(false, cfg.clone(), loss, app());
        let (trace, states) = record(true, cfg, loss, app());
        assert_same_run(
            (&ref_trace, &ref_states),
            (&trace, &states),
            "connection state",
        );
    }

    /// Two recorded runs are the same: more than 10 segments, the same segments, and the same
    /// recorded `what` after every step.
    fn assert_same_run<T: PartialEq + std::fmt::Debug, S: PartialEq + std::fmt::Debug>(
        (ref_trace, ref_states): (&[T], &[S]),
        (trace, states): (&[T], &[S]),
        what: &str,
    ) {
        assert!(ref_trace.len() > 10, "{} segments", ref_trace.len());
        assert_eq!(trace.len(), ref_trace.len());
        for (i, (a, b)) in trace.iter().zip(ref_trace).enumerate() {
            assert_eq!(a, b, "segment {i}");
        }
        assert_eq!(states.len(), ref_states.len());
        let first = states.iter().zip(ref_states).position(|(a, b)| a != b);
        assert_eq!(first, None, "{what} differs after step {first:?}");
    }

    #[test]
    fn the_short_cut_after_a_last_segment_changes_nothing_in_a_ping_pong() {
        same_with_and_without_short_cut(TcpConfig::default(), 0, || Box::new(ping_pong(300)));
        // Without RACK/SACK (NewReno), and with Nagle.
        let cfg = TcpConfig {
            rack_tlp: false,
            nagle: true,
            ..TcpConfig::default()
        };
        same_with_and_without_short_cut(cfg, 0, || Box::new(ping_pong(100)));
    }

    #[test]
    fn the_short_cut_after_a_last_segment_changes_nothing_in_bulk_with_loss() {
        same_with_and_without_short_cut(TcpConfig::default(), 20, || {
            Box::new(bulk_then_close(400_000))
        });
        same_with_and_without_short_cut(TcpConfig::default(), 0, || {
            Box::new(bulk_then_close(200_000))
        });
        let cfg = TcpConfig {
            rack_tlp: false,
            ..TcpConfig::default()
        };
        same_with_and_without_short_cut(cfg, 30, || Box::new(bulk_then_close(300_000)));
    }

    /// A run's segments and, after each step, both connections' next timeouts and counters,
    /// with the timers armed after every transmit poll (`each`, the reference) or once per
    /// burst (see `Connection::poll_common`).
    fn record_arming(
        each: bool,
        cfg: TcpConfig,
        loss: u32,
        mut app: impl FnMut(&mut Pair) -> bool,
    ) -> Record {
        use std::hash::{DefaultHasher, Hash, Hasher};
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(each));
        let mut p = Pair::new(cfg.clone(), cfg, 11);
        p.loss_permille = loss;
        p.trace = Some(Vec::new());
        let mut src_a = |off: u64, dst: &mut [u8]| dst.fill(off as u8);
        let mut src_b = |off: u64, dst: &mut [u8]| dst.fill(off as u8 ^ 0x5a);
        let mut states = Vec::new();
        for _ in 0..200_000 {
            let done = app(&mut p);
            let mut h = DefaultHasher::new();
            p.now.hash(&mut h);
            p.client().poll_timeout().hash(&mut h);
            format!("{:?}", p.client().stats()).hash(&mut h);
            if let Some(s) = p.server() {
                s.poll_timeout().hash(&mut h);
                format!("{:?}", s.stats()).hash(&mut h);
            }
            states.push(h.finish());
            if done || !p.step(&mut src_a, &mut src_b) {
                break;
            }
        }
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(false));
        let trace = p.trace.take().unwrap_or_default();
        (trace, states)
    }

    fn same_with_deferred_arming(
        cfg: TcpConfig,
        loss: u32,
        app: impl Fn() -> Box<dyn FnMut(&mut Pair) -> bool>,
    ) {
        let (ref_trace, ref_states) = record_arming(true, cfg.clone(), loss, app());
        let (trace, states) = record_arming(false, cfg, loss, app());
        assert_same_run(
            (&ref_trace, &ref_states),
            (&trace, &states),
            "timeouts or counters",
        );
    }

    /// Arming the timers once per burst sends the same segments at the same times, with the
    /// same next timeout after every step, as arming after every poll: bulk transfers with
    /// and without loss (RTOs, tail loss probes, RACK's reordering timer; RACK and NewReno),
    /// a zero window (persist), and the latency test's ping-pong.
    #[test]
    fn deferred_arming_changes_nothing() {
        for loss in [0, 5, 20, 60] {
            same_with_deferred_arming(TcpConfig::default(), loss, || {
                Box::new(bulk_then_close(400_000))
            });
        }
        let cfg = TcpConfig {
            rack_tlp: false,
            ..TcpConfig::default()
        };
        same_with_deferred_arming(cfg, 30, || Box::new(bulk_then_close(300_000)));
        same_with_deferred_arming(TcpConfig::default(), 0, || Box::new(ping_pong(300)));
        same_with_deferred_arming(TcpConfig::default(), 40, || Box::new(ping_pong(200)));
        let keepalive = TcpConfig {
            keepalive: Some(crate::config::Keepalive {
                idle: Duration::from_millis(5),
                interval: Duration::from_millis(1),
                count: 3,
            }),
            ..TcpConfig::default()
        };
        same_with_deferred_arming(keepalive, 10, || Box::new(ping_pong(100)));
        // The server reads now and then, into a small window: it closes (persist timer).
        let small = TcpConfig {
            recv_window: 8192,
            ..TcpConfig::default()
        };
        let slow_reader = || -> Box<dyn FnMut(&mut Pair) -> bool> {
            let (total, mut queued, mut calls) = (100_000u64, 0u64, 0u32);
            Box::new(move |p: &mut Pair| {
                calls += 1;
                if calls % 40 == 0
                    && let Some(s) = p.server()
                {
                    while s.poll_readable().is_some() {}
                }
                let c = p.client();
                while c.poll_event().is_some() {}
                while queued < total && c.state() == State::Established {
                    let len = u64::from(c.emss()).min(total - queued);
                    if c.send_record(len).is_err() {
                        break;
                    }
                    queued += len;
                }
                c.acked_offset() >= total
            })
        };
        same_with_deferred_arming(small, 0, slow_reader);
    }

    /// The client's next timeout and state after a burst whose arming was deferred (its last segment
    /// marked last, the caller polls no more) and then, 20 us later, a segment from the peer
    /// that acknowledges nothing new (the peer's data sent before ours arrived): the input
    /// arms the probe timeout (RFC 8985 §7.2) from the burst's time, not from its own.
    fn timeouts_around_a_late_input(each: bool) -> (Option<Instant>, Option<Instant>, String) {
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(each));
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 3);
        let mut src = |_: u64, dst: &mut [u8]| dst.fill(1);
        let mut src_b = |_: u64, dst: &mut [u8]| dst.fill(2);
        assert!(p.drive(&mut src, &mut src_b, 10_000, |p| {
            p.server().is_some_and(|s| s.state() == State::Established)
        }));
        let t0 = p.now;
        let mut buf = vec![0u8; 2000];
        // Three segments: the probe timeout (2 SRTT + 2 ms) comes before the RTO (200 ms).
        for _ in 0..3 {
            assert!(p.client().send_record(1000).is_ok());
        }
        for k in 0..3 {
            let t = p.client().poll_transmit(t0, &mut buf, &mut src);
            assert!(t.as_ref().is_some_and(|t| t.last == (k == 2)), "{t:?}");
        }
        let before = p.client().poll_timeout();
        let Some(s) = p.server() else {
            panic!("no server connection")
        };
        assert!(s.send_record(10).is_ok());
        let t1 = t0 + Duration::from_micros(10);
        let Some(t) = s.poll_transmit(t1, &mut buf, &mut src_b) else {
            panic!("the server sent nothing")
        };
        let seg = buf[..t.len].to_vec();
        let _ =
            p.a.handle_segment(t0 + Duration::from_micros(20), B_IP, A_IP, seg, 0..t.len);
        let after = p.client().poll_timeout();
        // The whole state, timers included (the input armed them in both modes).
        let state = format!("{:?}", p.client());
        crate::conn::ARM_EACH_SEGMENT.with(|c| c.set(false));
        (before, after, state)
    }

    #[test]
    fn deferred_arming_is_settled_before_input() {
        let reference = timeouts_around_a_late_input(true);
        assert!(
            reference.0.is_some() && reference.1.is_some(),
            "{reference:?}"
        );
        assert_eq!(timeouts_around_a_late_input(false), reference);
    }

    #[test]
    fn the_short_cut_is_taken() {
        // The ping-pong's data segments are all marked last (and the equivalence above is
        // not vacuous).
        let mut p = Pair::new(TcpConfig::default(), TcpConfig::default(), 1);
        let mut src = |_: u64, dst: &mut [u8]| dst.fill(1);
        assert!(
            p.drive(&mut src, &mut NoData, 10_000, |p| p.client().state()
                == State::Established)
        );
        assert!(p.client().send_record(2).is_ok());
        let now = p.now;
        let mut buf = [0u8; 200];
        let t = p.client().poll_transmit(now, &mut buf, &mut src);
        assert!(
            t.as_ref()
                .is_some_and(|t| t.last && t.len == t.header_len + 2),
            "{t:?}"
        );
        assert!(p.client().poll_transmit(now, &mut buf, &mut src).is_none());
        assert!(p.client().poll_nothing(now));
    }
}
