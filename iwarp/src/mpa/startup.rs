//! MPA connection setup for both roles (RFC 5044 §7.1, RFC 6581 §5–§9), sans-IO.
//!
//! Call order: [`Startup::new`] at connection time; feed in-order TCP bytes with
//! [`Startup::handle_stream`] (it consumes only the MPA frame: bytes after it are FPDUs and
//! belong to the deframer); send what [`Startup::poll_transmit`] returns; drive
//! [`Startup::handle_timeout`] at [`Startup::poll_timeout`]. A responder without
//! `auto_accept` sees the request in [`Startup::peer_request`] and calls
//! [`Startup::accept`] or [`Startup::reject`]. When [`Startup::outcome`] is `Some`, setup is
//! over.
//!
//! Interop facts from Linux siw (`siw-peer/README.md` §5) built in:
//! - the responder caps IRD/ORD (default 128) and replies with the values swapped;
//! - siw as responder may lose an FPDU sent right after its Reply: the initiator waits
//!   `first_fpdu_delay` (default 50 ms) before its first FPDU ([`FirstSend::NotBefore`]);
//! - siw as initiator fails if an FPDU follows the Reply: a responder never sends first
//!   ([`FirstSend::AfterPeerFpdu`]), with or without peer-to-peer mode;
//! - siw picks a zero-length Write RTR if offered, else Read, and proposes Write when the
//!   initiator set no RTR bit.

use core::fmt;

use netcore::{Duration, Instant};

use super::wire::{FrameKind, HEADER_LEN, IrdOrd, MAX_PD_LEN, Repr, RtrKind, WireError};
use super::{DeframerConfig, FramerConfig, MpaError};

/// Which side of the MPA exchange we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends the MPA Request (the TCP active opener).
    Initiator,
    /// Answers with a Reply or Reject.
    Responder,
}

/// When to use the MPA CRC (RFC 5044 §7.1: used if either side asks for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrcPolicy {
    /// Never; a peer that asks is refused.
    Never,
    /// Only if the peer asks (what stock siw does).
    #[default]
    IfPeerAsks,
    /// Always ask.
    Always,
    /// Always ask, and refuse a peer whose Request (responder) or Reply (initiator) does not
    /// set C (what siw's `crc` build does as initiator).
    Require,
}

impl CrcPolicy {
    /// Whether we set C in our Request/Reply.
    fn asks(self) -> bool {
        matches!(self, CrcPolicy::Always | CrcPolicy::Require)
    }
}

/// The RTR message types we offer (initiator) or accept (responder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtrSet {
    /// Zero-length RDMA Write.
    pub write: bool,
    /// Zero-length RDMA Read.
    pub read: bool,
    /// Zero-length Send.
    pub send: bool,
}

impl Default for RtrSet {
    fn default() -> Self {
        RtrSet {
            write: true,
            read: true,
            send: true,
        }
    }
}

impl RtrSet {
    fn contains(&self, k: RtrKind) -> bool {
        match k {
            RtrKind::Write => self.write,
            RtrKind::Read => self.read,
            RtrKind::Send => self.send,
        }
    }
}

/// Negotiation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupConfig {
    /// Our role.
    pub role: Role,
    /// MPA revision we send (initiator) or the highest we accept (responder): 1 or 2. With 2
    /// the RFC 6581 enhanced IRD/ORD words are used.
    pub revision: u8,
    /// Initiator: with revision 2, use the RFC 6581 enhanced IRD/ORD words (siw always does).
    pub enhanced: bool,
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Ask the peer to put markers on what it sends us (our M bit).
    pub markers_rx: bool,
    /// Whether we can send markers if the peer asks; if not, a peer asking is refused.
    pub markers_tx_supported: bool,
    /// Initiator: the IRD we offer. Responder: the IRD we grant at least.
    pub ird: u16,
    /// Initiator: the ORD we want. Responder: the most ORD we take.
    pub ord: u16,
    /// Responder: upper limit on the IRD granted (siw: 128).
    pub ird_cap: u16,
    /// Responder: refuse with "insufficient IRD" when the initiator's ORD exceeds what we
    /// grant, instead of granting less (siw is relaxed).
    pub strict_ird: bool,
    /// Initiator: request peer-to-peer mode (RFC 6581). Responder: allow it.
    pub p2p: bool,
    /// RTR types offered (initiator) or accepted (responder).
    pub rtr: RtrSet,
    /// ULP private data we send in the Request (initiator) or Reply (responder).
    pub private_data: Vec<u8>,
    /// Largest ULP private data we send (siw takes at most 252 next to the IRD/ORD words).
    pub max_ulp_private_data: usize,
    /// Largest private data (PD_Length, IRD/ORD included) accepted from the peer.
    pub max_peer_private_data: usize,
    /// Responder: accept automatically with `private_data` (no `accept()` call).
    pub auto_accept: bool,
    /// Initiator: how long to wait for the Reply (siw: 5 s).
    pub reply_timeout: Duration,
    /// Responder: how long to wait for the Request (siw: 10 s).
    pub request_timeout: Duration,
    /// Initiator: delay between receiving the Reply and sending the first FPDU (siw race).
    pub first_fpdu_delay: Duration,
}

impl StartupConfig {
    /// Defaults for `role` that interoperate with Linux siw.
    pub fn new(role: Role) -> Self {
        StartupConfig {
            role,
            revision: 2,
            enhanced: true,
            crc: CrcPolicy::IfPeerAsks,
            markers_rx: false,
            markers_tx_supported: true,
            ird: 1,
            ord: 1,
            ird_cap: 128,
            strict_ird: false,
            p2p: false,
            rtr: RtrSet::default(),
            private_data: Vec::new(),
            max_ulp_private_data: 252,
            max_peer_private_data: MAX_PD_LEN,
            auto_accept: true,
            reply_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            first_fpdu_delay: Duration::from_millis(50),
        }
    }
}

/// When the ULP may send its first FPDU after setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstSend {
    /// Not before this instant (initiator: Reply time + `first_fpdu_delay`). In peer-to-peer
    /// mode the first FPDU must be the RTR.
    NotBefore(Instant),
    /// Only after the first FPDU from the peer arrived (responder; RFC 5044 §7.1 and
    /// siw's initiator strictness). In peer-to-peer mode that FPDU is the RTR.
    AfterPeerFpdu,
}

/// Parameters of an established MPA connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Established {
    /// MPA revision in use.
    pub revision: u8,
    /// CRC on, both directions.
    pub crc: bool,
    /// The peer puts markers on what it sends us.
    pub markers_rx: bool,
    /// We must put markers on what we send.
    pub markers_tx: bool,
    /// Our inbound RDMA Read queue depth.
    pub ird: u16,
    /// Our outbound RDMA Read queue depth.
    pub ord: u16,
    /// Peer-to-peer RTR type, if that mode was negotiated (initiator sends it as its first
    /// FPDU; responder expects it as the first FPDU received).
    pub rtr: Option<RtrKind>,
    /// The peer's ULP private data.
    pub peer_private_data: Vec<u8>,
    /// When we may send the first FPDU.
    pub first_send: FirstSend,
}

impl Established {
    /// Framer settings for full operation (stream position 0 = first octet after our
    /// Request/Reply).
    pub fn framer_config(&self) -> FramerConfig {
        FramerConfig {
            crc: self.crc,
            markers: self.markers_tx,
            stream_pos: 0,
        }
    }

    /// Deframer settings for full operation (stream position 0 = first octet after the
    /// peer's Request/Reply); other limits at their defaults.
    pub fn deframer_config(&self) -> DeframerConfig {
        DeframerConfig {
            crc: self.crc,
            markers: self.markers_rx,
            ..DeframerConfig::default()
        }
    }
}

/// Why setup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartupError {
    /// No Request/Reply within the timeout.
    Timeout,
    /// The peer's frame is not a valid MPA frame (bad key, truncated, impossible length).
    Malformed(WireError),
    /// A protocol-level refusal with its TERMINATE meaning (e.g. no matching RTR).
    Mpa(MpaError),
    /// We refused the peer's request (the Reject was sent).
    Refused(RejectReason),
    /// The peer asked for something our configuration forbids (initiator side).
    Incompatible(RejectReason),
    /// API misuse (e.g. `accept` in the wrong state or private data too long).
    InvalidState,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// Unsupported revision.
    Revision(u8),
    /// Markers asked for but not supported.
    Markers,
    /// CRC asked for but policy is `Never`, or required but not granted.
    Crc,
    /// Private data too long.
    PrivateDataTooLong(usize),
    /// Enhanced frame without IRD/ORD words.
    MissingIrdOrd,
    /// Initiator's ORD exceeds the IRD we can grant (strict mode).
    InsufficientIrd,
    /// No RTR type in common.
    NoMatchingRtr,
    /// The ULP rejected the connection.
    Application,
}

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartupError::Timeout => f.write_str("MPA setup timed out"),
            StartupError::Malformed(e) => write!(f, "malformed MPA frame: {e}"),
            StartupError::Mpa(e) => write!(f, "MPA setup failed: {e}"),
            StartupError::Refused(r) => write!(f, "MPA request refused: {r:?}"),
            StartupError::Incompatible(r) => write!(f, "MPA reply incompatible: {r:?}"),
            StartupError::InvalidState => f.write_str("MPA setup API misuse"),
        }
    }
}

impl std::error::Error for StartupError {}

/// How setup ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Full operation may start.
    Established(Established),
    /// The peer rejected us (R bit in the Reply) with its private data.
    Rejected {
        /// The peer's ULP private data.
        peer_private_data: Vec<u8>,
    },
    /// Setup failed; the connection should be closed (after sending any pending Reject).
    Failed(StartupError),
}

/// A received MPA Request, as a responder's ULP sees it before accepting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRequest {
    /// Revision asked for.
    pub revision: u8,
    /// C bit.
    pub crc: bool,
    /// M bit.
    pub markers: bool,
    /// RFC 6581 words.
    pub ird_ord: Option<IrdOrd>,
    /// ULP private data.
    pub private_data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    AwaitFrame,
    AwaitAccept(PeerRequest),
    Done(Outcome),
}

/// The MPA setup state machine (see the module docs for the call order).
#[derive(Debug, Clone)]
pub struct Startup {
    cfg: StartupConfig,
    state: State,
    deadline: Instant,
    /// Partial incoming frame.
    rx: Vec<u8>,
    /// Frames to send.
    tx: Option<Vec<u8>>,
}

impl Startup {
    /// Start setup at `now`. An initiator queues its Request immediately.
    pub fn new(cfg: StartupConfig, now: Instant) -> Result<Self, StartupError> {
        if cfg.private_data.len() > cfg.max_ulp_private_data
            || cfg.private_data.len() + 4 > MAX_PD_LEN
        {
            return Err(StartupError::InvalidState);
        }
        let timeout = match cfg.role {
            Role::Initiator => cfg.reply_timeout,
            Role::Responder => cfg.request_timeout,
        };
        let mut s = Startup {
            deadline: now + timeout,
            state: State::AwaitFrame,
            rx: Vec::with_capacity(HEADER_LEN + MAX_PD_LEN),
            tx: None,
            cfg,
        };
        if s.cfg.role == Role::Initiator {
            let io = (s.cfg.revision >= 2 && s.cfg.enhanced).then_some(IrdOrd {
                ird: s.cfg.ird,
                ord: s.cfg.ord,
                p2p: s.cfg.p2p,
                rtr_write: s.cfg.p2p && s.cfg.rtr.write,
                rtr_read: s.cfg.p2p && s.cfg.rtr.read,
                rtr_send: s.cfg.p2p && s.cfg.rtr.send,
            });
            let req = Repr {
                kind: FrameKind::Request,
                markers: s.cfg.markers_rx,
                crc: s.cfg.crc.asks(),
                reject: false,
                revision: s.cfg.revision,
                ird_ord: io,
                ulp_data: &s.cfg.private_data,
            };
            s.tx = Some(emit(&req));
        }
        Ok(s)
    }

    /// Our configuration.
    pub fn config(&self) -> &StartupConfig {
        &self.cfg
    }

    /// The result once setup is over.
    pub fn outcome(&self) -> Option<&Outcome> {
        match &self.state {
            State::Done(o) => Some(o),
            _ => None,
        }
    }

    /// The pending Request a responder's ULP must `accept` or `reject`.
    pub fn peer_request(&self) -> Option<&PeerRequest> {
        match &self.state {
            State::AwaitAccept(r) => Some(r),
            _ => None,
        }
    }

    /// Bytes to send (the Request, Reply or Reject), once.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.tx.take()
    }

    /// When `handle_timeout` must be called next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Done(_) => None,
            _ => Some(self.deadline),
        }
    }

    /// Time passes.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !matches!(self.state, State::Done(_)) && now >= self.deadline {
            self.state = State::Done(Outcome::Failed(StartupError::Timeout));
        }
    }

    /// Feed in-order stream bytes; returns how many were consumed. Only the MPA frame is
    /// consumed: anything after it (FPDUs) is left for the deframer.
    pub fn handle_stream(&mut self, now: Instant, bytes: &[u8]) -> usize {
        if !matches!(self.state, State::AwaitFrame) {
            return 0;
        }
        let mut used = 0;
        // Header first, then exactly the private data it announces.
        loop {
            let need = match self.header_pd_len() {
                None => HEADER_LEN - self.rx.len(),
                Some(pd) => HEADER_LEN + pd - self.rx.len(),
            };
            if need == 0 {
                let frame = core::mem::take(&mut self.rx);
                self.on_frame(now, &frame);
                return used;
            }
            if used == bytes.len() {
                return used;
            }
            let take = need.min(bytes.len() - used);
            self.rx
                .extend_from_slice(bytes.get(used..used + take).unwrap_or(&[]));
            used += take;
            if let Some(pd) = self.header_pd_len() {
                if !self.rx.starts_with(b"MPA ID Re") {
                    self.fail(StartupError::Malformed(WireError::BadKey));
                    return used;
                }
                if pd > self.cfg.max_peer_private_data.min(MAX_PD_LEN) {
                    self.too_long(pd);
                    return used;
                }
            }
        }
    }

    /// PD_Length of the frame being received, once its header is complete.
    fn header_pd_len(&self) -> Option<usize> {
        match self.rx.get(18..20) {
            Some(&[a, b]) => Some(usize::from(u16::from_be_bytes([a, b]))),
            _ => None,
        }
    }

    fn fail(&mut self, e: StartupError) {
        self.state = State::Done(Outcome::Failed(e));
    }

    fn too_long(&mut self, pd: usize) {
        match self.cfg.role {
            Role::Responder => self.send_reject(RejectReason::PrivateDataTooLong(pd), &[]),
            Role::Initiator => self.fail(StartupError::Malformed(WireError::PdTooLong(
                u16::try_from(pd).unwrap_or(u16::MAX),
            ))),
        }
    }

    fn on_frame(&mut self, now: Instant, frame: &[u8]) {
        let repr = match Repr::parse_bytes(frame) {
            Ok((r, _)) => r,
            Err(WireError::MissingIrdOrd) if self.cfg.role == Role::Responder => {
                // siw: "Rev 2 with Enhanced but pd_len < 4: Reject".
                return self.send_reject(RejectReason::MissingIrdOrd, &[]);
            }
            Err(e) => return self.fail(StartupError::Malformed(e)),
        };
        match (self.cfg.role, repr.kind) {
            (Role::Responder, FrameKind::Request) => self.on_request(&repr),
            (Role::Initiator, FrameKind::Reply) => self.on_reply(now, &repr),
            // RFC 5044 §7.1: a frame with the wrong key for our role is an error.
            _ => self.fail(StartupError::Malformed(WireError::BadKey)),
        }
    }

    fn on_request(&mut self, req: &Repr<'_>) {
        let reason = if req.revision == 0 || req.revision > self.cfg.revision {
            Some(RejectReason::Revision(req.revision))
        } else if req.markers && !self.cfg.markers_tx_supported {
            // siw answers M=1 with a Reject too (README §5.5).
            Some(RejectReason::Markers)
        } else if (req.crc && self.cfg.crc == CrcPolicy::Never)
            || (!req.crc && self.cfg.crc == CrcPolicy::Require)
        {
            Some(RejectReason::Crc)
        } else {
            None
        };
        if let Some(r) = reason {
            return self.send_reject(r, &[]);
        }
        let pr = PeerRequest {
            revision: req.revision,
            crc: req.crc,
            markers: req.markers,
            ird_ord: req.ird_ord,
            private_data: req.ulp_data.to_vec(),
        };
        if self.cfg.auto_accept {
            let pd = self.cfg.private_data.clone();
            self.reply(pr, &pd);
        } else {
            self.state = State::AwaitAccept(pr);
        }
    }

    /// Responder: accept the pending request with `private_data` (ULP data after IRD/ORD).
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), StartupError> {
        let State::AwaitAccept(pr) = &self.state else {
            return Err(StartupError::InvalidState);
        };
        if private_data.len() > self.cfg.max_ulp_private_data {
            return Err(StartupError::InvalidState);
        }
        let pr = pr.clone();
        self.reply(pr, private_data);
        Ok(())
    }

    /// Responder: accept with `private_data`, granting at least `ird` and taking at most `ord`
    /// (instead of the configured values; the usual RFC 6581 rules apply).
    pub fn accept_with(
        &mut self,
        private_data: &[u8],
        ird: u16,
        ord: u16,
    ) -> Result<(), StartupError> {
        if !matches!(self.state, State::AwaitAccept(_)) {
            return Err(StartupError::InvalidState);
        }
        self.cfg.ird = ird.min(IrdOrd::VALUE_MASK);
        self.cfg.ord = ord.min(IrdOrd::VALUE_MASK);
        self.accept(private_data)
    }

    /// Responder, before [`Startup::accept`]: the CRC choice of the Reply (the application's
    /// per-connection choice instead of the listener's; RFC 5044 §7.1: CRC is used when
    /// either side asks).
    pub fn set_crc_policy(&mut self, crc: CrcPolicy) -> Result<(), StartupError> {
        if !matches!(self.state, State::AwaitAccept(_)) {
            return Err(StartupError::InvalidState);
        }
        self.cfg.crc = crc;
        Ok(())
    }

    /// Responder: reject the pending request with `private_data`.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), StartupError> {
        if !matches!(self.state, State::AwaitAccept(_)) {
            return Err(StartupError::InvalidState);
        }
        let pd = private_data
            .get(..self.cfg.max_ulp_private_data)
            .unwrap_or(private_data);
        self.send_reject(RejectReason::Application, pd);
        Ok(())
    }

    fn reply(&mut self, req: PeerRequest, private_data: &[u8]) {
        let crc = match self.cfg.crc {
            CrcPolicy::Never => false,
            CrcPolicy::IfPeerAsks => req.crc,
            CrcPolicy::Always | CrcPolicy::Require => true,
        };
        let mut rtr = None;
        let mut io = None;
        let (mut ird, mut ord) = (self.cfg.ird, self.cfg.ord);
        if let Some(p) = req.ird_ord {
            // siw: grant IRD = max(ours, initiator's ORD), limited; ORD = initiator's IRD,
            // limited to what we take (README §5.3, §10.5).
            ird = self
                .cfg
                .ird
                .max(p.ord)
                .min(self.cfg.ird_cap)
                .min(IrdOrd::VALUE_MASK);
            ord = p.ird.min(self.cfg.ord);
            if self.cfg.strict_ird && ird < p.ord {
                return self.send_reject(RejectReason::InsufficientIrd, &[]);
            }
            if p.p2p && self.cfg.p2p {
                let offered = [RtrKind::Write, RtrKind::Read, RtrKind::Send];
                let none_offered = !(p.rtr_write || p.rtr_read || p.rtr_send);
                rtr = if none_offered && self.cfg.rtr.write {
                    // siw proposes Write when the initiator set no RTR bit.
                    Some(RtrKind::Write)
                } else {
                    offered
                        .into_iter()
                        .find(|k| p.offers(*k) && self.cfg.rtr.contains(*k))
                };
                if rtr.is_none() {
                    return self.send_reject(RejectReason::NoMatchingRtr, &[]);
                }
            }
            io = Some(
                IrdOrd {
                    ird,
                    ord,
                    p2p: rtr.is_some(),
                    ..Default::default()
                }
                .with_only_rtr(rtr),
            );
        }
        let rep = Repr {
            kind: FrameKind::Reply,
            markers: self.cfg.markers_rx,
            crc,
            reject: false,
            revision: req.revision,
            ird_ord: io,
            ulp_data: private_data,
        };
        self.tx = Some(emit(&rep));
        self.state = State::Done(Outcome::Established(Established {
            revision: req.revision,
            crc: crc || req.crc,
            markers_rx: self.cfg.markers_rx,
            markers_tx: req.markers,
            ird,
            ord,
            rtr,
            peer_private_data: req.private_data,
            first_send: FirstSend::AfterPeerFpdu,
        }));
    }

    fn send_reject(&mut self, reason: RejectReason, private_data: &[u8]) {
        // Echo the enhanced words (zeros) on a revision 2 reject, as siw does.
        let rev = self.cfg.revision.clamp(1, 2);
        let rep = Repr {
            kind: FrameKind::Reply,
            markers: false,
            crc: false,
            reject: true,
            revision: rev,
            ird_ord: (rev >= 2).then(IrdOrd::default),
            ulp_data: private_data,
        };
        self.tx = Some(emit(&rep));
        let e = match reason {
            RejectReason::NoMatchingRtr => StartupError::Mpa(MpaError::NoMatchingRtr),
            RejectReason::InsufficientIrd => StartupError::Mpa(MpaError::InsufficientIrd),
            r => StartupError::Refused(r),
        };
        self.state = State::Done(Outcome::Failed(e));
    }

    fn on_reply(&mut self, now: Instant, rep: &Repr<'_>) {
        if rep.reject {
            self.state = State::Done(Outcome::Rejected {
                peer_private_data: rep.ulp_data.to_vec(),
            });
            return;
        }
        if rep.revision == 0 || rep.revision > self.cfg.revision {
            return self.fail(StartupError::Incompatible(RejectReason::Revision(
                rep.revision,
            )));
        }
        if rep.markers && !self.cfg.markers_tx_supported {
            return self.fail(StartupError::Incompatible(RejectReason::Markers));
        }
        if (rep.crc && self.cfg.crc == CrcPolicy::Never)
            || (!rep.crc && self.cfg.crc == CrcPolicy::Require)
        {
            return self.fail(StartupError::Incompatible(RejectReason::Crc));
        }
        let (mut ird, mut ord) = (self.cfg.ird, self.cfg.ord);
        let mut rtr = None;
        if let Some(p) = rep.ird_ord {
            ord = self.cfg.ord.min(p.ird);
            ird = self.cfg.ird;
            if self.cfg.p2p && p.p2p {
                let chosen: Vec<RtrKind> = [RtrKind::Write, RtrKind::Read, RtrKind::Send]
                    .into_iter()
                    .filter(|k| p.offers(*k))
                    .collect();
                rtr = match chosen.as_slice() {
                    [k] if self.cfg.rtr.contains(*k) => Some(*k),
                    _ => return self.fail(StartupError::Mpa(MpaError::NoMatchingRtr)),
                };
            }
        }
        self.state = State::Done(Outcome::Established(Established {
            revision: rep.revision,
            crc: rep.crc || self.cfg.crc.asks(),
            markers_rx: self.cfg.markers_rx,
            markers_tx: rep.markers,
            ird,
            ord,
            rtr,
            peer_private_data: rep.ulp_data.to_vec(),
            first_send: FirstSend::NotBefore(now + self.cfg.first_fpdu_delay),
        }));
    }
}

fn emit(r: &Repr<'_>) -> Vec<u8> {
    let mut v = vec![0u8; r.buffer_len()];
    // The buffer is exactly buffer_len() and private data lengths were checked on entry.
    let n = r.emit(&mut v).unwrap_or(0);
    v.truncate(n);
    v
}
