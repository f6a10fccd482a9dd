//! The control connection to the daemon: numbered requests and their responses, CM events
//! queued as they arrive in between.
//!
//! One `SOCK_SEQPACKET` socket carries everything (docs/rdma-seams.md): in daemon mode it is
//! connected to `iwarpd`'s socket, in embedded mode to the in-process service. A request holds
//! the state lock from its send until its response arrives, so concurrent callers are served
//! one after the other; events read meanwhile are queued for [`Session::next_event`].

use crate::error::{Error, Result};
use abi::ctl::{self, Body, Event, Request, Response};
use shm::SeqPacket;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a request may wait for its answer (a `DestroyQp` waits for the dataplane to let
/// go of the rings, which takes a poll-loop iteration or two).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct State {
    next_id: u32,
    events: VecDeque<Event>,
    closed: bool,
}

/// What to do before the caller blocks on the socket (embedded mode: hand the dataplane
/// loop back to its thread, which the answer or event may need).
pub(crate) type OnBlock = Box<dyn Fn() + Send + Sync>;

/// The control connection.
pub(crate) struct Session {
    sock: SeqPacket,
    state: Mutex<State>,
    on_block: Option<OnBlock>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("sock", &self.sock).finish()
    }
}

impl Session {
    pub(crate) fn new(sock: SeqPacket) -> Session {
        Session {
            sock,
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            on_block: None,
        }
    }

    /// A session that calls `on_block` whenever it is about to wait on the socket.
    #[cfg_attr(not(feature = "embedded"), allow(dead_code))]
    pub(crate) fn with_on_block(sock: SeqPacket, on_block: OnBlock) -> Session {
        Session {
            on_block: Some(on_block),
            ..Session::new(sock)
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The socket (readable when a response or event is waiting).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    fn wait_readable(&self, timeout: Duration) -> Result<bool> {
        if let Some(f) = &self.on_block
            && !timeout.is_zero()
        {
            f();
        }
        self.sock
            .wait_readable(timeout)
            .map_err(Error::io("poll control socket"))
    }

    /// Read one message (the socket must be readable). Events go to the queue.
    fn read_one(&self, st: &mut State) -> Result<Option<(u32, Response)>> {
        let mut buf = [0u8; ctl::MAX_MESSAGE];
        let msg = self
            .sock
            .recv(&mut buf)
            .map_err(Error::io("read control socket"))?;
        if msg.len == 0 {
            st.closed = true;
            return Err(Error::DaemonGone);
        }
        if msg.truncated {
            return Err(Error::Protocol(format!(
                "control message longer than {} bytes",
                ctl::MAX_MESSAGE
            )));
        }
        let m = ctl::decode(&buf[..msg.len])
            .map_err(|e| Error::Protocol(format!("undecodable message from iwarpd: {e}")))?;
        match m.body {
            Body::Response(r) => Ok(Some((m.id, r))),
            Body::Event(e) => {
                tracing::debug!(event = e.name(), "CM event");
                st.events.push_back(e);
                Ok(None)
            }
            Body::Request(r) => Err(Error::Protocol(format!(
                "iwarpd sent a request ({})",
                r.name()
            ))),
        }
    }

    /// Send `req` (with `fds`) and wait for its response. `Response::Error` becomes
    /// [`Error::Refused`].
    pub(crate) fn call(&self, req: &Request, fds: &[BorrowedFd<'_>]) -> Result<Response> {
        let mut st = self.lock();
        if st.closed {
            return Err(Error::DaemonGone);
        }
        let id = st.next_id;
        st.next_id = st.next_id.wrapping_add(1).max(1);
        self.sock
            .send(&req.encode(id), fds)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                    Error::DaemonGone
                }
                _ => Error::Io {
                    what: "write control socket",
                    source: e,
                },
            })?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.wait_readable(left)? {
                return Err(Error::Timeout {
                    request: req.name(),
                    secs: CALL_TIMEOUT.as_secs(),
                });
            }
            match self.read_one(&mut st)? {
                Some((rid, Response::Error { code, message })) if rid == id => {
                    return Err(Error::Refused {
                        request: req.name(),
                        code,
                        message,
                    });
                }
                Some((rid, r)) if rid == id => return Ok(r),
                Some((rid, r)) => {
                    tracing::warn!(id = rid, response = r.name(), "stray response ignored");
                }
                None => {}
            }
        }
    }

    /// Take the first queued event that `want` accepts, reading the socket until `timeout`.
    /// `None` on timeout.
    pub(crate) fn next_event(
        &self,
        timeout: Option<Duration>,
        mut want: impl FnMut(&Event) -> bool,
    ) -> Result<Option<Event>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            {
                let mut st = self.lock();
                if let Some(i) = st.events.iter().position(&mut want) {
                    return Ok(st.events.remove(i));
                }
                if st.closed {
                    return Err(Error::DaemonGone);
                }
                // Drain what is there without blocking (another thread may have read it).
                while self
                    .sock
                    .wait_readable(Duration::ZERO)
                    .map_err(Error::io("poll control socket"))?
                {
                    if let Some((rid, r)) = self.read_one(&mut st)? {
                        tracing::warn!(id = rid, response = r.name(), "stray response ignored");
                    }
                }
                if let Some(i) = st.events.iter().position(&mut want) {
                    return Ok(st.events.remove(i));
                }
            }
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_millis(100),
            };
            if deadline.is_some() && left.is_zero() {
                return Ok(None);
            }
            // Wait without the lock so requests of other threads go on meanwhile; wake up at
            // least every 100 ms in case another thread queued our event.
            self.wait_readable(left.min(Duration::from_millis(100)))?;
        }
    }
}
