//! Connection management: CM ids, listen/connect/accept/reject/disconnect, and the dataplane's
//! events turned into the clients' CM events.

use super::client::{Client, CmState};
use super::{Fail, Service, fail};
use abi::ctl::{
    CmId, ErrorCode, Event, MAX_PRIVATE_DATA, MpaOverride, QpId, Request, Response,
    connect_failure, qp_error, qp_state,
};
use dataplane::rdma::{
    ClientId, ConnId, ConnectFailure, CrcMode, EngineCmd, EngineEvent, MpaPolicy, QpErrorReason,
    QpNum, RtrMode,
};
use iwarp::mpa::startup::RtrSet;
use std::net::SocketAddrV4;

fn rtr_byte(rtr: Option<RtrSet>) -> u8 {
    match rtr {
        None => 0,
        Some(s) => u8::from(s.write) | u8::from(s.read) << 1 | u8::from(s.send) << 2,
    }
}

impl Client {
    fn cm(&self, id: CmId) -> Result<&CmState, Fail> {
        match self.cms.get(&id) {
            Some(s) => Ok(s),
            None => fail(
                ErrorCode::UnknownHandle,
                format!("cm id {} is not yours or unknown", id.0),
            ),
        }
    }
}

impl Service {
    fn private_data(&self, pd: &[u8]) -> Result<(), Fail> {
        let max = self.cfg.mpa.private_data_max.min(MAX_PRIVATE_DATA);
        if pd.len() > max {
            return fail(
                ErrorCode::InvalidArgument,
                format!(
                    "private_data of {} bytes, at most {max} allowed (mpa.private_data_max)",
                    pd.len()
                ),
            );
        }
        Ok(())
    }

    fn policy(&self, o: MpaOverride) -> Result<MpaPolicy, Fail> {
        let mut p = self.cfg.mpa.clone();
        p.crc = match o.crc {
            0 => p.crc,
            1 => CrcMode::On,
            2 => CrcMode::Off,
            3 => CrcMode::Require,
            v => {
                return fail(
                    ErrorCode::InvalidArgument,
                    format!("mpa.crc {v}: allowed 0..=3"),
                );
            }
        };
        p.markers = match o.markers {
            0 => p.markers,
            1 => true,
            2 => false,
            v => {
                return fail(
                    ErrorCode::InvalidArgument,
                    format!("mpa.markers {v}: allowed 0..=2"),
                );
            }
        };
        p.revision = match o.revision {
            0 => p.revision,
            1 | 2 => o.revision,
            v => {
                return fail(
                    ErrorCode::InvalidArgument,
                    format!("mpa.revision {v}: allowed 0, 1, 2"),
                );
            }
        };
        p.rtr = match o.rtr {
            0 => p.rtr,
            1 => RtrMode::None,
            2 => RtrMode::Write,
            3 => RtrMode::Read,
            4 => RtrMode::Send,
            v => {
                return fail(
                    ErrorCode::InvalidArgument,
                    format!("mpa.rtr {v}: allowed 0..=4"),
                );
            }
        };
        Ok(p)
    }

    pub(crate) fn create_cm_id(&mut self, client: ClientId) -> Result<Response, Fail> {
        let max = self.cfg.limits.cm_ids;
        let c = self.client(client)?;
        if c.cms.len() >= max as usize {
            return fail(
                ErrorCode::NoResources,
                format!("cm ids: the limit of {max} per client is reached"),
            );
        }
        let id = CmId(self.handle_id());
        self.client(client)?.cms.insert(id, CmState::Idle);
        Ok(Response::CmId { id })
    }

    pub(crate) fn destroy_cm_id(&mut self, client: ClientId, id: CmId) -> Result<Response, Fail> {
        let mut c = self
            .clients
            .remove(&client)
            .ok_or((ErrorCode::Internal, "client gone".to_string()))?;
        let r = c.cm(id).cloned();
        if let Ok(state) = &r {
            self.end_cm(client, &mut c, id, state.clone());
            c.cms.remove(&id);
        }
        self.clients.insert(client, c);
        r.map(|_| Response::Done {})
    }

    /// Stop whatever a CM id does (its QP, if any, stays: DestroyQp releases it).
    fn end_cm(&mut self, client: ClientId, c: &mut Client, id: CmId, state: CmState) {
        match state {
            CmState::Listening { listener, .. } => {
                self.listeners.remove(&listener);
                self.let_go_listeners.insert(listener);
                while self.let_go_listeners.len() > super::LET_GO_MAX {
                    self.let_go_listeners.pop_first();
                }
                if let Err(e) = self.engine.broadcast(|_| EngineCmd::Unlisten { listener }) {
                    tracing::error!(client = client.0, "Unlisten not queued: {e}");
                }
            }
            CmState::Requested { conn, thread, .. } => {
                self.let_go(conn);
                let cmd = EngineCmd::Reject {
                    conn,
                    private_data: Vec::new(),
                };
                if let Err(e) = self.engine.send(thread, cmd) {
                    tracing::error!(client = client.0, "Reject not queued: {e}");
                }
            }
            CmState::Conn {
                conn, thread, qp, ..
            } => {
                self.let_go(conn);
                if let Some(q) = c.qps.get_mut(&qp) {
                    q.cm = None;
                }
                if let Err(e) = self.engine.send(thread, EngineCmd::Disconnect { conn }) {
                    tracing::error!(client = client.0, "Disconnect not queued: {e}");
                }
            }
            CmState::Idle | CmState::Closed => {}
        }
        c.cms.insert(id, CmState::Closed);
    }

    /// A leaving client: every CM id ends.
    pub(crate) fn teardown_cms(&mut self, client: ClientId, c: &mut Client) {
        let ids: Vec<(CmId, CmState)> = c.cms.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (id, st) in ids {
            // Connections end through DestroyQp (TERMINATE or close) in release_qp; only the
            // bookkeeping is dropped here.
            if let CmState::Conn { conn, .. } = st {
                self.let_go(conn);
                continue;
            }
            self.end_cm(client, c, id, st);
        }
    }

    pub(crate) fn listen(
        &mut self,
        client: ClientId,
        id: CmId,
        addr: SocketAddrV4,
        _backlog: u32,
    ) -> Result<Response, Fail> {
        let ip = self.cfg.ip;
        if !addr.ip().is_unspecified() && *addr.ip() != ip {
            return fail(
                ErrorCode::InvalidArgument,
                format!("addr {addr}: this daemon's address is {ip} (or use 0.0.0.0)"),
            );
        }
        if addr.port() == 0 {
            return fail(ErrorCode::InvalidArgument, "addr: port 0 is not allowed");
        }
        let in_use = self.clients.values().any(|c| {
            c.cms
                .values()
                .any(|s| matches!(s, CmState::Listening { addr: a, .. } if a.port() == addr.port()))
        });
        if in_use {
            return fail(
                ErrorCode::AddressInUse,
                format!("port {} is already listened on", addr.port()),
            );
        }
        let c = self.client(client)?;
        if *c.cm(id)? != CmState::Idle {
            return fail(
                ErrorCode::InvalidState,
                format!("cm id {} is not idle", id.0),
            );
        }
        let listener = self.engine.ids.listener();
        let policy = self.cfg.mpa.clone();
        let port = addr.port();
        self.engine
            .broadcast(|_| EngineCmd::Listen {
                listener,
                port,
                policy: policy.clone(),
            })
            .or_else(|e| fail(ErrorCode::Internal, format!("Listen: {e}")))?;
        self.listeners.insert(listener, (client, id));
        let addr = SocketAddrV4::new(ip, port);
        self.client(client)?
            .cms
            .insert(id, CmState::Listening { listener, addr });
        Ok(Response::Done {})
    }

    /// Check that `qp` can be bound to a connection.
    fn idle_qp(&mut self, client: ClientId, qp: QpId) -> Result<(), Fail> {
        let q = self.client(client)?.qp(qp)?;
        if q.cm.is_some() || q.thread.is_some() {
            return fail(
                ErrorCode::InvalidState,
                format!("qp {} is already bound to a connection", qp.0),
            );
        }
        Ok(())
    }

    pub(crate) fn connect(&mut self, client: ClientId, req: Request) -> Result<Response, Fail> {
        let Request::Connect {
            id,
            qp,
            remote,
            private_data,
            ird,
            ord,
            mpa,
        } = req
        else {
            return fail(ErrorCode::Internal, "not Connect");
        };
        if *self.client(client)?.cm(id)? != CmState::Idle {
            return fail(
                ErrorCode::InvalidState,
                format!("cm id {} is not idle", id.0),
            );
        }
        self.idle_qp(client, qp)?;
        self.private_data(&private_data)?;
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return fail(
                ErrorCode::InvalidArgument,
                format!("remote {remote} is not a peer address"),
            );
        }
        let mut policy = self.policy(mpa)?;
        if ird > 16383 || ord > 16383 {
            return fail(
                ErrorCode::InvalidArgument,
                format!("ird {ird} / ord {ord}: allowed 0..=16383"),
            );
        }
        policy.ird = ird as u16;
        policy.ord = ord as u16;
        let thread = self.thread_for_connect();
        let binding = self.binding(client, qp)?;
        let conn = self.engine.ids.conn();
        self.engine
            .send(
                thread,
                EngineCmd::Connect {
                    conn,
                    remote,
                    policy,
                    private_data,
                    qp: binding,
                },
            )
            .or_else(|e| fail(ErrorCode::NoResources, format!("Connect: {e}")))?;
        self.bind(
            client,
            id,
            qp,
            conn,
            thread,
            SocketAddrV4::new(self.cfg.ip, 0),
            remote,
        );
        Ok(Response::Done {})
    }

    #[allow(clippy::too_many_arguments)]
    fn bind(
        &mut self,
        client: ClientId,
        id: CmId,
        qp: QpId,
        conn: ConnId,
        thread: usize,
        local: SocketAddrV4,
        remote: SocketAddrV4,
    ) {
        self.conns.insert(conn, (client, id));
        if let Some(c) = self.clients.get_mut(&client) {
            c.cms.insert(
                id,
                CmState::Conn {
                    conn,
                    thread,
                    qp,
                    established: false,
                    local,
                    remote,
                },
            );
            if let Some(q) = c.qps.get_mut(&qp) {
                q.cm = Some(id);
                q.thread = Some(thread);
                q.state = qp_state::CONNECTING;
                q.local = local;
                q.remote = remote;
            }
        }
    }

    pub(crate) fn accept(
        &mut self,
        client: ClientId,
        id: CmId,
        qp: QpId,
        private_data: Vec<u8>,
        (ird, ord): (u32, u32),
        mpa: MpaOverride,
    ) -> Result<Response, Fail> {
        let CmState::Requested {
            conn,
            thread,
            local,
            remote,
        } = self.client(client)?.cm(id)?.clone()
        else {
            return fail(
                ErrorCode::InvalidState,
                format!("cm id {} has no pending connect request", id.0),
            );
        };
        self.idle_qp(client, qp)?;
        self.private_data(&private_data)?;
        if ird > 16383 || ord > 16383 {
            return fail(
                ErrorCode::InvalidArgument,
                format!("ird {ird} / ord {ord}: allowed 0..=16383"),
            );
        }
        // Only CRC can change at accept time (the listener's policy fixed the rest).
        let crc = (mpa.crc != 0)
            .then(|| self.policy(mpa))
            .transpose()?
            .map(|p| p.crc);
        let binding = self.binding(client, qp)?;
        self.engine
            .send(
                thread,
                EngineCmd::Accept {
                    conn,
                    qp: binding,
                    private_data,
                    ird: ird as u16,
                    ord: ord as u16,
                    crc,
                },
            )
            .or_else(|e| fail(ErrorCode::NoResources, format!("Accept: {e}")))?;
        self.bind(client, id, qp, conn, thread, local, remote);
        Ok(Response::Done {})
    }

    pub(crate) fn reject(
        &mut self,
        client: ClientId,
        id: CmId,
        private_data: Vec<u8>,
    ) -> Result<Response, Fail> {
        let CmState::Requested { conn, thread, .. } = self.client(client)?.cm(id)?.clone() else {
            return fail(
                ErrorCode::InvalidState,
                format!("cm id {} has no pending connect request", id.0),
            );
        };
        self.private_data(&private_data)?;
        self.engine
            .send(thread, EngineCmd::Reject { conn, private_data })
            .or_else(|e| fail(ErrorCode::NoResources, format!("Reject: {e}")))?;
        self.let_go(conn);
        let c = self.client(client)?;
        c.cms.insert(id, CmState::Closed);
        c.counters.rejected += 1;
        Ok(Response::Done {})
    }

    pub(crate) fn disconnect(&mut self, client: ClientId, id: CmId) -> Result<Response, Fail> {
        let state = self.client(client)?.cm(id)?.clone();
        // The connection is over already (the peer closed first, or it failed): nothing to
        // do, as iw_cm's disconnect in its CLOSING and IDLE states. An application that
        // disconnects after the last exchange must not fail for losing the race.
        if matches!(state, CmState::Closed) {
            return Ok(Response::Done {});
        }
        let CmState::Conn {
            conn, thread, qp, ..
        } = state
        else {
            return fail(
                ErrorCode::InvalidState,
                format!("cm id {} is not connected", id.0),
            );
        };
        self.engine
            .send(thread, EngineCmd::Disconnect { conn })
            .or_else(|e| fail(ErrorCode::NoResources, format!("Disconnect: {e}")))?;
        if let Some(q) = self.client(client)?.qps.get_mut(&qp) {
            q.state = qp_state::CLOSING;
        }
        Ok(Response::Done {})
    }

    /// One event of the dataplane threads.
    pub fn handle_engine_event(&mut self, ev: EngineEvent) {
        let orphans = self.totals.orphan_events;
        let what = tracing::enabled!(tracing::Level::DEBUG).then(|| format!("{ev:?}"));
        self.dispatch_engine_event(ev);
        if self.totals.orphan_events != orphans {
            // Not the benign race of a connection the application let go of while its end
            // was on its way (`late_events`).
            tracing::debug!(
                event = what.unwrap_or_default(),
                "an event for a connection or QP no longer known"
            );
        }
    }

    fn dispatch_engine_event(&mut self, ev: EngineEvent) {
        match ev {
            EngineEvent::ConnectRequest {
                conn,
                listener,
                thread,
                local,
                peer,
                ird,
                ord,
                rtr,
                private_data,
                ..
            } => self.on_connect_request(
                conn,
                listener,
                thread,
                local,
                peer,
                ird,
                ord,
                rtr,
                private_data,
            ),
            EngineEvent::Established {
                conn,
                qp,
                negotiated,
                private_data,
            } => {
                let Some((client, id)) = self.conn_owner(conn, false) else {
                    return;
                };
                let Some(c) = self.clients.get_mut(&client) else {
                    return;
                };
                let Some(CmState::Conn {
                    qp: qpid,
                    established,
                    local,
                    remote,
                    ..
                }) = c.cms.get_mut(&id)
                else {
                    return;
                };
                *established = true;
                let (qpid, local, remote) = (*qpid, *local, *remote);
                if let Some(q) = c.qps.get_mut(&qpid) {
                    q.state = qp_state::RTS;
                    q.ird = u32::from(negotiated.ird);
                    q.ord = u32::from(negotiated.ord);
                    q.crc = negotiated.crc;
                    q.markers = negotiated.markers_rx || negotiated.markers_tx;
                    q.revision = negotiated.revision;
                    debug_assert_eq!(q.qp_num, qp);
                }
                c.counters.established += 1;
                self.send_event(
                    client,
                    Event::Established {
                        id,
                        qp: qpid,
                        local,
                        remote,
                        private_data,
                        ird: u32::from(negotiated.ird),
                        ord: u32::from(negotiated.ord),
                        crc: negotiated.crc,
                        markers: negotiated.markers_rx || negotiated.markers_tx,
                        revision: negotiated.revision,
                    },
                );
            }
            EngineEvent::Rejected { conn, private_data } => {
                if let Some((client, id)) = self.conn_end(conn, qp_state::ERROR) {
                    self.bump(client, |c| c.rejected += 1);
                    self.send_event(client, Event::Rejected { id, private_data });
                }
            }
            EngineEvent::ConnectFailed { conn, reason } => {
                if let Some((client, id)) = self.conn_end(conn, qp_state::ERROR) {
                    self.bump(client, |c| c.connect_failed += 1);
                    let reason = match reason {
                        ConnectFailure::Unreachable => connect_failure::UNREACHABLE,
                        ConnectFailure::Refused => connect_failure::REFUSED,
                        ConnectFailure::Timeout => connect_failure::TIMEOUT,
                        ConnectFailure::Mpa(_) => connect_failure::MPA,
                        ConnectFailure::Aborted => connect_failure::RESET,
                        ConnectFailure::NoResources => connect_failure::LOCAL,
                    };
                    self.send_event(client, Event::ConnectFailed { id, reason });
                }
            }
            EngineEvent::Disconnected { conn, .. } => {
                if let Some((client, id)) = self.conn_end(conn, qp_state::ERROR) {
                    self.bump(client, |c| c.disconnected += 1);
                    self.send_event(client, Event::Disconnected { id });
                }
            }
            EngineEvent::TerminateReceived { conn, qp, code, .. } => {
                self.on_qp_event(
                    conn,
                    qp,
                    |c| c.terminates_received += 1,
                    |id, _| Event::TerminateReceived {
                        id,
                        layer: code.layer as u8,
                        etype: code.etype,
                        ecode: code.ecode,
                    },
                );
            }
            EngineEvent::QpError { conn, qp, reason } => {
                let (r, code) = match reason {
                    QpErrorReason::TerminateSent(t) => (qp_error::TERMINATE_SENT, Some(t)),
                    QpErrorReason::StreamBroken => (qp_error::STREAM_BROKEN, None),
                    QpErrorReason::RxTimeout => (qp_error::RX_TIMEOUT, None),
                    QpErrorReason::StreamLost => (qp_error::STREAM_LOST, None),
                    QpErrorReason::CorruptRing => (qp_error::CORRUPT_RING, None),
                };
                let bump = |c: &mut super::client::ClientCounters| {
                    c.qp_errors += 1;
                    if code.is_some() {
                        c.terminates_sent += 1;
                    }
                };
                self.on_qp_event(conn, qp, bump, |id, qpid| Event::QpError {
                    id,
                    qp: qpid,
                    reason: r,
                    layer: code.map_or(0, |t| t.layer as u8),
                    etype: code.map_or(0, |t| t.etype),
                    ecode: code.map_or(0, |t| t.ecode),
                });
            }
            EngineEvent::QpReleased { qp, counters } => self.qp_released(qp, counters.as_deref()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_connect_request(
        &mut self,
        conn: ConnId,
        listener: dataplane::rdma::ListenerId,
        thread: usize,
        local: SocketAddrV4,
        peer: SocketAddrV4,
        ird: u16,
        ord: u16,
        rtr: Option<RtrSet>,
        private_data: Vec<u8>,
    ) {
        // Refused requests are rejected rather than left waiting for the peer's timeout.
        let reject = |svc: &mut Self| {
            let _ = svc.engine.send(
                thread,
                EngineCmd::Reject {
                    conn,
                    private_data: Vec::new(),
                },
            );
        };
        let Some((client, lid)) = self.listeners.get(&listener).copied() else {
            if self.let_go_listeners.contains(&listener) {
                // The application destroyed the listener while this was on its way.
                self.totals.late_requests += 1;
                tracing::debug!(
                    ?listener,
                    ?conn,
                    %peer,
                    "a connect request for a destroyed listener: rejected"
                );
            } else {
                self.totals.orphan_events += 1;
            }
            reject(self);
            return;
        };
        let room = self
            .clients
            .get(&client)
            .is_some_and(|c| c.cms.len() < self.cfg.limits.cm_ids as usize);
        if !room {
            self.totals.refused_requests += 1;
            tracing::info!(
                client = client.0,
                %peer,
                limit = self.cfg.limits.cm_ids,
                "a connect request refused: its listener's client holds its most CM ids"
            );
            reject(self);
            return;
        }
        let id = CmId(self.handle_id());
        self.conns.insert(conn, (client, id));
        if let Some(c) = self.clients.get_mut(&client) {
            c.cms.insert(
                id,
                CmState::Requested {
                    conn,
                    thread,
                    local,
                    remote: peer,
                },
            );
            c.counters.connect_requests += 1;
        }
        self.send_event(
            client,
            Event::ConnectRequest {
                listener: lid,
                id,
                local,
                remote: peer,
                private_data,
                ird: u32::from(ird),
                ord: u32::from(ord),
                rtr: rtr_byte(rtr),
            },
        );
    }

    /// The application lets go of `conn` (destroys its CM id or QP, rejects it, or leaves)
    /// while the dataplane may still report on it: its events from now on are late, not
    /// orphans ([`Service::unclaimed`]).
    pub(crate) fn let_go(&mut self, conn: ConnId) {
        if self.conns.remove(&conn).is_none() {
            return;
        }
        self.let_go_conns.insert(conn);
        while self.let_go_conns.len() > super::LET_GO_MAX {
            self.let_go_conns.pop_first();
        }
    }

    /// An event for `conn` that no CM id claims: late if the application let go of the
    /// connection (forgotten at its last event, `last`), an orphan otherwise.
    fn unclaimed(&mut self, conn: ConnId, last: bool) {
        let late = if last {
            self.let_go_conns.remove(&conn)
        } else {
            self.let_go_conns.contains(&conn)
        };
        if late {
            self.totals.late_events += 1;
        } else {
            self.totals.orphan_events += 1;
        }
    }

    /// The client and CM id of `conn`; `last`: the connection's last event.
    fn conn_owner(&mut self, conn: ConnId, last: bool) -> Option<(ClientId, CmId)> {
        let r = self.conns.get(&conn).copied();
        if r.is_none() {
            self.unclaimed(conn, last);
        }
        r
    }

    /// A connection is over: its CM id closes, its QP (still the client's) goes to `state`.
    fn conn_end(&mut self, conn: ConnId, state: u8) -> Option<(ClientId, CmId)> {
        let (client, id) = self.conn_owner(conn, true)?;
        self.conns.remove(&conn);
        let c = self.clients.get_mut(&client)?;
        if let Some(CmState::Conn { qp, .. }) = c.cms.get(&id).cloned()
            && let Some(q) = c.qps.get_mut(&qp)
        {
            q.state = state;
        }
        c.cms.insert(id, CmState::Closed);
        Some((client, id))
    }

    fn bump(&mut self, client: ClientId, f: impl FnOnce(&mut super::client::ClientCounters)) {
        if let Some(c) = self.clients.get_mut(&client) {
            f(&mut c.counters);
        } else if let Some(d) = self.departed.get_mut(&client) {
            f(&mut d.counters);
        }
    }

    /// A QP-level event: counted for the QP's owner (even a departed one), reported on the
    /// connection's CM id if the client still has it.
    fn on_qp_event(
        &mut self,
        conn: ConnId,
        qp: QpNum,
        count: impl FnOnce(&mut super::client::ClientCounters),
        make: impl FnOnce(CmId, QpId) -> Event,
    ) {
        let Some(&(client, qpid)) = self.qp_owner.get(&qp) else {
            self.unclaimed(conn, false);
            return;
        };
        self.bump(client, count);
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        if let Some(q) = c.qps.get_mut(&qpid) {
            q.state = qp_state::ERROR;
        }
        let id = self.conns.get(&conn).map(|&(_, id)| id).unwrap_or_default();
        self.send_event(client, make(id, qpid));
    }
}
