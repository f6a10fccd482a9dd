//! Drives a [`wire::script`](super::wire::script) over a comm channel and a test engine, both
//! behind traits: the real ones are RDMA Sends on the comm QP and the verbs data path; the
//! tests use a recorded perftest session (`../shared/siw-peer/pcaps/cap_write_bw.pcap`).

use super::report::{self, BwRow, LatRow, TestInfo};
use super::wire::{self, Dest, Step};
use anyhow::{Context, Result, bail};

/// The comm connection: one message per RDMA Send, received in order.
pub trait Comm {
    /// Send one message.
    fn send(&mut self, msg: &[u8]) -> Result<()>;
    /// Receive the next message (its bytes, as long as the Send was).
    fn recv(&mut self) -> Result<Vec<u8>>;
}

/// One exchange: the client sends first, the server receives first (`ctx_xchg_data_rdma`).
pub fn xchg(comm: &mut dyn Comm, client: bool, mine: &[u8]) -> Result<Vec<u8>> {
    if client {
        comm.send(mine)?;
        comm.recv()
    } else {
        let r = comm.recv()?;
        comm.send(mine)?;
        Ok(r)
    }
}

/// A measured result row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Row {
    /// Bandwidth row.
    Bw(BwRow),
    /// Latency row.
    Lat(LatRow),
    /// Latency in duration mode: size, iterations, average (us), transactions per second.
    LatDuration(u64, u64, f64, f64),
}

/// What the test side does for the driver.
pub trait Engine {
    /// Server: start listening for the data connection(s) before answering the exchange
    /// that precedes them. perftest's client connects as soon as that answer arrives and
    /// gives up at the first refusal (seen live against siw's `ib_write_bw -R`), so the
    /// listener must already be there.
    fn listen_data(&mut self) -> Result<()> {
        Ok(())
    }
    /// Open the data connection(s).
    fn connect_data(&mut self) -> Result<()>;
    /// Our QPs as the peer must address them (after the data connection is up).
    fn set_up(&mut self) -> Result<Vec<Dest>>;
    /// Run at size index `i` against the peer's QPs; `None` when this side only serves.
    fn run(&mut self, i: usize, remote: &[Dest]) -> Result<Option<Row>>;
    /// CPU use of this side over the last run, percent of one core (for `--cpu_util`).
    fn cpu_util(&self) -> Option<f64>;
    /// Print text (stdout in the binary).
    fn out(&mut self, text: &str);
}

/// Settings of the exchange.
#[derive(Debug, Clone)]
pub struct DriveCfg {
    /// The header block; its `mtu` is replaced by the negotiated MTU.
    pub info: TestInfo,
    /// Our page size (cycle buffer).
    pub page_size: u32,
    /// Our cache line size.
    pub cache_line: u32,
    /// Report in Gb/s.
    pub gbits: bool,
    /// Duration mode (`-D`).
    pub duration: bool,
}

/// What a session ended with.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The peer's version.
    pub peer_version: f64,
    /// Cycle buffer and cache line after taking the maximum of both sides.
    pub page_size: u32,
    /// See `page_size`.
    pub cache_line: u32,
    /// Negotiated MTU in bytes.
    pub mtu: u32,
    /// Our QPs.
    pub local: Vec<Dest>,
    /// The peer's QPs.
    pub remote: Vec<Dest>,
    /// Rows we measured, in order.
    pub rows: Vec<Row>,
    /// The client's report as a one-sided bandwidth server received it.
    pub peer_report: Option<BwRow>,
    /// The CPU column of our rows.
    pub cpu: Vec<Option<f64>>,
}

/// Run `steps`.
pub fn drive(
    steps: &[Step],
    client: bool,
    cfg: &DriveCfg,
    comm: &mut dyn Comm,
    eng: &mut dyn Engine,
) -> Result<Outcome> {
    let qps = steps
        .iter()
        .filter_map(|s| match s {
            Step::Dest(i) | Step::PrintRemote(i) => Some(i + 1),
            _ => None,
        })
        .fold(1, usize::max);
    let mut d = Driver {
        client,
        cfg,
        comm,
        eng,
        qps,
        bw_rows: Vec::new(),
        o: Outcome {
            page_size: cfg.page_size,
            cache_line: cfg.cache_line,
            mtu: cfg.info.mtu,
            local: vec![Dest::default(); qps],
            remote: vec![Dest::default(); qps],
            ..Outcome::default()
        },
    };
    if !client {
        d.eng.out(report::SERVER_BANNER);
    }
    for (n, step) in steps.iter().enumerate() {
        if !client && steps.get(n + 1) == Some(&Step::ConnectData) {
            d.eng.listen_data()?;
        }
        d.step(*step)?;
    }
    Ok(d.o)
}

/// One side of the exchange while [`drive`] runs it.
struct Driver<'a> {
    client: bool,
    cfg: &'a DriveCfg,
    comm: &'a mut dyn Comm,
    eng: &'a mut dyn Engine,
    /// QPs the script names.
    qps: usize,
    /// Our bandwidth rows so far (the last one is reported to the peer).
    bw_rows: Vec<BwRow>,
    o: Outcome,
}

impl Driver<'_> {
    fn step(&mut self, step: Step) -> Result<()> {
        match step {
            Step::Version => self.version()?,
            Step::CycleBuffer => {
                let r = self.xchg(&wire::encode_u32(self.cfg.page_size))?;
                let peer = wire::decode_u32(&r).context("short cycle-buffer message")?;
                self.o.page_size = self.o.page_size.max(peer);
            }
            Step::CacheLine => {
                let r = self.xchg(&wire::encode_u32(self.cfg.cache_line))?;
                let peer = wire::decode_u32(&r).context("short cache-line message")?;
                self.o.cache_line = self.o.cache_line.max(peer);
            }
            Step::Mtu => {
                let r = self.xchg(&wire::encode_mtu(self.cfg.info.mtu))?;
                if let Some(m) = wire::decode_mtu(&r) {
                    self.o.mtu = self.o.mtu.min(m);
                }
            }
            Step::Dest(i) => {
                let r = self.xchg(&self.o.local[i].encode())?;
                self.o.remote[i] = Dest::decode(&r).context("short pingpong_dest message")?;
            }
            Step::ConnectData => self.eng.connect_data()?,
            Step::SetUp => {
                let d = self.eng.set_up()?;
                if d.len() != self.qps {
                    bail!(
                        "engine set up {} QPs, the exchange needs {}",
                        d.len(),
                        self.qps
                    );
                }
                self.o.local = d;
            }
            Step::Run(i) => self.run(i)?,
            Step::BwReports => self.bw_reports()?,
            _ => self.print(step),
        }
        Ok(())
    }

    fn xchg(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        xchg(self.comm, self.client, msg)
    }

    /// perftest's version string, both ways; an older peer is refused.
    fn version(&mut self) -> Result<()> {
        let r = self.xchg(&wire::encode_version(wire::VERSION))?;
        self.o.peer_version = wire::parse_version(&r);
        if self.o.peer_version < wire::MIN_PEER_VERSION {
            bail!(
                "peer's perftest version {:?} is older than {}: not compatible",
                String::from_utf8_lossy(&r).trim_end_matches('\0'),
                wire::MIN_PEER_VERSION
            );
        }
        Ok(())
    }

    /// Measure size `i`, print its row.
    fn run(&mut self, i: usize) -> Result<()> {
        let Some(row) = self.eng.run(i, &self.o.remote)? else {
            return Ok(());
        };
        let cpu = self.eng.cpu_util();
        let text = match row {
            Row::Bw(b) => {
                self.bw_rows.push(b);
                b.render(self.cfg.gbits, cpu)
            }
            Row::Lat(l) => l.render(cpu),
            Row::LatDuration(s, n, t, tps) => report::render_lat_duration(s, n, t, tps, cpu),
        };
        self.eng.out(&text);
        self.o.rows.push(row);
        self.o.cpu.push(cpu);
        Ok(())
    }

    /// Our last bandwidth row for the peer's, five messages each way.
    fn bw_reports(&mut self) -> Result<()> {
        let mine = self.bw_rows.last().copied().unwrap_or(BwRow {
            size: 0,
            iters: 0,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        });
        let msgs = wire::encode_bw_report(
            mine.size,
            mine.iters,
            mine.bw_peak,
            mine.bw_avg,
            mine.msg_rate,
        );
        let mut got = Vec::new();
        for m in &msgs {
            got.push(self.xchg(m)?);
        }
        let (size, iters, bw_peak, bw_avg, msg_rate) =
            wire::decode_bw_report(&got).context("short bandwidth report")?;
        self.o.peer_report = Some(BwRow {
            size,
            iters,
            bw_peak,
            bw_avg,
            msg_rate,
        });
        Ok(())
    }

    /// The steps that only print.
    fn print(&mut self, step: Step) {
        let text = match step {
            Step::PrintInfo => {
                let mut info = self.cfg.info.clone();
                info.mtu = self.o.mtu;
                info.render()
            }
            Step::PrintLocal => self
                .o
                .local
                .iter()
                .map(|d| report::render_address(true, d.lid, d.qpn, d.psn, &d.gid))
                .collect(),
            Step::PrintRemote(i) => {
                let d = self.o.remote[i];
                report::render_address(false, d.lid, d.qpn, d.psn, &d.gid)
            }
            Step::TableHeader => {
                let cpu = self.eng.cpu_util().is_some();
                if self.cfg.info.test.is_bw() {
                    report::bw_header(self.cfg.gbits, cpu)
                } else {
                    report::lat_header(self.cfg.duration, cpu)
                }
            }
            Step::PrintPeerReport => match self.o.peer_report {
                Some(r) => r.render(self.cfg.gbits, self.eng.cpu_util()),
                None => return,
            },
            Step::TableEnd => report::RESULT_LINE.to_string(),
            _ => return,
        };
        self.eng.out(&text);
    }
}
