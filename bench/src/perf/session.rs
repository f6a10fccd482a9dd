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
    let mut o = Outcome {
        page_size: cfg.page_size,
        cache_line: cfg.cache_line,
        mtu: cfg.info.mtu,
        ..Outcome::default()
    };
    let mut qps = 1;
    for s in steps {
        if let Step::Dest(i) | Step::PrintRemote(i) = s {
            qps = qps.max(i + 1);
        }
    }
    o.local = vec![Dest::default(); qps];
    o.remote = vec![Dest::default(); qps];
    let mut bw_rows: Vec<BwRow> = Vec::new();
    if !client {
        eng.out(report::SERVER_BANNER);
    }
    for (n, step) in steps.iter().enumerate() {
        if !client && steps.get(n + 1) == Some(&Step::ConnectData) {
            eng.listen_data()?;
        }
        match *step {
            Step::Version => {
                let r = xchg(comm, client, &wire::encode_version(wire::VERSION))?;
                o.peer_version = wire::parse_version(&r);
                if o.peer_version < wire::MIN_PEER_VERSION {
                    bail!(
                        "peer's perftest version {:?} is older than {}: not compatible",
                        String::from_utf8_lossy(&r).trim_end_matches('\0'),
                        wire::MIN_PEER_VERSION
                    );
                }
            }
            Step::CycleBuffer => {
                let r = xchg(comm, client, &wire::encode_u32(cfg.page_size))?;
                o.page_size = o
                    .page_size
                    .max(wire::decode_u32(&r).context("short cycle-buffer message")?);
            }
            Step::CacheLine => {
                let r = xchg(comm, client, &wire::encode_u32(cfg.cache_line))?;
                o.cache_line = o
                    .cache_line
                    .max(wire::decode_u32(&r).context("short cache-line message")?);
            }
            Step::Mtu => {
                let r = xchg(comm, client, &wire::encode_mtu(cfg.info.mtu))?;
                if let Some(m) = wire::decode_mtu(&r) {
                    o.mtu = o.mtu.min(m);
                }
            }
            Step::Dest(i) => {
                let r = xchg(comm, client, &o.local[i].encode())?;
                o.remote[i] = Dest::decode(&r).context("short pingpong_dest message")?;
            }
            Step::ConnectData => eng.connect_data()?,
            Step::SetUp => {
                let d = eng.set_up()?;
                if d.len() != qps {
                    bail!("engine set up {} QPs, the exchange needs {qps}", d.len());
                }
                o.local = d;
            }
            Step::PrintInfo => {
                let mut info = cfg.info.clone();
                info.mtu = o.mtu;
                eng.out(&info.render());
            }
            Step::PrintLocal => {
                for d in &o.local {
                    eng.out(&report::render_address(true, d.lid, d.qpn, d.psn, &d.gid));
                }
            }
            Step::PrintRemote(i) => {
                let d = o.remote[i];
                eng.out(&report::render_address(false, d.lid, d.qpn, d.psn, &d.gid));
            }
            Step::TableHeader => {
                let cpu = eng.cpu_util().is_some();
                let h = if cfg.info.test.is_bw() {
                    report::bw_header(cfg.gbits, cpu)
                } else {
                    report::lat_header(cfg.duration, cpu)
                };
                eng.out(&h);
            }
            Step::Run(i) => {
                if let Some(row) = eng.run(i, &o.remote)? {
                    let cpu = eng.cpu_util();
                    let text = match row {
                        Row::Bw(b) => {
                            bw_rows.push(b);
                            b.render(cfg.gbits, cpu)
                        }
                        Row::Lat(l) => l.render(cpu),
                        Row::LatDuration(s, n, t, tps) => {
                            report::render_lat_duration(s, n, t, tps, cpu)
                        }
                    };
                    eng.out(&text);
                    o.rows.push(row);
                    o.cpu.push(cpu);
                }
            }
            Step::BwReports => {
                let mine = bw_rows.last().copied().unwrap_or(BwRow {
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
                    got.push(xchg(comm, client, m)?);
                }
                let (size, iters, bw_peak, bw_avg, msg_rate) =
                    wire::decode_bw_report(&got).context("short bandwidth report")?;
                o.peer_report = Some(BwRow {
                    size,
                    iters,
                    bw_peak,
                    bw_avg,
                    msg_rate,
                });
            }
            Step::PrintPeerReport => {
                if let Some(r) = o.peer_report {
                    eng.out(&r.render(cfg.gbits, eng.cpu_util()));
                }
            }
            Step::TableEnd => eng.out(report::RESULT_LINE),
        }
    }
    Ok(o)
}
