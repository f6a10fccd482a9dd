//! The opcheck client: one or many connections, each running every requested operation at
//! every requested size, `repeat` times.

use super::proto::{Cmd, MSG_LEN, Msg, pattern};
use super::{Completions, Op, Res, hex8, sha_of};
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use verbs::{Access, CmId, ConnParam, Device, Mr, Qp, RecvWr, RemoteMr, SendWr};

/// Client options.
#[derive(Debug, Clone)]
pub struct ClientOpts {
    /// The server.
    pub addr: SocketAddrV4,
    /// Operations to run.
    pub ops: Vec<Op>,
    /// Sizes in bytes.
    pub sizes: Vec<usize>,
    /// Rounds over all operations and sizes.
    pub repeat: u32,
    /// Connections at once.
    pub qps: u32,
    /// Connection parameters (CRC, markers).
    pub param: ConnParam,
    /// Per-step timeout.
    pub timeout: Duration,
    /// Print a line per check (otherwise per connection).
    pub verbose: bool,
}

const WR_CTL: u64 = 1;
const WR_REQ: u64 = 10;
const WR_OP: u64 = 20;

struct Conn {
    id: CmId,
    qp: Qp,
    wcs: Completions,
    ctl_rx: Mr,
    ctl_tx: Mr,
    data: Mr,
    peer: RemoteMr,
    atomic: RemoteMr,
    inval_rkey: u32,
    timeout: Duration,
    seed: u64,
}

/// Run all connections; returns the checks that passed, or the first failure.
pub fn run(dev: &Device, opts: &ClientOpts) -> Res<u64> {
    let passed = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let threads: Vec<_> = (0..opts.qps.max(1))
        .map(|i| {
            let (dev, opts, passed) = (dev.clone(), opts.clone(), passed.clone());
            std::thread::spawn(move || run_one(&dev, &opts, i, &passed))
        })
        .collect();
    let mut first_err = None;
    for (i, t) in threads.into_iter().enumerate() {
        let r = t.join().unwrap_or_else(|_| Err("thread panicked".into()));
        if let Err(e) = r {
            println!("qp {i}: FAILED: {e}");
            first_err.get_or_insert(format!("qp {i}: {e}"));
        }
    }
    let n = passed.load(Ordering::Relaxed);
    println!(
        "opcheck: {n} checks passed on {} connection(s) in {:.3} s",
        opts.qps.max(1),
        t0.elapsed().as_secs_f64()
    );
    match first_err {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

fn run_one(dev: &Device, opts: &ClientOpts, index: u32, passed: &AtomicU64) -> Res<()> {
    let mut c = Conn::connect(dev, opts, index)?;
    for round in 0..opts.repeat.max(1) {
        for &op in &opts.ops {
            let sizes: &[usize] = if matches!(op, Op::FetchAdd | Op::CmpSwap) {
                &[8]
            } else {
                &opts.sizes
            };
            for &size in sizes {
                c.seed = c.seed.wrapping_add(1);
                let sha = c
                    .check(op, size)
                    .map_err(|e| format!("{} {size} B (round {round}): {e}", op.name()))?;
                passed.fetch_add(1, Ordering::Relaxed);
                if opts.verbose {
                    println!(
                        "ok qp={index} op={} size={size} sha256={}",
                        op.name(),
                        hex8(&sha)
                    );
                }
            }
        }
    }
    c.rpc(Msg::new(Cmd::Bye))?;
    c.id.disconnect().map_err(|e| e.to_string())?;
    if !opts.verbose {
        println!("ok qp={index}: all checks passed");
    }
    Ok(())
}

impl Conn {
    fn connect(dev: &Device, opts: &ClientOpts, index: u32) -> Res<Conn> {
        let e = |e: verbs::Error| e.to_string();
        let max = opts.sizes.iter().copied().max().unwrap_or(0).max(8);
        let pd = dev.alloc_pd().map_err(e)?;
        let ch = dev.create_comp_channel().map_err(e)?;
        let cq = dev.create_cq(64, Some(&ch)).map_err(e)?;
        let qp = pd
            .create_qp(&cq, &cq)
            .sq_depth(16)
            .rq_depth(4)
            .build()
            .map_err(e)?;
        let mut c = Conn {
            id: dev.create_cm_id().map_err(e)?,
            wcs: Completions::new(&cq),
            ctl_rx: pd.alloc_mr(MSG_LEN, Access::LOCAL_WRITE).map_err(e)?,
            ctl_tx: pd.alloc_mr(MSG_LEN, Access::LOCAL_READ).map_err(e)?,
            data: pd.alloc_mr_huge(max, Access::LOCAL_WRITE).map_err(e)?,
            qp,
            peer: RemoteMr::default(),
            atomic: RemoteMr::default(),
            inval_rkey: 0,
            timeout: opts.timeout,
            seed: u64::from(index) << 32,
        };
        c.post_ctl()?;
        c.id.connect(&c.qp, opts.addr, &opts.param).map_err(e)?;
        c.id.wait_established(opts.timeout).map_err(e)?;
        let r = c.rpc(Msg::new(Cmd::Regions))?;
        c.peer = RemoteMr {
            addr: r.arg,
            rkey: (r.arg2 >> 32) as u32,
            len: r.size,
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(&r.sha[..8]);
        c.atomic = RemoteMr {
            addr: u64::from_le_bytes(a),
            rkey: r.arg2 as u32,
            len: 8,
        };
        c.inval_rkey = u32::from_le_bytes([r.sha[8], r.sha[9], r.sha[10], r.sha[11]]);
        if (max as u64) > c.peer.len {
            return Err(format!(
                "the server's region holds {} bytes, sizes go up to {max}",
                c.peer.len
            ));
        }
        Ok(c)
    }

    fn post_ctl(&self) -> Res<()> {
        let sge = self.ctl_rx.sge(0, MSG_LEN).map_err(|e| e.to_string())?;
        self.qp
            .post_recv(&RecvWr::new(WR_CTL, &[sge]))
            .map_err(|e| e.to_string())
    }

    /// Send a request and wait for the reply; a `Fail` reply is an error.
    fn rpc(&mut self, m: Msg) -> Res<Msg> {
        self.ctl_tx
            .write(0, &m.to_bytes())
            .map_err(|e| e.to_string())?;
        let sge = self.ctl_tx.sge(0, MSG_LEN).map_err(|e| e.to_string())?;
        self.qp
            .post_send(&SendWr::send(WR_REQ, &[sge]))
            .map_err(|e| e.to_string())?;
        self.wcs.wait(self.timeout, |w| w.wr_id() == WR_REQ)?;
        self.wcs.wait(self.timeout, |w| w.wr_id() == WR_CTL)?;
        let r = Msg::from_bytes(&self.ctl_rx.to_vec(0, MSG_LEN).map_err(|e| e.to_string())?)
            .ok_or("bad reply")?;
        self.post_ctl()?;
        match r.cmd {
            Cmd::Ok => Ok(r),
            Cmd::Fail => Err(format!("server: {}", r.why())),
            c => Err(format!("unexpected reply {c:?}")),
        }
    }

    /// Post one operation and wait for its completion.
    fn op(&mut self, wr: SendWr) -> Res<verbs::Wc> {
        self.qp.post_send(&wr).map_err(|e| e.to_string())?;
        self.wcs.wait(self.timeout, |w| w.wr_id() == WR_OP)
    }

    fn sges(&self, size: usize) -> Res<Vec<verbs::Sge>> {
        if size == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![self.data.sge(0, size).map_err(|e| e.to_string())?])
    }

    /// Fill the data region with the pattern of this check; its SHA-256.
    fn fill(&self, size: usize) -> Res<[u8; 32]> {
        let mut buf = vec![0u8; size];
        pattern(&mut buf, self.seed);
        self.data.write(0, &buf).map_err(|e| e.to_string())?;
        sha_of(&self.data, size)
    }

    fn check(&mut self, op: Op, size: usize) -> Res<[u8; 32]> {
        match op {
            Op::Send | Op::SendSe | Op::SendInv => self.check_send(op, size),
            Op::Write | Op::WriteImm => self.check_write(op, size),
            Op::Read => self.check_read(size),
            Op::FetchAdd | Op::CmpSwap => self.check_atomic(op),
        }
    }

    fn check_send(&mut self, op: Op, size: usize) -> Res<[u8; 32]> {
        let mut m = Msg::new(Cmd::PrepRecv);
        m.size = size as u64;
        self.rpc(m)?;
        let sha = self.fill(size)?;
        let sges = self.sges(size)?;
        let (wr, kind) = match op {
            Op::SendSe => (SendWr::send_se(WR_OP, &sges), 1),
            Op::SendInv => (SendWr::send_invalidate(WR_OP, &sges, self.inval_rkey), 2),
            _ => (SendWr::send(WR_OP, &sges), 0),
        };
        self.op(wr)?;
        let mut m = Msg::new(Cmd::CheckRecv);
        m.size = size as u64;
        m.arg = kind;
        let r = self.rpc(m)?;
        if r.sha != sha {
            return Err(format!(
                "server received sha {}, sent {}",
                hex8(&r.sha),
                hex8(&sha)
            ));
        }
        if kind == 2 {
            self.inval_rkey = r.arg as u32;
        }
        Ok(sha)
    }

    fn check_write(&mut self, op: Op, size: usize) -> Res<[u8; 32]> {
        let imm = op == Op::WriteImm;
        if imm {
            self.rpc(Msg::new(Cmd::PrepImm))?;
        }
        let sha = self.fill(size)?;
        let sges = self.sges(size)?;
        let (addr, rkey) = (self.peer.addr, self.peer.rkey);
        let wr = if imm {
            SendWr::write_imm(WR_OP, &sges, addr, rkey, self.seed)
        } else {
            SendWr::write(WR_OP, &sges, addr, rkey)
        };
        self.op(wr)?;
        let mut m = Msg::new(Cmd::CheckWrite);
        m.size = size as u64;
        m.arg = u64::from(imm);
        m.arg2 = self.seed;
        m.sha = sha;
        let r = self.rpc(m)?;
        if r.sha != sha {
            return Err(format!(
                "server holds sha {}, wrote {}",
                hex8(&r.sha),
                hex8(&sha)
            ));
        }
        Ok(sha)
    }

    fn check_read(&mut self, size: usize) -> Res<[u8; 32]> {
        let mut m = Msg::new(Cmd::PrepRead);
        m.size = size as u64;
        m.arg = self.seed;
        let r = self.rpc(m)?;
        // Clear the sink so stale bytes cannot pass for read ones.
        self.data
            .write(0, &vec![0xee; size])
            .map_err(|e| e.to_string())?;
        // A Read takes exactly one sink SGE, of length 0 for a zero-byte Read.
        let sge = self.data.sge(0, size).map_err(|e| e.to_string())?;
        let wc = self.op(SendWr::read(WR_OP, &[sge], self.peer.addr, self.peer.rkey))?;
        let sha = sha_of(&self.data, size)?;
        if sha != r.sha {
            return Err(format!(
                "read sha {} ({} bytes), server has {}",
                hex8(&sha),
                wc.byte_len(),
                hex8(&r.sha)
            ));
        }
        Ok(sha)
    }

    fn set_atomic(&mut self, v: u64) -> Res<()> {
        let mut m = Msg::new(Cmd::SetAtomic);
        m.arg = v;
        self.rpc(m).map(|_| ())
    }

    fn get_atomic(&mut self) -> Res<u64> {
        self.rpc(Msg::new(Cmd::GetAtomic)).map(|r| r.arg)
    }

    fn sink(&self) -> Res<u64> {
        self.data.load_u64(0).map_err(|e| e.to_string())
    }

    fn check_atomic(&mut self, op: Op) -> Res<[u8; 32]> {
        let v0 = self.seed.wrapping_mul(1_000_003);
        self.set_atomic(v0)?;
        let sink = self.data.sge(0, 8).map_err(|e| e.to_string())?;
        let (addr, rkey) = (self.atomic.addr, self.atomic.rkey);
        let want = if op == Op::FetchAdd {
            self.op(SendWr::fetch_add(WR_OP, sink, addr, rkey, 5))?;
            v0.wrapping_add(5)
        } else {
            self.op(SendWr::cmp_swap(WR_OP, sink, addr, rkey, v0, 77))?;
            if self.sink()? != v0 {
                return Err(format!(
                    "CmpSwap returned {}, the word held {v0}",
                    self.sink()?
                ));
            }
            // A compare that does not match leaves the word alone.
            self.op(SendWr::cmp_swap(WR_OP, sink, addr, rkey, v0, 99))?;
            if self.sink()? != 77 {
                return Err(format!(
                    "second CmpSwap returned {}, the word held 77",
                    self.sink()?
                ));
            }
            77
        };
        if op == Op::FetchAdd && self.sink()? != v0 {
            return Err(format!(
                "FetchAdd returned {}, the word held {v0}",
                self.sink()?
            ));
        }
        let now = self.get_atomic()?;
        if now != want {
            return Err(format!("the word is {now}, expected {want}"));
        }
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&now.to_le_bytes());
        Ok(d)
    }
}
