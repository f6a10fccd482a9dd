//! The control socket: a `SOCK_SEQPACKET` Unix socket at `[control] socket`, one thread per
//! client, and one thread turning the dataplane's events into CM events (docs/rdma-seams.md).
//!
//! Each datagram is one `abi::ctl` message; file descriptors come with `SCM_RIGHTS`. Bad input
//! (truncated, oversized or unknown messages, a wrong ABI version, stray descriptors) is
//! answered with an `Error` response naming the problem, and the connection keeps being
//! served. A client whose socket closes, or that dies, is disconnected from the service, which
//! frees everything it held. Embedded mode uses the same code over a socket pair
//! ([`ControlServer::connect_pair`]).

use crate::service::{EventSink, Service};
use abi::ctl::{self, DecodeError, ErrorCode, Event, Header, Response};
use shm::{SeqPacket, SeqPacketListener};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often blocked threads look at the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// The service shared by the server's threads.
pub type SharedService = Arc<Mutex<Service>>;

fn lock(s: &SharedService) -> MutexGuard<'_, Service> {
    // A panic in a handler must not take the whole control plane down with a poisoned lock:
    // the service's maps are updated one insert/remove at a time.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events to a client over its socket. Never blocks the service: a client that does not read
/// its socket until the buffer is full is disconnected (its events cannot be delivered).
struct SocketSink(SeqPacket);

impl EventSink for SocketSink {
    fn deliver(&self, ev: &Event) -> bool {
        match self.0.try_send(&ev.encode(), &[]) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    event = ev.name(),
                    "client does not take its events ({e}); disconnecting it"
                );
                self.0.shutdown();
                false
            }
        }
    }
}

/// The running server threads.
#[derive(Debug)]
pub struct ControlServer {
    service: SharedService,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl ControlServer {
    /// Start the event thread (and, with `socket`, listen there with those permission bits
    /// and accept clients).
    pub fn start(
        service: SharedService,
        socket: Option<(&Path, u32)>,
    ) -> std::io::Result<ControlServer> {
        let listener = match socket {
            Some((path, mode)) => {
                let l = SeqPacketListener::bind(path)?;
                std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
                Some(l)
            }
            None => None,
        };
        let srv = ControlServer {
            service,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Arc::new(Mutex::new(Vec::new())),
        };
        let (svc, stop) = (srv.service.clone(), srv.stop.clone());
        let (up_tx, up_rx) = std::sync::mpsc::sync_channel::<()>(1);
        let events = std::thread::Builder::new()
            .name("ctl-events".into())
            .spawn(move || {
                let _ = up_tx.send(());
                drop(up_tx);
                event_loop(&svc, &stop)
            })?;
        srv.push(events);
        // Started (its name set, which the new thread does itself) before this returns.
        let _ = up_rx.recv();
        if let Some(l) = listener {
            tracing::info!(socket = %l.path().display(), "control socket listening");
            let (svc, stop, threads) = (srv.service.clone(), srv.stop.clone(), srv.threads.clone());
            let accept = std::thread::Builder::new()
                .name("ctl-accept".into())
                .spawn(move || accept_loop(&l, &svc, &stop, &threads))?;
            srv.push(accept);
        }
        Ok(srv)
    }

    fn push(&self, h: JoinHandle<()>) {
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(h);
    }

    /// The service (stats, tests).
    pub fn service(&self) -> &SharedService {
        &self.service
    }

    /// A new in-process client: the returned socket is served like one accepted from the
    /// control socket (embedded mode).
    pub fn connect_pair(&self) -> std::io::Result<SeqPacket> {
        let (ours, theirs) = SeqPacket::pair()?;
        spawn_client(ours, &self.service, &self.stop, &self.threads)?;
        Ok(theirs)
    }

    /// Stop every thread (clients are disconnected, their resources freed) and wait for them.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        loop {
            let h = self.threads.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match h {
                Some(h) => {
                    let _ = h.join();
                }
                None => break,
            }
        }
    }
}

fn event_loop(svc: &SharedService, stop: &AtomicBool) {
    let engine = lock(svc).engine().clone();
    while !stop.load(Ordering::Acquire) {
        if let Some(ev) = engine.recv_timeout(TICK) {
            let mut s = lock(svc);
            s.handle_engine_event(ev);
            while let Some(ev) = engine.try_recv() {
                s.handle_engine_event(ev);
            }
        }
    }
}

fn accept_loop(
    l: &SeqPacketListener,
    svc: &SharedService,
    stop: &Arc<AtomicBool>,
    threads: &Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    while !stop.load(Ordering::Acquire) {
        match l.wait_readable(TICK) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => {
                tracing::error!("control socket poll: {e}");
                std::thread::sleep(TICK);
                continue;
            }
        }
        match l.accept() {
            Ok(sock) => {
                if let Err(e) = spawn_client(sock, svc, stop, threads) {
                    tracing::error!("cannot start a client thread: {e}");
                }
            }
            Err(e) => tracing::warn!("accept on the control socket: {e}"),
        }
    }
}

fn spawn_client(
    sock: SeqPacket,
    svc: &SharedService,
    stop: &Arc<AtomicBool>,
    threads: &Arc<Mutex<Vec<JoinHandle<()>>>>,
) -> std::io::Result<()> {
    let (svc, stop2) = (svc.clone(), stop.clone());
    let h = std::thread::Builder::new()
        .name("ctl-client".into())
        .spawn(move || {
            // Its 100 ms poll timeouts wake it at a scheduler tick, not with an interrupt of
            // their own on a core where an application spins (`dataplane::pump::PARK_SLACK`;
            // an embedded engine's client threads are started by the application's thread,
            // whose slack they would inherit).
            let _ = dataplane::pump::set_timer_slack(dataplane::pump::PARK_SLACK);
            serve_client(sock, &svc, &stop2)
        })?;
    let mut t = threads.lock().unwrap_or_else(|p| p.into_inner());
    t.retain(|h| !h.is_finished());
    t.push(h);
    Ok(())
}

fn serve_client(sock: SeqPacket, svc: &SharedService, stop: &AtomicBool) {
    let creds = sock.peer_credentials().ok();
    let sink = match sock.try_clone() {
        Ok(s) => Arc::new(SocketSink(s)),
        Err(e) => {
            tracing::error!("cannot clone a client socket: {e}");
            return;
        }
    };
    let pid = creds.and_then(|c| u32::try_from(c.pid).ok());
    let Some(client) = lock(svc).connect_client(sink, pid) else {
        let r = Response::error(
            ErrorCode::NoResources,
            "too many clients (control.max_clients)",
        );
        let _ = sock.send(&r.encode(0), &[]);
        return;
    };
    tracing::debug!(client = client.0, ?pid, "client connected");
    // One byte more than the largest message, so an oversized datagram shows as truncated.
    let mut buf = vec![0u8; ctl::MAX_MESSAGE + 1];
    while !stop.load(Ordering::Acquire) {
        match sock.wait_readable(TICK) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => break,
        }
        let m = match sock.recv(&mut buf) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(client = client.0, "control socket: {e}");
                break;
            }
        };
        if m.len == 0 {
            break;
        }
        let bytes = &buf[..m.len.min(buf.len())];
        let id = Header::parse(bytes).map(|h| h.id).unwrap_or(0);
        let resp = if m.truncated || m.len > ctl::MAX_MESSAGE {
            Response::error(
                ErrorCode::BadMessage,
                format!("message longer than {} bytes", ctl::MAX_MESSAGE),
            )
        } else if m.fds_truncated {
            Response::error(
                ErrorCode::BadMessage,
                "too many file descriptors (at most 4)",
            )
        } else {
            match ctl::decode_request(bytes) {
                Ok((_, req)) => lock(svc).handle(client, req, m.fds),
                Err(e) => decode_error(client.0, e),
            }
        };
        if let Err(e) = sock.send(&resp.encode(id), &[]) {
            tracing::debug!(client = client.0, "cannot answer: {e}");
            break;
        }
    }
    lock(svc).disconnect_client(client);
}

fn decode_error(client: u32, e: DecodeError) -> Response {
    tracing::info!(client, "bad control message: {e}");
    let code = match e {
        DecodeError::Version(_) => ErrorCode::AbiVersion,
        _ => ErrorCode::BadMessage,
    };
    Response::error(code, e.to_string())
}
