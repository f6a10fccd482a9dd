//! Work queue entries: the send-queue [`Wqe`] and the receive-queue [`RecvWqe`].
//!
//! Both live in shared memory written by the client, so the daemon treats them as untrusted:
//! every field is a plain integer (any bit pattern is a value), and [`Wqe::opcode`],
//! [`Wqe::sges`] and [`RecvWqe::sges`] validate what the dataplane needs before it acts.
//! Operations follow RFC 5040 §4.3 (Send, Send with Invalidate, Send with Solicited Event,
//! RDMA Write, RDMA Read) and RFC 7306 §4 (Write with Immediate Data, FetchAdd, CompareSwap).

use core::mem::{offset_of, size_of};

/// Most SGEs in one send WQE.
pub const MAX_SEND_SGE: usize = 5;
/// Most SGEs in one receive WQE.
pub const MAX_RECV_SGE: usize = 7;

/// A local scatter/gather element: `len` bytes at `offset` of the region whose local key is
/// `lkey` (a range of a registered MR; the daemon checks it against the QP's PD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Sge {
    /// Local key of the MR (`RegMr`'s answer).
    pub lkey: u32,
    /// Length in bytes.
    pub len: u32,
    /// Byte offset from the start of the MR.
    pub offset: u64,
}

const _: () = assert!(size_of::<Sge>() == 16);
const _: () = assert!(offset_of!(Sge, lkey) == 0);
const _: () = assert!(offset_of!(Sge, len) == 4);
const _: () = assert!(offset_of!(Sge, offset) == 8);

/// Send-queue operations (`Wqe::opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WqeOpcode {
    /// Send (RFC 5040 §4.3); with [`WQE_SOLICITED`] it is Send with Solicited Event.
    Send = 0,
    /// Send with Invalidate of `invalidate_stag` at the peer (RFC 5040 §6.2).
    SendInvalidate = 1,
    /// Send with Solicited Event (the flag is implied).
    SendSe = 2,
    /// RDMA Write of the SGEs to `rkey`/`remote_addr`.
    Write = 3,
    /// RDMA Write then Immediate Data carrying `imm` (RFC 7306 §5).
    WriteImm = 4,
    /// RDMA Read of `rkey`/`remote_addr` into the SGEs.
    Read = 5,
    /// Atomic FetchAdd of `compare_add` at `rkey`/`remote_addr` (RFC 7306 §4); the original
    /// 8 bytes go to the single SGE.
    FetchAdd = 6,
    /// Atomic CompareSwap: if the 8 bytes equal `compare_add`, write `swap`; the original
    /// value goes to the single SGE.
    CmpSwap = 7,
}

impl WqeOpcode {
    /// Every opcode, in wire order.
    pub const ALL: [WqeOpcode; 8] = [
        WqeOpcode::Send,
        WqeOpcode::SendInvalidate,
        WqeOpcode::SendSe,
        WqeOpcode::Write,
        WqeOpcode::WriteImm,
        WqeOpcode::Read,
        WqeOpcode::FetchAdd,
        WqeOpcode::CmpSwap,
    ];

    /// The opcode for a raw byte, `None` if unknown.
    pub fn from_u8(v: u8) -> Option<WqeOpcode> {
        WqeOpcode::ALL.get(usize::from(v)).copied()
    }

    /// True for operations with a remote STag (Write, Read, atomics).
    pub fn is_remote(self) -> bool {
        !matches!(
            self,
            WqeOpcode::Send | WqeOpcode::SendInvalidate | WqeOpcode::SendSe
        )
    }

    /// True for the RFC 7306 atomics.
    pub fn is_atomic(self) -> bool {
        matches!(self, WqeOpcode::FetchAdd | WqeOpcode::CmpSwap)
    }
}

/// Flag: produce a completion on success (errors always complete).
pub const WQE_SIGNALED: u8 = 0x01;
/// Flag: wait until every earlier Read and atomic completed (RFC 5040 §6.1 fence).
pub const WQE_FENCE: u8 = 0x02;
/// Flag: Solicited Event (Send with SE, Write with Immediate with SE).
pub const WQE_SOLICITED: u8 = 0x04;
/// Every defined flag.
pub const WQE_FLAGS_ALL: u8 = WQE_SIGNALED | WQE_FENCE | WQE_SOLICITED;

/// A send-queue entry: 128 bytes.
///
/// ```text
///  0 wr_id            u64   echoed in the completion
///  8 opcode           u8    WqeOpcode
///  9 flags            u8    WQE_SIGNALED | WQE_FENCE | WQE_SOLICITED
/// 10 num_sge          u8    0..=MAX_SEND_SGE
/// 11 _rsvd0           u8
/// 12 rkey             u32   remote STag (Write, Read, atomics)
/// 16 remote_addr      u64   remote tagged offset
/// 24 imm / compare_add u64  immediate data (WriteImm), addend or compared value (atomics)
/// 32 swap             u64   new value (CmpSwap)
/// 40 invalidate_stag  u32   STag the peer invalidates (SendInvalidate)
/// 44 _rsvd1           u32
/// 48 sge[5]           16 B each
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Wqe {
    /// Caller's id, echoed in the completion.
    pub wr_id: u64,
    /// [`WqeOpcode`] as a byte.
    pub opcode: u8,
    /// `WQE_*` flags.
    pub flags: u8,
    /// SGEs in use.
    pub num_sge: u8,
    /// Reserved, zero.
    pub rsvd0: u8,
    /// Remote STag.
    pub rkey: u32,
    /// Remote tagged offset.
    pub remote_addr: u64,
    /// Immediate data (WriteImm) or the atomic addend / compared value.
    pub compare_add: u64,
    /// CmpSwap's new value.
    pub swap: u64,
    /// STag the peer must invalidate (SendInvalidate).
    pub invalidate_stag: u32,
    /// Reserved, zero.
    pub rsvd1: u32,
    /// Local buffers: source of Send/Write, sink of Read/atomics.
    pub sge: [Sge; MAX_SEND_SGE],
}

const _: () = assert!(size_of::<Wqe>() == 128);
const _: () = assert!(offset_of!(Wqe, wr_id) == 0);
const _: () = assert!(offset_of!(Wqe, opcode) == 8);
const _: () = assert!(offset_of!(Wqe, flags) == 9);
const _: () = assert!(offset_of!(Wqe, num_sge) == 10);
const _: () = assert!(offset_of!(Wqe, rkey) == 12);
const _: () = assert!(offset_of!(Wqe, remote_addr) == 16);
const _: () = assert!(offset_of!(Wqe, compare_add) == 24);
const _: () = assert!(offset_of!(Wqe, swap) == 32);
const _: () = assert!(offset_of!(Wqe, invalidate_stag) == 40);
const _: () = assert!(offset_of!(Wqe, rsvd1) == 44);
const _: () = assert!(offset_of!(Wqe, sge) == 48);

/// Why a WQE read from a ring is refused (the QP goes to ERROR, RFC 5040 §5.4 local error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WqeError {
    /// Unknown opcode byte.
    Opcode(u8),
    /// Undefined flag bits.
    Flags(u8),
    /// `num_sge` above the maximum.
    NumSge(u8),
    /// An atomic needs exactly one SGE of at least 8 bytes.
    AtomicSink,
}

impl core::fmt::Display for WqeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WqeError::Opcode(v) => write!(f, "unknown WQE opcode {v}"),
            WqeError::Flags(v) => write!(f, "undefined WQE flags {v:#04x}"),
            WqeError::NumSge(n) => write!(f, "{n} SGEs, at most {MAX_SEND_SGE} allowed"),
            WqeError::AtomicSink => write!(f, "an atomic needs one SGE of 8 bytes"),
        }
    }
}

impl std::error::Error for WqeError {}

impl Wqe {
    /// A WQE with the given id, opcode and SGEs (signaled); the rest zero.
    ///
    /// At most [`MAX_SEND_SGE`] SGEs are taken; [`Wqe::try_new`] reports more.
    pub fn new(wr_id: u64, opcode: WqeOpcode, sges: &[Sge]) -> Wqe {
        let n = sges.len().min(MAX_SEND_SGE);
        let mut w = Wqe {
            wr_id,
            opcode: opcode as u8,
            flags: WQE_SIGNALED,
            num_sge: n as u8,
            ..Wqe::default()
        };
        w.sge[..n].copy_from_slice(&sges[..n]);
        if opcode == WqeOpcode::SendSe {
            w.flags |= WQE_SOLICITED;
        }
        w
    }

    /// Like [`Wqe::new`] but refuses more than [`MAX_SEND_SGE`] SGEs.
    pub fn try_new(wr_id: u64, opcode: WqeOpcode, sges: &[Sge]) -> Result<Wqe, WqeError> {
        if sges.len() > MAX_SEND_SGE {
            return Err(WqeError::NumSge(
                u8::try_from(sges.len()).unwrap_or(u8::MAX),
            ));
        }
        Ok(Wqe::new(wr_id, opcode, sges))
    }

    /// The validated opcode.
    pub fn opcode(&self) -> Result<WqeOpcode, WqeError> {
        WqeOpcode::from_u8(self.opcode).ok_or(WqeError::Opcode(self.opcode))
    }

    /// The SGEs in use, validated against the maximum (and the atomics' single 8-byte sink).
    pub fn sges(&self) -> Result<&[Sge], WqeError> {
        let sges = self
            .sge
            .get(..usize::from(self.num_sge))
            .ok_or(WqeError::NumSge(self.num_sge))?;
        if let Ok(op) = self.opcode()
            && op.is_atomic()
            && !(sges.len() == 1 && sges[0].len >= 8)
        {
            return Err(WqeError::AtomicSink);
        }
        Ok(sges)
    }

    /// Check opcode, flags and SGEs at once (what the dataplane does before acting).
    pub fn validate(&self) -> Result<WqeOpcode, WqeError> {
        let op = self.opcode()?;
        if self.flags & !WQE_FLAGS_ALL != 0 {
            return Err(WqeError::Flags(self.flags));
        }
        self.sges()?;
        Ok(op)
    }

    /// Total bytes of the SGEs in use (saturating; 0 for a bad `num_sge`).
    pub fn total_len(&self) -> u64 {
        self.sges()
            .map(|s| s.iter().map(|g| u64::from(g.len)).sum())
            .unwrap_or(0)
    }

    /// The signaled flag.
    pub fn signaled(&self) -> bool {
        self.flags & WQE_SIGNALED != 0
    }
    /// The fence flag.
    pub fn fence(&self) -> bool {
        self.flags & WQE_FENCE != 0
    }
    /// The solicited-event flag (always set for [`WqeOpcode::SendSe`]).
    pub fn solicited(&self) -> bool {
        self.flags & WQE_SOLICITED != 0 || self.opcode == WqeOpcode::SendSe as u8
    }
}

/// A receive-queue entry: 128 bytes.
///
/// ```text
///  0 wr_id    u64
///  8 num_sge  u8   0..=MAX_RECV_SGE
///  9 _rsvd    [u8; 7]
/// 16 sge[7]   16 B each
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct RecvWqe {
    /// Caller's id, echoed in the completion.
    pub wr_id: u64,
    /// SGEs in use.
    pub num_sge: u8,
    /// Reserved, zero.
    pub rsvd: [u8; 7],
    /// Buffers, filled in order.
    pub sge: [Sge; MAX_RECV_SGE],
}

const _: () = assert!(size_of::<RecvWqe>() == 128);
const _: () = assert!(offset_of!(RecvWqe, wr_id) == 0);
const _: () = assert!(offset_of!(RecvWqe, num_sge) == 8);
const _: () = assert!(offset_of!(RecvWqe, rsvd) == 9);
const _: () = assert!(offset_of!(RecvWqe, sge) == 16);

impl RecvWqe {
    /// A receive WQE over the given SGEs (at most [`MAX_RECV_SGE`] are taken).
    pub fn new(wr_id: u64, sges: &[Sge]) -> RecvWqe {
        let n = sges.len().min(MAX_RECV_SGE);
        let mut r = RecvWqe {
            wr_id,
            num_sge: n as u8,
            ..RecvWqe::default()
        };
        r.sge[..n].copy_from_slice(&sges[..n]);
        r
    }

    /// The SGEs in use, validated against the maximum.
    pub fn sges(&self) -> Result<&[Sge], WqeError> {
        self.sge
            .get(..usize::from(self.num_sge))
            .ok_or(WqeError::NumSge(self.num_sge))
    }

    /// Total bytes of the SGEs in use (0 for a bad `num_sge`).
    pub fn total_len(&self) -> u64 {
        self.sges()
            .map(|s| s.iter().map(|g| u64::from(g.len)).sum())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(lkey: u32, len: u32) -> Sge {
        Sge {
            lkey,
            len,
            offset: 0,
        }
    }

    #[test]
    fn opcodes_round_trip_and_unknown_is_refused() {
        for op in WqeOpcode::ALL {
            assert_eq!(WqeOpcode::from_u8(op as u8), Some(op));
        }
        assert_eq!(WqeOpcode::from_u8(8), None);
        let w = Wqe {
            opcode: 200,
            ..Wqe::default()
        };
        assert_eq!(w.validate(), Err(WqeError::Opcode(200)));
    }

    #[test]
    fn bad_sge_count_and_flags_are_refused() {
        let mut w = Wqe::new(1, WqeOpcode::Write, &[sge(1, 10), sge(2, 20)]);
        assert_eq!(w.total_len(), 30);
        assert_eq!(w.validate(), Ok(WqeOpcode::Write));
        w.num_sge = 6;
        assert_eq!(w.validate(), Err(WqeError::NumSge(6)));
        assert_eq!(w.total_len(), 0);
        w.num_sge = 1;
        w.flags = 0x80;
        assert_eq!(w.validate(), Err(WqeError::Flags(0x80)));
        let r = RecvWqe {
            num_sge: 8,
            ..RecvWqe::default()
        };
        assert_eq!(r.sges(), Err(WqeError::NumSge(8)));
        assert!(Wqe::try_new(1, WqeOpcode::Send, &[sge(1, 1); 6]).is_err());
    }

    #[test]
    fn atomics_need_one_eight_byte_sink() {
        let ok = Wqe::new(1, WqeOpcode::FetchAdd, &[sge(1, 8)]);
        assert_eq!(ok.validate(), Ok(WqeOpcode::FetchAdd));
        let short = Wqe::new(1, WqeOpcode::CmpSwap, &[sge(1, 4)]);
        assert_eq!(short.validate(), Err(WqeError::AtomicSink));
        let two = Wqe::new(1, WqeOpcode::CmpSwap, &[sge(1, 8), sge(1, 8)]);
        assert_eq!(two.validate(), Err(WqeError::AtomicSink));
    }

    #[test]
    fn send_se_implies_solicited() {
        let w = Wqe::new(1, WqeOpcode::SendSe, &[]);
        assert!(w.solicited() && w.signaled() && !w.fence());
        assert!(!Wqe::new(1, WqeOpcode::Send, &[]).solicited());
    }
}
