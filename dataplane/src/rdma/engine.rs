//! The per-thread RDMA engine: executes the control thread's commands, owns this thread's
//! iWARP connections, polls the bound QPs' work queues, and routes events.
//!
//! The engine never touches DPDK: it works on a TCP [`Endpoint`] through [`Net`], so the same
//! code runs in the dataplane (over mbufs) and in unit tests (over `Vec<u8>` segments between
//! two engines in memory).
//!
//! Call order per poll-loop iteration (by the netstack):
//! 1. [`Engine::poll`]: commands, pending active opens, the diagnostic service, QPs whose
//!    queues have work (their connections are pushed to `dirty`);
//! 2. for each new TCP connection, [`Engine::on_accept`];
//! 3. for each connection to service, [`Engine::service`] (an RDMA connection is serviced by
//!    the engine only), then TCP transmits, reading from [`Engine::log`];
//! 4. [`Engine::poll_timeout`] to arm the connection's timer; [`Engine::on_reaped`] once TCP
//!    dropped the connection.

// Keys are our own handles and numbers (never chosen by a peer): FxHash, not SipHash, on
// the per-step lookups (issue #8, bar (b)).
use rustc_hash::FxHashMap as HashMap;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use iwarp::mpa::startup::Role;
use netcore::{Duration, Instant};
use tcp::iface::Resolve;
use tcp::{ConnHandle, Connection, Endpoint, SegBuf};

use super::api::{
    CmdQueue, ConnectFailure, CrcMode, EngineCmd, EngineConfig, EngineEvent, MpaPolicy, QpBinding,
    RdmaSetup,
};
use super::conn::{Ctx, Owner, RdmaConn};
use super::diag::DiagRdma;
use super::ids::{ConnId, IdGen, ListenerId, QpNum};
use super::memory::MemTable;
use super::queues::{CqMap, FlushedQp, QueueIo};
use super::stats::SharedRdmaStats;
use super::txlog::{LogMode, TxLog};

/// What the engine needs from the network stack of its thread.
pub trait Net<B> {
    /// The thread's TCP endpoint.
    fn tcp(&mut self) -> &mut Endpoint<B>;
    /// Next-hop resolution for an active open.
    fn resolve(&mut self, now: Instant, ip: [u8; 4]) -> Resolve;
    /// A source port for an active open to `remote` (with RSS: one whose replies reach this
    /// thread's queue); 0 lets TCP choose.
    fn source_port(&mut self, remote: SocketAddrV4) -> u16;
}

#[derive(Debug)]
struct Listener {
    id: ListenerId,
    policy: MpaPolicy,
    owner: Owner,
}

#[derive(Debug)]
struct PendingConnect {
    conn: ConnId,
    remote: SocketAddrV4,
    policy: MpaPolicy,
    private_data: Vec<u8>,
    qp: QpBinding,
    owner: Owner,
    since: Instant,
}

/// How long an active open waits for next-hop resolution.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often QP counters are published for the stats file.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// One dataplane thread's RDMA engine (see the module docs).
#[derive(Debug)]
pub struct Engine {
    thread: usize,
    mem: Arc<MemTable>,
    ids: Arc<IdGen>,
    cmds: Arc<CmdQueue>,
    events: Sender<EngineEvent>,
    cfg: EngineConfig,
    stats: Arc<SharedRdmaStats>,
    conns: HashMap<ConnHandle, RdmaConn>,
    by_id: HashMap<ConnId, ConnHandle>,
    by_qp: HashMap<QpNum, ConnHandle>,
    listeners: HashMap<u16, Listener>,
    connecting: Vec<PendingConnect>,
    cqs: CqMap,
    /// QPs in ERROR whose connection ended (or never came up): what is posted to them
    /// completes flushed until `DestroyQp`.
    flushed: HashMap<QpNum, FlushedQp>,
    out: Vec<(Owner, EngineEvent)>,
    cmd_buf: Vec<EngineCmd>,
    /// The diagnostic RDMA service, when configured.
    pub diag: Option<DiagRdma>,
    sums: bool,
    /// Payload is copied into each frame (a device without multi-segment TX): see
    /// [`Engine::set_copy_payload`].
    copy_payload: bool,
    next_publish: Instant,
}

impl Engine {
    /// The engine of the thread `setup` belongs to. `zero_copy`: transmit payload by reference
    /// (header-only TCP transmission, region bytes attached as external mbufs) and precompute
    /// each FPDU's TCP checksum sum in its CRC pass.
    pub fn new(setup: RdmaSetup, diag: Option<DiagRdma>, zero_copy: bool) -> Self {
        Engine {
            thread: setup.thread,
            mem: setup.mem,
            ids: setup.ids,
            cmds: setup.cmds,
            events: setup.events,
            cfg: setup.cfg,
            stats: setup.stats,
            conns: HashMap::default(),
            by_id: HashMap::default(),
            by_qp: HashMap::default(),
            listeners: HashMap::default(),
            connecting: Vec::new(),
            cqs: CqMap::default(),
            flushed: HashMap::default(),
            out: Vec::new(),
            cmd_buf: Vec::new(),
            diag,
            sums: zero_copy,
            copy_payload: false,
            next_publish: Instant::ZERO,
        }
    }

    /// Whether the engine builds its connections' frames itself ([`Engine::new`]): payload by
    /// reference, or copied when [`Engine::copy_payload`].
    pub fn zero_copy(&self) -> bool {
        self.sums
    }

    /// For a device without multi-segment TX (net_af_xdp, net_af_packet): a chain would be
    /// copied into one buffer before the device sees it, so the frames of a zero-copy engine
    /// take their payload by copy into the header's mbuf at once, and the TCP checksum is
    /// the sum of the copied bytes (no sum in the FPDU's CRC pass). Also for a device that
    /// copies frames with the CPU anyway (net_memif: one buffer to copy instead of a chain of
    /// three after a pin and two more mbufs per segment; `[mpa] tx_payload`, issue #8). Set
    /// before connections open.
    pub fn set_copy_payload(&mut self, on: bool) {
        self.copy_payload = on;
    }

    /// Whether payload is copied into each frame ([`Engine::set_copy_payload`]).
    pub fn copy_payload(&self) -> bool {
        self.copy_payload
    }

    /// How the FPDU logs build records: TCP checksum sums precomputed for payload by
    /// reference; CRCs computed over the frame's copy when the payload is copied.
    fn log_mode(&self) -> LogMode {
        LogMode {
            sums: self.sums && !self.copy_payload,
            defer_crc: self.sums && self.copy_payload,
        }
    }

    /// The memory table.
    pub fn mem(&self) -> &Arc<MemTable> {
        &self.mem
    }

    /// Whether `h` is an RDMA connection of this engine.
    pub fn owns(&self, h: ConnHandle) -> bool {
        self.conns.contains_key(&h)
    }

    /// Connections alive.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The stream bytes of `h`, for TCP to (re)transmit.
    pub fn log(&mut self, h: ConnHandle) -> Option<&mut TxLog> {
        self.conns.get_mut(&h).map(|c| c.log())
    }

    /// When `h` needs servicing without TCP input.
    pub fn poll_timeout(&self, h: ConnHandle) -> Option<Instant> {
        self.conns.get(&h).and_then(|c| c.poll_timeout(&self.cfg))
    }

    /// Whether a connection wants the next loop step at once rather than at its timers (an
    /// ACK owed at the next step): for simulations that jump from timer to timer.
    #[cfg(test)]
    pub(crate) fn wants_step(&self) -> bool {
        self.conns.values().any(RdmaConn::ack_owed)
    }

    /// Commands, pending opens, the diagnostic service, QPs with work: connections to service
    /// are pushed to `dirty`.
    pub fn poll<B: SegBuf>(
        &mut self,
        now: Instant,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        let mut cmds = std::mem::take(&mut self.cmd_buf);
        self.cmds.drain(&mut cmds);
        // Each loop step: nothing is set up for an empty list (a `drain` and its drop are
        // calls, issue #8).
        if !cmds.is_empty() {
            for cmd in cmds.drain(..) {
                self.execute(now, cmd, Owner::Control, net, dirty);
            }
        }
        if let Some(d) = &mut self.diag {
            d.step(now, &mut cmds);
        }
        if !cmds.is_empty() {
            for cmd in cmds.drain(..) {
                self.execute(now, cmd, Owner::Diag, net, dirty);
            }
        }
        self.cmd_buf = cmds;
        self.open_pending(now, net, dirty);
        for (h, c) in &mut self.conns {
            if c.has_work() {
                dirty.push(*h);
            }
        }
        if !self.flushed.is_empty() {
            self.flush_dead();
        }
        self.route(now);
        if now >= self.next_publish {
            self.next_publish = now + PUBLISH_EVERY;
            self.publish();
        }
    }

    /// Complete what was posted to QPs without a connection, flushed.
    fn flush_dead(&mut self) {
        let cqs = &mut self.cqs;
        let mut corrupt = Vec::new();
        for (qp, f) in &mut self.flushed {
            if let Err(e) = f.step(*qp, cqs) {
                tracing::warn!(%qp, "work queue of a QP in ERROR corrupt: {e}; no more flushes");
                corrupt.push(*qp);
            }
        }
        for qp in corrupt {
            if let Some(f) = self.flushed.remove(&qp) {
                f.unbind(cqs);
            }
        }
    }

    /// Flush the queues of a QP no connection runs from now on, until `DestroyQp`.
    fn flush_binding(&mut self, b: &QpBinding) {
        match QueueIo::bind(&b.queues, self.thread, &mut self.cqs) {
            Ok(io) => {
                let f = FlushedQp::new(io, Default::default());
                if let Some(old) = self.flushed.insert(b.qp, f) {
                    old.unbind(&mut self.cqs);
                }
            }
            Err(e) => tracing::warn!(qp = %b.qp, "cannot bind the QP's queues to flush them: {e}"),
        }
    }

    /// Keep flushing the queues of `h`'s QP once its connection has ended (its terminal event
    /// is out) or is gone (`reaped`).
    fn retire_queues(&mut self, now: Instant, h: ConnHandle, reaped: bool) {
        let Some(rc) = self.conns.get_mut(&h) else {
            return;
        };
        if !reaped && !rc.finished() {
            return;
        }
        let owner = rc.owner;
        let Some((qp, mut f)) = rc.take_queues(now, self.thread, &mut self.cqs) else {
            return;
        };
        if owner == Owner::Diag {
            // The diagnostic service never posts to a dead QP (nor destroys QPs): hand it
            // what is left and let the queues go.
            if let Err(e) = f.step(qp, &mut self.cqs) {
                tracing::debug!(%qp, "diagnostic QP's last completions: {e}");
            }
            f.unbind(&mut self.cqs);
            return;
        }
        if let Some(old) = self.flushed.insert(qp, f) {
            old.unbind(&mut self.cqs);
        }
    }

    /// Publish every QP's counters.
    pub fn publish(&self) {
        for c in self.conns.values() {
            if let Some((qp, s)) = c.qp_stats() {
                self.stats.publish(qp, s);
            }
        }
    }

    fn ctx(&mut self) -> (Ctx<'_>, &mut HashMap<ConnHandle, RdmaConn>) {
        (
            Ctx {
                thread: self.thread,
                cfg: &self.cfg,
                mem: &self.mem,
                cqs: &mut self.cqs,
                out: &mut self.out,
            },
            &mut self.conns,
        )
    }

    fn execute<B: SegBuf>(
        &mut self,
        now: Instant,
        cmd: EngineCmd,
        owner: Owner,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        match cmd {
            EngineCmd::Listen {
                listener,
                port,
                policy,
            } => {
                net.tcp().listen(port);
                self.listeners.insert(
                    port,
                    Listener {
                        id: listener,
                        policy,
                        owner,
                    },
                );
            }
            EngineCmd::Unlisten { listener } => {
                let ports: Vec<u16> = self
                    .listeners
                    .iter()
                    .filter(|(_, l)| l.id == listener)
                    .map(|(p, _)| *p)
                    .collect();
                for p in ports {
                    self.listeners.remove(&p);
                    net.tcp().unlisten(p);
                }
            }
            EngineCmd::Connect {
                conn,
                remote,
                policy,
                private_data,
                qp,
            } => self.connecting.push(PendingConnect {
                conn,
                remote,
                policy,
                private_data,
                qp,
                owner,
                since: now,
            }),
            EngineCmd::Accept {
                conn,
                qp,
                private_data,
                ird,
                ord,
                crc,
            } => self.accept(now, conn, qp, &private_data, (ird, ord), crc, net, dirty),
            EngineCmd::Reject { conn, private_data } => {
                if let Some(&h) = self.by_id.get(&conn)
                    && let (Some(c), Some(rc)) = (net.tcp().conn_mut(h), self.conns.get_mut(&h))
                {
                    rc.reject(&private_data, c);
                    dirty.push(h);
                }
            }
            EngineCmd::Disconnect { conn } => {
                if let Some(p) = self.connecting.iter().position(|p| p.conn == conn) {
                    let p = self.connecting.remove(p);
                    self.out.push((
                        p.owner,
                        EngineEvent::ConnectFailed {
                            conn,
                            reason: ConnectFailure::Aborted,
                        },
                    ));
                    return;
                }
                if let Some(&h) = self.by_id.get(&conn)
                    && let Some(c) = net.tcp().conn_mut(h)
                {
                    let (mut ctx, conns) = self.ctx();
                    if let Some(rc) = conns.get_mut(&h) {
                        rc.disconnect(now, c, &mut ctx);
                    }
                    dirty.push(h);
                }
            }
            EngineCmd::DestroyQp { qp } => {
                // A connect not yet under way ends silently: the control thread closed the
                // CM id with the QP (as for a connection, `RdmaConn::report`).
                if let Some(p) = self.connecting.iter().position(|p| p.qp.qp == qp) {
                    self.connecting.remove(p);
                }
                if let Some(h) = self.by_qp.remove(&qp)
                    && let Some(c) = net.tcp().conn_mut(h)
                {
                    let (mut ctx, conns) = self.ctx();
                    let last = conns
                        .get_mut(&h)
                        .and_then(|rc| rc.destroy_qp(now, c, &mut ctx));
                    // Its counters as they are now (the periodic publication may be up to
                    // `PUBLISH_EVERY` old): they go out with `QpReleased`.
                    if let Some((n, s)) = last {
                        self.stats.publish(n, &s);
                    }
                    dirty.push(h);
                }
                if let Some(f) = self.flushed.remove(&qp) {
                    f.unbind(&mut self.cqs);
                }
                let counters = self.stats.take(qp).map(Box::new);
                self.out
                    .push((owner, EngineEvent::QpReleased { qp, counters }));
            }
            EngineCmd::FlushQp { qp } => self.flush_qp(now, qp, net, dirty),
            EngineCmd::FlushUnbound { qp } => self.flush_binding(&qp),
            EngineCmd::InjectFault { qp, fault } => {
                match self.by_qp.get(&qp).and_then(|h| self.conns.get_mut(h)) {
                    Some(rc) => {
                        rc.inject_fault(fault);
                        dirty.extend(self.by_qp.get(&qp));
                    }
                    None => tracing::warn!(%qp, "fault for a QP not on this thread: ignored"),
                }
            }
        }
    }

    fn flush_qp<B: SegBuf>(
        &mut self,
        now: Instant,
        qp: QpNum,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        if let Some(p) = self.connecting.iter().position(|p| p.qp.qp == qp) {
            // Not even connecting yet: its queues are flushed from now on.
            let p = self.connecting.remove(p);
            self.flush_binding(&p.qp);
            self.out.push((
                p.owner,
                EngineEvent::ConnectFailed {
                    conn: p.conn,
                    reason: ConnectFailure::Aborted,
                },
            ));
            return;
        }
        let Some(&h) = self.by_qp.get(&qp) else {
            tracing::info!(%qp, "flush for a QP not on this thread: ignored");
            return;
        };
        if let Some(c) = net.tcp().conn_mut(h) {
            let (mut ctx, conns) = self.ctx();
            if let Some(rc) = conns.get_mut(&h) {
                rc.flush_qp(now, c, &mut ctx);
            }
            // A QP still in MPA startup is abandoned at once: its queues flush from now on.
            self.retire_queues(now, h, false);
            dirty.push(h);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn accept<B: SegBuf>(
        &mut self,
        now: Instant,
        conn: ConnId,
        qp: QpBinding,
        private_data: &[u8],
        (ird, ord): (u16, u16),
        crc: Option<CrcMode>,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        let Some(&h) = self.by_id.get(&conn) else {
            tracing::info!(%conn, "accept for a connection that is gone");
            self.out.push((
                Owner::Control,
                EngineEvent::ConnectFailed {
                    conn,
                    reason: ConnectFailure::Aborted,
                },
            ));
            return;
        };
        let Some(c) = net.tcp().conn_mut(h) else {
            return;
        };
        let num = qp.qp;
        let (mut ctx, conns) = self.ctx();
        let Some(rc) = conns.get_mut(&h) else {
            return;
        };
        match rc.accept(now, qp, private_data, (ird, ord), crc, c, &mut ctx) {
            Ok(()) => {
                self.by_qp.insert(num, h);
            }
            Err(e) => tracing::info!(%conn, "accept refused: {e}"),
        }
        dirty.push(h);
    }

    fn open_pending<B: SegBuf>(
        &mut self,
        now: Instant,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        let mut i = 0;
        while i < self.connecting.len() {
            let p = &self.connecting[i];
            let fail = match net.resolve(now, p.remote.ip().octets()) {
                Resolve::Known(_) => None,
                Resolve::Pending if now < p.since + RESOLVE_TIMEOUT => {
                    i += 1;
                    continue;
                }
                Resolve::Pending | Resolve::Failed | Resolve::NoRoute => {
                    Some(ConnectFailure::Unreachable)
                }
            };
            let p = self.connecting.remove(i);
            if let Some(reason) = fail {
                self.out.push((
                    p.owner,
                    EngineEvent::ConnectFailed {
                        conn: p.conn,
                        reason,
                    },
                ));
                continue;
            }
            self.open(now, p, net, dirty);
        }
    }

    fn open<B: SegBuf>(
        &mut self,
        now: Instant,
        p: PendingConnect,
        net: &mut dyn Net<B>,
        dirty: &mut Vec<ConnHandle>,
    ) {
        let port = net.source_port(p.remote);
        let remote = (*p.remote.ip(), p.remote.port());
        let h = match net.tcp().connect(now, port, remote) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(conn = %p.conn, ?e, "connect failed");
                self.out.push((
                    p.owner,
                    EngineEvent::ConnectFailed {
                        conn: p.conn,
                        reason: ConnectFailure::NoResources,
                    },
                ));
                return;
            }
        };
        let Some(c) = net.tcp().conn_mut(h) else {
            return;
        };
        let num = p.qp.qp;
        let rc = RdmaConn::initiator(
            now,
            p.conn,
            p.owner,
            &p.policy,
            &p.private_data,
            p.qp,
            c,
            self.log_mode(),
        );
        match rc {
            Ok(rc) => {
                self.by_id.insert(p.conn, h);
                self.by_qp.insert(num, h);
                self.conns.insert(h, rc);
                dirty.push(h);
            }
            Err(e) => {
                c.abort();
                self.out.push((
                    p.owner,
                    EngineEvent::ConnectFailed {
                        conn: p.conn,
                        reason: ConnectFailure::Mpa(e),
                    },
                ));
            }
        }
    }

    /// A TCP connection was accepted: if it arrived on one of our listeners, it becomes an
    /// iWARP connection (MPA responder). Returns whether the engine took it.
    pub fn on_accept<B: SegBuf>(
        &mut self,
        now: Instant,
        h: ConnHandle,
        c: &mut Connection<B>,
    ) -> bool {
        let Some(l) = self.listeners.get(&c.local().1) else {
            return false;
        };
        let id = self.ids.conn();
        match RdmaConn::responder(now, id, l.owner, l.id, &l.policy, c, self.log_mode()) {
            Ok(rc) => {
                self.by_id.insert(id, h);
                self.conns.insert(h, rc);
            }
            Err(e) => {
                tracing::warn!(?e, "cannot start MPA on an accepted connection");
                c.abort();
            }
        }
        true
    }

    /// Service connection `h` (TCP events, data, work, timers) if it is one of the engine's;
    /// returns whether it is (one lookup per frame where [`Engine::owns`] and this took two).
    pub fn service<B: SegBuf>(
        &mut self,
        now: Instant,
        h: ConnHandle,
        c: &mut Connection<B>,
    ) -> bool {
        let (mut ctx, conns) = self.ctx();
        let Some(rc) = conns.get_mut(&h) else {
            self.route(now);
            return false;
        };
        rc.service(now, c, &mut ctx);
        let (qp, finished) = (rc.live_qp_num(), rc.finished());
        // Not once destroyed: the control thread may give the number to a new QP.
        if let Some(qp) = qp {
            self.by_qp.entry(qp).or_insert(h);
        }
        if finished {
            self.retire_queues(now, h, false);
        }
        self.route(now);
        true
    }

    /// TCP dropped connection `h`: forget it (its QP's queues are released).
    pub fn on_reaped(&mut self, now: Instant, h: ConnHandle) {
        // The handle may be reused by a later connection: no QP may point at it any more.
        self.by_qp.retain(|_, c| *c != h);
        self.retire_queues(now, h, true);
        let Some(rc) = self.conns.remove(&h) else {
            return;
        };
        self.by_id.remove(&rc.id);
        if let Some((qp, s)) = rc.qp_stats() {
            self.stats.publish(qp, s);
        }
        if !rc.finished() && !rc.qp_destroyed() {
            // Ended without the QP seeing it (e.g. reaped while negotiating as responder).
            if rc.role == Role::Initiator && rc.run.is_none() {
                self.out.push((
                    rc.owner,
                    EngineEvent::ConnectFailed {
                        conn: rc.id,
                        reason: ConnectFailure::Aborted,
                    },
                ));
            } else if rc.run.is_some() {
                self.out.push((
                    rc.owner,
                    EngineEvent::Disconnected {
                        conn: rc.id,
                        qp: rc.qp_num(),
                    },
                ));
            }
        }
        self.route(now);
    }

    /// Deliver events: to the control thread or the diagnostic service.
    fn route(&mut self, now: Instant) {
        if self.out.is_empty() {
            return;
        }
        for (owner, ev) in self.out.drain(..) {
            match (owner, &mut self.diag) {
                (Owner::Diag, Some(d)) => d.on_event(now, ev),
                (Owner::Diag, None) => {}
                (Owner::Control, _) => {
                    if self.events.send(ev).is_err() {
                        tracing::debug!("control thread gone; event dropped");
                    }
                }
            }
        }
    }
}
