//! Completion queue entries ([`Cqe`]), written by the dataplane, read by the client.
//!
//! The status set follows the verbs work-completion statuses an RDMA user knows
//! (`IBV_WC_*`), narrowed to what an iWARP RNIC reports (siw's `siw_wc_status`). A completion
//! caused by a TERMINATE carries its `(layer, etype, ecode)` (RFC 5040 §4.8) in `term_*`
//! with [`CQE_TERM_VALID`] set.

use core::mem::{offset_of, size_of};

/// Completion status (`Cqe::status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CqeStatus {
    /// The work request completed.
    Success = 0,
    /// Flushed: the QP went to ERROR before the WR was processed.
    Flushed = 1,
    /// Local length error: a received message was longer than the receive buffer.
    LocalLength = 2,
    /// Local QP operation error (bad WQE: opcode, SGE count, ORD 0 for a Read).
    LocalQpOperation = 3,
    /// Local protection error: an lkey unknown, of another PD, or a range outside its MR.
    LocalProtection = 4,
    /// Local access error: the MR lacks the right needed (e.g. local write for a Read sink).
    LocalAccess = 5,
    /// The peer reported an invalid request (RDMAP remote operation error).
    RemoteInvalidRequest = 6,
    /// The peer reported a protection error (invalid STag, bounds, access rights).
    RemoteAccess = 7,
    /// The peer reported an operation error (DDP/RDMAP layer).
    RemoteOperation = 8,
    /// The connection failed under the WR (TCP retransmission limit, reset, peer gone).
    RetryExceeded = 9,
    /// A fatal local error (corrupt ring, catastrophic error); the QP is in ERROR.
    Fatal = 10,
}

impl CqeStatus {
    /// Every status, in wire order.
    pub const ALL: [CqeStatus; 11] = [
        CqeStatus::Success,
        CqeStatus::Flushed,
        CqeStatus::LocalLength,
        CqeStatus::LocalQpOperation,
        CqeStatus::LocalProtection,
        CqeStatus::LocalAccess,
        CqeStatus::RemoteInvalidRequest,
        CqeStatus::RemoteAccess,
        CqeStatus::RemoteOperation,
        CqeStatus::RetryExceeded,
        CqeStatus::Fatal,
    ];

    /// The status for a raw byte, `None` if unknown.
    pub fn from_u8(v: u8) -> Option<CqeStatus> {
        CqeStatus::ALL.get(usize::from(v)).copied()
    }
}

/// What completed (`Cqe::opcode`). Receive-side values have bit 7 set, as `IBV_WC_RECV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CqeOpcode {
    /// A Send (any flavour) left and was acknowledged.
    Send = 0,
    /// An RDMA Write (or Write with Immediate) left and was acknowledged.
    Write = 1,
    /// An RDMA Read completed (data placed).
    Read = 2,
    /// A FetchAdd completed; the original value is in the sink.
    FetchAdd = 3,
    /// A CompareSwap completed; the original value is in the sink.
    CmpSwap = 4,
    /// A Send arrived into a posted receive.
    Recv = 0x80,
    /// Immediate Data (Write with Immediate) arrived, consuming a posted receive.
    RecvImm = 0x81,
}

impl CqeOpcode {
    /// Every opcode.
    pub const ALL: [CqeOpcode; 7] = [
        CqeOpcode::Send,
        CqeOpcode::Write,
        CqeOpcode::Read,
        CqeOpcode::FetchAdd,
        CqeOpcode::CmpSwap,
        CqeOpcode::Recv,
        CqeOpcode::RecvImm,
    ];

    /// The opcode for a raw byte, `None` if unknown.
    pub fn from_u8(v: u8) -> Option<CqeOpcode> {
        CqeOpcode::ALL.into_iter().find(|o| *o as u8 == v)
    }
}

/// Flag: `imm` holds immediate data.
pub const CQE_IMM_VALID: u8 = 0x01;
/// Flag: `invalidated_stag` was invalidated by a received Send with Invalidate.
pub const CQE_INVALIDATED: u8 = 0x02;
/// Flag: the message carried a Solicited Event.
pub const CQE_SOLICITED: u8 = 0x04;
/// Flag: `term_layer`/`term_etype`/`term_ecode` hold the TERMINATE that ended the QP.
pub const CQE_TERM_VALID: u8 = 0x08;

/// A completion: 64 bytes.
///
/// ```text
///  0 wr_id             u64
///  8 byte_len          u32  bytes transferred (received bytes for Recv)
/// 12 qp_num            u32
/// 16 imm               u64  immediate data (RecvImm, CQE_IMM_VALID)
/// 24 invalidated_stag  u32  (CQE_INVALIDATED)
/// 28 status            u8   CqeStatus
/// 29 opcode            u8   CqeOpcode
/// 30 flags             u8   CQE_*
/// 31 term_layer        u8   TERMINATE layer (CQE_TERM_VALID)
/// 32 term_etype        u8   TERMINATE error type
/// 33 term_ecode        u8   TERMINATE error code
/// 34 _rsvd0            u16
/// 36 detail            u32  local error detail (implementation specific, 0 if none)
/// 40 _rsvd1            [u8; 24]
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Cqe {
    /// The WR's id.
    pub wr_id: u64,
    /// Bytes transferred.
    pub byte_len: u32,
    /// The QP number.
    pub qp_num: u32,
    /// Immediate data.
    pub imm: u64,
    /// The STag a received Send with Invalidate invalidated.
    pub invalidated_stag: u32,
    /// [`CqeStatus`] as a byte.
    pub status: u8,
    /// [`CqeOpcode`] as a byte.
    pub opcode: u8,
    /// `CQE_*` flags.
    pub flags: u8,
    /// TERMINATE layer nibble (RFC 5040 §4.8: 0 RDMAP, 1 DDP, 2 LLP).
    pub term_layer: u8,
    /// TERMINATE error type nibble.
    pub term_etype: u8,
    /// TERMINATE error code.
    pub term_ecode: u8,
    /// Reserved, zero.
    pub rsvd0: u16,
    /// Local error detail.
    pub detail: u32,
    /// Reserved, zero.
    pub rsvd1: [u8; 24],
}

const _: () = assert!(size_of::<Cqe>() == 64);
const _: () = assert!(offset_of!(Cqe, wr_id) == 0);
const _: () = assert!(offset_of!(Cqe, byte_len) == 8);
const _: () = assert!(offset_of!(Cqe, qp_num) == 12);
const _: () = assert!(offset_of!(Cqe, imm) == 16);
const _: () = assert!(offset_of!(Cqe, invalidated_stag) == 24);
const _: () = assert!(offset_of!(Cqe, status) == 28);
const _: () = assert!(offset_of!(Cqe, opcode) == 29);
const _: () = assert!(offset_of!(Cqe, flags) == 30);
const _: () = assert!(offset_of!(Cqe, term_layer) == 31);
const _: () = assert!(offset_of!(Cqe, term_etype) == 32);
const _: () = assert!(offset_of!(Cqe, term_ecode) == 33);
const _: () = assert!(offset_of!(Cqe, rsvd0) == 34);
const _: () = assert!(offset_of!(Cqe, detail) == 36);
const _: () = assert!(offset_of!(Cqe, rsvd1) == 40);

impl Cqe {
    /// A completion with the given id, QP, opcode, status and length; the rest zero.
    pub fn new(wr_id: u64, qp_num: u32, opcode: CqeOpcode, status: CqeStatus, len: u32) -> Cqe {
        Cqe {
            wr_id,
            qp_num,
            opcode: opcode as u8,
            status: status as u8,
            byte_len: len,
            ..Cqe::default()
        }
    }

    /// Attach immediate data.
    pub fn with_imm(mut self, imm: u64) -> Cqe {
        self.imm = imm;
        self.flags |= CQE_IMM_VALID;
        self
    }

    /// Attach the STag a Send with Invalidate invalidated.
    pub fn with_invalidated(mut self, stag: u32) -> Cqe {
        self.invalidated_stag = stag;
        self.flags |= CQE_INVALIDATED;
        self
    }

    /// Attach the TERMINATE triple that ended the QP.
    pub fn with_terminate(mut self, layer: u8, etype: u8, ecode: u8) -> Cqe {
        self.term_layer = layer;
        self.term_etype = etype;
        self.term_ecode = ecode;
        self.flags |= CQE_TERM_VALID;
        self
    }

    /// The status, `None` if the byte is unknown (a client reading a newer daemon's CQE).
    pub fn status(&self) -> Option<CqeStatus> {
        CqeStatus::from_u8(self.status)
    }
    /// The opcode, `None` if the byte is unknown.
    pub fn opcode(&self) -> Option<CqeOpcode> {
        CqeOpcode::from_u8(self.opcode)
    }
    /// Immediate data, if any.
    pub fn imm(&self) -> Option<u64> {
        (self.flags & CQE_IMM_VALID != 0).then_some(self.imm)
    }
    /// The invalidated STag, if any.
    pub fn invalidated(&self) -> Option<u32> {
        (self.flags & CQE_INVALIDATED != 0).then_some(self.invalidated_stag)
    }
    /// The TERMINATE `(layer, etype, ecode)`, if any.
    pub fn terminate(&self) -> Option<(u8, u8, u8)> {
        (self.flags & CQE_TERM_VALID != 0).then_some((
            self.term_layer,
            self.term_etype,
            self.term_ecode,
        ))
    }
    /// The solicited-event flag.
    pub fn solicited(&self) -> bool {
        self.flags & CQE_SOLICITED != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in CqeStatus::ALL {
            assert_eq!(CqeStatus::from_u8(s as u8), Some(s));
        }
        for o in CqeOpcode::ALL {
            assert_eq!(CqeOpcode::from_u8(o as u8), Some(o));
        }
        assert_eq!(CqeStatus::from_u8(11), None);
        assert_eq!(CqeOpcode::from_u8(5), None);
    }

    #[test]
    fn optional_fields_follow_their_flags() {
        let c = Cqe::new(7, 3, CqeOpcode::Recv, CqeStatus::Success, 100);
        assert_eq!(
            (c.imm(), c.invalidated(), c.terminate()),
            (None, None, None)
        );
        let c = c
            .with_imm(0xfeed)
            .with_invalidated(0x1234_5600)
            .with_terminate(1, 1, 0);
        assert_eq!(c.imm(), Some(0xfeed));
        assert_eq!(c.invalidated(), Some(0x1234_5600));
        assert_eq!(c.terminate(), Some((1, 1, 0)));
        assert_eq!(c.status(), Some(CqeStatus::Success));
        assert_eq!(c.opcode(), Some(CqeOpcode::Recv));
    }
}
