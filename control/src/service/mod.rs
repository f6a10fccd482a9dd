//! The control-plane service: the client registry and every client's resources (segments,
//! PDs, MRs, CQs, QPs, CM ids), independent of the transport (docs/rdma-seams.md, "Service").
//!
//! Call order: [`Service::connect_client`] when a client arrives (with the [`EventSink`] its
//! CM events go to), [`Service::handle`] for each decoded request (answers one
//! [`Response`]), [`Service::handle_engine_event`] for each `EngineEvent` of the dataplane
//! threads, and [`Service::disconnect_client`] when the client's socket closes or it dies:
//! every resource is then freed (its connections end with a TERMINATE or a close, see
//! `EngineCmd::DestroyQp`; segments are unmapped once the dataplane released the QPs using
//! them). The Unix-socket server (`crate::server`) and embedded mode drive it the same way.
//!
//! Everything a client sends is untrusted: every handle, lkey and offset is checked against
//! that client's own objects; a handle of another client fails like an unknown one.

mod client;
mod cm;
mod resources;
mod stats;

use crate::config::{Config, MpaSection};
use abi::ctl::{CmId, DeviceAttrs, ErrorCode, Event, QpId, Request, Response};
use client::{Client, Departed};
use dataplane::rdma::{
    ClientId, ConnId, CrcMode, EngineHandle, ListenerId, MpaPolicy, QpNum, QpNumAllocator, RtrMode,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::sync::Arc;

pub use client::{ClientCounters, Held, QpTotals};
pub use stats::ClientStats;

/// Where a client's CM events go (its socket, an in-process channel, a test vector).
pub trait EventSink: Send + Sync {
    /// Deliver one event; `false` if the client is gone.
    fn deliver(&self, ev: &Event) -> bool;
}

/// Per-client limits (answered in `DeviceAttrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Segments per client.
    pub segments: u32,
    /// PDs per client.
    pub pds: u32,
    /// MRs per client.
    pub mrs: u32,
    /// CQs per client.
    pub cqs: u32,
    /// QPs per client.
    pub qps: u32,
    /// CM ids per client.
    pub cm_ids: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            segments: 1024,
            pds: 256,
            mrs: 4096,
            cqs: 1024,
            qps: 1024,
            cm_ids: 4096,
        }
    }
}

/// What the service needs to know about the daemon.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The port's MAC.
    pub mac: [u8; 6],
    /// The port's IPv4 address.
    pub ip: Ipv4Addr,
    /// MPA defaults (`[mpa]`).
    pub mpa: MpaPolicy,
    /// Most clients at once.
    pub max_clients: u32,
    /// Per-client limits.
    pub limits: Limits,
    /// `[control] allow_faults`: `InjectFault` is served (test only).
    pub allow_faults: bool,
}

impl ServiceConfig {
    /// From the daemon's config and the port's MAC.
    pub fn from_config(cfg: &Config, mac: [u8; 6]) -> ServiceConfig {
        let ip = crate::config::parse_cidr(&cfg.port.ip)
            .map(|c| c.addr)
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        ServiceConfig {
            mac,
            ip,
            mpa: mpa_policy(&cfg.mpa),
            max_clients: cfg.control.max_clients,
            limits: Limits::default(),
            allow_faults: cfg.control.allow_faults,
        }
    }
}

/// `[mpa]` (validated) as the dataplane's `MpaPolicy`.
pub fn mpa_policy(m: &MpaSection) -> MpaPolicy {
    MpaPolicy {
        crc: match m.crc.as_str() {
            "on" => CrcMode::On,
            "require" => CrcMode::Require,
            _ => CrcMode::Off,
        },
        markers: m.markers,
        revision: m.revision,
        rtr: match m.rtr.as_str() {
            "write" => RtrMode::Write,
            "read" => RtrMode::Read,
            "send" => RtrMode::Send,
            _ => RtrMode::None,
        },
        ird: m.ird,
        ord: m.ord,
        private_data_max: m.private_data_max,
        timeout: netcore::Duration::from_millis(m.timeout_ms),
        first_fpdu_delay: netcore::Duration::from_millis(m.first_fpdu_delay_ms),
    }
}

/// A refused request: the code and a message naming the field.
pub(crate) type Fail = (ErrorCode, String);

pub(crate) fn fail<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, Fail> {
    Err((code, msg.into()))
}

/// Daemon-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Clients that said Hello.
    pub clients_seen: u64,
    /// Clients whose every resource has been freed after they left.
    pub clients_freed: u64,
    /// Requests answered.
    pub requests: u64,
    /// Requests refused.
    pub errors: u64,
    /// Engine events that matched no connection or QP the daemon knows or let go of: none is
    /// expected (each is logged at debug).
    pub orphan_events: u64,
    /// Engine events for connections the application had let go of (it destroyed their CM id
    /// or QP, or left) while their end was on its way from the dataplane: expected, and not
    /// delivered (nobody holds the CM id any more).
    pub late_events: u64,
    /// Connect requests for a listener the application had destroyed (its CM id, or it left)
    /// while the request was on its way from the dataplane: expected; the daemon rejects each
    /// (logged at debug).
    pub late_requests: u64,
    /// Connect requests refused because the listener's client holds its most CM ids
    /// (`[limits] cm_ids`): the daemon rejects each (logged at info).
    pub refused_requests: u64,
    /// Completions of the clients that have been freed.
    pub freed_completions: u64,
    /// The QP counters of the clients that have been freed (their `[client.N]` sections are
    /// gone; the stats file keeps these under `[freed_clients]`).
    pub freed_qps: QpTotals,
}

/// Most connections (and listeners) [`Service`] remembers as let go of (a rejected request's
/// connection has no last event to forget it by; a listener's last request is not known).
const LET_GO_MAX: usize = 4096;

/// The service. Not thread-safe by itself: the server keeps it in a `Mutex`.
pub struct Service {
    engine: Arc<EngineHandle>,
    cfg: ServiceConfig,
    clients: BTreeMap<ClientId, Client>,
    departed: BTreeMap<ClientId, Departed>,
    next_client: u32,
    next_handle: u32,
    qpnums: QpNumAllocator,
    conns: HashMap<ConnId, (ClientId, CmId)>,
    /// Connections taken out of `conns` because the application let go of them while the
    /// dataplane may still report on them (`Service::let_go`), until their last event; the
    /// oldest are forgotten beyond [`LET_GO_MAX`] (connection ids are never reused, and grow).
    let_go_conns: BTreeSet<ConnId>,
    listeners: HashMap<ListenerId, (ClientId, CmId)>,
    /// Listeners the application destroyed (their requests may still be on their way); the
    /// oldest are forgotten beyond [`LET_GO_MAX`] (listener ids are never reused, and grow).
    let_go_listeners: BTreeSet<ListenerId>,
    qp_owner: HashMap<QpNum, (ClientId, QpId)>,
    next_thread: usize,
    totals: Totals,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("clients", &self.clients.len())
            .field("departed", &self.departed.len())
            .field("totals", &self.totals)
            .finish()
    }
}

impl Service {
    /// A service over the dataplane's engine.
    pub fn new(engine: Arc<EngineHandle>, cfg: ServiceConfig) -> Service {
        Service {
            engine,
            cfg,
            clients: BTreeMap::new(),
            departed: BTreeMap::new(),
            next_client: 0,
            next_handle: 0,
            qpnums: QpNumAllocator::default(),
            conns: HashMap::new(),
            let_go_conns: BTreeSet::new(),
            listeners: HashMap::new(),
            let_go_listeners: BTreeSet::new(),
            qp_owner: HashMap::new(),
            next_thread: 0,
            totals: Totals::default(),
        }
    }

    /// The engine handle (shared with the event thread).
    pub fn engine(&self) -> &Arc<EngineHandle> {
        &self.engine
    }

    /// A new client (its socket was accepted); `None` when `max_clients` are connected.
    /// `peer_pid` is the kernel's word for its process id (`SO_PEERCRED`), which wins over
    /// the pid the client states in `Hello`.
    pub fn connect_client(
        &mut self,
        sink: Arc<dyn EventSink>,
        peer_pid: Option<u32>,
    ) -> Option<ClientId> {
        if self.clients.len() >= self.cfg.max_clients as usize {
            return None;
        }
        self.next_client = self.next_client.wrapping_add(1).max(1);
        let id = ClientId(self.next_client);
        let mut c = Client::new(sink);
        c.peer_pid = peer_pid;
        self.clients.insert(id, c);
        Some(id)
    }

    /// Connected clients.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Clients that left but whose QPs the dataplane has not released yet.
    pub fn releasing(&self) -> usize {
        self.departed.len()
    }

    /// Daemon-wide counters.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// The device attributes a client sees.
    pub fn device_attrs(&self) -> DeviceAttrs {
        let l = &self.cfg.limits;
        DeviceAttrs {
            version: format!("iwarpd {}", env!("CARGO_PKG_VERSION")),
            mac: self.cfg.mac,
            ip: SocketAddrV4::new(self.cfg.ip, 0),
            cq_subs: self.engine.threads() as u32,
            max_qp: l.qps,
            max_qp_wr: abi::ring::MAX_ENTRIES,
            max_send_sge: abi::wqe::MAX_SEND_SGE as u32,
            max_recv_sge: abi::wqe::MAX_RECV_SGE as u32,
            max_cq: l.cqs,
            max_cqe: abi::ring::MAX_ENTRIES,
            max_mr: l.mrs,
            max_mr_size: shm::MAX_SEGMENT,
            max_pd: l.pds,
            max_segments: l.segments,
            max_ird: 16383,
            max_ord: 16383,
            max_private_data: self.cfg.mpa.private_data_max as u32,
        }
    }

    fn handle_id(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1).max(1);
        self.next_handle
    }

    fn client(&mut self, id: ClientId) -> Result<&mut Client, Fail> {
        match self.clients.get_mut(&id) {
            Some(c) => Ok(c),
            None => fail(
                ErrorCode::Internal,
                format!("client {} is not connected", id.0),
            ),
        }
    }

    /// Answer one request of `client`; `fds` are the descriptors that came with it.
    pub fn handle(&mut self, client: ClientId, req: Request, fds: Vec<OwnedFd>) -> Response {
        let name = req.name();
        let r = self.dispatch(client, req, fds);
        self.totals.requests += 1;
        match r {
            Ok(resp) => resp,
            Err((code, message)) => {
                self.totals.errors += 1;
                if let Some(c) = self.clients.get_mut(&client) {
                    c.counters.errors += 1;
                }
                tracing::info!(
                    client = client.0,
                    request = name,
                    ?code,
                    "refused: {message}"
                );
                Response::Error { code, message }
            }
        }
    }

    fn dispatch(
        &mut self,
        client: ClientId,
        req: Request,
        mut fds: Vec<OwnedFd>,
    ) -> Result<Response, Fail> {
        let hello = self.client(client)?.hello;
        if let Request::Hello {
            abi_version,
            pid,
            name,
        } = &req
        {
            if hello {
                return fail(ErrorCode::NotHello, "Hello was already received");
            }
            if *abi_version != abi::ABI_VERSION {
                return fail(
                    ErrorCode::AbiVersion,
                    format!(
                        "client ABI version {abi_version}, this daemon speaks {}",
                        abi::ABI_VERSION
                    ),
                );
            }
            let c = self.client(client)?;
            c.hello = true;
            c.pid = c.peer_pid.unwrap_or(*pid);
            c.name = name.chars().take(64).collect();
            tracing::info!(client = client.0, pid, name = %c.name, "client attached");
            self.totals.clients_seen += 1;
            return Ok(Response::Hello {
                client: client.0,
                abi_version: abi::ABI_VERSION,
                device: self.device_attrs(),
            });
        }
        if !hello {
            return fail(
                ErrorCode::NotHello,
                format!(
                    "{} before Hello: the first request must be Hello",
                    req.name()
                ),
            );
        }
        let wants_fd = matches!(
            req,
            Request::AttachSegment { .. } | Request::CreateCq { channel: true, .. }
        );
        if !wants_fd && !fds.is_empty() {
            return fail(
                ErrorCode::InvalidArgument,
                format!(
                    "{} takes no file descriptor, {} came",
                    req.name(),
                    fds.len()
                ),
            );
        }
        if wants_fd && fds.len() > 1 {
            return fail(
                ErrorCode::InvalidArgument,
                format!(
                    "{} takes one file descriptor, {} came",
                    req.name(),
                    fds.len()
                ),
            );
        }
        let fd = fds.pop();
        match req {
            Request::Hello { .. } => unreachable!("handled above"),
            Request::QueryDevice {} => Ok(Response::Device {
                device: self.device_attrs(),
            }),
            Request::AttachSegment { len } => self.attach_segment(client, len, fd),
            Request::DetachSegment { segment } => self.detach_segment(client, segment),
            Request::AllocPd {} => self.alloc_pd(client),
            Request::DeallocPd { pd } => self.dealloc_pd(client, pd),
            Request::RegMr {
                pd,
                segment,
                offset,
                len,
                iova,
                access,
            } => self.reg_mr(client, pd, segment, offset, len, iova, access),
            Request::DeregMr { lkey } => self.dereg_mr(client, lkey),
            Request::CreateCq {
                segment,
                offset,
                entries,
                subs,
                channel,
            } => self.create_cq(client, segment, offset, entries, subs, channel, fd),
            Request::DestroyCq { cq } => self.destroy_cq(client, cq),
            req @ Request::CreateQp { .. } => self.create_qp(client, req),
            Request::DestroyQp { qp } => self.destroy_qp(client, qp),
            Request::QueryQp { qp } => self.query_qp(client, qp),
            Request::ModifyQpError { qp } => self.modify_qp_error(client, qp),
            Request::CreateCmId {} => self.create_cm_id(client),
            Request::DestroyCmId { id } => self.destroy_cm_id(client, id),
            Request::Listen { id, addr, backlog } => self.listen(client, id, addr, backlog),
            req @ Request::Connect { .. } => self.connect(client, req),
            Request::Accept {
                id,
                qp,
                private_data,
                ird,
                ord,
                mpa,
            } => self.accept(client, id, qp, private_data, (ird, ord), mpa),
            Request::Reject { id, private_data } => self.reject(client, id, private_data),
            Request::Disconnect { id } => self.disconnect(client, id),
            Request::InjectFault { qp, fault } => self.inject_fault(client, qp, fault),
            other => fail(
                ErrorCode::Unsupported,
                format!("{} is not supported by this daemon", other.name()),
            ),
        }
    }

    /// The client left (socket closed, process died): free everything it held.
    pub fn disconnect_client(&mut self, client: ClientId) {
        let Some(mut c) = self.clients.remove(&client) else {
            return;
        };
        let held = c.held();
        // Listeners stop, pending connect requests are rejected, connections are torn down
        // with their QPs (EngineCmd::DestroyQp: TERMINATE if work was outstanding, then close).
        self.teardown_cms(client, &mut c);
        let qps: Vec<QpId> = c.qps.keys().copied().collect();
        for qp in qps {
            self.release_qp(client, &mut c, qp);
        }
        let mrs = self.engine.mem.deregister_all(client);
        c.completions_retired += c.live_completions();
        let dep = Departed::from_client(c);
        tracing::info!(
            client = client.0,
            pid = dep.pid,
            ?held,
            mrs,
            releasing_qps = dep.releasing.len(),
            "client left; resources freed"
        );
        if dep.releasing.is_empty() {
            self.totals.clients_freed += 1;
            self.departed_done(client, dep);
        } else {
            self.departed.insert(client, dep);
        }
    }

    fn departed_done(&mut self, client: ClientId, dep: Departed) {
        self.totals.freed_completions += dep.completions;
        self.totals.freed_qps.merge(&dep.qp_totals);
        tracing::info!(
            client = client.0,
            pid = dep.pid,
            name = %dep.name,
            completions = dep.completions,
            terminates_received = dep.counters.terminates_received,
            "every resource of the client is freed"
        );
    }

    fn thread_for_connect(&mut self) -> usize {
        let n = self.engine.threads().max(1);
        self.next_thread = (self.next_thread + 1) % n;
        self.next_thread
    }

    fn send_event(&mut self, client: ClientId, ev: Event) {
        if let Some(c) = self.clients.get_mut(&client)
            && !c.sink.deliver(&ev)
        {
            tracing::debug!(
                client = client.0,
                event = ev.name(),
                "client gone before the event"
            );
        }
    }
}

#[cfg(test)]
mod tests;
