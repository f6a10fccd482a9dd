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
        while let Some((_, t)) = self.a.poll_transmit_all(now, &mut self.buf, src_a) {
            sent = true;
            let seg = self.buf[..t.len].to_vec();
            if !self.lose() {
                self.a_to_b.push_back((now + self.latency, seg));
            }
        }
        while let Some(t) = self.a.poll_transmit(&mut self.buf) {
            let seg = self.buf[..t.len].to_vec();
            self.a_to_b.push_back((now + self.latency, seg));
        }
        while let Some((_, t)) = self.b.poll_transmit_all(now, &mut self.buf, src_b) {
            sent = true;
            let seg = self.buf[..t.len].to_vec();
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
}
