//! Peer-to-peer ready-to-receive (RTR) messages of RFC 6581 §5 at the RDMAP level.
//!
//! In peer-to-peer mode the MPA initiator's first FPDU is a zero-length RDMA Write, RDMA Read
//! Request or Send (the type negotiated in the MPA Request/Reply, see
//! [`crate::mpa::startup`]); the responder sends nothing before that RTR has arrived. The
//! RTR is consumed by RDMAP and never surfaced to the ULP: no STag is checked (RFC 6581: a
//! zero-length RTR names no buffer; siw sends STag 1 and says "it must not be checked"), no
//! receive is consumed and no completion is produced on either side. A Read RTR is answered
//! by a zero-length Read Response to its sink STag, which the initiator consumes silently.
//!
//! Wire forms (the Write form is byte-identical to Linux siw's, `pcaps/variant_p2p_rping`):
//! - Write: tagged, L=1, STag 1, TO 0, no payload.
//! - Read: untagged QN 1, next MSN, MO 0, L=1, sink STag 0 / TO 0, size 0, source STag 1 /
//!   TO 0 (as siw's `siw_qp_mpa_rts`).
//! - Send: untagged QN 0, next MSN, MO 0, L=1, no payload.
//!
//! A first FPDU that is not the expected RTR is answered with a Terminate "LLP / MPA / No
//! matching RTR option" (RFC 6581 §9, LLP error 0x07).

use crate::ddp::wire::DdpBuf;
use crate::error::{LlpError, TermCode};
use crate::mpa::startup::{Established, Role};
use crate::mpa::wire::RtrKind;
use crate::rdmap::qp::{Outstanding, Qp, QpConfig, WorkRequest, WrOpcode};
use crate::rdmap::tx::TxMsg;
use crate::rdmap::wire::{self as rw, Header, Opcode, RdmapPart, ReadRequest, qn};
use crate::stag::{MrHandle, PdId, Stag};

/// STag the RTR Write and Read name (siw's choice: "some HW may treat STag 0 special").
pub const RTR_STAG: Stag = Stag(1);

/// This side's part in the peer-to-peer RTR exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rtr {
    /// MPA initiator: send this RTR as the very first FPDU.
    Send(RtrKind),
    /// MPA responder: expect this RTR as the first FPDU and send nothing before it.
    Expect(RtrKind),
}

impl QpConfig {
    /// The QP parameters an MPA negotiation produced, for this side's `role`: CRC, markers
    /// per direction, IRD/ORD and the peer-to-peer RTR part.
    pub fn from_established(e: &Established, role: Role, pd: PdId) -> QpConfig {
        QpConfig {
            pd,
            ird: u32::from(e.ird),
            ord: u32::from(e.ord),
            crc: e.crc,
            markers_rx: e.markers_rx,
            markers_tx: e.markers_tx,
            rtr: e.rtr.map(|k| match role {
                Role::Initiator => Rtr::Send(k),
                Role::Responder => Rtr::Expect(k),
            }),
            ..QpConfig::default()
        }
    }
}

impl Qp {
    /// The initiator's RTR message (called once, before anything else is sent).
    pub(crate) fn rtr_message(&mut self, kind: RtrKind) -> TxMsg {
        let hdr = match kind {
            RtrKind::Write => Header {
                opcode: Opcode::Write,
                ddp: rw::tagged(true, RTR_STAG, 0),
                rdmap: RdmapPart::None,
            },
            RtrKind::Read => {
                let msn = self.next_msn(qn::READ_REQ);
                self.orq.push_back(Outstanding {
                    wr: WorkRequest::new(0, WrOpcode::Read, Vec::new()),
                    sink: Some((Stag(0), 0)),
                    size: 0,
                    received: 0,
                    req_id: 0,
                    seq: 0,
                    rtr: true,
                });
                Header {
                    opcode: Opcode::ReadRequest,
                    ddp: rw::untagged(true, qn::READ_REQ, msn, 0, 0),
                    rdmap: RdmapPart::ReadRequest(ReadRequest {
                        sink_stag: Stag(0),
                        sink_to: 0,
                        size: 0,
                        src_stag: RTR_STAG,
                        src_to: 0,
                    }),
                }
            }
            RtrKind::Send => {
                let msn = self.next_msn(qn::SEND);
                Header {
                    opcode: Opcode::Send,
                    ddp: rw::untagged(true, qn::SEND, msn, 0, 0),
                    rdmap: RdmapPart::None,
                }
            }
        };
        TxMsg::control(hdr)
    }

    /// Responder: check that the first segment is the expected RTR (header complete,
    /// `payload` octets follow).
    pub(crate) fn begin_rtr(
        &self,
        kind: RtrKind,
        h: &Header,
        payload: u64,
    ) -> Result<(), TermCode> {
        let ok = payload == 0
            && h.ddp.last
            && match (kind, h.opcode, h.ddp.buf) {
                (RtrKind::Write, Opcode::Write, DdpBuf::Tagged { .. }) => true,
                (RtrKind::Read, Opcode::ReadRequest, DdpBuf::Untagged { qn: q, msn, mo, .. }) => {
                    q == qn::READ_REQ
                        && mo == 0
                        && msn == self.rx.expected_msn_of(q)
                        && matches!(h.rdmap, RdmapPart::ReadRequest(r) if r.size == 0)
                }
                (RtrKind::Send, Opcode::Send, DdpBuf::Untagged { qn: q, msn, mo, .. }) => {
                    q == qn::SEND && mo == 0 && msn == self.rx.expected_msn_of(q)
                }
                _ => false,
            };
        if ok {
            Ok(())
        } else {
            Err(LlpError::NoMatchingRtr.into())
        }
    }

    /// Responder: the RTR segment passed its CRC; from now on the QP may send.
    pub(crate) fn end_rtr(&mut self, h: &Header) {
        self.rtr_rx = None;
        if let DdpBuf::Untagged { qn: q, .. } = h.ddp.buf {
            self.rx.bump_msn(q);
        }
        if let RdmapPart::ReadRequest(r) = h.rdmap {
            // RFC 6581 §5: a Read RTR is answered with a zero-length Read Response.
            self.irq
                .push_back(TxMsg::read_response(&r, MrHandle::default(), 0));
        }
    }
}
