//! Bring-up, the control loop (stats file), and clean teardown of one `iwarpd`.

use crate::config::parse_sockaddr;
use crate::config::{Config, parse_cidr};
use crate::eal_args::{self, RUNTIME_DIR};
use crate::server::ControlServer;
use crate::service::{Service, ServiceConfig};
use anyhow::{Context, Result};
use dataplane::arpbus::ArpBus;
use dataplane::clock::TscClock;
use dataplane::eal::{Eal, ShutdownOutcome};
use dataplane::extbuf::ExtRegion;
use dataplane::lcore::{self, LcoreReport, LcoreSetup, LoopMode, PingRequest};
use dataplane::mempool::{Mempool, data_room_for_mtu};
use dataplane::netstack::{SendJob, Services};
use dataplane::port::{Port, PortConfig, PortStats, fmt_mac};
use dataplane::pump::{self, Pump};
use dataplane::rdma::diag::{DiagOp, DiagRdmaConfig};
use dataplane::rdma::{CrcMode, EngineConfig, EngineHandle, MemTable, TxPayload, engine_channels};
use dataplane::rss::RssSteering;
use dataplane::signal;
use dataplane::stats::{SharedLcoreStats, render};
use netcore::Duration;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Instant as WallClock;
use tcp::iface::{IfaceConfig, IfaceStats};
use tcp::{CongestionControl, Keepalive, TcpConfig, TcpStats};

/// Run the daemon until SIGINT/SIGTERM, `diag.run_seconds`, or the end of a diagnostic ping.
/// Returns the process exit status.
pub fn run(cfg: &Config) -> Result<i32> {
    run_with(cfg, &RunOptions::default())
}

/// How the bring-up runs: as the `iwarpd` process, or embedded in an application.
#[derive(Default)]
pub struct RunOptions {
    /// Embedded: no signal handlers, no control socket; the control server is handed to
    /// this callback once the dataplane runs (`crate::embedded`).
    /// The pumps let the application step the dataplane loops itself (`dataplane::pump`).
    #[allow(clippy::type_complexity)]
    pub embedded: Option<Box<dyn Fn(Arc<ControlServer>, Vec<Arc<Pump>>) + Send + Sync>>,
}

/// Print a report line: to stdout as the daemon, to stderr when embedded (the application's
/// stdout is its own: `iwarp-perf` prints perftest's tables there).
fn say(opts: &RunOptions, text: &str) {
    if opts.embedded.is_some() {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

/// [`run`] with options.
pub fn run_with(cfg: &Config, opts: &RunOptions) -> Result<i32> {
    crate::crc_choice::choose()?;
    let plan = eal_args::plan(cfg, eal_args::free_hugepages(), std::process::id())
        .map_err(anyhow::Error::msg)?;
    tracing::info!(args = ?plan.args, "EAL arguments");
    if opts.embedded.is_none() {
        signal::install();
    }
    let eal = Eal::init(&plan.args).context("EAL initialisation")?;
    tracing::info!(version = %Eal::version(), "EAL up");
    let result = run_with_eal(cfg, &eal, opts);
    // The last handle: pools are freed and rte_eal_cleanup runs here, on the main thread, once
    // every port, queue and mbuf is gone (see dataplane::eal).
    drop(eal);
    match dataplane::eal::shutdown_outcome() {
        Some(ShutdownOutcome::CleanedUp) => say(opts, "iwarpd: EAL shutdown: cleaned up"),
        other => say(
            opts,
            &format!("iwarpd: EAL shutdown: left to the process exit ({other:?})"),
        ),
    }
    // EAL leaves its runtime directory (/var/run/dpdk/<prefix>) behind, even with --in-memory.
    let dir = std::path::Path::new(RUNTIME_DIR).join(&plan.file_prefix);
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        tracing::warn!(dir = %dir.display(), "cannot remove DPDK runtime dir: {e}");
    }
    result
}

fn run_with_eal(cfg: &Config, eal: &Eal, opts: &RunOptions) -> Result<i32> {
    let nq = u16::try_from(cfg.dataplane.cores.len()).context("too many cores")?;
    let (pool, port) = start_port(cfg, eal, nq)?;
    let memif_socket = memif_socket_path(&cfg.port.device);
    let iface = iface_config(cfg, &port)?;
    say(opts, &port_line(cfg, &port, nq));
    let ping = ping_request(cfg)?;
    // The control plane's seam to the dataplane threads (docs/rdma-seams.md).
    let (engine, rdma_setups) = rdma_engine(cfg)?;
    // One clock for every thread: one origin, so Instants agree across threads.
    let clock = TscClock::new(eal);
    let setups = lcore_setups(cfg, &port, &iface, ping, clock, &rdma_setups, nq);
    let queues = (0..nq)
        .map(|q| port.queue(q))
        .collect::<Result<Vec<_>, _>>()
        .context("queues")?;
    let shared: Vec<SharedLcoreStats> =
        setups.iter().map(|_| SharedLcoreStats::default()).collect();

    let engine = Arc::new(engine);
    let server = start_control(cfg, opts, eal, &port, &engine)?;
    // Embedded: each dataplane loop can be stepped by the application too.
    let pumps: Vec<Arc<Pump>> = setups
        .iter()
        .filter(|_| opts.embedded.is_some())
        .map(|s| {
            Arc::new(Pump::new(
                s.clock,
                cfg.dataplane.cores.get(s.index).copied(),
            ))
        })
        .collect();
    let started = WallClock::now();
    let mut port_peak = PortStats::default();
    let threads = Threads {
        cfg,
        eal,
        pool: &pool,
        setups: &setups,
        shared: &shared,
        pumps: &pumps,
    };
    let reports = std::thread::scope(|s| -> Result<Vec<LcoreReport>> {
        let handles = threads.spawn(s, queues)?;
        // Every dataplane thread runs: an embedded engine's application may use the engine
        // from here on. (When one failed, the stop is requested and bring-up fails.)
        if let Some(cb) = opts.embedded.as_ref().filter(|_| !signal::stop_requested()) {
            cb(server.clone(), pumps.clone());
        }
        control_loop(
            cfg,
            &port,
            &shared,
            started,
            &mut port_peak,
            &server,
            &engine,
        );
        server.stop();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("dataplane thread panicked"))?
            })
            .collect()
    })?;

    let mut report = render_all(
        &port,
        &reports,
        started.elapsed().as_secs_f64(),
        &mut port_peak,
    );
    report.push_str(&control_stats(&server));
    dataplane::rdma::stats::render(&engine.qp_stats(), &mut report);
    say(opts, &report);
    let status = exit_status(cfg, &reports, ping.as_ref());
    if let Some(file) = &cfg.stats.file {
        let _ = write_atomically(file, &report);
    }
    engine.mem.clear_dma();
    drop(port);
    drop(pool);
    if let Some(sock) = memif_socket
        && std::path::Path::new(&sock).exists()
    {
        let _ = std::fs::remove_file(&sock);
    }
    Ok(status)
}

/// The mbuf pool and the started port, `nq` queue pairs.
fn start_port(cfg: &Config, eal: &Eal, nq: u16) -> Result<(Mempool, Port)> {
    // One frame per mbuf at the configured MTU (jumbo frames included): receive and transmit
    // need no chains on the normal path.
    let data_room = data_room_for_mtu(cfg.port.mtu);
    let pool = Mempool::new(
        eal,
        "iwarpd_rx",
        cfg.dataplane.mbufs,
        cfg.dataplane.mbuf_cache,
        data_room,
        -1,
    )
    .with_context(|| {
        format!(
            "mbuf pool for MTU {} ({} mbufs of {data_room} bytes): raise eal.memory_mb or lower dataplane.mbufs",
            cfg.port.mtu, cfg.dataplane.mbufs
        )
    })?;
    let pcfg = PortConfig {
        rx_queues: nq,
        tx_queues: nq,
        rx_desc: cfg.port.rx_desc,
        tx_desc: cfg.port.tx_desc,
        mtu: cfg.port.mtu,
        promiscuous: cfg.port.promiscuous,
    };
    let port = Port::start(cfg.port_name(), &pcfg, &pool).context("port bring-up")?;
    if !port.info().mtu_set {
        check_kernel_mtu(&cfg.port.device, cfg.port.mtu);
    }
    Ok((pool, port))
}

/// The interface's addresses from `[port]`, the MAC from the port.
fn iface_config(cfg: &Config, port: &Port) -> Result<IfaceConfig> {
    let cidr = parse_cidr(&cfg.port.ip).context("port.ip")?;
    let gateway = cfg
        .port
        .gateway
        .as_deref()
        .map(|g| g.parse::<Ipv4Addr>())
        .transpose()
        .context("port.gateway")?;
    Ok(IfaceConfig {
        gateway: gateway.map(|g| g.octets()),
        mtu: cfg.port.mtu,
        ..IfaceConfig::new(port.info().mac, cidr.addr.octets(), cidr.prefix)
    })
}

/// The bring-up line: port, driver, addresses, queues, loop mode.
fn port_line(cfg: &Config, port: &Port, nq: u16) -> String {
    format!(
        "iwarpd: port {} ({}) mac {} ip {} mtu {} queues {} mode {}",
        port.info().name,
        port.info().driver,
        fmt_mac(&port.info().mac),
        cfg.port.ip,
        cfg.port.mtu,
        nq,
        cfg.dataplane.mode
    )
}

/// The diagnostic ping of `[diag]`, if any.
fn ping_request(cfg: &Config) -> Result<Option<PingRequest>> {
    let Some(p) = cfg.diag.ping.as_deref() else {
        return Ok(None);
    };
    Ok(Some(PingRequest {
        dst: p.parse::<Ipv4Addr>().context("diag.ping")?.octets(),
        count: cfg.diag.ping_count,
        size: cfg.diag.ping_size,
        interval: Duration::from_millis(cfg.diag.ping_interval_ms),
        exit_when_done: cfg.diag.exit_after_ping,
    }))
}

/// The RDMA engine's handle and one setup per dataplane thread.
fn rdma_engine(cfg: &Config) -> Result<(EngineHandle, Vec<dataplane::rdma::RdmaSetup>)> {
    Ok(engine_channels(
        cfg.dataplane.cores.len(),
        MemTable::new(
            1 << 20,
            u64::from_le_bytes(random_secret()[..8].try_into()?),
        ),
        EngineConfig {
            rx_timeout: netcore::Duration::from_millis(cfg.mpa.rx_timeout_ms),
            tx_payload: match cfg.mpa.tx_payload.as_str() {
                "copy" => TxPayload::Copy,
                "by_ref" => TxPayload::ByRef,
                _ => TxPayload::Auto,
            },
            ..EngineConfig::default()
        },
    ))
}

/// One setup per dataplane thread (`dataplane.cores`).
fn lcore_setups(
    cfg: &Config,
    port: &Port,
    iface: &IfaceConfig,
    ping: Option<PingRequest>,
    clock: TscClock,
    rdma: &[dataplane::rdma::RdmaSetup],
    nq: u16,
) -> Vec<LcoreSetup> {
    let mode = if cfg.dataplane.mode == "echo" {
        LoopMode::Echo
    } else {
        LoopMode::Stack
    };
    let tcp_cfg = tcp_config(cfg);
    let services = services(cfg);
    let diag_rdma = diag_rdma_config(cfg);
    // With several queues, ARP lands on one of them: every thread sees every ARP frame.
    let arp_bus = (nq > 1).then(|| ArpBus::new(usize::from(nq)));
    (0..cfg.dataplane.cores.len())
        .map(|i| LcoreSetup {
            index: i,
            clock,
            iface: iface.clone(),
            mode,
            idle_yield: cfg.dataplane.idle == "yield",
            tx_backoff: Duration::from_nanos(cfg.dataplane.tx_backoff_ns),
            // The diagnostic ping and the sender run on the first thread only.
            ping: if i == 0 { ping } else { None },
            tcp: tcp_cfg.clone(),
            services: Services {
                send: if i == 0 { services.send.clone() } else { None },
                steering: port.info().rss.then(|| {
                    let s = RssSteering {
                        queues: port.info().queues,
                        reta_size: u32::from(port.info().reta_size),
                        ephemeral: 49152..=65535,
                    };
                    (s, i as u16)
                }),
                ..services.clone()
            },
            exit_when_sent: cfg.diag.exit_after_send,
            secret: random_secret(),
            rdma: rdma.get(i).cloned(),
            // The sink listens on every thread (RSS puts a connection anywhere); the generator
            // runs on the first.
            arp_bus: arp_bus.clone(),
            diag_rdma: diag_rdma.clone().map(|mut d| {
                if i != 0 {
                    d.connect = None;
                }
                d
            }),
        })
        .collect()
}

/// The control plane: the engine seam, the service, the control socket (or, embedded, the
/// in-process server handed to the application).
fn start_control(
    cfg: &Config,
    opts: &RunOptions,
    eal: &Eal,
    port: &Port,
    engine: &Arc<EngineHandle>,
) -> Result<Arc<ControlServer>> {
    // Zero-copy transmit: a mapping is registered with DPDK (and DMA-mapped for PCI ports)
    // the first time payload goes out of it; without a registration payload is copied.
    let (dma_eal, dma_port) = (eal.clone(), port.clone());
    engine.mem.set_dma_registrar(Box::new(move |m| {
        ExtRegion::register(&dma_eal, m, &[&dma_port])
            .inspect_err(|e| tracing::info!("zero-copy registration refused: {e}"))
            .ok()
    }));
    let service = Service::new(
        engine.clone(),
        ServiceConfig::from_config(cfg, port.info().mac),
    );
    let socket = opts.embedded.is_none().then(|| {
        let mode = cfg.control.mode().unwrap_or(0o660);
        (std::path::Path::new(&cfg.control.socket), mode)
    });
    let server = ControlServer::start(Arc::new(Mutex::new(service)), socket)
        .with_context(|| format!("control socket {}", cfg.control.socket))?;
    Ok(Arc::new(server))
}

/// What the dataplane threads share with the thread that spawns them.
struct Threads<'a> {
    cfg: &'a Config,
    eal: &'a Eal,
    pool: &'a Mempool,
    setups: &'a [LcoreSetup],
    shared: &'a [SharedLcoreStats],
    pumps: &'a [Arc<Pump>],
}

type LcoreHandle<'scope> = std::thread::ScopedJoinHandle<'scope, Result<LcoreReport>>;

impl<'a> Threads<'a> {
    /// One thread per queue, pinned to its core, registered with EAL, running its loop (or
    /// its pump's, embedded) until a stop. Returns once every thread has started (named,
    /// pinned, registered); when one failed to, the stop is requested and its error comes
    /// back from its handle.
    fn spawn<'scope>(
        &self,
        s: &'scope std::thread::Scope<'scope, '_>,
        queues: Vec<dataplane::port::Queue>,
    ) -> Result<Vec<LcoreHandle<'scope>>>
    where
        'a: 'scope,
    {
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        let mut handles = Vec::new();
        let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
        for ((setup, sh), queue) in self.setups.iter().zip(self.shared).zip(queues) {
            let up = up_tx.clone();
            let pump = self.pumps.get(setup.index).cloned();
            let core = self.cfg.dataplane.cores[setup.index];
            let core_id = core_ids.iter().find(|c| c.id == core).copied();
            let (eal, pool) = (self.eal, self.pool);
            let h = std::thread::Builder::new()
                .name(format!("dp{}", setup.index))
                .spawn_scoped(s, move || -> Result<LcoreReport> {
                    if let Some(c) = core_id
                        && !core_affinity::set_for_current(c)
                    {
                        tracing::warn!(core, "could not pin dataplane thread");
                    }
                    // On an error the sender is dropped unsent.
                    let lcore = eal.register_thread().context("register dataplane thread")?;
                    let _ = up.send(());
                    drop(up);
                    tracing::info!(
                        thread = setup.index,
                        core,
                        lcore_id = lcore.lcore_id(),
                        "dataplane thread running"
                    );
                    let r = match &pump {
                        Some(p) => pump::run(lcore::Lcore::new(setup, queue, pool), p, sh),
                        None => lcore::run(setup, queue, pool, sh),
                    };
                    drop(lcore);
                    Ok(r)
                })
                .context("spawn dataplane thread")?;
            handles.push(h);
        }
        drop(up_tx);
        // Each thread sends once or drops its sender: this ends when all have done either.
        if up_rx.iter().count() < handles.len() {
            signal::request_stop();
        }
        Ok(handles)
    }
}

/// The process's exit status: non-zero when a diagnostic (ping, RDMA connect, sender) failed.
fn exit_status(cfg: &Config, reports: &[LcoreReport], ping: Option<&PingRequest>) -> i32 {
    let mut status = ping_status(reports, ping);
    if let Some(r) = reports.first().and_then(|r| r.rdma_diag.as_ref())
        && cfg.diag.rdma_connect.is_some()
        && (r.failed > 0 || !r.done)
    {
        status = 1;
    }
    if let Some(sr) = reports.first().and_then(|r| r.send.as_ref())
        && (sr.failed > 0 || sr.completed < cfg.diag.send_connections)
    {
        status = 1;
    }
    status
}

/// Wait for a stop (signal, timed run, or ping done), refreshing the stats file meanwhile.
fn control_loop(
    cfg: &Config,
    port: &Port,
    shared: &[SharedLcoreStats],
    started: WallClock,
    port_peak: &mut PortStats,
    server: &ControlServer,
    engine: &EngineHandle,
) {
    let tick = std::time::Duration::from_millis(cfg.stats.interval_ms.min(100));
    let mut last_write = WallClock::now();
    while !signal::stop_requested() {
        std::thread::sleep(tick);
        *port_peak = peak(port_peak, &port.stats());
        if cfg.diag.run_seconds > 0 && started.elapsed().as_secs() >= cfg.diag.run_seconds {
            signal::request_stop();
        }
        if let Some(file) = &cfg.stats.file
            && last_write.elapsed().as_millis() as u64 >= cfg.stats.interval_ms
        {
            last_write = WallClock::now();
            let reports: Vec<LcoreReport> = shared
                .iter()
                .map(|s| LcoreReport {
                    stats: s.snapshot(),
                    ..Default::default()
                })
                .collect();
            let mut text = render_all(port, &reports, started.elapsed().as_secs_f64(), port_peak);
            text.push_str(&control_stats(server));
            dataplane::rdma::stats::render(&engine.qp_stats(), &mut text);
            if let Err(e) = write_atomically(file, &text) {
                tracing::warn!(file, "cannot write stats file: {e}");
            }
        }
    }
}

/// The control plane's counters (clients and their resources).
fn control_stats(server: &ControlServer) -> String {
    server
        .service()
        .lock()
        .map(|s| s.render_stats())
        .unwrap_or_else(|p| p.into_inner().render_stats())
}

/// Field-wise maximum of two snapshots: some PMDs (memif) reset their counters when the
/// peer disconnects, so the report keeps the highest value seen.
fn peak(a: &PortStats, b: &PortStats) -> PortStats {
    PortStats {
        ipackets: a.ipackets.max(b.ipackets),
        opackets: a.opackets.max(b.opackets),
        ibytes: a.ibytes.max(b.ibytes),
        obytes: a.obytes.max(b.obytes),
        imissed: a.imissed.max(b.imissed),
        ierrors: a.ierrors.max(b.ierrors),
        oerrors: a.oerrors.max(b.oerrors),
        rx_nombuf: a.rx_nombuf.max(b.rx_nombuf),
    }
}

fn render_all(
    port: &Port,
    reports: &[LcoreReport],
    secs: f64,
    port_peak: &mut PortStats,
) -> String {
    let mut out = format!("# iwarpd counters after {secs:.3} s\n\n");
    *port_peak = peak(port_peak, &port.stats());
    let ps = *port_peak;
    render(
        &format!("port.{}", port.info().name),
        &[
            ("ipackets", ps.ipackets),
            ("opackets", ps.opackets),
            ("ibytes", ps.ibytes),
            ("obytes", ps.obytes),
            ("imissed", ps.imissed),
            ("ierrors", ps.ierrors),
            ("oerrors", ps.oerrors),
            ("rx_nombuf", ps.rx_nombuf),
        ],
        &mut out,
    );
    let xs = port.xstats();
    let xs: Vec<(&str, u64)> = xs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    render(&format!("port.{}.xstats", port.info().name), &xs, &mut out);
    for (i, r) in reports.iter().enumerate() {
        render(&format!("lcore.{i}"), &r.stats.fields(), &mut out);
        render(
            &format!("lcore.{i}.iface"),
            &iface_fields(&r.iface),
            &mut out,
        );
        render(&format!("lcore.{i}.tcp"), &tcp_fields(&r.tcp), &mut out);
        let n = &r.netstack;
        render(
            &format!("lcore.{i}.netstack"),
            &[
                ("accepted", n.accepted),
                ("reaped", n.reaped),
                ("tx_no_neighbor", n.tx_no_neighbor),
                ("tx_held_neighbor", n.tx_held_neighbor),
                ("tx_wait_neighbor", n.tx_wait_neighbor),
                ("tx_backpressure", n.tx_backpressure),
                ("tx_no_mbuf", n.tx_no_mbuf),
            ],
            &mut out,
        );
        if let Some(sr) = &r.send {
            out.push_str(&format!(
                "[lcore.{i}.send]\ncompleted = {}\nfailed = {}\nbytes = {}\nsecs = {:.3}\ngbps = {:.3}\n\n",
                sr.completed,
                sr.failed,
                sr.bytes,
                sr.secs,
                if sr.secs > 0.0 { sr.bytes as f64 * 8.0 / sr.secs / 1e9 } else { 0.0 }
            ));
        }
        if let Some(p) = &r.ping {
            let mut rtts: Vec<f64> = p.rtts.iter().map(|d| d.as_secs_f64() * 1e6).collect();
            rtts.sort_by(f64::total_cmp);
            let pct = |q: f64| {
                rtts.get(((rtts.len() as f64 - 1.0) * q).round() as usize)
                    .copied()
                    .unwrap_or(0.0)
            };
            out.push_str(&format!(
                "[lcore.{i}.ping]\nsent = {}\nreceived = {}\nrtt_p50_us = {:.1}\nrtt_p99_us = {:.1}\n\n",
                p.sent,
                p.received,
                pct(0.5),
                pct(0.99)
            ));
        }
    }
    out
}

/// `TcpConfig` from `[tcp]` (validated already).
pub fn tcp_config(cfg: &Config) -> TcpConfig {
    let t = &cfg.tcp;
    let ms = Duration::from_millis;
    TcpConfig {
        mss: if t.mss == 0 { cfg.port.mtu - 40 } else { t.mss },
        recv_window: t.recv_window,
        send_window: t.send_window,
        window_scale: u8::try_from(t.window_scale).ok(),
        sack: t.sack,
        timestamps: t.timestamps,
        cc: match t.cc.as_str() {
            "newreno" => CongestionControl::NewReno,
            "bbr" => CongestionControl::Bbr,
            _ => CongestionControl::Cubic,
        },
        delayed_ack: (t.delayed_ack_us > 0).then(|| Duration::from_micros(t.delayed_ack_us)),
        ack_stretch_segments: t.ack_stretch_segs,
        nagle: t.nagle,
        keepalive: (t.keepalive_secs > 0).then(|| Keepalive {
            idle: Duration::from_secs(t.keepalive_secs),
            interval: Duration::from_secs(t.keepalive_secs.div_ceil(9).max(1)),
            count: 9,
        }),
        time_wait: ms(t.time_wait_ms),
        rto_initial: ms(t.rto_initial_ms),
        rto_min: ms(t.rto_min_ms),
        rto_min_bulk: ms(t.rto_min_bulk_ms.min(t.rto_min_ms)),
        rto_max: ms(t.rto_max_ms),
        max_ooo_bytes: t.max_ooo_bytes,
        max_ooo_segments: t.max_ooo_segments,
        max_ooo_small_segments: t.max_ooo_small_segments,
        // The pool is shared by every thread: a quarter of it, split between them.
        max_ooo_segments_total: if t.max_ooo_mbufs == 0 {
            (cfg.dataplane.mbufs as usize / 4 / cfg.dataplane.cores.len().max(1)).max(1)
        } else {
            t.max_ooo_mbufs
        },
        syn_cookies: t.syn_cookies,
        syn_backlog: t.syn_backlog,
        max_connections: t.max_connections,
        max_listener_connections: t.max_listener_connections,
        fin_wait2_timeout: (t.fin_wait2_ms > 0).then(|| ms(t.fin_wait2_ms)),
        rack_tlp: t.rack_tlp,
        prr: t.prr,
        hystart: t.hystart,
        rto_undo: t.rto_undo,
        sack_compress_segments: t.sack_compress_segs,
        sack_compress_delay: Duration::from_micros(t.sack_compress_delay_us),
        sack_compress_min_held: t.sack_compress_min_held,
        ..TcpConfig::default()
    }
}

fn services(cfg: &Config) -> Services {
    let d = &cfg.diag;
    Services {
        echo_port: d.echo_port,
        discard_port: d.discard_port,
        discard_sha256: d.discard_sha256,
        echo_buffer: d.echo_buffer,
        send: d
            .send_to
            .as_deref()
            .and_then(parse_sockaddr)
            .map(|(ip, port)| SendJob {
                dst: ip.octets(),
                port,
                bytes: d.send_bytes,
                connections: d.send_connections,
                sha256: d.send_sha256,
            }),
        steering: None,
    }
}

/// The diagnostic RDMA service from `[diag] rdma_*` (validated) and `[mpa]`.
fn diag_rdma_config(cfg: &Config) -> Option<DiagRdmaConfig> {
    let d = &cfg.diag;
    if d.rdma_port.is_none() && d.rdma_connect.is_none() {
        return None;
    }
    let mut policy = crate::service::mpa_policy(&cfg.mpa);
    if let Some(c) = &d.rdma_crc {
        policy.crc = match c.as_str() {
            "on" => CrcMode::On,
            "require" => CrcMode::Require,
            _ => CrcMode::Off,
        };
    }
    if let Some(m) = d.rdma_markers {
        policy.markers = m;
    }
    Some(DiagRdmaConfig {
        listen_port: d.rdma_port,
        connect: d
            .rdma_connect
            .as_deref()
            .and_then(parse_sockaddr)
            .map(|(ip, port)| std::net::SocketAddrV4::new(ip, port)),
        ops: d.rdma_ops.iter().filter_map(|o| DiagOp::parse(o)).collect(),
        sizes: d.rdma_sizes.clone(),
        iterations: d.rdma_iterations,
        buffer: usize::try_from(d.rdma_buffer).unwrap_or(usize::MAX),
        policy,
        sha256: d.rdma_sha256,
        exit_when_done: d.exit_after_rdma,
        connect_timeout: Duration::from_secs(30),
    })
}

/// 16 random bytes from the OS (ISN key, STag keys, pattern seeds).
fn random_secret() -> [u8; 16] {
    let mut b = [0u8; 16];
    if let Err(e) = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
    {
        tracing::warn!("cannot read /dev/urandom ({e}); using the clock as ISN key");
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        b[..16].copy_from_slice(&t.as_nanos().to_le_bytes());
    }
    b
}

/// For a device on a kernel interface (af_packet, af_xdp: `iface=` in the device string)
/// whose MTU DPDK did not set: the interface's own MTU must allow our frames, else the kernel
/// drops them. Warn with the remedy when it is smaller.
fn check_kernel_mtu(device: &str, mtu: u16) {
    let Some(iface) = device
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("iface="))
    else {
        return;
    };
    let path = format!("/sys/class/net/{iface}/mtu");
    let Some(have) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        return;
    };
    if have < u32::from(mtu) {
        tracing::warn!(
            iface,
            have,
            want = mtu,
            "the interface's MTU is smaller than port.mtu: larger frames are dropped by the kernel (ip link set {iface} mtu {mtu})"
        );
    } else {
        tracing::info!(iface, mtu = have, "interface MTU allows port.mtu");
    }
}

fn tcp_fields(s: &TcpStats) -> Vec<(&'static str, u64)> {
    let mut v = s.fields();
    v.retain(|(_, n)| *n != 0);
    v
}

fn iface_fields(s: &IfaceStats) -> Vec<(&'static str, u64)> {
    let mut v = s.fields();
    v.retain(|(_, n)| *n != 0);
    v
}

fn ping_status(reports: &[LcoreReport], req: Option<&PingRequest>) -> i32 {
    match (req, reports.first().and_then(|r| r.ping.as_ref())) {
        (Some(req), Some(p)) => i32::from(!(p.sent == req.count && p.received == req.count)),
        (Some(_), None) => 1,
        _ => 0,
    }
}

fn write_atomically(path: &str, text: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The `socket=` path of a memif vdev in the server role (DPDK's default), so a stale one can be
/// removed at exit. A client leaves it alone: the socket is the server's, and removing it would
/// keep every later client from connecting to the still-running server.
fn memif_socket_path(device: &str) -> Option<String> {
    if !device.starts_with("net_memif") || device.split(',').any(|kv| kv == "role=client") {
        return None;
    }
    device
        .split(',')
        .find_map(|kv| kv.strip_prefix("socket="))
        .map(str::to_owned)
}

/// Check a config file and explain it.
pub fn check(cfg: &Config) -> Result<()> {
    let plan = eal_args::plan(cfg, eal_args::free_hugepages(), std::process::id())
        .map_err(anyhow::Error::msg)?;
    println!(
        "config OK: device {} ip {} cores {:?}",
        cfg.port.device, cfg.port.ip, cfg.dataplane.cores
    );
    println!("EAL arguments: {}", plan.args.join(" "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::memif_socket_path;

    #[test]
    fn only_the_memif_server_removes_its_socket() {
        let dev = |r: &str| format!("net_memif0,{r}id=0,socket=/tmp/m.sock,socket-abstract=no");
        assert_eq!(
            memif_socket_path(&dev("role=server,")).as_deref(),
            Some("/tmp/m.sock")
        );
        assert_eq!(memif_socket_path(&dev("")).as_deref(), Some("/tmp/m.sock"));
        assert_eq!(memif_socket_path(&dev("role=client,")), None);
        assert_eq!(memif_socket_path("net_af_packet0,iface=eth0"), None);
    }
}
