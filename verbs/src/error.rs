//! The library's error type.

use abi::ctl::ErrorCode;

/// Result of every fallible call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device spec could not be used (names the spec and what is allowed).
    #[error("device `{spec}`: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// Why it is not usable.
        reason: String,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Creating or mapping a shared segment failed.
    #[error("shared segment: {0}")]
    Segment(#[from] shm::SegmentError),
    /// The daemon refused a request; nothing changed.
    #[error("{request}: {code:?}: {message}")]
    Refused {
        /// The request.
        request: &'static str,
        /// The daemon's error code.
        code: ErrorCode,
        /// The daemon's explanation (names the field).
        message: String,
    },
    /// The daemon closed the control connection (it stopped or died).
    #[error("the iwarpd control connection is closed")]
    DaemonGone,
    /// The daemon did not answer in time.
    #[error("{request}: no answer from iwarpd within {secs} s")]
    Timeout {
        /// The request.
        request: &'static str,
        /// The time waited.
        secs: u64,
    },
    /// The daemon answered something this library does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Memory outside this device's shared segments cannot be registered: the daemon could
    /// not place data into it. Allocate it with `Pd::alloc_mr` or `Device::alloc_segment`.
    #[error(
        "{len} bytes at {addr:#x} are not inside a shared segment of this device: allocate \
         registered memory with Pd::alloc_mr or Device::alloc_segment (no hidden copy is made)"
    )]
    NotShared {
        /// First byte.
        addr: usize,
        /// Length.
        len: usize,
    },
    /// A range outside its memory region or segment.
    #[error("range {offset}..{offset}+{len} is outside the {size}-byte {what}")]
    OutOfRange {
        /// What was indexed.
        what: &'static str,
        /// Start.
        offset: u64,
        /// Length.
        len: u64,
        /// Size of the object.
        size: u64,
    },
    /// An argument is invalid (the message names it and the allowed values).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The send or receive ring is full: poll completions first.
    #[error("the {0} queue is full (poll completions, or create the QP with a deeper queue)")]
    QueueFull(&'static str),
    /// A ring in shared memory is corrupt (the daemon wrote garbage); the object is unusable.
    #[error("shared ring: {0}")]
    Ring(#[from] abi::ring::RingError),
    /// The CM id has no event of the kind waited for before the deadline.
    #[error("no CM event within {0:?}")]
    NoEvent(std::time::Duration),
    /// The peer rejected our connect (MPA Reply with the Rejected bit), with its private
    /// data.
    #[error(
        "the peer rejected the connection (private data {:?})",
        String::from_utf8_lossy(private_data)
    )]
    Rejected {
        /// The peer's private data.
        private_data: Vec<u8>,
    },
    /// The active open failed (`reason` is one of `abi::ctl::connect_failure`).
    #[error("connect failed: {}", connect_failure_name(*reason))]
    ConnectFailed {
        /// The daemon's reason code.
        reason: u8,
    },
    /// A CM event other than the one waited for.
    #[error("unexpected CM event: {0}")]
    UnexpectedEvent(String),
    /// Embedded mode failed to start or is not built in.
    #[error("embedded mode: {0}")]
    Embedded(String),
}

impl Error {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { what, source }
    }

    /// The daemon's error code, if the daemon refused the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<abi::ring::PushError> for Error {
    fn from(e: abi::ring::PushError) -> Self {
        match e {
            abi::ring::PushError::Full => Error::QueueFull("send"),
            abi::ring::PushError::Ring(r) => Error::Ring(r),
        }
    }
}

/// A readable name of an `abi::ctl::connect_failure` code.
pub fn connect_failure_name(reason: u8) -> &'static str {
    use abi::ctl::connect_failure as f;
    match reason {
        f::UNREACHABLE => "peer unreachable (no ARP answer or no route)",
        f::REFUSED => "connection refused (RST to the SYN)",
        f::TIMEOUT => "TCP or MPA startup timed out",
        f::MPA => "MPA negotiation failed",
        f::RESET => "connection reset during startup",
        f::LOCAL => "local failure (no resources)",
        _ => "unknown reason",
    }
}
