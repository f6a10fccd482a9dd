//! The opcheck server: serves connections (each on its own thread) until `conns` are done.

use super::proto::{Cmd, MSG_LEN, Msg, pattern};
use super::{Completions, Res, hex8, sha_of};
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use verbs::{Access, CmEvent, CmId, ConnParam, Device, Mr, Qp, RecvWr, SendWr, Wc, WcOpcode};

/// Server options.
#[derive(Debug, Clone)]
pub struct ServerOpts {
    /// Address to listen on.
    pub addr: SocketAddrV4,
    /// Data region size (the largest size a client may check).
    pub max_size: usize,
    /// Connections to serve before exiting (0: forever).
    pub conns: u64,
    /// Connection parameters (CRC, markers).
    pub param: ConnParam,
    /// How long a client may stay silent.
    pub timeout: Duration,
}

const WR_CTL: u64 = 1;
const WR_DATA: u64 = 2;
const WR_IMM: u64 = 3;
const WR_REPLY: u64 = 10;

/// One client's connection.
struct Served {
    id: CmId,
    qp: Qp,
    wcs: Completions,
    ctl_rx: Mr,
    ctl_tx: Mr,
    data: Mr,
    atomic: Mr,
    inval: Mr,
    last_data: Option<Wc>,
    last_imm: Option<Wc>,
    timeout: Duration,
}

/// Listen and serve. Returns the number of connections that failed.
pub fn run(dev: &Device, opts: &ServerOpts) -> Res<u64> {
    let lis = dev.create_cm_id().map_err(|e| e.to_string())?;
    lis.listen(opts.addr, 128).map_err(|e| e.to_string())?;
    println!("opcheck server: listening on {}", opts.addr);
    let failed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    let mut n = 0u64;
    while opts.conns == 0 || n < opts.conns {
        let req = lis
            .get_request(Duration::from_secs(86400))
            .map_err(|e| e.to_string())?;
        n += 1;
        let (dev, opts, failed) = (dev.clone(), opts.clone(), failed.clone());
        let remote = req.remote;
        threads.push(std::thread::spawn(move || {
            let t0 = Instant::now();
            match serve(&dev, req.id, &opts) {
                Ok(s) => println!(
                    "server: conn {n} from {remote}: {s} after {:.3} s",
                    t0.elapsed().as_secs_f64()
                ),
                Err(e) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    println!(
                        "server: conn {n} from {remote}: FAILED: {e} after {:.3} s",
                        t0.elapsed().as_secs_f64()
                    );
                }
            }
        }));
        threads.retain(|t| !t.is_finished());
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(failed.load(Ordering::Relaxed))
}

fn serve(dev: &Device, id: CmId, opts: &ServerOpts) -> Res<String> {
    let e = |e: verbs::Error| e.to_string();
    let pd = dev.alloc_pd().map_err(e)?;
    let ch = dev.create_comp_channel().map_err(e)?;
    let cq = dev.create_cq(64, Some(&ch)).map_err(e)?;
    let qp = pd
        .create_qp(&cq, &cq)
        .sq_depth(16)
        .rq_depth(8)
        .build()
        .map_err(e)?;
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mut s = Served {
        id: id.clone(),
        qp,
        wcs: Completions::new(&cq),
        ctl_rx: pd.alloc_mr(MSG_LEN, Access::LOCAL_WRITE).map_err(e)?,
        ctl_tx: pd.alloc_mr(MSG_LEN, Access::LOCAL_READ).map_err(e)?,
        data: pd.alloc_mr_huge(opts.max_size.max(8), rw).map_err(e)?,
        atomic: pd.alloc_mr(64, rw | Access::REMOTE_ATOMIC).map_err(e)?,
        inval: pd.alloc_mr(64, rw | Access::REMOTE_INVALIDATE).map_err(e)?,
        last_data: None,
        last_imm: None,
        timeout: opts.timeout,
    };
    s.post_ctl()?;
    id.accept(&s.qp, &opts.param).map_err(e)?;
    let est = id.wait_established(opts.timeout).map_err(e)?;
    let mut checks = 0u64;
    loop {
        let wc = match s.next() {
            Ok(Some(wc)) => wc,
            Ok(None) => return Err(s.events_or("client silent")),
            Err(err) => return Err(s.events_or(&err)),
        };
        match wc.wr_id() {
            WR_DATA => s.last_data = Some(wc),
            WR_IMM => s.last_imm = Some(wc),
            WR_CTL => {
                let m = Msg::from_bytes(&s.ctl_rx.to_vec(0, MSG_LEN).map_err(e)?)
                    .ok_or("bad control message")?;
                if m.cmd == Cmd::Bye {
                    s.reply(Msg::new(Cmd::Ok))?;
                    let _ = s.wcs.wait(opts.timeout, |w| w.wr_id() == WR_REPLY);
                    return Ok(format!(
                        "{checks} requests served (CRC {}, markers {}), client said bye",
                        est.crc, est.markers
                    ));
                }
                let r = s.handle(&m)?;
                checks += 1;
                s.reply(r)?;
            }
            _ => {}
        }
    }
}

impl Served {
    fn post_ctl(&self) -> Res<()> {
        let sge = self.ctl_rx.sge(0, MSG_LEN).map_err(|e| e.to_string())?;
        self.qp
            .post_recv(&RecvWr::new(WR_CTL, &[sge]))
            .map_err(|e| e.to_string())
    }

    /// The next receive completion (send completions of replies are consumed on the way).
    fn next(&mut self) -> Res<Option<Wc>> {
        match self.wcs.wait(self.timeout, |w| {
            w.opcode().is_some_and(|o| o as u8 & 0x80 != 0)
        }) {
            Ok(w) => Ok(Some(w)),
            Err(e) if e.starts_with("no completion") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Why the connection ended, from the CM events waiting (or `fallback`).
    fn events_or(&self, fallback: &str) -> String {
        let mut v = Vec::new();
        while let Ok(Some(ev)) = self.id.get_event(Some(Duration::from_millis(200))) {
            v.push(describe(&ev));
        }
        if v.is_empty() {
            fallback.to_owned()
        } else {
            format!("{} ({fallback})", v.join(", "))
        }
    }

    fn reply(&mut self, m: Msg) -> Res<()> {
        // Completions of earlier replies are of no interest: keep only this one's.
        self.wcs.discard(|w| w.wr_id() == WR_REPLY);
        self.ctl_tx
            .write(0, &m.to_bytes())
            .map_err(|e| e.to_string())?;
        let sge = self.ctl_tx.sge(0, MSG_LEN).map_err(|e| e.to_string())?;
        self.qp
            .post_send(&SendWr::send(WR_REPLY, &[sge]))
            .map_err(|e| e.to_string())
    }

    fn handle(&mut self, m: &Msg) -> Res<Msg> {
        let e = |e: verbs::Error| e.to_string();
        let size = usize::try_from(m.size).map_err(|_| "size")?;
        if size > self.data.len() {
            return Ok(Msg::fail("size above the server's region"));
        }
        let mut r = Msg::new(Cmd::Ok);
        match m.cmd {
            Cmd::Regions => {
                r.size = self.data.len() as u64;
                r.arg = self.data.remote_addr();
                r.arg2 = (u64::from(self.data.rkey()) << 32) | u64::from(self.atomic.rkey());
                r.sha[..8].copy_from_slice(&self.atomic.remote_addr().to_le_bytes());
                r.sha[8..12].copy_from_slice(&self.inval.rkey().to_le_bytes());
            }
            Cmd::PrepRecv => {
                let sge = self.data.sge(0, size).map_err(e)?;
                self.qp
                    .post_recv(&RecvWr::new(WR_DATA, &[sge]))
                    .map_err(e)?;
                self.last_data = None;
            }
            Cmd::PrepImm => {
                self.qp.post_recv(&RecvWr::new(WR_IMM, &[])).map_err(e)?;
                self.last_imm = None;
            }
            Cmd::CheckRecv => return self.check_recv(m, size),
            Cmd::CheckWrite => return self.check_write(m, size),
            Cmd::PrepRead => {
                let mut buf = vec![0u8; size];
                pattern(&mut buf, m.arg);
                self.data.write(0, &buf).map_err(e)?;
                r.sha = sha_of(&self.data, size)?;
            }
            Cmd::SetAtomic => self.atomic.write(0, &m.arg.to_ne_bytes()).map_err(e)?,
            Cmd::GetAtomic => r.arg = self.atomic.load_u64(0).map_err(e)?,
            Cmd::Bye | Cmd::Ok | Cmd::Fail => return Ok(Msg::fail("unexpected command")),
        }
        // The next control receive goes after any data receive posted above (FIFO).
        self.post_ctl()?;
        Ok(r)
    }

    fn check_recv(&mut self, m: &Msg, size: usize) -> Res<Msg> {
        self.post_ctl()?;
        let Some(wc) = self.last_data.take() else {
            return Ok(Msg::fail("no data Send arrived"));
        };
        if wc.byte_len() as usize != size || wc.opcode() != Some(WcOpcode::Recv) {
            return Ok(Msg::fail(&format!("got {} bytes", wc.byte_len())));
        }
        let mut r = Msg::new(Cmd::Ok);
        r.sha = sha_of(&self.data, size)?;
        if m.arg == 2 {
            if wc.invalidated_rkey() != Some(self.inval.rkey()) {
                return Ok(Msg::fail("STag not invalidated"));
            }
            // Its STag is gone: a fresh region for the next Send with Invalidate.
            let pd = self.inval.pd().clone();
            let acc = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_INVALIDATE;
            self.inval = pd.alloc_mr(64, acc).map_err(|e| e.to_string())?;
            r.arg = u64::from(self.inval.rkey());
        }
        if m.arg == 1 && !wc.solicited() {
            return Ok(Msg::fail("SE flag missing"));
        }
        Ok(r)
    }

    fn check_write(&mut self, m: &Msg, size: usize) -> Res<Msg> {
        self.post_ctl()?;
        if m.arg == 1 {
            match self.last_imm.take() {
                Some(wc) if wc.imm() == Some(m.arg2) && wc.opcode() == Some(WcOpcode::RecvImm) => {}
                Some(wc) => return Ok(Msg::fail(&format!("imm {:?}", wc.imm()))),
                None => return Ok(Msg::fail("no immediate arrived")),
            }
        }
        let mut r = Msg::new(Cmd::Ok);
        r.sha = sha_of(&self.data, size)?;
        if r.sha != m.sha {
            return Ok(Msg::fail(&format!("sha {} differs", hex8(&r.sha))));
        }
        Ok(r)
    }
}

/// A CM event as a log line (with TERMINATE codes).
pub fn describe(ev: &CmEvent) -> String {
    match ev {
        CmEvent::TerminateReceived {
            layer,
            etype,
            ecode,
            ..
        } => {
            format!("event TERMINATE_RECEIVED layer {layer} etype {etype} ecode {ecode:#04x}")
        }
        CmEvent::QpError {
            reason,
            layer,
            etype,
            ecode,
            ..
        } => {
            format!("event QP_ERROR reason {reason} layer {layer} etype {etype} ecode {ecode:#04x}")
        }
        e => format!("event {}", e.name()),
    }
}
