//! `rping` over iwarpd: the same ping-pong, wire exchange and output as rdma-core's
//! `librdmacm/examples/rping.c`, so it interoperates with rping on Linux siw and hardware.
//!
//! One ping (client C, server S), all on one RC connection with IRD = ORD = 1:
//! 1. C sends its start buffer's `{addr, rkey, size}` (16 bytes, big-endian) in a Send;
//! 2. S RDMA-Reads `size` bytes from it, then sends a 16-byte "go ahead";
//! 3. C sends its RDMA buffer's `{addr, rkey, size}`;
//! 4. S RDMA-Writes `strlen(data) + 1` bytes into it, then sends "go ahead";
//! 5. C checks the buffer (`-V`) and prints it (`-v`): `ping data: rdma-ping-N: ...`.
//!
//! The client disconnects after `-C` pings; the server then sees DISCONNECTED and exits 0.

use std::io::Write;
use std::net::SocketAddrV4;
use std::time::Duration;
use verbs::{
    Access, CmEvent, CmId, ConnParam, Cq, Device, Mr, Qp, RecvWr, RemoteMr, SendWr, Wc, WcOpcode,
    WcStatus,
};

/// rping's default port.
pub const DEFAULT_PORT: u16 = 7174;
/// rping's default ping size.
pub const DEFAULT_SIZE: usize = 64;
/// rping's largest buffer (`RPING_BUFSIZE`); sizes up to one less are allowed.
pub const BUFSIZE: usize = 64 * 1024;
/// rping's smallest size: `sizeof("INT_MAX") + sizeof("rdma-ping-%d: ")`.
pub const MIN_SIZE: usize = 23;
/// Bytes of the `{addr, rkey, size}` message.
pub const INFO_LEN: usize = 16;
/// rping's send-queue depth.
pub const SQ_DEPTH: u32 = 16;

/// rping's states (their numbers appear in its error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Nothing yet.
    Idle = 1,
    /// A connect request arrived.
    ConnectRequest = 2,
    /// Connected.
    Connected = 5,
    /// The peer advertised its source buffer.
    ReadAdv = 6,
    /// The Read completed.
    ReadComplete = 7,
    /// The peer advertised its sink buffer.
    WriteAdv = 8,
    /// The Write completed (server) or the final go-ahead arrived (client).
    WriteComplete = 9,
    /// The connection closed.
    Disconnected = 10,
    /// Something failed.
    Error = 11,
}

/// Fill `buf` as rping's client does for ping `n`: `"rdma-ping-<n>: "` followed by the
/// characters from `start` cycling through 'A'..='z', NUL in the last byte.
pub fn fill_ping(buf: &mut [u8], n: u64, start: u8) {
    let head = format!("rdma-ping-{n}: ");
    let cc = head.len().min(buf.len().saturating_sub(1));
    buf[..cc].copy_from_slice(&head.as_bytes()[..cc]);
    let mut c = start;
    for b in buf.iter_mut().skip(cc) {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

/// The start character of ping `n` (65 for ping 0, then +1 wrapping after 'z').
pub fn start_char(n: u64) -> u8 {
    65 + (n % 58) as u8
}

/// The bytes before the first NUL (what `printf("%s")` prints).
pub fn c_str(buf: &[u8]) -> &[u8] {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    &buf[..end]
}

/// Options common to both roles.
#[derive(Debug, Clone)]
pub struct Options {
    /// Device spec (`None`: `IWARP_DEVICE` or the default socket).
    pub device: Option<String>,
    /// Server: address to listen on; client: server address.
    pub addr: SocketAddrV4,
    /// Ping size in bytes.
    pub size: usize,
    /// Pings (0: forever).
    pub count: u64,
    /// Print ping data.
    pub verbose: bool,
    /// Check each echoed buffer.
    pub validate: bool,
    /// Debug messages on stderr.
    pub debug: bool,
    /// Per-connection MPA settings.
    pub conn: ConnParam,
    /// Serve several clients (server).
    pub persistent: bool,
    /// Give up waiting for the peer after this long.
    pub timeout: Duration,
    /// Client: the source address (`-I`), which must be the device's.
    pub source: Option<std::net::Ipv4Addr>,
    /// Test-only fault (server): the first RDMA Write crosses the end of the client's
    /// advertised buffer by 8 bytes, so a conformant peer answers with a TERMINATE (DDP,
    /// tagged, base or bounds violation: RFC 5041 §7.2).
    pub write_past_end: bool,
    /// Test-only fault (client): break the first Send's FPDU (`abi::ctl::tx_fault` value;
    /// the daemon needs `[control] allow_faults`).
    pub fault: Option<u8>,
}

/// What went wrong, as rping words it.
#[derive(Debug)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<verbs::Error> for Failure {
    fn from(e: verbs::Error) -> Self {
        Failure(e.to_string())
    }
}

type Res<T> = Result<T, Failure>;

/// The resources of one connection.
struct Conn {
    id: CmId,
    qp: Qp,
    cq: Cq,
    recv: Mr,
    send: Mr,
    rdma: Mr,
    start: Option<Mr>,
    state: State,
    remote: RemoteMr,
    opts: Options,
    role: &'static str,
}

fn dbg(opts: &Options, msg: impl FnOnce() -> String) {
    if opts.debug {
        eprintln!("{}", msg());
    }
}

impl Conn {
    /// PD, CQ with a channel, QP (SQ 16, RQ 2), and the buffers in one shared segment.
    fn setup(dev: &Device, id: CmId, opts: &Options, client: bool) -> Res<Conn> {
        let pd = dev.alloc_pd()?;
        let ch = dev.create_comp_channel()?;
        let cq = dev.create_cq(SQ_DEPTH * 2, Some(&ch))?;
        let qp = pd
            .create_qp(&cq, &cq)
            .sq_depth(SQ_DEPTH)
            .rq_depth(2)
            .build()?;
        let size = opts.size;
        let seg = dev.alloc_segment(2 * INFO_LEN + 2 * size.next_multiple_of(64))?;
        let remote = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let recv = pd.reg_mr(&seg, 0, INFO_LEN, Access::LOCAL_WRITE)?;
        let send = pd.reg_mr(&seg, INFO_LEN, INFO_LEN, Access::LOCAL_READ)?;
        let rdma = pd.reg_mr(&seg, 2 * INFO_LEN, size, remote)?;
        let start = if client {
            let off = 2 * INFO_LEN + size.next_multiple_of(64);
            Some(pd.reg_mr(&seg, off, size, remote)?)
        } else {
            None
        };
        let c = Conn {
            id,
            qp,
            cq,
            recv,
            send,
            rdma,
            start,
            state: State::Idle,
            remote: RemoteMr::default(),
            opts: opts.clone(),
            role: if client { "client" } else { "server" },
        };
        c.post_recv()?;
        Ok(c)
    }

    fn post_recv(&self) -> Res<()> {
        Ok(self
            .qp
            .post_recv(&RecvWr::new(0, &[self.recv.sge(0, INFO_LEN)?]))?)
    }

    /// Send the 16-byte message in the send buffer.
    fn post_info(&self) -> Res<()> {
        Ok(self
            .qp
            .post_send(&SendWr::send(1, &[self.send.sge(0, INFO_LEN)?]))?)
    }

    /// Put `{addr, rkey, size}` of `mr` in the send buffer (`rping_format_send`).
    fn format_send(&self, mr: &Mr) -> Res<()> {
        let info = RemoteMr {
            addr: mr.remote_addr(),
            rkey: mr.rkey(),
            len: self.opts.size as u64,
        };
        dbg(&self.opts, || {
            format!(
                "RDMA addr {:x} rkey {:x} len {}",
                info.addr, info.rkey, info.len
            )
        });
        self.send.write(0, &info.to_bytes())?;
        Ok(())
    }

    /// A receive completed: advance the state as `server_recv`/`client_recv` do.
    fn on_recv(&mut self, wc: &Wc) -> Res<()> {
        if wc.byte_len() as usize != INFO_LEN {
            return Err(Failure(format!(
                "Received bogus data, size {}",
                wc.byte_len()
            )));
        }
        if self.role == "server" {
            let mut b = [0u8; INFO_LEN];
            self.recv.read(0, &mut b)?;
            self.remote = RemoteMr::from_bytes(&b);
            dbg(&self.opts, || {
                format!(
                    "Received rkey {:x} addr {:x} len {} from peer",
                    self.remote.rkey, self.remote.addr, self.remote.len
                )
            });
            self.state = if self.state as u8 <= State::Connected as u8
                || self.state == State::WriteComplete
            {
                State::ReadAdv
            } else {
                State::WriteAdv
            };
        } else {
            self.state = if self.state == State::ReadAdv {
                State::WriteAdv
            } else {
                State::WriteComplete
            };
        }
        self.post_recv()
    }

    /// Handle one completion (`rping_cq_event_handler`); `true` when it moved the state.
    fn on_completion(&mut self, wc: &Wc) -> Res<bool> {
        if !wc.is_ok() {
            if wc.status() == WcStatus::Flushed {
                return Ok(false);
            }
            self.state = State::Error;
            return Err(Failure(format!(
                "cq completion failed status {} ({wc})",
                wc.status() as u8
            )));
        }
        match wc.opcode() {
            Some(WcOpcode::Send) => Ok(false),
            Some(WcOpcode::Write) => {
                self.state = State::WriteComplete;
                Ok(true)
            }
            Some(WcOpcode::Read) => {
                self.state = State::ReadComplete;
                Ok(true)
            }
            Some(WcOpcode::Recv) => {
                self.on_recv(wc)?;
                Ok(true)
            }
            _ => Err(Failure(format!("unknown completion {wc}"))),
        }
    }

    /// Wait until a completion or a CM event moves the state (`sem_wait(&cb->sem)`).
    fn wait(&mut self) -> Res<()> {
        let deadline = std::time::Instant::now() + self.opts.timeout;
        loop {
            if let Some(wc) = self.cq.wait_one(Duration::from_millis(50))? {
                match self.on_completion(&wc) {
                    Ok(true) => return Ok(()),
                    Ok(false) => continue,
                    Err(e) => {
                        eprintln!("{e}");
                        self.state = State::Error;
                        return Ok(());
                    }
                }
            }
            if let Some(ev) = self.id.get_event(Some(Duration::ZERO))?
                && self.on_cm_event(&ev)
            {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(Failure(format!(
                    "{} timed out after {:?} in state {}",
                    self.role, self.opts.timeout, self.state as u8
                )));
            }
        }
    }

    /// `rping_cma_event_handler` for an established connection; `true` if the state moved.
    fn on_cm_event(&mut self, ev: &CmEvent) -> bool {
        match ev {
            CmEvent::Disconnected { .. } => {
                eprintln!("{} DISCONNECT EVENT...", self.role);
                self.state = State::Disconnected;
                true
            }
            CmEvent::TerminateReceived {
                layer,
                etype,
                ecode,
                ..
            } => {
                eprintln!(
                    "{} TERMINATE received: layer {layer} etype {etype} ecode {ecode:#04x}",
                    self.role
                );
                self.state = State::Error;
                true
            }
            CmEvent::QpError { .. } => {
                eprintln!("{} QP error: {ev:?}", self.role);
                self.state = State::Error;
                true
            }
            other => {
                eprintln!("unhandled event: {}, ignoring", other.name());
                false
            }
        }
    }

    fn expect(&mut self, want: State) -> Res<bool> {
        self.wait()?;
        if self.state != want {
            eprintln!("wait for {} state {}", state_name(want), self.state as u8);
            return Ok(false);
        }
        Ok(true)
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::ReadAdv => "RDMA_READ_ADV",
        State::ReadComplete => "RDMA_READ_COMPLETE",
        State::WriteAdv => "RDMA_WRITE_ADV",
        State::WriteComplete => "RDMA_WRITE_COMPLETE",
        State::Connected => "CONNECTED",
        State::ConnectRequest => "CONNECT_REQUEST",
        _ => "?",
    }
}

/// The client (`rping_run_client` + `rping_test_client`). Returns the pings done.
pub fn run_client(opts: &Options) -> Res<u64> {
    let dev = Device::open_or_default(opts.device.as_deref())?;
    if let Some(src) = opts.source
        && *dev.attrs().ip.ip() != src
    {
        return Err(Failure(format!(
            "-I {src}: the device's address is {} (one address per device)",
            dev.attrs().ip.ip()
        )));
    }
    let id = dev.create_cm_id()?;
    let mut c = Conn::setup(&dev, id.clone(), opts, true)?;
    id.connect(&c.qp, opts.addr, &opts.conn)?;
    match id.wait_established(opts.timeout) {
        Ok(est) => {
            dbg(opts, || negotiated(&est));
            c.state = State::Connected;
        }
        Err(e) => {
            return Err(Failure(format!("cma event {}, error {e}", cma_name(&e))));
        }
    }
    dbg(opts, || "rdma_connect successful".into());
    let done = client_loop(&mut c)?;
    if c.state != State::Disconnected {
        id.disconnect()?;
        // The CM reports our own disconnect too, as librdmacm does.
        if let Ok(Some(ev)) = id.get_event(Some(Duration::from_secs(2))) {
            c.on_cm_event(&ev);
        }
    }
    if c.state == State::Error {
        return Err(Failure("rping client failed".into()));
    }
    Ok(done)
}

/// The `--debug` line naming what MPA negotiated (the interop harness checks it).
pub fn negotiated(e: &verbs::Established) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    format!(
        "negotiated: MPA rev {} crc {} markers {} ird {} ord {} peer {}",
        e.revision,
        on(e.crc),
        on(e.markers),
        e.ird,
        e.ord,
        e.remote
    )
}

fn cma_name(e: &verbs::Error) -> &'static str {
    match e {
        verbs::Error::Rejected { .. } => "RDMA_CM_EVENT_REJECTED",
        verbs::Error::ConnectFailed { .. } => "RDMA_CM_EVENT_CONNECT_ERROR",
        verbs::Error::NoEvent(_) => "RDMA_CM_EVENT_UNREACHABLE",
        _ => "RDMA_CM_EVENT_CONNECT_ERROR",
    }
}

fn client_loop(c: &mut Conn) -> Res<u64> {
    let size = c.opts.size;
    let mut buf = vec![0u8; size];
    let mut out = std::io::stdout().lock();
    let start_mr = c
        .start
        .take()
        .ok_or_else(|| Failure("no start buffer".into()))?;
    let mut ping = 0u64;
    while c.opts.count == 0 || ping < c.opts.count {
        c.state = State::ReadAdv;
        fill_ping(&mut buf, ping, start_char(ping));
        start_mr.write(0, &buf)?;
        c.format_send(&start_mr)?;
        if let (Some(f), 0) = (c.opts.fault, ping) {
            c.qp.inject_fault(f)?;
        }
        c.post_info()?;
        if !c.expect(State::WriteAdv)? {
            break;
        }
        c.format_send(&c.rdma)?;
        c.post_info()?;
        if !c.expect(State::WriteComplete)? {
            break;
        }
        let got = c.rdma.to_vec(0, size)?;
        if c.opts.validate && got != buf {
            eprintln!("data mismatch!");
            c.state = State::Error;
            break;
        }
        if c.opts.verbose {
            let mut line = b"ping data: ".to_vec();
            line.extend_from_slice(c_str(&got));
            line.push(b'\n');
            out.write_all(&line)
                .and_then(|_| out.flush())
                .map_err(|e| Failure(format!("stdout: {e}")))?;
        }
        ping += 1;
    }
    c.start = Some(start_mr);
    Ok(ping)
}

/// The server (`rping_run_server` / `rping_run_persistent_server`).
pub fn run_server(opts: &Options) -> Res<()> {
    let dev = Device::open_or_default(opts.device.as_deref())?;
    let listener = dev.create_cm_id()?;
    listener.listen(opts.addr, 3)?;
    dbg(opts, || format!("rdma_listen on {}", opts.addr));
    eprintln!("iwarp-rping: server listening on {}", opts.addr);
    let mut workers = Vec::new();
    loop {
        let req = match listener.get_event(None)? {
            Some(CmEvent::ConnectRequest(r)) => r,
            Some(e) => {
                eprintln!("wait for CONNECT_REQUEST state {}", e.name());
                return Err(Failure("unexpected CM event".into()));
            }
            None => continue,
        };
        dbg(opts, || format!("connect request from {}", req.remote));
        let (dev2, opts2) = (dev.clone(), opts.clone());
        let serve = move || serve_one(&dev2, req.id, &opts2);
        if !opts.persistent {
            return serve();
        }
        workers.retain(|w: &std::thread::JoinHandle<Res<()>>| !w.is_finished());
        workers.push(std::thread::spawn(move || {
            if let Err(e) = serve() {
                eprintln!("{e}");
            }
            Ok(())
        }));
    }
}

fn serve_one(dev: &Device, id: CmId, opts: &Options) -> Res<()> {
    let mut c = Conn::setup(dev, id.clone(), opts, false)?;
    let param = ConnParam {
        private_data: Vec::new(),
        ..opts.conn.clone()
    };
    id.accept(&c.qp, &param)?;
    match id.wait_established(opts.timeout) {
        Ok(est) => dbg(opts, || negotiated(&est)),
        Err(e) => {
            eprintln!("wait for CONNECTED state {}: {e}", State::Error as u8);
            return Err(Failure("connect error".into()));
        }
    }
    c.state = State::Connected;
    let r = server_loop(&mut c);
    if c.state != State::Disconnected {
        let _ = id.disconnect();
    }
    r?;
    if c.state == State::Disconnected {
        Ok(())
    } else {
        Err(Failure("rping server failed".into()))
    }
}

fn server_loop(c: &mut Conn) -> Res<()> {
    let mut out = std::io::stdout().lock();
    loop {
        if !c.expect(State::ReadAdv)? {
            return Ok(());
        }
        let len = c.remote.len as usize;
        if len > c.opts.size {
            eprintln!(
                "RDMA Read of {len} bytes does not fit the {}-byte buffer (use the same -S on both sides)",
                c.opts.size
            );
            c.state = State::Error;
            return Ok(());
        }
        let read = SendWr::read(2, &[c.rdma.sge(0, len)?], c.remote.addr, c.remote.rkey);
        c.qp.post_send(&read)?;
        if !c.expect(State::ReadComplete)? {
            return Ok(());
        }
        let data = c.rdma.to_vec(0, c.opts.size)?;
        if c.opts.verbose {
            let mut line = b"server ping data: ".to_vec();
            line.extend_from_slice(c_str(&data));
            line.push(b'\n');
            out.write_all(&line)
                .and_then(|_| out.flush())
                .map_err(|e| Failure(format!("stdout: {e}")))?;
        }
        c.send.write(0, &[0u8; INFO_LEN])?;
        c.post_info()?;
        if !c.expect(State::WriteAdv)? {
            return Ok(());
        }
        let n = (c_str(&data).len() + 1).min(c.opts.size);
        let (n, to) = if c.opts.write_past_end {
            let n = n.clamp(16, c.opts.size);
            (n, c.remote.addr + c.remote.len + 8 - n as u64)
        } else {
            (n, c.remote.addr)
        };
        let write = SendWr::write(3, &[c.rdma.sge(0, n)?], to, c.remote.rkey);
        c.qp.post_send(&write)?;
        if !c.expect(State::WriteComplete)? {
            return Ok(());
        }
        c.post_info()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_buffers_match_rpings_output() {
        // From ../shared/siw-peer/results/rping.client.txt (rping -v -C 10, size 64).
        let mut b = vec![0u8; 64];
        fill_ping(&mut b, 0, start_char(0));
        assert_eq!(
            c_str(&b),
            b"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
        );
        fill_ping(&mut b, 9, start_char(9));
        assert_eq!(
            c_str(&b),
            b"rdma-ping-9: JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"
        );
        assert_eq!(b[63], 0);
        // The start character wraps after 'z' (58 characters).
        assert_eq!(start_char(57), b'z');
        assert_eq!(start_char(58), b'A');
    }

    #[test]
    fn smallest_size_holds_a_large_ping_number() {
        let mut b = vec![0u8; MIN_SIZE];
        fill_ping(&mut b, 1_000_000, start_char(1_000_000));
        assert_eq!(b[MIN_SIZE - 1], 0);
        assert!(c_str(&b).starts_with(b"rdma-ping-1000000: "));
    }
}
