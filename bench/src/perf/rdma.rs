//! The tests over the `verbs` library: the comm connection that carries perftest's exchange
//! ([`CommQp`]), the data connections and the measurement loops ([`Side`]), shaped like
//! perftest's `run_iter_bw`, `run_iter_bw_server`, `run_iter_lat_write`, `run_iter_lat_send`
//! and `run_iter_lat` so the numbers mean the same thing.

use super::cli::Pump;
pub use super::clock::now_ns;
use super::cpu::CpuMeter;
use super::idle;
use super::outliers::{self, TscLog};
use super::pace;
use super::params::{Test, Verb, cq_moderation};
use super::session::{Comm, Engine, Row};
use super::stats;
use super::wire::Dest;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};
use verbs::{Access, CmId, ConnParam, Cq, CrcMode, Device, Mr, Pd, Qp, RecvWr, Rtr, SendWr, Wc};

/// How long a wait for a completion or an event may take before the test fails.
const WAIT: Duration = Duration::from_secs(30);
/// `SYNC_SPEC_ID` of perftest: the wr_id of exchange messages.
const SYNC_ID: u64 = 5;

/// Whether the polling loops give the core away (`sched_yield`) when they found nothing.
static YIELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the polling loops step an embedded engine themselves (`--pump`): 0 off, 1 on,
/// 2 toggle.
static PUMP: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// `--pump toggle`: how many empty polls each phase (driving / leaving it) lasts.
const TOGGLE_EVERY: u64 = 300;

/// `--pump on|off|toggle`: whether the polling loops drive an embedded engine themselves.
pub fn set_pump(p: Pump) {
    let v = match p {
        Pump::Off => 0,
        Pump::On => 1,
        Pump::Toggle => 2,
    };
    PUMP.store(v, std::sync::atomic::Ordering::Relaxed);
}

thread_local! {
    /// `--pump toggle`: this thread's empty polls so far.
    static TURNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Make the polling loops yield (`--idle yield`: the dataplane threads share our cores) or
/// spin (`--idle spin`: perftest's behaviour, for cores of our own).
pub fn set_idle_yield(on: bool) {
    YIELD.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// One turn of a polling loop that found nothing: drive an engine this thread pumps, then
/// spin, yield or nap ([`idle::Backoff`]).
fn idle_turn(dev: &Device, backoff: &mut idle::Backoff) {
    let pumped = dev.is_pumped()
        && match PUMP.load(std::sync::atomic::Ordering::Relaxed) {
            1 => true,
            2 => {
                let n = TURNS.with(|t| t.replace(t.get() + 1));
                let on = (n / TOGGLE_EVERY).is_multiple_of(2);
                if !on && n.is_multiple_of(TOGGLE_EVERY) {
                    // Hand the loop back to the dataplane thread mid-traffic.
                    dev.release_engine();
                }
                on
            }
            _ => false,
        };
    let stepped = pumped && dev.poll_engine();
    let turn = backoff.turn(idle::Policy {
        yield_: YIELD.load(std::sync::atomic::Ordering::Relaxed),
        pumped,
    });
    // A step of the engine (~70 ns when idle) is wait enough: no spin-loop hint after it
    // (a PAUSE is ~24 ns on the AMD EPYC of BENCHMARKS.md, a quarter of each turn, and half
    // of it on average is added to every message's discovery; issue #8, bar (b)).
    if !(stepped && turn == idle::Turn::Spin) {
        idle::wait(turn);
    }
}

/// A polling loop found nothing on `cq`: with a completion channel (`-e`), arm the CQ and
/// sleep until its next completion or `until` (default: [`WAIT`] from the first look at the
/// clock; not at all when
/// completions arrived meanwhile), the engine left to its dataplane thread; without one,
/// [`idle_turn`] (no clock read).
fn wait_turn(
    dev: &Device,
    cq: &Cq,
    until: &mut Patience,
    backoff: &mut idle::Backoff,
) -> Result<()> {
    match cq.channel() {
        Some(ch) => {
            if !cq.req_notify()? {
                dev.release_engine();
                let (now, until) = until.now_and_limit();
                ch.wait(until.saturating_duration_since(now))?;
            }
        }
        None => idle_turn(dev, backoff),
    }
    Ok(())
}

/// How long a graceful close may take before the process exits anyway.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// Disconnect `cm` and wait (up to [`CLOSE_WAIT`]) for the close to finish, so the FIN (and
/// the ACK of the peer's last message, whose Send completes only on that ACK) leaves before
/// an embedded engine stops with the process.
fn close(cm: &CmId) {
    if cm.disconnect().is_err() {
        return;
    }
    let end = Instant::now() + CLOSE_WAIT;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match cm.get_event(Some(left)) {
            Ok(Some(verbs::CmEvent::Disconnected { .. })) | Ok(None) | Err(_) => return,
            Ok(Some(_)) => {}
        }
    }
}

/// Empty polls between two looks at the clock in the polling loops (a clock read costs as
/// much as a poll of an idle engine).
const CLOCK_EVERY: u32 = 64;

/// A time limit that looks at the clock only when asked (every [`CLOCK_EVERY`] empty polls):
/// a wait that ends at once, as for every message of a latency test, reads no clock. A clock
/// read (`clock_gettime`) costs ~33 ns on the AMD EPYC guest of BENCHMARKS.md, and each side's
/// half of a round trip went through three of them (issue #8, bar (b)).
#[derive(Debug, Clone, Copy)]
struct Patience {
    until: Option<Instant>,
}

impl Patience {
    /// Until `at`, or without one [`WAIT`] after the first look at the clock.
    fn until(at: Option<Instant>) -> Patience {
        Patience { until: at }
    }

    /// The clock now, and the limit.
    fn now_and_limit(&mut self) -> (Instant, Instant) {
        let now = Instant::now();
        (now, *self.until.get_or_insert(now + WAIT))
    }

    /// Whether the limit has passed.
    fn passed(&mut self) -> bool {
        let (now, until) = self.now_and_limit();
        now > until
    }
}

/// Poll `cq` until a completion arrives or `until` passes (without one: [`WAIT`]).
fn wait_cq(dev: &Device, cq: &Cq, until: Option<Instant>) -> Result<Wc> {
    let mut spins = 0u32;
    let mut backoff = idle::Backoff::default();
    let mut patience = Patience::until(until);
    loop {
        if let Some(wc) = cq.poll_one()? {
            if !wc.is_ok() {
                bail!("completion with error: {wc}");
            }
            return Ok(wc);
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(CLOCK_EVERY) && patience.passed() {
            bail!("no completion within {:?}", WAIT);
        }
        wait_turn(dev, cq, &mut patience, &mut backoff)?;
    }
}

/// Connection parameters of our side.
fn conn_param(crc: CrcMode, reads: u32) -> ConnParam {
    ConnParam::new().crc(crc).ird(reads).ord(reads)
}

/// The comm connection: an RC QP of depth 1 with one 4 KiB receive buffer re-posted after
/// every message, as perftest's `create_comm_struct`.
pub struct CommQp {
    dev: Device,
    qp: Qp,
    scq: Cq,
    rcq: Cq,
    mr: Mr,
    cm: CmId,
}

impl CommQp {
    fn resources(dev: &Device, pd: &Pd) -> Result<(Qp, Cq, Cq, Mr)> {
        let scq = dev.create_cq(4, None)?;
        let rcq = dev.create_cq(4, None)?;
        let qp = pd.create_qp(&scq, &rcq).sq_depth(2).rq_depth(2).build()?;
        let mr = pd.alloc_mr(8192, Access::LOCAL_WRITE)?;
        qp.post_recv(&RecvWr::new(SYNC_ID, &[mr.sge(0, 4096)?]))?;
        Ok((qp, scq, rcq, mr))
    }

    /// Client: connect to `server`, retrying for up to `patience` while it is not listening.
    pub fn connect(
        dev: &Device,
        pd: &Pd,
        server: SocketAddrV4,
        crc: CrcMode,
        patience: Duration,
    ) -> Result<CommQp> {
        let deadline = Instant::now() + patience;
        loop {
            let (qp, scq, rcq, mr) = Self::resources(dev, pd)?;
            let cm = dev.create_cm_id()?;
            cm.connect(&qp, server, &conn_param(crc, 0))?;
            match cm.wait_established(WAIT) {
                Ok(_) => {
                    return Ok(CommQp {
                        dev: dev.clone(),
                        qp,
                        scq,
                        rcq,
                        mr,
                        cm,
                    });
                }
                Err(e @ (verbs::Error::Rejected { .. } | verbs::Error::ConnectFailed { .. })) => {
                    if Instant::now() > deadline {
                        return Err(e).with_context(|| format!("connect to {server}"));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e).with_context(|| format!("connect to {server}")),
            }
        }
    }

    /// Server: listen on `addr`, accept one connection, stop listening.
    pub fn accept(dev: &Device, pd: &Pd, addr: SocketAddrV4, crc: CrcMode) -> Result<CommQp> {
        let listener = dev.create_cm_id()?;
        listener
            .listen(addr, 1)
            .with_context(|| format!("listen on {addr}"))?;
        let req = listener.get_request(Duration::from_secs(24 * 3600))?;
        let (qp, scq, rcq, mr) = Self::resources(dev, pd)?;
        let _ = crc;
        req.id.accept(&qp, &conn_param(crc, 0))?;
        req.id.wait_established(WAIT)?;
        drop(listener);
        Ok(CommQp {
            dev: dev.clone(),
            qp,
            scq,
            rcq,
            mr,
            cm: req.id,
        })
    }

    /// Close the connection (FIN to the peer) and wait for the close to finish.
    pub fn disconnect(&self) {
        close(&self.cm);
    }
}

impl Comm for CommQp {
    fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.mr.write(4096, msg)?;
        self.qp
            .post_send(&SendWr::send(SYNC_ID, &[self.mr.sge(4096, msg.len())?]).signaled())?;
        wait_cq(&self.dev, &self.scq, None).context("exchange Send")?;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let wc = wait_cq(&self.dev, &self.rcq, None).context("exchange Receive")?;
        let v = self.mr.to_vec(0, (wc.byte_len() as usize).min(4096))?;
        self.qp
            .post_recv(&RecvWr::new(SYNC_ID, &[self.mr.sge(0, 4096)?]))?;
        Ok(v)
    }
}

/// What a side runs.
#[derive(Debug, Clone)]
pub struct Opts {
    /// The test.
    pub test: Test,
    /// Client: the server's address.
    pub server: Option<Ipv4Addr>,
    /// TCP port of both connections.
    pub port: u16,
    /// Message sizes (one, or the sweep).
    pub sizes: Vec<u64>,
    /// Iterations per QP (ignored with `duration`).
    pub iters: u64,
    /// Duration mode.
    pub duration: Option<Duration>,
    /// Send-queue depth.
    pub tx_depth: u32,
    /// Receive-queue depth (Send tests).
    pub rx_depth: u32,
    /// QPs.
    pub qps: u32,
    /// Requested CQ moderation.
    pub cq_mod: Option<u32>,
    /// Outstanding Reads/atomics.
    pub out_reads: u32,
    /// Fetch-and-add (else compare-and-swap).
    pub fetch_add: bool,
    /// MPA CRC of our side.
    pub crc: CrcMode,
    /// Gb/s.
    pub gbits: bool,
    /// Measure CPU for the CPU_Util column.
    pub cpu_util: bool,
    /// The daemon's pid (daemon mode CPU).
    pub daemon_pid: Option<u32>,
    /// `-e`: sleep on CQ events instead of polling.
    pub events: bool,
    /// Page size of the exchange (perftest's cycle buffer).
    pub page: u32,
    /// Cache line size.
    pub cache_line: u32,
    /// `--outliers FILE` and `--outlier_us`: where to write the latency samples above the
    /// threshold (ns), with their TSC bounds ([`outliers::TscLog`]).
    pub outliers: Option<(std::path::PathBuf, u64)>,
    /// `--rate_limit`: the rate, its units and the burst size (work requests) of the
    /// software rate limiter ([`pace::Pacer`]) of BW tests' posting side.
    pub pace: Option<(f64, pace::RateUnits, u64)>,
}

struct DataQp {
    qp: Qp,
    cm: CmId,
}

/// One side of a test: device, buffers, data QPs, measurement.
pub struct Side {
    o: Opts,
    dev: Device,
    pd: Pd,
    scq: Cq,
    rcq: Cq,
    mr: Mr,
    buff: usize,
    data: Vec<DataQp>,
    /// Server: the data connections' listener, from [`Engine::listen_data`].
    data_listener: Option<CmId>,
    last_cpu: Option<f64>,
    seed: u64,
}

impl Side {
    /// Allocate the buffer: `2 * qps` slots of `max(largest size, page)` bytes, the first half
    /// sources (and Read sinks), the second half what the peer targets (perftest's layout).
    pub fn new(o: Opts, dev: Device, pd: Pd) -> Result<Side> {
        let max = o.sizes.iter().copied().max().unwrap_or(1) as usize;
        let buff = max
            .max(o.page as usize)
            .next_multiple_of(o.cache_line.max(1) as usize);
        let depth = o.tx_depth.max(o.rx_depth).max(16);
        // `-e`: the data CQs signal a completion channel (perftest's `use_event`).
        let channel = if o.events {
            Some(dev.create_comp_channel()?)
        } else {
            None
        };
        let scq = dev.create_cq(depth * o.qps * 2, channel.as_ref())?;
        let rcq = dev.create_cq(depth * o.qps * 2, channel.as_ref())?;
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let mr = pd.alloc_mr(2 * o.qps as usize * buff, access)?;
        mr.fill(0)?;
        let seed = std::process::id() as u64
            ^ Instant::now().elapsed().as_nanos() as u64
            ^ 0x9e37_79b9_7f4a_7c15;
        Ok(Side {
            o,
            dev,
            pd,
            scq,
            rcq,
            mr,
            buff,
            data: Vec::new(),
            data_listener: None,
            last_cpu: None,
            seed,
        })
    }

    fn reads(&self) -> u32 {
        match self.o.test.verb() {
            Verb::Read | Verb::Atomic => self.o.out_reads,
            _ => 0,
        }
    }

    fn build_qp(&self) -> Result<Qp> {
        let rq = if self.o.test.verb() == Verb::Send {
            self.o.rx_depth
        } else {
            1
        };
        Ok(self
            .pd
            .create_qp(&self.scq, &self.rcq)
            .sq_depth(self.o.tx_depth.max(1))
            .rq_depth(rq)
            .build()?)
    }

    fn connect_one(&self, server: SocketAddrV4) -> Result<DataQp> {
        // perftest's server listens again only after exchange 5: retry 10 x 100 ms like
        // perftest's client, and longer (a loaded machine).
        let mut last = None;
        for _ in 0..50 {
            let qp = self.build_qp()?;
            let cm = self.dev.create_cm_id()?;
            // The MPA responder sends nothing before the initiator's first FPDU (RFC 5044
            // §7.1), but perftest's write_lat server writes first: offer peer-to-peer mode
            // with a zero-length RDMA Write as the ready-to-receive message (RFC 6581 §5),
            // which unlocks the responder at once. A peer without RTR support just leaves it
            // off (and then write_lat against it waits, as it would with perftest).
            let param = conn_param(self.o.crc, self.reads()).rtr(Rtr::Write);
            cm.connect(&qp, server, &param)?;
            match cm.wait_established(WAIT) {
                Ok(_) => return Ok(DataQp { qp, cm }),
                Err(e @ (verbs::Error::Rejected { .. } | verbs::Error::ConnectFailed { .. })) => {
                    last = Some(e);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e).context("data connection"),
            }
        }
        Err(last
            .map(anyhow::Error::from)
            .unwrap_or_else(|| anyhow::anyhow!("no attempt")))
        .with_context(|| format!("data connection to {server}"))
    }

    /// Disconnect the data connections and wait for the closes to finish.
    pub fn disconnect(&self) {
        for d in &self.data {
            close(&d.cm);
        }
    }

    fn next_psn(&mut self) -> u32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed & 0xff_ffff) as u32
    }

    /// Receive buffers of Send tests: each QP keeps `rx_depth` receives of a whole slot posted.
    fn post_recvs(&self, q: usize, n: u32) -> Result<()> {
        let off = (self.o.qps as usize + q) * self.buff;
        for _ in 0..n {
            self.data[q]
                .qp
                .post_recv(&RecvWr::new(q as u64, &[self.mr.sge(off, self.buff)?]))?;
        }
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        self.o.duration.map(|d| Instant::now() + d)
    }

    fn wr(
        &self,
        q: usize,
        wr_id: u64,
        size: usize,
        loc: usize,
        rem: &Dest,
        rem_off: u64,
    ) -> Result<SendWr> {
        let local = q * self.buff + loc;
        let raddr = rem.vaddr.wrapping_add(rem_off);
        Ok(match self.o.test.verb() {
            Verb::Write => SendWr::write(wr_id, &[self.mr.sge(local, size)?], raddr, rem.rkey),
            Verb::Read => SendWr::read(wr_id, &[self.mr.sge(local, size)?], raddr, rem.rkey),
            Verb::Send => SendWr::send(wr_id, &[self.mr.sge(local, size)?]),
            Verb::Atomic if self.o.fetch_add => {
                SendWr::fetch_add(wr_id, self.mr.sge(local, 8)?, raddr, rem.rkey, 1)
            }
            Verb::Atomic => SendWr::cmp_swap(wr_id, self.mr.sge(local, 8)?, raddr, rem.rkey, 0, 0),
        })
    }

    /// `run_iter_bw`: keep up to `depth` WRs in flight per QP, one signaled per `cq_mod`.
    fn run_bw(&mut self, size: u64, remote: &[Dest]) -> Result<Row> {
        let qps = self.o.qps as usize;
        let depth = match self.o.test.verb() {
            Verb::Read | Verb::Atomic => self.o.tx_depth.min(self.o.out_reads),
            _ => self.o.tx_depth,
        } as u64;
        let cq_mod =
            cq_moderation(self.o.cq_mod, size, self.o.sizes.len() > 1, depth as u32) as u64;
        let iters = if self.o.duration.is_some() {
            u64::MAX
        } else {
            self.o.iters
        };
        let end = self.deadline();
        let (mut scnt, mut ccnt) = (vec![0u64; qps], vec![0u64; qps]);
        let mut posted = Vec::with_capacity((self.o.iters as usize * qps).min(1 << 24));
        let mut completed = Vec::with_capacity(posted.capacity());
        // perftest's increase_rem_addr: step by the size rounded to a cache line, wrap within
        // the cycle buffer, when the size is at most half of it.
        let step = (size as usize).next_multiple_of(self.o.cache_line.max(1) as usize);
        let cycle = self.o.page as usize;
        let slots = if size as usize <= cycle / 2 {
            (cycle / step).max(1)
        } else {
            1
        };
        let mut wcs = vec![Wc::default(); 64];
        let mut stop = false;
        let mut progress = Instant::now();
        let mut backoff = idle::Backoff::default();
        let mut pacer = self.o.pace.map(|(rate, units, burst)| {
            pace::Pacer::new(pace::messages_per_sec(rate, units, size), burst, now_ns())
        });
        loop {
            if let Some(e) = end
                && !stop
                && Instant::now() >= e
            {
                stop = true;
            }
            for q in 0..qps {
                while !stop
                    && scnt[q] - ccnt[q] < depth
                    && scnt[q] < iters
                    && pacer.as_mut().is_none_or(|p| p.may_post(now_ns))
                {
                    let k = scnt[q];
                    let off = (k as usize % slots) * step;
                    let last = k + 1 == iters;
                    let mut w = self.wr(
                        q,
                        (q as u64) << 48 | k,
                        size as usize,
                        off,
                        &remote[q],
                        off as u64,
                    )?;
                    w = if (k + 1) % cq_mod == 0 || last {
                        w.signaled()
                    } else {
                        w.unsignaled()
                    };
                    posted.push(now_ns());
                    self.data[q].qp.post_send(&w)?;
                    scnt[q] += 1;
                    if let Some(p) = pacer.as_mut() {
                        p.posted();
                    }
                }
            }
            let n = self.scq.poll(&mut wcs)?;
            let t = now_ns();
            for wc in &wcs[..n] {
                if !wc.is_ok() {
                    bail!("completion with error: {wc}");
                }
                let q = (wc.wr_id() >> 48) as usize;
                let k = wc.wr_id() & 0xffff_ffff_ffff;
                let covered = (k + 1).saturating_sub(ccnt[q]);
                ccnt[q] += covered;
                completed.extend(std::iter::repeat_n(t, covered as usize));
            }
            let in_flight: u64 = (0..qps).map(|q| scnt[q] - ccnt[q]).sum();
            let done = (0..qps).all(|q| ccnt[q] >= iters)
                || (stop && in_flight == 0 && !unsignaled_tail(&scnt, &ccnt));
            if done {
                break;
            }
            if n == 0 {
                // Past the end of a timed run, only the last completions are awaited.
                let mut until = Patience::until(end.filter(|_| !stop));
                wait_turn(&self.dev, &self.scq, &mut until, &mut backoff)?;
            }
            if n > 0 {
                progress = Instant::now();
                backoff.progress();
            } else if progress.elapsed() > WAIT {
                // A stuck peer fails the test instead of hanging it.
                bail!(
                    "no completion within {WAIT:?} ({} of {} done)",
                    completed.len(),
                    posted.len()
                );
            }
        }
        let peak = self.o.duration.is_none();
        Ok(Row::Bw(stats::bw(
            size,
            &posted,
            &completed,
            cq_mod as usize,
            self.o.gbits,
            peak,
        )))
    }

    /// perftest on iWARP (`send_rcredit`): a send_bw client stops `rx_depth` Sends ahead of
    /// the credits the server RDMA-Writes into the buffer its pingpong_dest names (a `u32`
    /// receive count, host order), and its rx_depth is at most the iterations. Without
    /// credits siw's `ib_send_bw -R -n 50` stalls at its 49th Send (seen live).
    fn send_credit(&mut self, q: usize, count: u64, nth: u64, remote: &[Dest]) -> Result<()> {
        let Some(rem) = remote.get(q) else {
            return Ok(());
        };
        let off = q * self.buff + (nth % 16) as usize * 4;
        self.mr.write(off, &(count as u32).to_le_bytes())?;
        let w = SendWr::write(u64::MAX, &[self.mr.sge(off, 4)?], rem.vaddr, rem.rkey).signaled();
        self.data[q].qp.post_send(&w)?;
        Ok(())
    }

    /// `run_iter_bw_server` (send_bw): count receive completions, keep receives posted, send
    /// credits ([`Side::send_credit`]).
    fn run_bw_server(&mut self, size: u64, remote: &[Dest]) -> Result<Row> {
        let qps = self.o.qps as usize;
        let total = if self.o.duration.is_some() {
            u64::MAX
        } else {
            self.o.iters * qps as u64
        };
        let mut end = None;
        let mut got = 0u64;
        let (mut first, mut last) = (0u64, 0u64);
        let mut wcs = vec![Wc::default(); 64];
        let mut idle = Instant::now();
        // perftest's credit_cnt = rx_depth / 3, the client's rx_depth at most its iterations.
        let credit_every = (u64::from(self.o.rx_depth).min(self.o.iters) / 3).max(1);
        let mut per_qp = vec![0u64; qps];
        let mut credits = 0u64;
        let mut scratch = vec![Wc::default(); 16];
        let mut backoff = idle::Backoff::default();
        while got < total {
            self.scq.poll(&mut scratch)?;
            let n = self.rcq.poll(&mut wcs)?;
            if n == 0 {
                if let Some(e) = end
                    && Instant::now() > e
                {
                    break;
                }
                if idle.elapsed() > WAIT {
                    bail!("no Send received for {WAIT:?} ({got} so far)");
                }
                wait_turn(
                    &self.dev,
                    &self.rcq,
                    &mut Patience::until(end),
                    &mut backoff,
                )?;
                continue;
            }
            idle = Instant::now();
            backoff.progress();
            let t = now_ns();
            if got == 0 {
                first = t;
                end = self.deadline();
            }
            last = t;
            for wc in &wcs[..n] {
                if !wc.is_ok() {
                    bail!("receive completion with error: {wc}");
                }
                let q = wc.wr_id() as usize;
                self.post_recvs(q, 1)?;
                if let Some(c) = per_qp.get_mut(q) {
                    *c += 1;
                    if *c % credit_every == 0 {
                        let c = *c;
                        credits += 1;
                        self.send_credit(q, c, credits, remote)?;
                    }
                }
            }
            got += n as u64;
        }
        let mut r = stats::bw(size, &[first], &[last], 1, self.o.gbits, false);
        let secs = last.saturating_sub(first).max(1) as f64 / 1e9;
        let unit = if self.o.gbits {
            125_000_000.0
        } else {
            1_048_576.0
        };
        r.iters = got;
        r.bw_avg = (size * got) as f64 / secs / unit;
        r.msg_rate = got as f64 / secs / 1e6;
        Ok(Row::Bw(r))
    }

    /// The TSC log of a latency run, with `--outliers`.
    fn tsc_log(&self) -> Option<TscLog> {
        let (path, ns) = self.o.outliers.clone()?;
        Some(TscLog::new(path, ns, self.o.iters))
    }

    fn lat_row(&self, size: u64, iters: u64, posted: &[u64], log: Option<&TscLog>) -> Row {
        if let Some(l) = log
            && let Err(e) = l.write(size, posted, self.o.test.rtt_factor())
        {
            eprintln!("iwarp-perf: cannot write the outliers: {e}");
        }
        // Saturating: a TSC reading on a CPU whose counter lags the previous one's gives 0,
        // not a wrapped 1.8e19 ns sample.
        let samples: Vec<u64> = posted
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        let n = iters;
        match self.o.duration {
            Some(_) => {
                let total = posted
                    .last()
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(posted.first().copied().unwrap_or(0));
                let it = n.saturating_sub(1).max(1);
                let t_avg = total as f64 / it as f64 / self.o.test.rtt_factor() / 1000.0;
                let tps = it as f64 / (total.max(1) as f64 / 1e9);
                Row::LatDuration(size, it, t_avg, tps)
            }
            None => Row::Lat(stats::lat(size, n, &samples, self.o.test.rtt_factor())),
        }
    }

    /// `run_iter_lat_write`: write `size` bytes with a counter in the last byte; the peer
    /// spins on its buffer's last byte and writes back.
    fn run_lat_write(&mut self, size: u64, remote: &[Dest]) -> Result<Row> {
        let server = self.o.server.is_none();
        let iters = if self.o.duration.is_some() {
            u64::MAX
        } else {
            self.o.iters
        };
        let end = self.deadline();
        let poll_off = self.o.qps as usize * self.buff + size as usize - 1;
        let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
        let mut posted = outliers::prefaulted(self.o.iters);
        let mut log = self.tsc_log();
        let mut b = [0u8; 1];
        'run: while scnt < iters || ccnt < iters || rcnt < iters {
            if rcnt < iters && !(scnt < 1 && server) {
                rcnt += 1;
                let mut patience = Patience::until(end);
                let mut spins = 0u32;
                let mut backoff = idle::Backoff::default();
                loop {
                    self.mr.read(poll_off, &mut b)?;
                    if b[0] == rcnt as u8 {
                        break;
                    }
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(CLOCK_EVERY) && patience.passed() {
                        if end.is_some() {
                            break 'run;
                        }
                        bail!("peer's RDMA Write {rcnt} did not arrive within {WAIT:?}");
                    }
                    idle_turn(&self.dev, &mut backoff);
                }
            }
            if let Some(e) = end
                && Instant::now() >= e
            {
                break;
            }
            if scnt < iters {
                posted.push(now_ns());
                if let Some(l) = log.as_mut() {
                    l.stamp();
                }
                scnt += 1;
                self.mr.write(size as usize - 1, &[scnt as u8])?;
                let w = self
                    .wr(0, scnt, size as usize, 0, &remote[0], 0)?
                    .signaled();
                self.data[0].qp.post_send(&w)?;
            }
            if ccnt < iters {
                wait_cq(&self.dev, &self.scq, None)?;
                ccnt += 1;
            }
        }
        Ok(self.lat_row(size, posted.len() as u64, &posted, log.as_ref()))
    }

    /// `run_iter_lat_send`: ping-pong Sends; the server answers each one.
    fn run_lat_send(&mut self, size: u64) -> Result<Row> {
        let client = self.o.server.is_some();
        let iters = if self.o.duration.is_some() {
            u64::MAX
        } else {
            self.o.iters
        };
        let end = self.deadline();
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        let mut posted = outliers::prefaulted(self.o.iters);
        let mut log = self.tsc_log();
        while scnt < iters || rcnt < iters {
            if rcnt < iters && !(scnt < 1 && client) {
                match wait_cq(&self.dev, &self.rcq, end) {
                    Ok(_) => {}
                    Err(_) if end.is_some() => break,
                    Err(e) => return Err(e),
                }
                rcnt += 1;
                self.post_recvs(0, 1)?;
            }
            if let Some(e) = end
                && Instant::now() >= e
            {
                break;
            }
            if scnt < iters {
                posted.push(now_ns());
                if let Some(l) = log.as_mut() {
                    l.stamp();
                }
                scnt += 1;
                let w = self
                    .wr(0, scnt, size as usize, 0, &Dest::default(), 0)?
                    .signaled();
                self.data[0].qp.post_send(&w)?;
                wait_cq(&self.dev, &self.scq, None)?;
            }
        }
        Ok(self.lat_row(size, posted.len() as u64, &posted, log.as_ref()))
    }

    /// `run_iter_lat` for Reads and atomics: one operation at a time.
    fn run_lat_op(&mut self, size: u64, remote: &[Dest]) -> Result<Row> {
        let iters = if self.o.duration.is_some() {
            u64::MAX
        } else {
            self.o.iters
        };
        let end = self.deadline();
        let mut posted = outliers::prefaulted(self.o.iters);
        let mut log = self.tsc_log();
        let mut k = 0u64;
        while k < iters {
            if let Some(e) = end
                && Instant::now() >= e
            {
                break;
            }
            posted.push(now_ns());
            if let Some(l) = log.as_mut() {
                l.stamp();
            }
            let w = self.wr(0, k, size as usize, 0, &remote[0], 0)?.signaled();
            self.data[0].qp.post_send(&w)?;
            wait_cq(&self.dev, &self.scq, None)?;
            k += 1;
        }
        posted.push(now_ns());
        if let Some(l) = log.as_mut() {
            l.stamp();
        }
        Ok(self.lat_row(size, k, &posted, log.as_ref()))
    }
}

/// True while a QP still waits for the signaled completion covering its unsignaled tail.
fn unsignaled_tail(scnt: &[u64], ccnt: &[u64]) -> bool {
    scnt.iter().zip(ccnt).any(|(s, c)| s > c)
}

impl Engine for Side {
    fn listen_data(&mut self) -> Result<()> {
        if self.data_listener.is_none() && self.o.server.is_none() {
            let addr = SocketAddrV4::new(*self.dev.attrs().ip.ip(), self.o.port);
            let listener = self.dev.create_cm_id()?;
            listener
                .listen(addr, self.o.qps)
                .with_context(|| format!("listen on {addr}"))?;
            self.data_listener = Some(listener);
        }
        Ok(())
    }

    fn connect_data(&mut self) -> Result<()> {
        match self.o.server {
            Some(ip) => {
                let addr = SocketAddrV4::new(ip, self.o.port);
                for _ in 0..self.o.qps {
                    let d = self.connect_one(addr)?;
                    self.data.push(d);
                }
            }
            None => {
                self.listen_data()?;
                let listener = self.data_listener.take().context("no data listener")?;
                for _ in 0..self.o.qps {
                    let req = listener
                        .get_request(Duration::from_secs(60))
                        .context("data connection request")?;
                    let qp = self.build_qp()?;
                    req.id.accept(&qp, &conn_param(self.o.crc, self.reads()))?;
                    req.id.wait_established(WAIT)?;
                    self.data.push(DataQp { qp, cm: req.id });
                }
            }
        }
        Ok(())
    }

    fn set_up(&mut self) -> Result<Vec<Dest>> {
        let mut mac = [0u8; 16];
        mac[..6].copy_from_slice(&self.dev.attrs().mac);
        let mut v = Vec::new();
        for q in 0..self.o.qps as usize {
            if self.o.test.verb() == Verb::Send {
                self.post_recvs(q, self.o.rx_depth)?;
            }
            let psn = self.next_psn();
            v.push(Dest {
                lid: 0,
                out_reads: self.o.out_reads,
                qpn: self.data[q].qp.qp_num(),
                psn,
                rkey: self.mr.rkey(),
                vaddr: self.mr.remote_addr() + ((self.o.qps as usize + q) * self.buff) as u64,
                gid: mac,
                srqn: 0,
                gid_index: 0,
            });
        }
        Ok(v)
    }

    fn run(&mut self, i: usize, remote: &[Dest]) -> Result<Option<Row>> {
        let size = self.o.sizes[i];
        let client = self.o.server.is_some();
        let meter = CpuMeter::start(self.o.daemon_pid);
        let row = match self.o.test {
            Test::WriteBw | Test::ReadBw | Test::AtomicBw if client => {
                Some(self.run_bw(size, remote)?)
            }
            Test::SendBw if client => Some(self.run_bw(size, remote)?),
            Test::SendBw => Some(self.run_bw_server(size, remote)?),
            Test::WriteLat => Some(self.run_lat_write(size, remote)?),
            Test::SendLat => Some(self.run_lat_send(size)?),
            Test::ReadLat | Test::AtomicLat if client => Some(self.run_lat_op(size, remote)?),
            _ => None,
        };
        self.last_cpu = self.o.cpu_util.then(|| meter.percent());
        Ok(row)
    }

    fn cpu_util(&self) -> Option<f64> {
        if self.o.cpu_util {
            Some(self.last_cpu.unwrap_or(0.0))
        } else {
            None
        }
    }

    fn out(&mut self, text: &str) {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    }
}
