//! Protocol errors and their TERMINATE triples (RFC 5040 §4.8, §7; RFC 5041 §7; RFC 5044 §8).
//!
//! Heads up: read RFC 5040 §7.2 (RDMAP error codes), RFC 5041 §7.2 (DDP error codes) and
//! RFC 5044 §8 (MPA/LLP error codes) before editing. Every protocol violation maps 1:1 onto a
//! [`TermCode`] `(layer, etype, ecode)` that goes into the TERMINATE message (rustls
//! `From<...> for AlertDescription` pattern; siw `siw_tagged_error()`).

use core::fmt;

/// The layer nibble of a TERMINATE control field (RFC 5040 §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (0x0).
    Rdmap = 0x0,
    /// DDP (0x1).
    Ddp = 0x1,
    /// The lower layer protocol: MPA over TCP (0x2).
    Llp = 0x2,
}

impl Layer {
    /// The layer for a wire nibble, `None` for a reserved value.
    pub fn from_nibble(v: u8) -> Option<Layer> {
        match v {
            0 => Some(Layer::Rdmap),
            1 => Some(Layer::Ddp),
            2 => Some(Layer::Llp),
            _ => None,
        }
    }
}

/// A TERMINATE `(layer, etype, ecode)` triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// Layer that detected the error.
    pub layer: Layer,
    /// Error type (4 bits), meaning depends on `layer`.
    pub etype: u8,
    /// Error code (8 bits), meaning depends on `layer` and `etype`.
    pub ecode: u8,
}

impl TermCode {
    /// Build a triple from raw values (e.g. `MpaError::term_code()`); a reserved layer value
    /// becomes RDMAP local catastrophic.
    pub fn from_raw(layer: u8, etype: u8, ecode: u8) -> TermCode {
        match Layer::from_nibble(layer) {
            Some(layer) => TermCode {
                layer,
                etype: etype & 0xf,
                ecode,
            },
            None => RdmapError::LocalCatastrophic.into(),
        }
    }

    /// True when `(layer, etype)` is a combination defined by the RFCs (used to tell the RFC
    /// layout of a received TERMINATE from the nibble-swapped one siw emits).
    pub fn is_defined_combo(layer: u8, etype: u8) -> bool {
        match layer {
            0 => etype <= 2,
            1 => etype <= 2,
            2 => etype == 0,
            _ => false,
        }
    }
}

impl fmt::Display for TermCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}/etype {:#x}/ecode {:#04x}",
            self.layer, self.etype, self.ecode
        )
    }
}

/// RDMAP error types (RFC 5040 §7.2).
pub mod rdmap_etype {
    /// Local Catastrophic Error.
    pub const LOCAL_CATASTROPHIC: u8 = 0x0;
    /// Remote Protection Error.
    pub const REMOTE_PROTECTION: u8 = 0x1;
    /// Remote Operation Error.
    pub const REMOTE_OPERATION: u8 = 0x2;
}

/// DDP error types (RFC 5041 §7.2).
pub mod ddp_etype {
    /// Local Catastrophic Error.
    pub const LOCAL_CATASTROPHIC: u8 = 0x0;
    /// Tagged Buffer Error.
    pub const TAGGED: u8 = 0x1;
    /// Untagged Buffer Error.
    pub const UNTAGGED: u8 = 0x2;
}

/// RDMAP errors: the RDMA-layer rows of the TERMINATE error table (RFC 5040 §4.8, §7; the
/// same rows are the IANA "RDMAP Errors" registry of RFC 6580 §3.1, which RFC 7306 left
/// unchanged). Codes 0x09 (STag cannot be invalidated) and 0xFF (unspecified) exist under
/// both Remote Protection and Remote Operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmapError {
    /// Local catastrophic error (etype 0, ecode 0).
    LocalCatastrophic,
    /// Remote protection: invalid STag (0x00).
    InvalidStag,
    /// Remote protection: base or bounds violation (0x01).
    BaseBounds,
    /// Remote protection: access rights violation (0x02).
    AccessRights,
    /// Remote protection: STag not associated with the RDMAP stream (0x03).
    StagNotAssociated,
    /// Remote protection: TO wrap (0x04).
    ToWrap,
    /// Remote operation: invalid RDMAP version (0x05).
    InvalidVersion,
    /// Remote operation: unexpected opcode (0x06).
    UnexpectedOpcode,
    /// Remote operation: catastrophic error localized to the RDMAP stream (0x07), e.g. IRD
    /// exceeded.
    CatastrophicStream,
    /// Remote operation: catastrophic global error (0x08).
    CatastrophicGlobal,
    /// Remote protection: STag cannot be invalidated (0x09), e.g. the STag belongs to another
    /// PD or may not be invalidated remotely.
    CannotInvalidate,
    /// Remote operation: STag cannot be invalidated (0x09), e.g. no such STag.
    CannotInvalidateOperation,
    /// Remote protection: unspecified error (0xff).
    UnspecifiedProtection,
    /// Remote operation: unspecified error (0xff).
    UnspecifiedOperation,
}

impl From<RdmapError> for TermCode {
    fn from(e: RdmapError) -> TermCode {
        use rdmap_etype::*;
        let (etype, ecode) = match e {
            RdmapError::LocalCatastrophic => (LOCAL_CATASTROPHIC, 0x00),
            RdmapError::InvalidStag => (REMOTE_PROTECTION, 0x00),
            RdmapError::BaseBounds => (REMOTE_PROTECTION, 0x01),
            RdmapError::AccessRights => (REMOTE_PROTECTION, 0x02),
            RdmapError::StagNotAssociated => (REMOTE_PROTECTION, 0x03),
            RdmapError::ToWrap => (REMOTE_PROTECTION, 0x04),
            RdmapError::InvalidVersion => (REMOTE_OPERATION, 0x05),
            RdmapError::UnexpectedOpcode => (REMOTE_OPERATION, 0x06),
            RdmapError::CatastrophicStream => (REMOTE_OPERATION, 0x07),
            RdmapError::CatastrophicGlobal => (REMOTE_OPERATION, 0x08),
            RdmapError::CannotInvalidate => (REMOTE_PROTECTION, 0x09),
            RdmapError::CannotInvalidateOperation => (REMOTE_OPERATION, 0x09),
            RdmapError::UnspecifiedProtection => (REMOTE_PROTECTION, 0xff),
            RdmapError::UnspecifiedOperation => (REMOTE_OPERATION, 0xff),
        };
        TermCode {
            layer: Layer::Rdmap,
            etype,
            ecode,
        }
    }
}

/// DDP errors: the DDP-layer rows of the TERMINATE error table (RFC 5041 §7.2; IANA "DDP
/// Errors", RFC 6580 §3.2). Untagged code 0x00 is not assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DdpError {
    /// Local catastrophic error (etype 0, ecode 0).
    LocalCatastrophic,
    /// Tagged: invalid STag (0x00).
    TaggedInvalidStag,
    /// Tagged: base or bounds violation (0x01).
    TaggedBaseBounds,
    /// Tagged: STag not associated with the DDP stream (0x02).
    TaggedStagNotAssociated,
    /// Tagged: TO wrap (0x03).
    TaggedToWrap,
    /// Tagged: invalid DDP version (0x04).
    TaggedInvalidVersion,
    /// Untagged: invalid QN (0x01).
    UntaggedInvalidQn,
    /// Untagged: invalid MSN, no buffer available (0x02).
    UntaggedNoBuffer,
    /// Untagged: invalid MSN, MSN range not valid (0x03).
    UntaggedMsnRange,
    /// Untagged: invalid MO (0x04).
    UntaggedInvalidMo,
    /// Untagged: DDP message too long for the available buffer (0x05).
    UntaggedTooLong,
    /// Untagged: invalid DDP version (0x06).
    UntaggedInvalidVersion,
}

impl From<DdpError> for TermCode {
    fn from(e: DdpError) -> TermCode {
        use ddp_etype::*;
        let (etype, ecode) = match e {
            DdpError::LocalCatastrophic => (LOCAL_CATASTROPHIC, 0x00),
            DdpError::TaggedInvalidStag => (TAGGED, 0x00),
            DdpError::TaggedBaseBounds => (TAGGED, 0x01),
            DdpError::TaggedStagNotAssociated => (TAGGED, 0x02),
            DdpError::TaggedToWrap => (TAGGED, 0x03),
            DdpError::TaggedInvalidVersion => (TAGGED, 0x04),
            DdpError::UntaggedInvalidQn => (UNTAGGED, 0x01),
            DdpError::UntaggedNoBuffer => (UNTAGGED, 0x02),
            DdpError::UntaggedMsnRange => (UNTAGGED, 0x03),
            DdpError::UntaggedInvalidMo => (UNTAGGED, 0x04),
            DdpError::UntaggedTooLong => (UNTAGGED, 0x05),
            DdpError::UntaggedInvalidVersion => (UNTAGGED, 0x06),
        };
        TermCode {
            layer: Layer::Ddp,
            etype,
            ecode,
        }
    }
}

/// LLP (MPA) errors, error type 0 "MPA" (RFC 5044 §8 codes 0x01-0x04; RFC 6581 adds 0x05-0x07
/// for the enhanced connection setup; IANA "LLP Errors", RFC 6580 §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlpError {
    /// TCP connection closed, terminated or lost (0x01).
    StreamLost,
    /// MPA CRC error (0x02).
    Crc,
    /// MPA marker and ULPDU length field mismatch (0x03).
    MarkerMismatch,
    /// Invalid MPA Request or Reply frame (0x04).
    InvalidReqRep,
    /// Local catastrophic error (0x05, RFC 6581).
    LocalCatastrophic,
    /// Insufficient IRD resources (0x06, RFC 6581).
    InsufficientIrd,
    /// No matching RTR option (0x07, RFC 6581).
    NoMatchingRtr,
}

impl From<LlpError> for TermCode {
    fn from(e: LlpError) -> TermCode {
        let ecode = match e {
            LlpError::StreamLost => 0x01,
            LlpError::Crc => 0x02,
            LlpError::MarkerMismatch => 0x03,
            LlpError::InvalidReqRep => 0x04,
            LlpError::LocalCatastrophic => 0x05,
            LlpError::InsufficientIrd => 0x06,
            LlpError::NoMatchingRtr => 0x07,
        };
        TermCode {
            layer: Layer::Llp,
            etype: 0,
            ecode,
        }
    }
}

/// Why a memory access was refused (RFC 5042 §5: STag, PD, rights and bounds checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessError {
    /// No such STag, wrong key, or invalidated.
    InvalidStag,
    /// The region belongs to another protection domain.
    PdMismatch,
    /// The region does not grant the requested right.
    AccessRights,
    /// The range falls outside the region.
    BaseBounds,
    /// TO + length wraps the 64-bit space.
    ToWrap,
}

impl AccessError {
    /// The DDP tagged-buffer error for a failed tagged placement (RFC 5041 §7.2). RFC 5041 has
    /// no access-rights code; the RDMAP one is used (RFC 5040 §7.2), unlike siw which reports
    /// Invalid STag.
    pub fn tagged(self) -> TermCode {
        match self {
            AccessError::InvalidStag => DdpError::TaggedInvalidStag.into(),
            AccessError::PdMismatch => DdpError::TaggedStagNotAssociated.into(),
            AccessError::AccessRights => RdmapError::AccessRights.into(),
            AccessError::BaseBounds => DdpError::TaggedBaseBounds.into(),
            AccessError::ToWrap => DdpError::TaggedToWrap.into(),
        }
    }
}

impl From<AccessError> for TermCode {
    /// RDMAP remote protection errors (Read Request source, atomics, invalidation targets).
    fn from(e: AccessError) -> TermCode {
        match e {
            AccessError::InvalidStag => RdmapError::InvalidStag,
            AccessError::PdMismatch => RdmapError::StagNotAssociated,
            AccessError::AccessRights => RdmapError::AccessRights,
            AccessError::BaseBounds => RdmapError::BaseBounds,
            AccessError::ToWrap => RdmapError::ToWrap,
        }
        .into()
    }
}

/// Decode error of a wire header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// Buffer shorter than the header.
    Truncated,
    /// A version field is not 1.
    BadVersion,
    /// Field value outside the defined set.
    Invalid,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for WireError {}

/// Records only the first error of a stream, as siw's `term_info.valid` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirstError {
    code: Option<TermCode>,
}

impl FirstError {
    /// Record `code` unless an error was recorded before. Returns true if it was recorded.
    pub fn record(&mut self, code: TermCode) -> bool {
        if self.code.is_none() {
            self.code = Some(code);
            true
        } else {
            false
        }
    }

    /// The first recorded error.
    pub fn get(&self) -> Option<TermCode> {
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_rfc_tables() {
        let t: TermCode = DdpError::UntaggedMsnRange.into();
        assert_eq!((t.layer, t.etype, t.ecode), (Layer::Ddp, 2, 3));
        let t: TermCode = RdmapError::CannotInvalidate.into();
        assert_eq!((t.layer, t.etype, t.ecode), (Layer::Rdmap, 1, 9));
        let t: TermCode = LlpError::Crc.into();
        assert_eq!((t.layer, t.etype, t.ecode), (Layer::Llp, 0, 2));
        assert_eq!(
            AccessError::PdMismatch.tagged(),
            DdpError::TaggedStagNotAssociated.into()
        );
        assert_eq!(
            TermCode::from(AccessError::InvalidStag),
            RdmapError::InvalidStag.into()
        );
    }

    /// Every row of the RFC 5040 §4.8 / RFC 5041 §7.2 / RFC 5044 §8 tables (as registered by
    /// IANA, RFC 6580), one by one.
    #[test]
    fn full_error_tables() {
        use DdpError as D;
        use LlpError as L;
        use RdmapError as R;
        let rdmap = [
            (R::LocalCatastrophic, 0, 0x00),
            (R::InvalidStag, 1, 0x00),
            (R::BaseBounds, 1, 0x01),
            (R::AccessRights, 1, 0x02),
            (R::StagNotAssociated, 1, 0x03),
            (R::ToWrap, 1, 0x04),
            (R::CannotInvalidate, 1, 0x09),
            (R::UnspecifiedProtection, 1, 0xff),
            (R::InvalidVersion, 2, 0x05),
            (R::UnexpectedOpcode, 2, 0x06),
            (R::CatastrophicStream, 2, 0x07),
            (R::CatastrophicGlobal, 2, 0x08),
            (R::CannotInvalidateOperation, 2, 0x09),
            (R::UnspecifiedOperation, 2, 0xff),
        ];
        for (e, t, c) in rdmap {
            assert_eq!(
                TermCode::from(e),
                TermCode {
                    layer: Layer::Rdmap,
                    etype: t,
                    ecode: c
                }
            );
        }
        let ddp = [
            (D::LocalCatastrophic, 0, 0x00),
            (D::TaggedInvalidStag, 1, 0x00),
            (D::TaggedBaseBounds, 1, 0x01),
            (D::TaggedStagNotAssociated, 1, 0x02),
            (D::TaggedToWrap, 1, 0x03),
            (D::TaggedInvalidVersion, 1, 0x04),
            (D::UntaggedInvalidQn, 2, 0x01),
            (D::UntaggedNoBuffer, 2, 0x02),
            (D::UntaggedMsnRange, 2, 0x03),
            (D::UntaggedInvalidMo, 2, 0x04),
            (D::UntaggedTooLong, 2, 0x05),
            (D::UntaggedInvalidVersion, 2, 0x06),
        ];
        for (e, t, c) in ddp {
            assert_eq!(
                TermCode::from(e),
                TermCode {
                    layer: Layer::Ddp,
                    etype: t,
                    ecode: c
                }
            );
        }
        let llp = [
            (L::StreamLost, 0x01),
            (L::Crc, 0x02),
            (L::MarkerMismatch, 0x03),
            (L::InvalidReqRep, 0x04),
            (L::LocalCatastrophic, 0x05),
            (L::InsufficientIrd, 0x06),
            (L::NoMatchingRtr, 0x07),
        ];
        for (e, c) in llp {
            assert_eq!(
                TermCode::from(e),
                TermCode {
                    layer: Layer::Llp,
                    etype: 0,
                    ecode: c
                }
            );
        }
    }

    #[test]
    fn first_error_wins() {
        let mut f = FirstError::default();
        assert!(f.record(LlpError::Crc.into()));
        assert!(!f.record(DdpError::UntaggedInvalidQn.into()));
        assert_eq!(f.get(), Some(LlpError::Crc.into()));
    }
}
