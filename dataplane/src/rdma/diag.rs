//! The diagnostic RDMA service: an in-process client of the engine, so the iWARP data path can
//! be tested end to end between two `iwarpd` (and measured) without `verbs`.
//!
//! - **Sink/responder** (`[diag] rdma_port`): accepts every MPA connection on the port. Per
//!   connection it registers a Write sink (followed by an unregistered guard page of 0xA5
//!   bytes), a Read source filled with a seeded pattern, receive buffers and a reply buffer,
//!   and announces the sink and source in the MPA Reply's private data. For every check
//!   message it computes the SHA-256 of what the operation left in its memory and sends it
//!   back. A QP that dies reports whether the guard page is intact.
//! - **Generator** (`[diag] rdma_connect`): connects, then runs `rdma_ops` x `rdma_sizes` x
//!   `rdma_iterations`: an RDMA Write into the sink, a Send into a receive buffer, or an RDMA
//!   Read of the source, each followed by a check message (a Send with Solicited Event:
//!   operation, length, the generator's SHA-256) and the sink's reply. Both ends print one line
//!   per operation with both digests; `oob` writes across the end of the sink and expects the
//!   RDMAP/DDP TERMINATE instead.
//!
//! The generator also runs Send with Invalidate, Send with Solicited Event, Write with
//! Immediate, FetchAdd and CompareSwap (each checked by the sink: the invalidated STag, the
//! SE flag, the immediate, the atomic word), and the test-only fault ops (`badcrc`,
//! `truncate`, `fin`, `rst`: a Write whose first FPDU is broken by
//! [`EngineCmd::InjectFault`]; both ends print how the connection ended and how many work
//! requests were flushed).
//!
//! Wire formats of the service (little endian): private data `"IWD1", sink stag u32, sink to
//! u64, source stag u32, source to u64, buffer u64, atomic stag u32, atomic to u64,
//! invalidatable stag u32`; check `"IWDC", op u8, 3 pad, len u64, sha [32]` (atomics: the
//! expected word in the first 8 bytes of `sha`); reply `"IWDR", ok u8, 3 pad, len u64,
//! sha [32]`.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::Arc;

use iwarp::rdmap::{Completion, CqOpcode, RecvRequest, Sge, WcStatus, WorkRequest, WrOpcode};
use iwarp::stag::{Access, PdId, Stag};
use netcore::{Duration, Instant};
use sha2::{Digest, Sha256};

use super::api::{EngineCmd, EngineEvent, LocalQueues, MpaPolicy, QpBinding, QpQueues, TxFault};
use super::ids::{ClientId, ConnId, IdGen, QpNum};
use super::memory::{HeapMemory, MemTable, MrKeys, MrRequest};
use crate::diag::{Pattern, hex};

/// The client id of the diagnostic service's regions and QPs.
pub const DIAG_CLIENT: ClientId = ClientId(u32::MAX);
const PD: PdId = PdId(1);
/// QP numbers of the diagnostic service (far from the control thread's, which count up from 1).
const QP_BASE: u32 = 0xfff0_0000;
const GUARD: usize = 4096;
const SMALL: usize = 4096;
const MSG: usize = 64;
const RECV_SLOTS: usize = 2;
const REPLY_SLOTS: usize = 4;
const TO_BASE: u64 = 0x1000_0000_0000;

/// One operation of the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagOp {
    /// RDMA Write into the sink.
    Write,
    /// Send into a posted receive.
    Send,
    /// RDMA Read of the source.
    Read,
    /// RDMA Write across the end of the sink: expects a TERMINATE.
    Oob,
    /// Send with Invalidate of the sink's invalidatable STag (the sink checks the completion
    /// names it, then revalidates it).
    SendInv,
    /// Send with Solicited Event (the sink checks the completion's flag).
    SendSe,
    /// RFC 7306 Write with Immediate Data into the sink (the sink checks the immediate).
    WriteImm,
    /// RFC 7306 FetchAdd on the sink's atomic word (8 bytes; the size is ignored).
    FetchAdd,
    /// RFC 7306 CompareSwap on the sink's atomic word (8 bytes; the size is ignored).
    CmpSwap,
    /// A Write of the size whose first FPDU is broken by a test-only fault switch
    /// ([`TxFault`]); the connection must end (then the generator reconnects).
    Fault(TxFault),
}

/// Names of the operations, by wire code (the check message's `op`).
const OP_NAMES: [&str; 10] = [
    "write",
    "send",
    "read",
    "oob",
    "send_inv",
    "send_se",
    "write_imm",
    "fetch_add",
    "cmp_swap",
    "fault",
];

impl DiagOp {
    /// Every name [`DiagOp::parse`] takes (`[diag] rdma_ops`).
    pub const NAMES: [&'static str; 13] = [
        "write",
        "send",
        "read",
        "oob",
        "send_inv",
        "send_se",
        "write_imm",
        "fetch_add",
        "cmp_swap",
        "badcrc",
        "truncate",
        "fin",
        "rst",
    ];

    /// Parse `write`, `send`, `read`, `oob`, `send_inv`, `send_se`, `write_imm`,
    /// `fetch_add`, `cmp_swap`, or a fault name (`badcrc`, `truncate`, `fin`, `rst`).
    pub fn parse(s: &str) -> Option<DiagOp> {
        let op = match s {
            "write" => DiagOp::Write,
            "send" => DiagOp::Send,
            "read" => DiagOp::Read,
            "oob" => DiagOp::Oob,
            "send_inv" => DiagOp::SendInv,
            "send_se" => DiagOp::SendSe,
            "write_imm" => DiagOp::WriteImm,
            "fetch_add" => DiagOp::FetchAdd,
            "cmp_swap" => DiagOp::CmpSwap,
            f => DiagOp::Fault(TxFault::parse(f)?),
        };
        Some(op)
    }
    fn name(self) -> &'static str {
        match self {
            DiagOp::Fault(f) => f.name(),
            op => OP_NAMES[usize::from(op.code())],
        }
    }
    fn code(self) -> u8 {
        match self {
            DiagOp::Write => 0,
            DiagOp::Send => 1,
            DiagOp::Read => 2,
            DiagOp::Oob => 3,
            DiagOp::SendInv => 4,
            DiagOp::SendSe => 5,
            DiagOp::WriteImm => 6,
            DiagOp::FetchAdd => 7,
            DiagOp::CmpSwap => 8,
            DiagOp::Fault(_) => 9,
        }
    }
    fn is_atomic(self) -> bool {
        matches!(self, DiagOp::FetchAdd | DiagOp::CmpSwap)
    }
}

/// The sink's atomic word at connect time; FetchAdd adds `ATOM_ADD`, CompareSwap swaps in
/// the known value xor `ATOM_XOR`.
const ATOM_INIT: u64 = 0x1122_3344_5566_7788;
const ATOM_ADD: u64 = 0x0101_0101_0000_0001;
const ATOM_XOR: u64 = 0xffff_0000_ffff_0000;

/// The immediate a `write_imm` of `len` bytes carries.
fn imm_for(len: u64) -> u64 {
    0x1a2b_0000_0000_0000 ^ len
}

/// Configuration of the service.
#[derive(Debug, Clone)]
pub struct DiagRdmaConfig {
    /// Sink/responder port.
    pub listen_port: Option<u16>,
    /// Generator target.
    pub connect: Option<SocketAddrV4>,
    /// Operations, in order.
    pub ops: Vec<DiagOp>,
    /// Sizes, in order (each operation runs at each size).
    pub sizes: Vec<u64>,
    /// Repetitions of the whole plan.
    pub iterations: u32,
    /// Buffer size of the sink, source and receives (the largest operation).
    pub buffer: usize,
    /// MPA policy (both roles).
    pub policy: MpaPolicy,
    /// Compute SHA-256 digests (off for throughput runs: lengths are still checked).
    pub sha256: bool,
    /// Stop the daemon when the generator is done.
    pub exit_when_done: bool,
    /// How long the generator keeps retrying to connect.
    pub connect_timeout: Duration,
}

/// What the service did (for the exit status and the report).
#[derive(Debug, Clone, Default)]
pub struct DiagRdmaReport {
    /// Operations that checked out.
    pub ok: u32,
    /// Operations that did not.
    pub failed: u32,
    /// The generator finished (or gave up).
    pub done: bool,
    /// Payload bytes moved by the generator's operations.
    pub bytes: u64,
    /// Seconds spent in operations (post to reply).
    pub secs: f64,
    /// Per-operation totals: (op, bytes, seconds).
    pub per_op: Vec<(String, u64, f64)>,
}

fn sha_of(heap: &HeapMemory, off: usize, len: usize) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        heap.copy_out(off + done, &mut buf[..n]);
        h.update(&buf[..n]);
        done += n;
    }
    h.finalize().into()
}

fn fill_pattern(heap: &HeapMemory, off: usize, len: usize, seed: u64) {
    let p = Pattern::new(seed);
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len());
        p.fill(done as u64, &mut buf[..n]);
        heap.fill(off + done, &buf[..n]);
        done += n;
    }
}

fn register(
    table: &MemTable,
    heap: &Arc<HeapMemory>,
    off: usize,
    len: usize,
    access: Access,
) -> Option<MrKeys> {
    table
        .register(MrRequest {
            owner: DIAG_CLIENT,
            pd: PD,
            mem: heap.clone(),
            offset: off,
            len,
            base_to: TO_BASE + off as u64,
            access,
            remote_invalidate: false,
        })
        .ok()
}

fn msg(magic: &[u8; 4], code: u8, len: u64, sha: &[u8; 32]) -> [u8; MSG] {
    let mut m = [0u8; MSG];
    m[..4].copy_from_slice(magic);
    m[4] = code;
    m[8..16].copy_from_slice(&len.to_le_bytes());
    m[16..48].copy_from_slice(sha);
    m
}

fn parse_msg(b: &[u8], magic: &[u8; 4]) -> Option<(u8, u64, [u8; 32])> {
    if b.len() < 48 || &b[..4] != magic {
        return None;
    }
    let len = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let sha: [u8; 32] = b[16..48].try_into().ok()?;
    Some((b[4], len, sha))
}

/// A sink connection's memory: `[sink | guard | source | recv slots | reply]`.
#[derive(Debug)]
struct Sink {
    qp: QpNum,
    queues: LocalQueues,
    heap: Arc<HeapMemory>,
    buffer: usize,
    keys: Vec<MrKeys>,
    recv: MrKeys,
    reply: MrKeys,
    /// The invalidatable region (over the atomic word's bytes).
    inv: MrKeys,
    /// The last data Send: length, digest, Solicited Event, STag it invalidated.
    last_send: Option<(u64, [u8; 32], bool, Option<Stag>)>,
    /// The last Immediate Data received.
    last_imm: Option<u64>,
}

impl Sink {
    fn sink_off(&self) -> usize {
        0
    }
    fn source_off(&self) -> usize {
        self.buffer + GUARD
    }
    fn recv_off(&self, slot: usize) -> usize {
        2 * self.buffer + GUARD + slot * self.buffer
    }
    fn reply_off(&self) -> usize {
        (2 + RECV_SLOTS) * self.buffer + GUARD
    }
    fn atom_off(&self) -> usize {
        self.reply_off() + SMALL
    }
    fn atom_word(&self) -> u64 {
        let mut w = [0u8; 8];
        self.heap.copy_out(self.atom_off(), &mut w);
        u64::from_ne_bytes(w)
    }
    fn guard_intact(&self) -> bool {
        let mut g = vec![0u8; GUARD];
        self.heap.copy_out(self.buffer, &mut g);
        g.iter().all(|&b| b == 0xa5)
    }
    fn post_recv(&self, slot: usize) {
        self.queues.post_recv(RecvRequest {
            wr_id: slot as u64,
            sges: vec![Sge {
                mr: self.recv.lkey,
                offset: (slot * self.buffer) as u64,
                len: self.buffer as u32,
            }],
        });
    }
}

#[derive(Debug, Clone, Copy)]
struct PeerInfo {
    sink_stag: Stag,
    sink_to: u64,
    src_stag: Stag,
    src_to: u64,
    buffer: u64,
    /// Atomic word and invalidatable STag (absent from older sinks: 0).
    atom_stag: Stag,
    atom_to: u64,
    inv_stag: Stag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GenPhase {
    Idle,
    Connecting,
    Running,
    /// Waiting for the Read's completion (then the check goes out).
    WaitRead,
    /// Waiting for the sink's reply.
    WaitReply,
    /// Waiting for the TERMINATE an out-of-bounds Write must draw.
    WaitTerminate,
    /// A fault op: the fault is armed and the Write posted at the next step.
    ArmFault,
    /// A fault op: waiting for the connection to end.
    WaitFault,
    Done,
}

/// The generator's state: `[src | read sink | check msg | reply slots]`.
#[derive(Debug)]
struct Generator {
    remote: SocketAddrV4,
    conn: Option<ConnId>,
    qp: QpNum,
    queues: LocalQueues,
    heap: Arc<HeapMemory>,
    keys: Vec<MrKeys>,
    src: MrKeys,
    rsink: MrKeys,
    check: MrKeys,
    replies: MrKeys,
    buffer: usize,
    peer: Option<PeerInfo>,
    plan: Vec<(DiagOp, u64)>,
    idx: usize,
    phase: GenPhase,
    first_try: Instant,
    retry_at: Instant,
    op_started: Instant,
    local_sha: [u8; 32],
    /// What the generator checked itself (an atomic's original value) agreed.
    local_ok: bool,
    /// The sink's atomic word as the generator's operations left it.
    atom_known: u64,
    /// Work requests flushed during a fault op.
    flushed: u32,
    shas: HashMap<u64, [u8; 32]>,
}

/// The service (see the module docs).
#[derive(Debug)]
pub struct DiagRdma {
    cfg: DiagRdmaConfig,
    mem: Arc<MemTable>,
    ids: Arc<IdGen>,
    thread: usize,
    listening: bool,
    next_qp: u32,
    sinks: HashMap<ConnId, Sink>,
    gen_: Option<Generator>,
    /// Outcome so far.
    pub report: DiagRdmaReport,
    pending: Vec<EngineCmd>,
}

impl DiagRdma {
    /// The service of dataplane thread `thread`.
    pub fn new(cfg: DiagRdmaConfig, mem: Arc<MemTable>, ids: Arc<IdGen>, thread: usize) -> Self {
        DiagRdma {
            cfg,
            mem,
            ids,
            thread,
            listening: false,
            next_qp: QP_BASE + (thread as u32) * 0x1000,
            sinks: HashMap::new(),
            gen_: None,
            report: DiagRdmaReport::default(),
            pending: Vec::new(),
        }
    }

    /// Replace the generator's plan before it starts (tests).
    #[cfg(test)]
    pub(crate) fn set_plan(&mut self, ops: Vec<DiagOp>, sizes: Vec<u64>, iterations: u32) {
        self.cfg.ops = ops;
        self.cfg.sizes = sizes;
        self.cfg.iterations = iterations;
    }

    /// Whether the generator is done (true when there is none).
    pub fn done(&self) -> bool {
        self.cfg.connect.is_none() || self.report.done
    }

    fn qp_num(&mut self) -> QpNum {
        self.next_qp = self.next_qp.wrapping_add(1).max(QP_BASE);
        QpNum(self.next_qp)
    }

    fn binding(&mut self, queues: &LocalQueues) -> QpBinding {
        QpBinding {
            qp: self.qp_num(),
            owner: DIAG_CLIENT,
            pd: PD,
            sq_depth: 64,
            rq_depth: 64,
            queues: QpQueues::Local(queues.clone()),
        }
    }

    /// One step: issue commands (listen, connect, accept) and drive the generator.
    pub fn step(&mut self, now: Instant, cmds: &mut Vec<EngineCmd>) {
        cmds.append(&mut self.pending);
        if let (Some(port), false) = (self.cfg.listen_port, self.listening) {
            self.listening = true;
            cmds.push(EngineCmd::Listen {
                listener: self.ids.listener(),
                port,
                policy: self.cfg.policy.clone(),
            });
        }
        self.sink_poll(now);
        if self.cfg.connect.is_some() && self.gen_.is_none() && !self.report.done {
            self.gen_ = self.new_generator(now);
            if self.gen_.is_none() {
                self.finish_generator("cannot register the generator's memory");
            }
        }
        self.gen_step(now, cmds);
    }

    /// An event for one of the service's connections.
    pub fn on_event(&mut self, now: Instant, ev: EngineEvent) {
        match ev {
            EngineEvent::ConnectRequest {
                conn, peer, ird, ..
            } => self.sink_request(conn, peer, ird),
            EngineEvent::Established {
                conn,
                private_data,
                negotiated,
                ..
            } => {
                tracing::info!(%conn, ?negotiated, "diag rdma: established");
                if let Some(g) = &mut self.gen_
                    && g.conn == Some(conn)
                {
                    g.peer = parse_info(&private_data);
                    if g.peer.is_none_or(|p| (p.buffer as usize) < g.buffer) {
                        self.finish_generator("the sink's buffer is smaller than ours");
                        return;
                    }
                    g.phase = GenPhase::Running;
                    g.atom_known = ATOM_INIT;
                    for s in 0..REPLY_SLOTS {
                        g.post_reply_recv(s);
                    }
                    self.next_op(now);
                }
            }
            EngineEvent::Rejected { conn, .. } => self.gen_failed(now, conn, "rejected"),
            EngineEvent::ConnectFailed { conn, reason } => {
                self.gen_failed(now, conn, &format!("{reason:?}"))
            }
            EngineEvent::TerminateReceived { conn, code, .. } => {
                self.conn_ended(now, conn, "TerminateReceived", Some(code))
            }
            EngineEvent::QpError { conn, reason, .. } => {
                let why = format!("QpError({reason:?})").replace(' ', "");
                self.conn_ended(now, conn, &why, None)
            }
            EngineEvent::Disconnected { conn, .. } => {
                self.conn_ended(now, conn, "disconnected", None)
            }
            EngineEvent::QpReleased { .. } => {}
        }
    }

    fn sink_request(&mut self, conn: ConnId, peer: SocketAddrV4, ird: u16) {
        let b = self.cfg.buffer;
        let atom_off = (2 + RECV_SLOTS) * b + GUARD + SMALL;
        let heap = HeapMemory::new(atom_off + SMALL);
        heap.fill(b, &[0xa5; GUARD]);
        fill_pattern(&heap, b + GUARD, b, 0x5eed);
        heap.fill(atom_off, &ATOM_INIT.to_ne_bytes());
        let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
        let mut inv = register(&self.mem, &heap, atom_off, SMALL, rw | Access::REMOTE_WRITE);
        if let Some(k) = &inv {
            // Remote invalidation allowed: re-register with the flag (register() has none).
            let _ = self.mem.deregister(DIAG_CLIENT, k.lkey);
            inv = self
                .mem
                .register(MrRequest {
                    owner: DIAG_CLIENT,
                    pd: PD,
                    mem: heap.clone(),
                    offset: atom_off,
                    len: SMALL,
                    base_to: TO_BASE + atom_off as u64,
                    access: rw | Access::REMOTE_WRITE,
                    remote_invalidate: true,
                })
                .ok();
        }
        let regs = [
            register(&self.mem, &heap, 0, b, rw | Access::REMOTE_WRITE),
            register(&self.mem, &heap, b + GUARD, b, rw | Access::REMOTE_READ),
            register(&self.mem, &heap, 2 * b + GUARD, RECV_SLOTS * b, rw),
            register(&self.mem, &heap, (2 + RECV_SLOTS) * b + GUARD, SMALL, rw),
            register(
                &self.mem,
                &heap,
                atom_off,
                SMALL,
                rw | Access::REMOTE_ATOMIC,
            ),
            inv,
        ];
        let Some(keys) = regs.into_iter().collect::<Option<Vec<MrKeys>>>() else {
            tracing::warn!(%conn, "diag rdma: cannot register sink memory; rejecting");
            self.pending.push(EngineCmd::Reject {
                conn,
                private_data: Vec::new(),
            });
            return;
        };
        let queues = LocalQueues::default();
        let binding = self.binding(&queues);
        let sink = Sink {
            qp: binding.qp,
            queues,
            heap,
            buffer: b,
            recv: keys[2],
            reply: keys[3],
            inv: keys[5],
            keys: keys.clone(),
            last_send: None,
            last_imm: None,
        };
        for s in 0..RECV_SLOTS {
            sink.post_recv(s);
        }
        let mut pd = Vec::with_capacity(36);
        pd.extend_from_slice(b"IWD1");
        pd.extend_from_slice(&keys[0].rkey.0.to_le_bytes());
        pd.extend_from_slice(&TO_BASE.to_le_bytes());
        pd.extend_from_slice(&keys[1].rkey.0.to_le_bytes());
        pd.extend_from_slice(&(TO_BASE + (b + GUARD) as u64).to_le_bytes());
        pd.extend_from_slice(&(b as u64).to_le_bytes());
        pd.extend_from_slice(&keys[4].rkey.0.to_le_bytes());
        pd.extend_from_slice(&(TO_BASE + atom_off as u64).to_le_bytes());
        pd.extend_from_slice(&keys[5].rkey.0.to_le_bytes());
        tracing::info!(%conn, %peer, qp = %sink.qp, "diag rdma: sink accepts");
        self.sinks.insert(conn, sink);
        self.pending.push(EngineCmd::Accept {
            conn,
            qp: binding,
            private_data: pd,
            ird: ird.max(self.cfg.policy.ird),
            ord: self.cfg.policy.ord,
            crc: None,
        });
    }

    fn sink_poll(&mut self, _now: Instant) {
        let sha = self.cfg.sha256;
        for s in self.sinks.values_mut() {
            while let Some(c) = s.queues.poll_cq() {
                sink_completion(s, &c, sha, &self.mem);
            }
        }
    }

    fn conn_ended(
        &mut self,
        now: Instant,
        conn: ConnId,
        why: &str,
        code: Option<iwarp::error::TermCode>,
    ) {
        if let Some(s) = self.sinks.remove(&conn) {
            let intact = s.guard_intact();
            // The engine delivers a dying QP's flushed completions before its event.
            let flushed = std::iter::from_fn(|| s.queues.poll_cq())
                .filter(|c| c.status == WcStatus::Flushed)
                .count();
            println!(
                "iwarpd: rdma-sink conn={} qp={} ended={why} guard_intact={intact} flushed={flushed} terminate={}",
                conn.raw(),
                s.qp.0,
                code.map_or("none".to_string(), |c| c.to_string())
            );
            for k in &s.keys {
                let _ = self.mem.deregister(DIAG_CLIENT, k.lkey);
            }
            return;
        }
        let Some(g) = &mut self.gen_ else { return };
        if g.conn != Some(conn) {
            return;
        }
        if g.phase == GenPhase::WaitFault {
            self.fault_ended(now, why, code);
            return;
        }
        if g.phase == GenPhase::WaitTerminate {
            // RFC 5041 §7.2: a tagged Write beyond the STag's range is "base or bounds"
            // (DDP, tagged buffer error, 0x01).
            let ok = code.is_some_and(|c| (c.layer as u8, c.etype, c.ecode) == (1, 1, 1));
            println!(
                "iwarpd: rdma op=oob bytes={} terminate={} ok={ok}",
                g.plan.get(g.idx).map_or(0, |p| p.1),
                code.map_or("none".to_string(), |c| c.to_string())
            );
            if ok {
                self.report.ok += 1;
            } else {
                self.report.failed += 1;
            }
            g.idx += 1;
            g.conn = None;
            if g.idx < g.plan.len() {
                // Reconnect for the rest of the plan.
                g.phase = GenPhase::Idle;
                g.peer = None;
                return;
            }
            self.finish_generator("plan complete");
            return;
        }
        if g.phase != GenPhase::Done {
            self.report.failed += 1;
            self.finish_generator(&format!("connection ended: {why}"));
        }
    }

    fn gen_failed(&mut self, now: Instant, conn: ConnId, why: &str) {
        let timeout = self.cfg.connect_timeout;
        let Some(g) = &mut self.gen_ else { return };
        if g.conn != Some(conn) {
            return;
        }
        g.conn = None;
        if g.phase == GenPhase::Connecting && now < g.first_try + timeout {
            tracing::info!(why, "diag rdma: connect failed, retrying");
            g.phase = GenPhase::Idle;
            g.retry_at = now + Duration::from_millis(200);
            return;
        }
        self.report.failed += 1;
        self.finish_generator(&format!("connect failed: {why}"));
    }

    fn finish_generator(&mut self, why: &str) {
        if self.report.done {
            return;
        }
        self.report.done = true;
        let r = &self.report;
        let gbps = if r.secs > 0.0 {
            r.bytes as f64 * 8.0 / r.secs / 1e9
        } else {
            0.0
        };
        println!(
            "iwarpd: rdma-diag done ok={} failed={} bytes={} secs={:.3} gbps={gbps:.3} ({why})",
            r.ok, r.failed, r.bytes, r.secs
        );
        for (op, bytes, secs) in &r.per_op {
            let g = if *secs > 0.0 {
                *bytes as f64 * 8.0 / secs / 1e9
            } else {
                0.0
            };
            println!("iwarpd: rdma-diag op={op} bytes={bytes} secs={secs:.3} gbps={g:.3}");
        }
        if let Some(g) = &mut self.gen_ {
            g.phase = GenPhase::Done;
            if let Some(conn) = g.conn.take() {
                self.pending.push(EngineCmd::Disconnect { conn });
            }
            for k in g.keys.drain(..) {
                let _ = self.mem.deregister(DIAG_CLIENT, k.lkey);
            }
        }
        if self.cfg.exit_when_done {
            crate::signal::request_stop();
        }
    }

    fn new_generator(&mut self, now: Instant) -> Option<Generator> {
        let b = self.cfg.buffer;
        let heap = HeapMemory::new(2 * b + SMALL + REPLY_SLOTS * MSG);
        fill_pattern(&heap, 0, b, 0xfeed ^ self.thread as u64);
        let rw = Access::LOCAL_READ | Access::LOCAL_WRITE;
        let src = register(&self.mem, &heap, 0, b, rw)?;
        let rsink = register(&self.mem, &heap, b, b, rw)?;
        let check = register(&self.mem, &heap, 2 * b, SMALL, rw)?;
        let replies = register(&self.mem, &heap, 2 * b + SMALL, REPLY_SLOTS * MSG, rw)?;
        let mut plan = Vec::new();
        for _ in 0..self.cfg.iterations.max(1) {
            for &size in &self.cfg.sizes {
                for &op in &self.cfg.ops {
                    let size = if op.is_atomic() {
                        8
                    } else {
                        size.min(b as u64)
                    };
                    plan.push((op, size));
                }
            }
        }
        let queues = LocalQueues::default();
        Some(Generator {
            remote: self.cfg.connect?,
            conn: None,
            qp: self.qp_num(),
            queues,
            heap,
            keys: vec![src, rsink, check, replies],
            src,
            rsink,
            check,
            replies,
            buffer: b,
            peer: None,
            plan,
            idx: 0,
            phase: GenPhase::Idle,
            first_try: now,
            retry_at: now,
            op_started: now,
            local_sha: [0; 32],
            local_ok: true,
            atom_known: ATOM_INIT,
            flushed: 0,
            shas: HashMap::new(),
        })
    }

    fn gen_step(&mut self, now: Instant, cmds: &mut Vec<EngineCmd>) {
        let Some(g) = &mut self.gen_ else { return };
        if g.phase == GenPhase::Idle && now >= g.retry_at {
            let conn = self.ids.conn();
            g.conn = Some(conn);
            g.phase = GenPhase::Connecting;
            g.queues = LocalQueues::default();
            let queues = g.queues.clone();
            let remote = g.remote;
            let binding = self.binding(&queues);
            if let Some(g) = &mut self.gen_ {
                g.qp = binding.qp;
            }
            cmds.push(EngineCmd::Connect {
                conn,
                remote,
                policy: self.cfg.policy.clone(),
                private_data: Vec::new(),
                qp: binding,
            });
            return;
        }
        let Some(g) = &mut self.gen_ else { return };
        if g.phase == GenPhase::ArmFault {
            g.arm_fault(now, cmds);
        }
        let done: Vec<Completion> = std::iter::from_fn(|| g.queues.poll_cq()).collect();
        for c in done {
            let Some(phase) = self.gen_.as_ref().map(|g| g.phase) else {
                return;
            };
            if c.status != WcStatus::Success {
                tracing::warn!(?c, "diag rdma: work request failed");
                match phase {
                    GenPhase::WaitFault => {
                        if let Some(g) = &mut self.gen_ {
                            g.flushed += u32::from(c.status == WcStatus::Flushed);
                        }
                    }
                    GenPhase::WaitTerminate | GenPhase::Done => {}
                    _ => {
                        self.report.failed += 1;
                        self.finish_generator("work request failed");
                    }
                }
                continue;
            }
            match (c.opcode, phase) {
                (CqOpcode::Read, GenPhase::WaitRead) => self.read_done(now),
                (CqOpcode::FetchAdd | CqOpcode::CmpSwap, GenPhase::WaitRead) => {
                    self.atomic_done(now)
                }
                (CqOpcode::Recv, GenPhase::WaitReply) => self.reply(now, &c),
                _ => {}
            }
        }
    }

    /// An atomic completed: check the original value, then the sink checks its word.
    fn atomic_done(&mut self, _now: Instant) {
        let Some(g) = &mut self.gen_ else { return };
        let Some(&(op, size)) = g.plan.get(g.idx) else {
            return;
        };
        let mut w = [0u8; 8];
        g.heap.copy_out(g.buffer, &mut w);
        let orig = u64::from_ne_bytes(w);
        g.local_ok = orig == g.atom_known;
        if !g.local_ok {
            tracing::warn!(
                orig,
                known = g.atom_known,
                "diag rdma: atomic returned an unexpected value"
            );
        }
        g.atom_known = match op {
            DiagOp::FetchAdd => g.atom_known.wrapping_add(ATOM_ADD),
            _ => g.atom_known ^ ATOM_XOR,
        };
        g.local_sha = [0; 32];
        g.local_sha[..8].copy_from_slice(&g.atom_known.to_ne_bytes());
        g.send_check(op, size);
    }

    /// The connection of a fault op ended: report it, then reconnect for the rest.
    fn fault_ended(&mut self, now: Instant, why: &str, code: Option<iwarp::error::TermCode>) {
        use iwarp::error::{LlpError, TermCode};
        let Some(g) = &mut self.gen_ else { return };
        let Some(&(op, size)) = g.plan.get(g.idx) else {
            return;
        };
        g.flushed += std::iter::from_fn(|| g.queues.poll_cq())
            .filter(|c| c.status == WcStatus::Flushed)
            .count() as u32;
        // What the peer must answer (RFC 5044 §8: a bad CRC is an LLP error; the stream
        // cut or stalled inside an FPDU is "stream lost"); FIN and RST: any abortive end.
        let ok = match op {
            DiagOp::Fault(TxFault::BadCrc) => code == Some(TermCode::from(LlpError::Crc)),
            DiagOp::Fault(TxFault::Truncate) => code == Some(TermCode::from(LlpError::StreamLost)),
            _ => why != "disconnected",
        };
        println!(
            "iwarpd: rdma op={} bytes={size} ended={why} flushed={} secs={:.3} ok={ok} terminate={}",
            op.name(),
            g.flushed,
            (now - g.op_started).as_secs_f64(),
            code.map_or("none".to_string(), |c| c.to_string())
        );
        if ok {
            self.report.ok += 1;
        } else {
            self.report.failed += 1;
        }
        g.idx += 1;
        g.conn = None;
        g.flushed = 0;
        if g.idx < g.plan.len() {
            g.phase = GenPhase::Idle;
            g.peer = None;
            return;
        }
        self.finish_generator("plan complete");
    }

    fn next_op(&mut self, now: Instant) {
        let sha = self.cfg.sha256;
        let Some(g) = &mut self.gen_ else { return };
        let Some(&(op, size)) = g.plan.get(g.idx) else {
            self.finish_generator("plan complete");
            return;
        };
        let Some(peer) = g.peer else { return };
        g.op_started = now;
        g.local_ok = true;
        match op {
            DiagOp::Write | DiagOp::Oob | DiagOp::WriteImm => {
                let mut w = g.write_to_sink(&peer, size);
                if op == DiagOp::Oob {
                    // Straddle the end of the sink: half inside, half beyond.
                    w.remote_to = peer.sink_to + peer.buffer - size / 2;
                    g.queues.post_send(w);
                    g.phase = GenPhase::WaitTerminate;
                    return;
                }
                if op == DiagOp::WriteImm {
                    w.opcode = WrOpcode::WriteImm;
                    w.imm = imm_for(size);
                }
                g.queues.post_send(w);
                g.local_sha = g.src_sha(size, sha);
                g.send_check(op, size);
            }
            DiagOp::Send | DiagOp::SendInv | DiagOp::SendSe => {
                let opcode = if op == DiagOp::SendInv {
                    WrOpcode::SendInvalidate
                } else {
                    WrOpcode::Send
                };
                let mut w = WorkRequest::new(1, opcode, vec![g.src_sge(size)]);
                w.invalidate = peer.inv_stag;
                w.flags.solicited = op == DiagOp::SendSe;
                g.queues.post_send(w);
                g.local_sha = g.src_sha(size, sha);
                g.send_check(op, size);
            }
            DiagOp::Read => {
                let mut w = WorkRequest::new(
                    3,
                    WrOpcode::Read,
                    vec![Sge {
                        mr: g.rsink.lkey,
                        offset: 0,
                        len: size as u32,
                    }],
                );
                w.remote_stag = peer.src_stag;
                w.remote_to = peer.src_to;
                g.queues.post_send(w);
                g.phase = GenPhase::WaitRead;
            }
            DiagOp::FetchAdd | DiagOp::CmpSwap => {
                let opcode = if op == DiagOp::FetchAdd {
                    WrOpcode::FetchAdd { add: ATOM_ADD }
                } else {
                    WrOpcode::CmpSwap {
                        compare: g.atom_known,
                        swap: g.atom_known ^ ATOM_XOR,
                    }
                };
                let mut w = WorkRequest::new(
                    4,
                    opcode,
                    vec![Sge {
                        mr: g.rsink.lkey,
                        offset: 0,
                        len: 8,
                    }],
                );
                w.remote_stag = peer.atom_stag;
                w.remote_to = peer.atom_to;
                g.queues.post_send(w);
                g.phase = GenPhase::WaitRead;
            }
            // The fault is armed and the Write posted by the next step, in one command batch
            // (the engine executes the fault before it takes the Write).
            DiagOp::Fault(_) => g.phase = GenPhase::ArmFault,
        }
    }

    fn read_done(&mut self, _now: Instant) {
        let sha = self.cfg.sha256;
        let Some(g) = &mut self.gen_ else { return };
        let Some(&(op, size)) = g.plan.get(g.idx) else {
            return;
        };
        g.local_sha = if sha {
            sha_of(&g.heap, g.buffer, size as usize)
        } else {
            [0; 32]
        };
        g.send_check(op, size);
    }

    fn reply(&mut self, now: Instant, c: &Completion) {
        let Some(g) = &mut self.gen_ else { return };
        let slot = c.wr_id as usize;
        let mut b = [0u8; MSG];
        g.heap.copy_out(2 * g.buffer + SMALL + slot * MSG, &mut b);
        g.post_reply_recv(slot);
        let Some(&(op, size)) = g.plan.get(g.idx) else {
            return;
        };
        let secs = (now - g.op_started).as_secs_f64();
        let (ok, peer_sha) = match parse_msg(&b, b"IWDR") {
            Some((flag, len, sha)) => (
                flag == 1 && len == size && sha == g.local_sha && g.local_ok,
                sha,
            ),
            None => (false, [0; 32]),
        };
        println!(
            "iwarpd: rdma op={} bytes={size} sha256={} peer_sha256={} ok={ok} secs={secs:.6}",
            op.name(),
            hex(&g.local_sha),
            hex(&peer_sha)
        );
        if ok {
            self.report.ok += 1;
        } else {
            self.report.failed += 1;
        }
        self.report.bytes += size;
        self.report.secs += secs;
        match self.report.per_op.iter_mut().find(|p| p.0 == op.name()) {
            Some(p) => {
                p.1 += size;
                p.2 += secs;
            }
            None => self.report.per_op.push((op.name().into(), size, secs)),
        }
        g.idx += 1;
        g.phase = GenPhase::Running;
        self.next_op(now);
    }
}

impl Generator {
    fn src_sge(&self, size: u64) -> Sge {
        Sge {
            mr: self.src.lkey,
            offset: 0,
            len: size as u32,
        }
    }

    /// A Write of `size` source bytes to the start of the peer's sink.
    fn write_to_sink(&self, peer: &PeerInfo, size: u64) -> WorkRequest {
        let mut w = WorkRequest::new(1, WrOpcode::Write, vec![self.src_sge(size)]);
        w.remote_stag = peer.sink_stag;
        w.remote_to = peer.sink_to;
        w
    }

    /// Fault op: arm the fault on our QP and post the Write it breaks (same command batch).
    fn arm_fault(&mut self, now: Instant, cmds: &mut Vec<EngineCmd>) {
        let (Some(&(DiagOp::Fault(fault), size)), Some(peer)) =
            (self.plan.get(self.idx), self.peer)
        else {
            return;
        };
        cmds.push(EngineCmd::InjectFault { qp: self.qp, fault });
        self.queues.post_send(self.write_to_sink(&peer, size));
        self.op_started = now;
        self.flushed = 0;
        self.phase = GenPhase::WaitFault;
    }

    fn src_sha(&mut self, size: u64, on: bool) -> [u8; 32] {
        if !on {
            return [0; 32];
        }
        let heap = &self.heap;
        *self
            .shas
            .entry(size)
            .or_insert_with(|| sha_of(heap, 0, size as usize))
    }

    fn send_check(&mut self, op: DiagOp, size: u64) {
        let m = msg(b"IWDC", op.code(), size, &self.local_sha);
        self.heap.fill(2 * self.buffer, &m);
        let mut w = WorkRequest::new(
            2,
            WrOpcode::Send,
            vec![Sge {
                mr: self.check.lkey,
                offset: 0,
                len: MSG as u32,
            }],
        );
        w.flags.solicited = true;
        self.queues.post_send(w);
        self.phase = GenPhase::WaitReply;
    }

    fn post_reply_recv(&self, slot: usize) {
        self.queues.post_recv(RecvRequest {
            wr_id: slot as u64,
            sges: vec![Sge {
                mr: self.replies.lkey,
                offset: (slot * MSG) as u64,
                len: MSG as u32,
            }],
        });
    }
}

fn parse_info(pd: &[u8]) -> Option<PeerInfo> {
    if pd.len() < 36 || &pd[..4] != b"IWD1" {
        return None;
    }
    let u32_at = |o: usize| {
        pd.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    };
    let u64_at = |o: usize| {
        pd.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    Some(PeerInfo {
        sink_stag: Stag(u32_at(4)?),
        sink_to: u64_at(8)?,
        src_stag: Stag(u32_at(16)?),
        src_to: u64_at(20)?,
        buffer: u64_at(28)?,
        atom_stag: Stag(u32_at(36).unwrap_or(0)),
        atom_to: u64_at(40).unwrap_or(0),
        inv_stag: Stag(u32_at(48).unwrap_or(0)),
    })
}

/// A completion on a sink: a data Send (hash it), an Immediate (note it), a check (answer
/// it), or a reply sent. A check is told from data by its content (64 bytes, "IWDC"): data
/// Sends may carry the Solicited Event too.
fn sink_completion(s: &mut Sink, c: &Completion, sha: bool, mem: &MemTable) {
    if c.status != WcStatus::Success || !matches!(c.opcode, CqOpcode::Recv | CqOpcode::RecvImm) {
        return;
    }
    let slot = c.wr_id as usize;
    let off = s.recv_off(slot);
    if c.opcode == CqOpcode::RecvImm {
        s.last_imm = c.imm;
        s.post_recv(slot);
        return;
    }
    let mut b = [0u8; MSG];
    s.heap.copy_out(off, &mut b);
    let check = (c.byte_len == MSG as u64)
        .then(|| parse_msg(&b, b"IWDC"))
        .flatten();
    let Some((code, len, peer_sha)) = check else {
        let digest = if sha {
            sha_of(&s.heap, off, c.byte_len as usize)
        } else {
            [0; 32]
        };
        s.last_send = Some((c.byte_len, digest, c.solicited, c.invalidated));
        s.post_recv(slot);
        return;
    };
    s.post_recv(slot);
    let (have_len, local, extra_ok) = sink_verify(s, code, len, &peer_sha, sha);
    if code == 4 {
        // Send with Invalidate took the STag away: give it back for the next one.
        let _ = mem.revalidate(DIAG_CLIENT, s.inv.lkey);
    }
    let ok = have_len == len && local == peer_sha && extra_ok;
    let op = OP_NAMES.get(usize::from(code)).unwrap_or(&"?");
    println!(
        "iwarpd: rdma-sink op={op} bytes={len} sha256={} peer_sha256={} ok={ok}",
        hex(&local),
        hex(&peer_sha)
    );
    let m = msg(b"IWDR", u8::from(ok), have_len, &local);
    s.heap.fill(s.reply_off(), &m);
    let mut w = WorkRequest::new(
        9,
        WrOpcode::Send,
        vec![Sge {
            mr: s.reply.lkey,
            offset: 0,
            len: MSG as u32,
        }],
    );
    w.flags.signaled = false;
    s.queues.post_send(w);
}

/// What the sink holds for check `code` of `len` bytes: (length, digest or atomic word,
/// whether the operation's own marks are right: invalidated STag, SE flag, immediate).
fn sink_verify(
    s: &mut Sink,
    code: u8,
    len: u64,
    peer: &[u8; 32],
    sha: bool,
) -> (u64, [u8; 32], bool) {
    let n = len.min(s.buffer as u64) as usize;
    let digest = |off: usize| {
        if sha {
            sha_of(&s.heap, off, n)
        } else {
            [0; 32]
        }
    };
    match code {
        // Write, Write with Immediate: the sink region (and the immediate).
        0 | 6 => {
            let imm_ok = code == 0 || s.last_imm.take() == Some(imm_for(len));
            (len, digest(s.sink_off()), imm_ok)
        }
        // Send, Send with Invalidate, Send with SE: the last data Send.
        1 | 4 | 5 => {
            let (l, d, se, inv) = s
                .last_send
                .take()
                .unwrap_or((u64::MAX, [0; 32], false, None));
            let marks = match code {
                4 => inv == Some(s.inv.rkey) && !se,
                5 => se && inv.is_none(),
                _ => !se && inv.is_none(),
            };
            (l, d, marks)
        }
        // Atomics: the word, compared with the generator's expectation.
        7 | 8 => {
            let mut w = [0u8; 32];
            w[..8].copy_from_slice(&s.atom_word().to_ne_bytes());
            (len, w, peer[8..].iter().all(|&b| b == 0))
        }
        _ => (len, digest(s.source_off()), true),
    }
}

#[cfg(test)]
mod tests {
    use super::DiagOp;

    #[test]
    fn every_listed_name_parses_and_no_other() {
        for n in DiagOp::NAMES {
            assert_eq!(DiagOp::parse(n).map(DiagOp::name), Some(n));
        }
        assert!(DiagOp::parse("fault").is_none());
        assert!(DiagOp::parse("").is_none());
    }
}
