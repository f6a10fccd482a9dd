//! A packetdrill-like script interpreter for segment-level TCP tests at explicit times.
//!
//! One line per step, `<time_ms> <what>`; time is absolute milliseconds from the start of the
//! script (fractions allowed); `+N` is relative to the previous line. Before each line, all
//! timers due up to its time fire (in order) and everything our side emits is queued;
//! an unconsumed segment when time advances fails the script, as in packetdrill.
//!
//! ```text
//! 0    cfg ts on            // before the connection exists: ts|ws N|sack off|delack MS|nagle on|
//!                           //   rwnd N|mss N|cubic|iw N|timewait MS|keepalive IDLE INTVL CNT|
//!                           //   rto_init MS|rto_min MS|rto_min_bulk MS|retries N|isn N (peer ISN)|ooo N|
//!                           //   txbuf N (poll_transmit buffer size)|rack on|off (RFC 8985)|
//!                           //   finwait2 MS|bbr|prr on|off (RFC 6937)|
//!                           //   hystart on|off (RFC 9406)|sackcomp N|sackcomp_delay_us N|sackcomp_held N
//!                           //   (SACK compression, `TcpConfig::sack_compress_*`)|ackstretch N
//!                           //   (`TcpConfig::ack_stretch_segments`; scripts default to 2)
//! 0    listen 8080          // or: connect
//! 0    < S 0:0(0) win 65535 <mss 1460,sackOK,ts val 100 ecr 0,ws 7>
//! 0    > S. 0:0(0) ack 1 <mss 1460,sackOK>    // options checked only if listed
//! 0    < . 1:1(0) ack 1 win 65535
//! 0    < P. 1:1001(1000) ack 1                // inbound payload = pattern at stream offsets
//! 0    << . 1001:2001(1000) ack 1             // same receive burst: no poll since the last `<`
//! 0    > . 1:1(0) ack 1001 win *
//! 0    read 1000            // poll_readable drains exactly 1000 bytes, contents checked
//! 0    send 2000            // Connection::send; record N = send_record
//! 0    close | abort | none (no output) | state Established | event Closed(Reset) |
//!      stat retransmissions 1 | emss 1448 | send_err N | cwnd N | rto MS | bbr STATE |
//!      ack_request true|false (Connection::request_ack and what it must return)
//! ```
//! Inbound `ts val V ecr @N` echoes the TSval we sent at N ms.
//! Inbound `seq` is relative to the peer ISN, inbound `ack` to our ISS; outbound the other
//! way round, as packetdrill does. Flags: S F R P and `.` (ACK).

#![allow(dead_code, unreachable_pub)]

mod segment;

use std::collections::VecDeque;

use netcore::{Instant, Seq32};
use smoltcp::wire::Ipv4Address;
use tcp::wire::SegmentHeader;
use tcp::{ChecksumMode, CongestionControl, ConnHandle, Endpoint, Event, Keepalive, TcpConfig};

pub use segment::{Hdr, build_segment};

/// Byte of the peer's stream at offset `o`.
pub fn pattern_in(o: u64) -> u8 {
    (o % 251) as u8
}
/// Byte of our stream at offset `o`.
pub fn pattern_out(o: u64) -> u8 {
    (o.wrapping_mul(13).wrapping_add(5) % 256) as u8
}

pub const LOCAL: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
pub const REMOTE: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
pub const LPORT: u16 = 8080;
pub const RPORT: u16 = 40000;

/// The default configuration for scripts: no timestamps, no window scale, immediate ACKs.
pub fn script_cfg() -> TcpConfig {
    TcpConfig {
        mss: 1460,
        recv_window: 65535,
        send_window: 1 << 20,
        window_scale: None,
        sack: true,
        timestamps: false,
        cc: CongestionControl::NewReno,
        delayed_ack: None,
        // The classic scenarios pin every-second-segment ACKs (RFC 9293 §3.8.6.3); `cfg
        // ackstretch N` stretches them (`TcpConfig::ack_stretch_segments`).
        ack_stretch_segments: 2,
        nagle: false,
        keepalive: None,
        time_wait: netcore::Duration::from_secs(60),
        rto_initial: netcore::Duration::from_secs(1),
        rto_min: netcore::Duration::from_millis(200),
        // The classic scenarios time every RTO from rto_min; `cfg rto_min_bulk MS` lowers the
        // bound for flights of two segments or more.
        rto_min_bulk: netcore::Duration::from_millis(200),
        rto_max: netcore::Duration::from_secs(60),
        max_retries: 15,
        max_ooo_bytes: 1 << 20,
        max_ooo_segments: 1024,
        challenge_ack_limit: 1000,
        checksum: ChecksumMode::Software,
        initial_cwnd_segments: 10,
        // The classic scenarios pin RFC 6675 recovery; `cfg rack on` selects RFC 8985.
        rack_tlp: false,
        // Likewise RFC 6675's window on entering recovery; `cfg prr on` selects RFC 6937.
        prr: false,
        // Likewise the classic slow start; `cfg hystart on` selects RFC 9406.
        hystart: false,
        ..TcpConfig::default()
    }
}

struct Out {
    h: SegmentHeader,
    payload: Vec<u8>,
}

struct Runner {
    cfg: TcpConfig,
    ep: Option<Endpoint<Vec<u8>>>,
    conn: Option<ConnHandle>,
    our_iss: u32,
    peer_isn: u32,
    now: Instant,
    queue: VecDeque<Out>,
    events: Vec<Event>,
    read_off: u64,
    txbuf: usize,
    line: usize,
    text: String,
    /// MSS the peer announced in its SYN (RFC 9293 §3.7.1 default 536 without one).
    peer_mss: u16,
}

fn ms_to_instant(ms: f64) -> Instant {
    Instant::from_nanos((ms * 1e6).round() as u64)
}

impl Runner {
    fn fail(&self, msg: &str) -> ! {
        panic!("script line {}: `{}`: {}", self.line, self.text.trim(), msg)
    }

    fn ep(&mut self) -> &mut Endpoint<Vec<u8>> {
        if self.ep.is_none() {
            self.ep = Some(Endpoint::new(self.cfg.clone(), LOCAL, [7; 16]));
        }
        self.ep.as_mut().unwrap()
    }

    /// Collect everything our side wants to send now, and its events.
    fn pump(&mut self) {
        let now = self.now;
        let mut buf = vec![0u8; self.txbuf];
        loop {
            let mut got = None;
            if let Some(ep) = self.ep.as_mut() {
                if let Some(t) = ep.poll_transmit(&mut buf) {
                    got = Some(t);
                } else if let Some(h) = self.conn {
                    if let Some(c) = ep.conn_mut(h) {
                        let mut src = |off: u64, dst: &mut [u8]| {
                            for (i, b) in dst.iter_mut().enumerate() {
                                *b = pattern_out(off + i as u64);
                            }
                        };
                        got = c.poll_transmit(now, &mut buf, &mut src);
                    }
                }
            }
            let Some(t) = got else { break };
            assert_eq!((t.src, t.dst), (LOCAL, REMOTE));
            let h = tcp::parse_segment(&buf, 0..t.len, LOCAL, REMOTE, ChecksumMode::Software)
                .unwrap_or_else(|e| self.fail(&format!("we emitted an unparsable segment: {e:?}")));
            let payload = buf[h.payload.clone()].to_vec();
            // Zero-copy TX check: payload bytes are the owner's bytes at those offsets.
            for (i, b) in payload.iter().enumerate() {
                assert_eq!(
                    *b,
                    pattern_out(t.payload.start + i as u64),
                    "payload mismatch"
                );
            }
            assert!(t.len <= 40 + 1460 + 20, "segment larger than MTU");
            // RFC 9293 §3.7.1 / RFC 6691: payload plus TCP options never exceed the MSS the
            // peer announced (the IP packet fits its MTU), SACK blocks included.
            if !payload.is_empty() && t.len - 20 > usize::from(self.peer_mss) {
                self.fail(&format!(
                    "segment of {} payload + options bytes exceeds the peer's MSS {}",
                    t.len - 20,
                    self.peer_mss
                ));
            }
            self.queue.push_back(Out { h, payload });
        }
        if let (Some(ep), Some(h)) = (self.ep.as_mut(), self.conn) {
            if let Some(c) = ep.conn_mut(h) {
                while let Some(e) = c.poll_event() {
                    if !matches!(e, Event::Acked { .. }) {
                        self.events.push(e);
                    }
                }
            }
        }
    }

    fn advance(&mut self, to: Instant) {
        if to <= self.now {
            // Same instant: actions (send, close...) take effect together; output is
            // collected by the next `>`, `<`, `none` or time step.
            return;
        }
        loop {
            self.pump();
            if !self.queue.is_empty() {
                if to > self.now {
                    let o = &self.queue[0];
                    self.fail(&format!(
                        "unexpected segment before time advanced: {}",
                        describe(o, self)
                    ));
                }
                return;
            }
            let next = self.ep.as_ref().and_then(|e| e.poll_timeout());
            match next {
                Some(t) if t <= to => {
                    self.now = self.now.max(t);
                    let now = self.now;
                    self.ep().handle_timeout(now);
                }
                _ => break,
            }
        }
        self.now = self.now.max(to);
        self.pump();
    }

    fn conn_mut(&mut self) -> &mut tcp::Connection<Vec<u8>> {
        let h = self.conn.unwrap_or_else(|| self.fail("no connection"));
        match self.ep.as_mut().and_then(|e| e.conn_mut(h)) {
            Some(c) => c,
            None => panic!("script line {}: connection gone", self.line),
        }
    }
}

fn describe(o: &Out, r: &Runner) -> String {
    let h = &o.h;
    let mut f = String::new();
    if h.syn {
        f.push('S');
    }
    if h.fin {
        f.push('F');
    }
    if h.rst {
        f.push('R');
    }
    if h.ack.is_some() {
        f.push('.');
    }
    let seq = h.seq.0.wrapping_sub(r.our_iss);
    let ack = h.ack.map(|a| a.0.wrapping_sub(r.peer_isn));
    let sack: Vec<_> = h
        .sack
        .iter()
        .flatten()
        .map(|(l, rr)| (l.0.wrapping_sub(r.peer_isn), rr.0.wrapping_sub(r.peer_isn)))
        .collect();
    format!(
        "{f} {seq}:{}({}) ack {ack:?} win {} mss {:?} ws {:?} sackOK {} ts {:?} sack {sack:?}",
        seq.wrapping_add(o.payload.len() as u32),
        o.payload.len(),
        h.window,
        h.mss,
        h.wscale,
        h.sack_permitted,
        h.timestamp
    )
}

#[derive(Default, Debug)]
struct Spec {
    syn: bool,
    fin: bool,
    rst: bool,
    psh: bool,
    ack_flag: bool,
    seq: u32,
    len: u32,
    ack: Option<u32>,
    win: Option<u32>,
    opts: Option<Vec<String>>,
    corrupt: bool,
}

fn parse_spec(toks: &[&str], r: &Runner) -> Spec {
    let mut s = Spec::default();
    let flags = toks.first().unwrap_or_else(|| r.fail("missing flags"));
    for c in flags.chars() {
        match c {
            'S' => s.syn = true,
            'F' => s.fin = true,
            'R' => s.rst = true,
            'P' => s.psh = true,
            '.' => s.ack_flag = true,
            _ => r.fail("bad flag"),
        }
    }
    let range = toks.get(1).unwrap_or_else(|| r.fail("missing seq range"));
    let (a, rest) = range.split_once(':').unwrap_or_else(|| r.fail("bad range"));
    let (_, l) = rest.split_once('(').unwrap_or_else(|| r.fail("bad range"));
    s.seq = a.parse().unwrap_or_else(|_| r.fail("bad seq"));
    s.len = l
        .trim_end_matches(')')
        .parse()
        .unwrap_or_else(|_| r.fail("bad len"));
    let mut i = 2;
    while i < toks.len() {
        match toks[i] {
            "ack" => {
                s.ack = toks.get(i + 1).and_then(|v| v.parse().ok());
                i += 2;
            }
            "win" => {
                s.win = toks.get(i + 1).and_then(|v| v.parse().ok());
                i += 2;
            }
            "corrupt" => {
                s.corrupt = true;
                i += 1;
            }
            t if t.starts_with('<') => {
                let joined = toks[i..].join(" ");
                let inner = joined.trim_start_matches('<');
                let inner = inner.split('>').next().unwrap_or("");
                s.opts = Some(
                    inner
                        .split(',')
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty())
                        .collect(),
                );
                break;
            }
            _ => r.fail("unknown token"),
        }
    }
    s
}

fn inbound(r: &mut Runner, s: Spec) {
    let mut h = tcp_out_header(&s, r);
    let payload: Vec<u8> = (0..s.len as u64)
        .map(|i| pattern_in((s.seq as u64 + i).wrapping_sub(1)))
        .collect();
    h.1 = payload;
    if h.0.syn {
        r.peer_mss = h.0.mss.unwrap_or(536);
    }
    let bytes = build_segment(&h.0, &h.1, s.corrupt);
    let now = r.now;
    let len = bytes.len();
    let d = r.ep().handle_segment(now, REMOTE, LOCAL, bytes, 0..len);
    if let tcp::Dispatch::NewConn(hd) = d {
        r.conn = Some(hd);
        r.our_iss = r.ep().conn(hd).unwrap().iss().0;
    }
}

fn tcp_out_header(s: &Spec, r: &Runner) -> (Hdr, Vec<u8>) {
    let mut h = Hdr {
        src_port: RPORT,
        dst_port: LPORT,
        seq: r.peer_isn.wrapping_add(s.seq),
        ack: if s.ack_flag {
            Some(r.our_iss.wrapping_add(s.ack.unwrap_or(0)))
        } else {
            None
        },
        syn: s.syn,
        fin: s.fin,
        rst: s.rst,
        psh: s.psh,
        window: s.win.unwrap_or(65535) as u16,
        mss: None,
        ws: None,
        sack_perm: false,
        sack: [None; 3],
        ts: None,
    };
    for o in s.opts.iter().flatten() {
        let p: Vec<&str> = o.split_whitespace().collect();
        match p.as_slice() {
            ["mss", v] => h.mss = v.parse().ok(),
            ["ws", v] => h.ws = v.parse().ok(),
            ["sackOK"] => h.sack_perm = true,
            ["nop"] => {}
            ["ts", "val", v, "ecr", e] => {
                // `ecr @N`: the TSval we sent at N ms (our per-connection offset, RFC 7323
                // §5.4, is ISS rotated left by 13 bits).
                let ecr = match e.strip_prefix('@') {
                    Some(ms) => r.our_iss.rotate_left(13).wrapping_add(ms.parse().unwrap()),
                    None => e.parse().unwrap_or(0),
                };
                h.ts = Some((v.parse().unwrap(), ecr));
            }
            ["sack", blocks @ ..] => {
                for (i, b) in blocks.iter().enumerate().take(3) {
                    let (l, rr) = b.split_once(':').unwrap();
                    h.sack[i] = Some((
                        r.our_iss.wrapping_add(l.parse().unwrap()),
                        r.our_iss.wrapping_add(rr.parse().unwrap()),
                    ));
                }
            }
            _ => r.fail(&format!("bad option {o}")),
        }
    }
    (h, Vec::new())
}

fn check_out(r: &mut Runner, s: Spec) {
    if r.queue.is_empty() {
        r.pump();
    }
    let Some(o) = r.queue.pop_front() else {
        r.fail("expected a segment, got none")
    };
    let d = describe(&o, r);
    let h = &o.h;
    let bad = |what: &str| -> ! { r.fail(&format!("{what} mismatch; got {d}")) };
    if h.syn != s.syn || h.fin != s.fin || h.rst != s.rst || h.ack.is_some() != s.ack_flag {
        bad("flags");
    }
    if h.seq.0.wrapping_sub(r.our_iss) != s.seq {
        bad("seq");
    }
    if o.payload.len() as u32 != s.len {
        bad("len");
    }
    if let (Some(a), Some(got)) = (s.ack, h.ack) {
        if got.0.wrapping_sub(r.peer_isn) != a {
            bad("ack");
        }
    }
    if let Some(w) = s.win {
        if u32::from(h.window) != w {
            bad("win");
        }
    }
    // Inbound-direction payload bytes were checked in pump().
    if let Some(opts) = &s.opts {
        let mut want_mss = None;
        let mut want_ws = None;
        let mut want_sp = false;
        let mut want_ts: Option<(Option<u32>, Option<u32>)> = None;
        let mut want_sack: Vec<(u32, u32)> = Vec::new();
        for o in opts {
            let p: Vec<&str> = o.split_whitespace().collect();
            match p.as_slice() {
                ["mss", v] => want_mss = v.parse::<u16>().ok(),
                ["ws", v] => want_ws = v.parse::<u8>().ok(),
                ["sackOK"] => want_sp = true,
                ["nop"] => {}
                ["ts", "val", v, "ecr", e] => want_ts = Some((v.parse().ok(), e.parse().ok())),
                ["sack", blocks @ ..] => {
                    for b in blocks {
                        let (l, rr) = b.split_once(':').unwrap();
                        want_sack.push((l.parse().unwrap(), rr.parse().unwrap()));
                    }
                }
                _ => r.fail(&format!("bad option {o}")),
            }
        }
        let got_sack: Vec<(u32, u32)> = h
            .sack
            .iter()
            .flatten()
            .map(|(l, rr)| (l.0.wrapping_sub(r.peer_isn), rr.0.wrapping_sub(r.peer_isn)))
            .collect();
        if h.mss != want_mss
            || h.wscale != want_ws
            || h.sack_permitted != want_sp
            || got_sack != want_sack
        {
            bad("options");
        }
        match (want_ts, h.timestamp) {
            (None, None) => {}
            (Some((v, e)), Some((gv, ge))) => {
                if v.is_some_and(|v| v != gv) || e.is_some_and(|e| e != ge) {
                    bad("timestamp");
                }
            }
            _ => bad("timestamp presence"),
        }
    }
}

fn parse_event(s: &str, r: &Runner) -> Event {
    use tcp::CloseReason::*;
    match s {
        "Connected" => Event::Connected,
        "PeerClosed" => Event::PeerClosed,
        "Closed(Normal)" => Event::Closed(Normal),
        "Closed(Reset)" => Event::Closed(Reset),
        "Closed(Timeout)" => Event::Closed(Timeout),
        "Closed(Aborted)" => Event::Closed(Aborted),
        _ => r.fail("unknown event"),
    }
}

fn parse_state(s: &str, r: &Runner) -> tcp::State {
    use tcp::State::*;
    match s {
        "Closed" => Closed,
        "SynSent" => SynSent,
        "SynReceived" => SynReceived,
        "Established" => Established,
        "FinWait1" => FinWait1,
        "FinWait2" => FinWait2,
        "CloseWait" => CloseWait,
        "Closing" => Closing,
        "LastAck" => LastAck,
        "TimeWait" => TimeWait,
        _ => r.fail("unknown state"),
    }
}

/// Prelude for scripts that start from ESTABLISHED (passive open, no options but SACK).
pub const EST: &str = "
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1
0   < . 1:1(0) ack 1 win 65535
0   event Connected
";

/// Run `text` after the [`EST`] prelude (config lines in `cfg` go first).
pub fn run_est(cfg: &str, text: &str) {
    run(&format!("{cfg}\n{EST}\n{text}"))
}

/// Run a script with the default script configuration.
pub fn run(text: &str) {
    run_with(script_cfg(), text)
}

/// Run a script starting from `cfg`.
pub fn run_with(cfg: TcpConfig, text: &str) {
    let mut r = Runner {
        cfg,
        ep: None,
        conn: None,
        our_iss: 0,
        peer_isn: 1_000_000,
        now: Instant::ZERO,
        queue: VecDeque::new(),
        events: Vec::new(),
        read_off: 0,
        txbuf: 2048,
        line: 0,
        text: String::new(),
        peer_mss: 536,
    };
    let mut last = 0.0f64;
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        r.line = ln + 1;
        r.text = raw.to_string();
        let toks: Vec<&str> = line.split_whitespace().collect();
        let t = toks[0];
        let ms = if let Some(rel) = t.strip_prefix('+') {
            last + rel.parse::<f64>().unwrap_or_else(|_| r.fail("bad time"))
        } else {
            t.parse::<f64>().unwrap_or_else(|_| r.fail("bad time"))
        };
        last = ms;
        r.advance(ms_to_instant(ms));
        let rest = &toks[1..];
        step(&mut r, rest);
    }
    r.pump();
    if let Some(o) = r.queue.front() {
        r.fail(&format!("unexpected segment at end: {}", describe(o, &r)));
    }
}

fn num<T: std::str::FromStr>(r: &Runner, s: Option<&&str>) -> T {
    s.and_then(|v| v.parse().ok())
        .unwrap_or_else(|| r.fail("bad number"))
}

fn step(r: &mut Runner, t: &[&str]) {
    match t {
        ["<", rest @ ..] => {
            r.pump();
            let s = parse_spec(rest, r);
            inbound(r, s);
        }
        // In the same receive burst as the previous inbound segment: no poll in between (the
        // dataplane polls a connection once per burst of up to 32 frames).
        ["<<", rest @ ..] => {
            let s = parse_spec(rest, r);
            inbound(r, s);
        }
        ["ack_request", want] => {
            let want = match *want {
                "true" => true,
                "false" => false,
                _ => r.fail("ack_request true|false"),
            };
            if r.conn_mut().request_ack() != want {
                r.fail("request_ack returned the other value");
            }
        }
        [">", rest @ ..] => {
            let s = parse_spec(rest, r);
            check_out(r, s);
        }
        ["cfg", rest @ ..] => match rest {
            ["ts", "on"] => r.cfg.timestamps = true,
            ["ws", n] => r.cfg.window_scale = n.parse().ok(),
            ["sack", "off"] => r.cfg.sack = false,
            ["delack", n] => {
                r.cfg.delayed_ack = Some(netcore::Duration::from_millis(num(r, Some(n))))
            }
            ["ackstretch", n] => r.cfg.ack_stretch_segments = num(r, Some(n)),
            ["nagle", "on"] => r.cfg.nagle = true,
            ["rwnd", n] => r.cfg.recv_window = num(r, Some(n)),
            ["swnd", n] => r.cfg.send_window = num(r, Some(n)),
            ["mss", n] => r.cfg.mss = num(r, Some(n)),
            ["cubic"] => r.cfg.cc = CongestionControl::Cubic,
            ["bbr"] => r.cfg.cc = CongestionControl::Bbr,
            ["iw", n] => r.cfg.initial_cwnd_segments = num(r, Some(n)),
            ["rack", "on"] => r.cfg.rack_tlp = true,
            ["rack", "off"] => r.cfg.rack_tlp = false,
            ["prr", "on"] => r.cfg.prr = true,
            ["hystart", "on"] => r.cfg.hystart = true,
            ["hystart", "off"] => r.cfg.hystart = false,
            ["prr", "off"] => r.cfg.prr = false,
            ["sackcomp", n] => r.cfg.sack_compress_segments = num(r, Some(n)),
            ["sackcomp_held", n] => r.cfg.sack_compress_min_held = num(r, Some(n)),
            ["sackcomp_delay_us", n] => {
                r.cfg.sack_compress_delay = netcore::Duration::from_micros(num(r, Some(n)))
            }
            ["finwait2", n] => {
                r.cfg.fin_wait2_timeout = Some(netcore::Duration::from_millis(num(r, Some(n))))
            }
            ["timewait", n] => r.cfg.time_wait = netcore::Duration::from_millis(num(r, Some(n))),
            ["rto_init", n] => r.cfg.rto_initial = netcore::Duration::from_millis(num(r, Some(n))),
            ["rto_min", n] => {
                r.cfg.rto_min = netcore::Duration::from_millis(num(r, Some(n)));
                r.cfg.rto_min_bulk = r.cfg.rto_min_bulk.min(r.cfg.rto_min);
            }
            ["rto_min_bulk", n] => {
                r.cfg.rto_min_bulk = netcore::Duration::from_millis(num(r, Some(n)));
            }
            ["retries", n] => r.cfg.max_retries = num(r, Some(n)),
            ["ooo", n] => r.cfg.max_ooo_bytes = num(r, Some(n)),
            ["challenge", n] => r.cfg.challenge_ack_limit = num(r, Some(n)),
            ["isn", n] => r.peer_isn = num(r, Some(n)),
            ["txbuf", n] => r.txbuf = num(r, Some(n)),
            ["keepalive", i, v, c] => {
                r.cfg.keepalive = Some(Keepalive {
                    idle: netcore::Duration::from_millis(num(r, Some(i))),
                    interval: netcore::Duration::from_millis(num(r, Some(v))),
                    count: num(r, Some(c)),
                })
            }
            _ => r.fail("unknown cfg"),
        },
        ["listen", p] => {
            let p = num(r, Some(p));
            r.ep().listen(p);
        }
        ["connect"] => {
            let now = r.now;
            let h = r.ep().connect(now, LPORT, (REMOTE, RPORT)).unwrap();
            r.conn = Some(h);
            r.our_iss = r.ep().conn(h).unwrap().iss().0;
        }
        ["send", n] => {
            let n: u64 = num(r, Some(n));
            let got = r
                .conn_mut()
                .send(n)
                .unwrap_or_else(|e| panic!("send failed: {e:?}"));
            assert_eq!(got, n, "send accepted fewer bytes");
        }
        ["send_err", n] => {
            let n: u64 = num(r, Some(n));
            if r.conn_mut().send(n).is_ok() {
                r.fail("send should have failed");
            }
        }
        ["record", n] => {
            let n: u64 = num(r, Some(n));
            r.conn_mut()
                .send_record(n)
                .unwrap_or_else(|e| panic!("send_record failed: {e:?}"));
        }
        ["close"] => r.conn_mut().close(),
        ["abort"] => r.conn_mut().abort(),
        ["read", n] => {
            let want: u64 = num(r, Some(n));
            let mut got = 0u64;
            while let Some((b, range)) = r.conn_mut().poll_readable() {
                for (i, byte) in b[range.clone()].iter().enumerate() {
                    assert_eq!(
                        *byte,
                        pattern_in(r.read_off + i as u64),
                        "read data mismatch"
                    );
                }
                got += range.len() as u64;
                r.read_off += range.len() as u64;
            }
            if got != want {
                r.fail(&format!("read {got} bytes, expected {want}"));
            }
        }
        ["consume", n] => {
            // Peek and check bytes in place, then release exactly n (partial chunks allowed).
            let want: usize = num(r, Some(n));
            let mut left = want;
            let mut off = r.read_off;
            {
                let c = r.conn_mut();
                while left > 0 {
                    let Some((b, range)) = c.peek_readable() else {
                        break;
                    };
                    let k = left.min(range.len());
                    for (i, byte) in b[range.start..range.start + k].iter().enumerate() {
                        assert_eq!(*byte, pattern_in(off + i as u64), "peeked data mismatch");
                    }
                    assert_eq!(c.consume_readable(k), k);
                    off += k as u64;
                    left -= k;
                }
            }
            if left > 0 {
                r.fail(&format!("only {} bytes readable", want - left));
            }
            r.read_off = off;
        }
        ["none"] => {
            r.pump();
            if let Some(o) = r.queue.front() {
                r.fail(&format!("expected no output, got {}", describe(o, r)));
            }
        }
        ["state", s] => {
            let want = parse_state(s, r);
            let got = r.conn_mut().state();
            if got != want {
                r.fail(&format!("state {got:?}"));
            }
        }
        ["gone"] => {
            let h = r.conn.unwrap_or_else(|| r.fail("no connection"));
            let closed =
                r.ep.as_ref()
                    .and_then(|e| e.conn(h))
                    .is_none_or(|c| c.is_closed());
            if !closed {
                r.fail("connection still open");
            }
        }
        ["event", e] => {
            r.pump();
            let want = parse_event(e, r);
            match r.events.iter().position(|x| *x == want) {
                Some(i) => {
                    r.events.remove(i);
                }
                None => r.fail(&format!("event not seen; have {:?}", r.events)),
            }
        }
        ["noevent", e] => {
            r.pump();
            let want = parse_event(e, r);
            if r.events.contains(&want) {
                r.fail("event seen");
            }
        }
        ["stat", name, v] => {
            let v: u64 = num(r, Some(v));
            let s = r.ep.as_ref().map(|e| e.stats()).unwrap_or_default();
            let got = match *name {
                "retransmissions" => s.retransmissions,
                "fast_retransmits" => s.fast_retransmits,
                "rtos" => s.rtos,
                "spurious_rtos" => s.spurious_rtos,
                "rto_undos" => s.rto_undos,
                "ooo_held" => s.ooo_held,
                "ooo_dropped" => s.ooo_dropped,
                "bad_checksum" => s.bad_checksum,
                "challenge_acks" => s.challenge_acks,
                "resets_sent" => s.resets_sent,
                "resets_received" => s.resets_received,
                "paws_drops" => s.paws_drops,
                "tlp_probes" => s.tlp_probes,
                "rack_lost" => s.rack_lost,
                "fin_wait2_timeouts" => s.fin_wait2_timeouts,
                "ooo_dropped_small" => s.ooo_dropped_small,
                other => s
                    .fields()
                    .into_iter()
                    .find(|(k, _)| *k == other)
                    .map(|(_, v)| v)
                    .unwrap_or_else(|| r.fail("unknown stat")),
            };
            if got != v {
                r.fail(&format!("stat {name} = {got}"));
            }
        }
        ["acked", v] => {
            let v: u64 = num(r, Some(v));
            let got = r.conn_mut().acked_offset();
            if got != v {
                r.fail(&format!("acked offset {got}"));
            }
        }
        ["emss", v] => {
            let v: u16 = num(r, Some(v));
            let got = r.conn_mut().emss();
            if got != v {
                r.fail(&format!("emss {got}"));
            }
        }
        ["rto", v] => {
            let v: u64 = num(r, Some(v));
            let got = r.conn_mut().rto().as_millis() as u64;
            if got != v {
                r.fail(&format!("rto {got} ms"));
            }
        }
        ["bbr", st] => {
            let got = r.conn_mut().bbr_state().map(|b| b.0);
            if got != Some(*st) {
                r.fail(&format!("bbr state {got:?}"));
            }
        }
        ["cwnd", v] => {
            let v: u64 = num(r, Some(v));
            let got = r.conn_mut().cwnd();
            if got != v {
                r.fail(&format!("cwnd {got}"));
            }
        }
        _ => r.fail("unknown step"),
    }
}

/// Seq32 helper for tests that need wire values.
pub fn seq(v: u32) -> Seq32 {
    Seq32(v)
}
