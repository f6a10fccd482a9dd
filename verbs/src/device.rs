//! Opening a device: a running `iwarpd` (its control socket) or an embedded engine (an
//! `iwarpd` config file).

use crate::cm::{CmEvent, CmId};
use crate::cq::{CompChannel, Cq};
use crate::error::{Error, Result};
use crate::mem::Segment;
use crate::pd::Pd;
use crate::session::Session;
use abi::ctl::{DeviceAttrs, Request, Response};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Environment variable holding the default device spec.
pub const DEVICE_ENV: &str = "IWARP_DEVICE";
/// The daemon's socket when neither a spec nor `IWARP_DEVICE` is given.
pub const DEFAULT_SOCKET: &str = "/run/iwarpd.sock";

/// Where a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A running `iwarpd`'s control socket.
    Daemon(PathBuf),
    /// An `iwarpd` config file: the engine runs in this process.
    Embedded(PathBuf),
}

impl DeviceSpec {
    /// Parse a spec: `unix:PATH` (a daemon socket), `embedded:PATH` (a config file), or a bare
    /// path: a file ending in `.toml` or any other regular file is a config (embedded mode),
    /// anything else (a socket, or a path that does not exist yet) a daemon socket.
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let bad = |reason: &str| Error::Spec {
            spec: spec.to_owned(),
            reason: reason.to_owned(),
        };
        if spec.is_empty() {
            return Err(bad(
                "empty; give a daemon socket (unix:PATH) or an iwarpd config (embedded:PATH)",
            ));
        }
        if let Some(p) = spec.strip_prefix("unix:") {
            return Ok(DeviceSpec::Daemon(PathBuf::from(p)));
        }
        if let Some(p) = spec
            .strip_prefix("embedded:")
            .or_else(|| spec.strip_prefix("config:"))
        {
            return Ok(DeviceSpec::Embedded(PathBuf::from(p)));
        }
        if let Some((scheme, _)) = spec.split_once(':')
            && !scheme.contains('/')
            && scheme.len() > 1
        {
            return Err(bad(&format!(
                "unknown scheme `{scheme}:`; allowed: unix:PATH, embedded:PATH, config:PATH or a bare path"
            )));
        }
        let p = Path::new(spec);
        let is_file = std::fs::metadata(p).is_ok_and(|m| m.is_file());
        if is_file || p.extension().is_some_and(|e| e == "toml") {
            Ok(DeviceSpec::Embedded(p.to_owned()))
        } else {
            Ok(DeviceSpec::Daemon(p.to_owned()))
        }
    }

    /// The spec from `IWARP_DEVICE`, else the default daemon socket.
    pub fn from_env() -> Result<DeviceSpec> {
        match std::env::var(DEVICE_ENV) {
            Ok(s) if !s.is_empty() => DeviceSpec::parse(&s),
            _ => Ok(DeviceSpec::Daemon(PathBuf::from(DEFAULT_SOCKET))),
        }
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Daemon(p) => write!(f, "unix:{}", p.display()),
            DeviceSpec::Embedded(p) => write!(f, "embedded:{}", p.display()),
        }
    }
}

/// State shared by every object of one device.
pub(crate) struct DeviceInner {
    pub(crate) session: Session,
    pub(crate) attrs: DeviceAttrs,
    pub(crate) client: u32,
    pub(crate) spec: DeviceSpec,
    /// Segments alive, to tell whether memory handed to `reg_*` is shared.
    pub(crate) segments: Mutex<Vec<Weak<crate::mem::SegmentInner>>>,
    /// Keeps an embedded engine alive as long as any object of the device, and steps its
    /// dataplane loops from the caller's thread ([`Device::poll_engine`]).
    pub(crate) engine: Option<Box<dyn LocalEngine>>,
}

/// An engine running in this process (embedded mode).
pub(crate) trait LocalEngine: Send + Sync {
    /// Step the dataplane loops once from the calling thread (run-to-completion mode);
    /// whether one ran.
    fn poll(&self) -> bool;
    /// The calling thread stops stepping the loops for a while: their threads take over now.
    fn release(&self);
    /// Pin the calling thread to the core of the (first) dataplane loop.
    fn pin_current_thread(&self) -> Option<usize>;
}

impl std::fmt::Debug for DeviceInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("spec", &self.spec)
            .field("client", &self.client)
            .field("ip", &self.attrs.ip)
            .finish()
    }
}

/// An open device: the control connection plus what the daemon offers.
///
/// Cheap to clone (a reference count); every object created from it keeps it alive.
///
/// ```no_run
/// let dev = verbs::Device::open("/run/iwarpd-a.sock")?;
/// println!("{} at {}", dev.attrs().version, dev.attrs().ip);
/// # Ok::<(), verbs::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl Device {
    /// Open the device named by `spec` (see [`DeviceSpec::parse`]).
    pub fn open(spec: &str) -> Result<Device> {
        Device::open_spec(&DeviceSpec::parse(spec)?)
    }

    /// Open the device named by `IWARP_DEVICE` (default: [`DEFAULT_SOCKET`]).
    pub fn open_default() -> Result<Device> {
        Device::open_spec(&DeviceSpec::from_env()?)
    }

    /// Open `spec` (`Some`) or the default device (`None`).
    pub fn open_or_default(spec: Option<&str>) -> Result<Device> {
        match spec {
            Some(s) => Device::open(s),
            None => Device::open_default(),
        }
    }

    /// Open a parsed spec.
    pub fn open_spec(spec: &DeviceSpec) -> Result<Device> {
        match spec {
            DeviceSpec::Daemon(path) => {
                let sock = shm::SeqPacket::connect(path).map_err(|e| Error::Spec {
                    spec: spec.to_string(),
                    reason: format!("cannot connect to the iwarpd socket: {e} (is iwarpd running, with [control] socket = \"{}\"?)", path.display()),
                })?;
                Device::handshake(spec.clone(), Session::new(sock), None)
            }
            DeviceSpec::Embedded(path) => crate::embedded::open(spec, path),
        }
    }

    /// Say hello over a connected session.
    pub(crate) fn handshake(
        spec: DeviceSpec,
        session: Session,
        engine: Option<Box<dyn LocalEngine>>,
    ) -> Result<Device> {
        let name = std::env::args()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "verbs".to_owned());
        let r = session.call(
            &Request::Hello {
                abi_version: abi::ABI_VERSION,
                pid: std::process::id(),
                name,
            },
            &[],
        )?;
        let Response::Hello {
            client,
            abi_version,
            device,
        } = r
        else {
            return Err(unexpected("Hello", &r));
        };
        if abi_version != abi::ABI_VERSION {
            return Err(Error::Protocol(format!(
                "iwarpd speaks ABI {abi_version}, this library {}",
                abi::ABI_VERSION
            )));
        }
        tracing::debug!(client, %spec, "device open");
        Ok(Device {
            inner: Arc::new(DeviceInner {
                session,
                attrs: device,
                client,
                spec,
                segments: Mutex::new(Vec::new()),
                engine,
            }),
        })
    }

    /// What the device offers (as answered when it was opened).
    pub fn attrs(&self) -> &DeviceAttrs {
        &self.inner.attrs
    }

    /// Ask the daemon for its attributes again.
    pub fn query(&self) -> Result<DeviceAttrs> {
        match self.call(&Request::QueryDevice {})? {
            Response::Device { device } => Ok(device),
            r => Err(unexpected("QueryDevice", &r)),
        }
    }

    /// The spec this device was opened with.
    pub fn spec(&self) -> &DeviceSpec {
        &self.inner.spec
    }

    /// The client number the daemon gave us (its logs and stats use it).
    pub fn client_id(&self) -> u32 {
        self.inner.client
    }

    /// A new protection domain.
    pub fn alloc_pd(&self) -> Result<Pd> {
        Pd::alloc(self)
    }

    /// A shared segment of at least `len` bytes, mapped here and by the daemon. Memory regions
    /// can be registered on any range of it ([`Pd::reg_mr`]).
    pub fn alloc_segment(&self, len: usize) -> Result<Segment> {
        Segment::alloc(self, len, shm::HugepagePolicy::Off)
    }

    /// Like [`Device::alloc_segment`], backed by 2 MiB hugepages when enough are free.
    pub fn alloc_segment_huge(&self, len: usize) -> Result<Segment> {
        Segment::alloc(self, len, shm::HugepagePolicy::Auto)
    }

    /// A completion channel: a file descriptor that becomes readable when an armed CQ gets a
    /// completion ([`Cq::req_notify`]).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        CompChannel::new()
    }

    /// A completion queue of at least `entries` completions (rounded up to a power of two),
    /// optionally signalling `channel`.
    pub fn create_cq(&self, entries: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        Cq::create(self, entries, channel)
    }

    /// A new connection-manager id (for `listen` or `connect`).
    pub fn create_cm_id(&self) -> Result<CmId> {
        CmId::create(self)
    }

    /// The next CM event of any id of this device, waiting at most `timeout` (`None`: wait
    /// forever). `Ok(None)` on timeout.
    pub fn get_cm_event(&self, timeout: Option<Duration>) -> Result<Option<CmEvent>> {
        let e = self.inner.session.next_event(timeout, |_| true)?;
        Ok(e.map(|e| CmEvent::from_abi(self, e)))
    }

    /// The control socket: readable when a CM event (or a response) is waiting. Use it in an
    /// `epoll`/`poll` loop, then call [`Device::get_cm_event`] with a zero timeout.
    pub fn event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.session.fd()
    }

    /// True when the caller's thread may drive the engine ([`Device::poll_engine`]): an
    /// embedded engine (run-to-completion mode). A daemon's engine runs on its own threads.
    pub fn is_pumped(&self) -> bool {
        self.inner.engine.is_some()
    }

    /// Embedded mode: run one iteration of the engine's dataplane loop on the calling thread
    /// (receive, place, transmit, complete), so a busy-polling application sees its
    /// completions and data without a hand-off to the dataplane thread; that thread is parked
    /// while the application keeps polling and takes over when it stops (`dataplane::pump`,
    /// [`Device::release_engine`]). Pin the polling thread with [`Device::pin_to_engine`].
    /// The calling thread is registered with DPDK on its first step (an lcore id, so its
    /// mbufs come from per-thread caches) and stays registered until the engine stops. DPDK's
    /// memory is freed at the stop if every thread that stepped the engine is the one that
    /// drops the device or has exited; otherwise it is left to the process exit.
    /// Nothing happens for a daemon's device. Busy loops may call it unconditionally.
    /// Returns whether an iteration ran (not for a daemon's device, nor while the
    /// dataplane thread or another application thread is running the loop).
    pub fn poll_engine(&self) -> bool {
        self.inner.engine.as_ref().is_some_and(|e| e.poll())
    }

    /// Embedded mode: the calling thread stops calling [`Device::poll_engine`] for a while
    /// (it is about to sleep or block): the engine's dataplane thread takes its loop back at
    /// once. Without it the parked thread notices only when it next wakes: 2 ms after the
    /// application's last poll at first, up to 20 ms while the application kept polling
    /// (`dataplane::pump::PARK_MAX` plus its timer slack, chosen so its wake-ups ride on
    /// scheduler ticks and stay out of latency-sensitive loops). Calls
    /// that block on the engine (CM events, control requests, completion channels) do it
    /// themselves. Nothing happens for a daemon's device.
    pub fn release_engine(&self) {
        if let Some(e) = &self.inner.engine {
            e.release();
        }
    }

    /// Embedded mode, for a thread that drives the engine ([`Device::poll_engine`]): pin it
    /// to the core of the engine's (first) dataplane thread, so the two share one core (the
    /// dataplane thread is parked while this one polls) instead of racing from two CPUs.
    /// Returns the core; `None` for a daemon's device or when pinning failed.
    pub fn pin_to_engine(&self) -> Option<usize> {
        self.inner.engine.as_ref()?.pin_current_thread()
    }

    pub(crate) fn call(&self, req: &Request) -> Result<Response> {
        self.inner.session.call(req, &[])
    }

    pub(crate) fn call_fd(
        &self,
        req: &Request,
        fd: std::os::fd::BorrowedFd<'_>,
    ) -> Result<Response> {
        self.inner.session.call(req, &[fd])
    }
}

/// The error for a response of the wrong kind.
pub(crate) fn unexpected(request: &str, r: &Response) -> Error {
    Error::Protocol(format!("{request} answered with {}", r.name()))
}
