//! `iwarp-rdma-client` / `iwarp-rdma-server`: rdma-core's `librdmacm/examples/rdma_client.c`
//! and `rdma_server.c` over iwarpd (same options, exchange and output), so each interoperates
//! with the other's rdma-core original on Linux siw or hardware.
//!
//! The exchange, on one RC connection (SQ and RQ depth 1, every send signalled):
//! 1. the client posts a 16-byte receive, connects, sends its 16-byte message and waits for
//!    the Send's completion, then for the receive's;
//! 2. the server gets the request, posts a 16-byte receive, accepts, waits for the client's
//!    message, sends its own 16 bytes and waits for that completion;
//! 3. both disconnect. Each prints `NAME: start` and `NAME: end RC` (0 on success).
//!
//! rdma-core's messages are zero-filled static buffers; ours are too, and we additionally
//! check that the message that arrived is exactly 16 bytes.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};
use verbs::{Access, CmEvent, CmId, ConnParam, Cq, Device, Mr, Qp, RecvWr, SendWr, Wc};

/// The examples' default port (`"7471"`).
pub const DEFAULT_PORT: u16 = 7471;
/// Size of each message.
pub const MSG_LEN: usize = 16;

/// Options of both tools.
#[derive(Debug, Clone)]
pub struct Options {
    /// Device spec (`None`: `IWARP_DEVICE` or the default socket).
    pub device: Option<String>,
    /// Client: the server; server: the address to listen on.
    pub addr: SocketAddrV4,
    /// MPA choices for this connection.
    pub conn: ConnParam,
    /// Debug lines on stderr.
    pub debug: bool,
    /// Give up waiting for the peer after this long.
    pub timeout: Duration,
}

/// The flags `iwarp-rdma-client` and `iwarp-rdma-server` share (beyond rdma-core's `-s`/`-p`).
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    /// Device: an iwarpd socket (unix:PATH) or an iwarpd config (embedded mode); default
    /// $IWARP_DEVICE, else /run/iwarpd.sock.
    #[arg(short = 'd', value_name = "DEVICE")]
    pub device: Option<String>,
    /// CRC for this connection.
    #[arg(long, value_enum, default_value_t = crate::crc_arg::Crc::Default)]
    pub crc: crate::crc_arg::Crc,
    /// Debug lines (negotiated MPA parameters, the received bytes) on stderr.
    #[arg(long)]
    pub debug: bool,
    /// Give up when the peer does not come or answer within this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// Print the version.
    #[arg(long, action = clap::ArgAction::Version)]
    pub version: Option<bool>,
}

impl CommonArgs {
    /// The exchange's options for `addr` (client: the server; server: where to listen).
    pub fn options(self, addr: SocketAddrV4) -> Options {
        Options {
            device: self.device,
            addr,
            conn: ConnParam::new().crc(verbs::CrcMode::from(self.crc)),
            debug: self.debug,
            timeout: Duration::from_secs(self.timeout.max(1)),
        }
    }
}

/// Resources of the endpoint (`rdma_create_ep` + `rdma_reg_msgs`).
struct Ep {
    qp: Qp,
    cq: Cq,
    recv: Mr,
    send: Mr,
}

impl Ep {
    fn new(dev: &Device) -> verbs::Result<Ep> {
        let pd = dev.alloc_pd()?;
        let ch = dev.create_comp_channel()?;
        let cq = dev.create_cq(4, Some(&ch))?;
        let qp = pd.create_qp(&cq, &cq).sq_depth(1).rq_depth(1).build()?;
        let seg = dev.alloc_segment(2 * MSG_LEN)?;
        let recv = pd.reg_mr(&seg, 0, MSG_LEN, Access::LOCAL_WRITE)?;
        let send = pd.reg_mr(&seg, MSG_LEN, MSG_LEN, Access::LOCAL_READ)?;
        Ok(Ep { qp, cq, recv, send })
    }

    fn post_recv(&self) -> verbs::Result<()> {
        self.qp
            .post_recv(&RecvWr::new(1, &[self.recv.sge(0, MSG_LEN)?]))
    }

    fn post_send(&self) -> verbs::Result<()> {
        self.qp
            .post_send(&SendWr::send(2, &[self.send.sge(0, MSG_LEN)?]))
    }

    /// Wait for the next completion (`rdma_get_send_comp` / `rdma_get_recv_comp`), watching
    /// the CM id for a TERMINATE or a disconnect meanwhile.
    fn completion(&self, id: &CmId, what: &str, timeout: Duration) -> Result<Wc, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(wc) = self
                .cq
                .wait_one(Duration::from_millis(50))
                .map_err(|e| format!("{what}: {e}"))?
            {
                if !wc.is_ok() {
                    return Err(format!("{what}: completion failed: {wc}"));
                }
                return Ok(wc);
            }
            match id.get_event(Some(Duration::ZERO)) {
                Ok(Some(CmEvent::TerminateReceived {
                    layer,
                    etype,
                    ecode,
                    ..
                })) => {
                    return Err(format!(
                        "{what}: TERMINATE received: layer {layer} etype {etype} ecode {ecode:#04x}"
                    ));
                }
                Ok(Some(e @ (CmEvent::Disconnected { .. } | CmEvent::QpError { .. }))) => {
                    return Err(format!("{what}: {}", e.name()));
                }
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(format!("{what}: no completion within {timeout:?}"));
            }
        }
    }
}

fn dbg(opts: &Options, msg: impl FnOnce() -> String) {
    if opts.debug {
        eprintln!("{}", msg());
    }
}

/// Check the received message's length; print it under `--debug`.
fn check_recv(opts: &Options, ep: &Ep, wc: &Wc) -> Result<(), String> {
    if wc.byte_len() as usize != MSG_LEN {
        return Err(format!(
            "received {} bytes, expected {MSG_LEN}",
            wc.byte_len()
        ));
    }
    let data = ep.recv.to_vec(0, MSG_LEN).map_err(|e| e.to_string())?;
    dbg(opts, || format!("received {MSG_LEN} bytes: {data:02x?}"));
    Ok(())
}

/// `rdma_client`'s `run()`: 0 on success; errors are printed as `perror` would.
pub fn run_client(opts: &Options) -> i32 {
    match client(opts) {
        Ok(()) => 0,
        Err(e) => {
            println!("{e}");
            -1
        }
    }
}

fn client(opts: &Options) -> Result<(), String> {
    let dev = Device::open_or_default(opts.device.as_deref())
        .map_err(|e| format!("rdma_create_ep: {e}"))?;
    let ep = Ep::new(&dev).map_err(|e| format!("rdma_create_ep: {e}"))?;
    let id = dev
        .create_cm_id()
        .map_err(|e| format!("rdma_create_ep: {e}"))?;
    ep.post_recv().map_err(|e| format!("rdma_post_recv: {e}"))?;
    id.connect(&ep.qp, opts.addr, &opts.conn)
        .map_err(|e| format!("rdma_connect: {e}"))?;
    let est = id
        .wait_established(opts.timeout)
        .map_err(|e| format!("rdma_connect: {e}"))?;
    dbg(opts, || crate::rping::negotiated(&est));
    let r = exchange_client(opts, &ep, &id);
    let _ = id.disconnect();
    r
}

fn exchange_client(opts: &Options, ep: &Ep, id: &CmId) -> Result<(), String> {
    ep.post_send().map_err(|e| format!("rdma_post_send: {e}"))?;
    ep.completion(id, "rdma_get_send_comp", opts.timeout)?;
    let wc = ep.completion(id, "rdma_get_recv_comp", opts.timeout)?;
    check_recv(opts, ep, &wc)
}

/// `rdma_server`'s `run()`: 0 on success.
pub fn run_server(opts: &Options) -> i32 {
    match server(opts) {
        Ok(()) => 0,
        Err(e) => {
            println!("{e}");
            -1
        }
    }
}

fn server(opts: &Options) -> Result<(), String> {
    let dev = Device::open_or_default(opts.device.as_deref())
        .map_err(|e| format!("rdma_create_ep: {e}"))?;
    let listener = dev
        .create_cm_id()
        .map_err(|e| format!("rdma_create_ep: {e}"))?;
    listener
        .listen(opts.addr, 0)
        .map_err(|e| format!("rdma_listen: {e}"))?;
    eprintln!("iwarp-rdma-server: listening on {}", opts.addr);
    let req = loop {
        match listener.get_event(Some(opts.timeout)) {
            Ok(Some(CmEvent::ConnectRequest(r))) => break r,
            Ok(Some(e)) => dbg(opts, || format!("ignoring {}", e.name())),
            Ok(None) => return Err("rdma_get_request: no connect request".into()),
            Err(e) => return Err(format!("rdma_get_request: {e}")),
        }
    };
    dbg(opts, || format!("connect request from {}", req.remote));
    let ep = Ep::new(&dev).map_err(|e| format!("rdma_create_ep: {e}"))?;
    ep.post_recv().map_err(|e| format!("rdma_post_recv: {e}"))?;
    let param = ConnParam {
        private_data: Vec::new(),
        ..opts.conn.clone()
    };
    req.id
        .accept(&ep.qp, &param)
        .map_err(|e| format!("rdma_accept: {e}"))?;
    let est = req
        .id
        .wait_established(opts.timeout)
        .map_err(|e| format!("rdma_accept: {e}"))?;
    dbg(opts, || crate::rping::negotiated(&est));
    let r = exchange_server(opts, &ep, &req.id);
    let _ = req.id.disconnect();
    r
}

fn exchange_server(opts: &Options, ep: &Ep, id: &CmId) -> Result<(), String> {
    let wc = ep.completion(id, "rdma_get_recv_comp", opts.timeout)?;
    check_recv(opts, ep, &wc)?;
    ep.post_send().map_err(|e| format!("rdma_post_send: {e}"))?;
    ep.completion(id, "rdma_get_send_comp", opts.timeout)?;
    Ok(())
}
