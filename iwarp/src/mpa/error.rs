//! MPA protocol errors and their TERMINATE triples.

use core::fmt;

/// TERMINATE layer value for the LLP (MPA) layer (RFC 5040 §4.8: 0 RDMAP, 1 DDP, 2 LLP).
pub const LAYER_LLP: u8 = 2;
/// TERMINATE error type for MPA under the LLP layer (RFC 5044 §8).
pub const ETYPE_MPA: u8 = 0;

/// An MPA-level protocol violation found in the FPDU stream or during connection setup.
///
/// Each maps 1:1 onto a TERMINATE (layer, etype, ecode) triple via [`MpaError::term_code`]:
/// layer LLP (2), error type MPA (0), and the error codes of RFC 5044 §8 / RFC 6581 §8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpaError {
    /// The received CRC does not match the CRC computed over the FPDU (RFC 5044 §8, 0x02).
    Crc {
        /// CRC computed over the received octets.
        computed: u32,
        /// CRC value read from the wire.
        received: u32,
    },
    /// A marker does not point at the start of the FPDU it sits in (RFC 5044 §8, 0x03).
    Marker {
        /// FPDUPTR read from the marker.
        fpduptr: u16,
        /// The value it should have had.
        expected: u16,
    },
    /// The ULPDU_LENGTH is impossible (smaller than the smallest ULP header or larger than
    /// allowed); the FPDU framing is lost (RFC 5044 §8, 0x03 "FPDU start", as siw reports it).
    UlpduLength(u16),
    /// A malformed or unexpected MPA Request/Reply (RFC 5044 §8, 0x04).
    InvalidReqRep,
    /// Local catastrophic error during enhanced connection setup (RFC 6581 §8, 0x05).
    LocalCatastrophic,
    /// The peer asked for more IRD than we can give (RFC 6581 §8, 0x06).
    InsufficientIrd,
    /// No RTR type in common with the peer (RFC 6581 §8, 0x07).
    NoMatchingRtr,
}

impl MpaError {
    /// The TERMINATE (layer, etype, ecode) triple for this error (RFC 5040 §4.8,
    /// RFC 5044 §8, RFC 6581 §8). The `error` module's `TermCode` converts from this.
    pub const fn term_code(&self) -> (u8, u8, u8) {
        let ecode = match self {
            MpaError::Crc { .. } => 0x02,
            MpaError::Marker { .. } | MpaError::UlpduLength(_) => 0x03,
            MpaError::InvalidReqRep => 0x04,
            MpaError::LocalCatastrophic => 0x05,
            MpaError::InsufficientIrd => 0x06,
            MpaError::NoMatchingRtr => 0x07,
        };
        (LAYER_LLP, ETYPE_MPA, ecode)
    }
}

impl fmt::Display for MpaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MpaError::Crc { computed, received } => {
                write!(
                    f,
                    "MPA CRC mismatch: computed {computed:#010x}, received {received:#010x}"
                )
            }
            MpaError::Marker { fpduptr, expected } => {
                write!(f, "MPA marker FPDUPTR {fpduptr}, expected {expected}")
            }
            MpaError::UlpduLength(l) => write!(f, "impossible MPA ULPDU length {l}"),
            MpaError::InvalidReqRep => f.write_str("invalid MPA request/reply"),
            MpaError::LocalCatastrophic => f.write_str("MPA local catastrophic error"),
            MpaError::InsufficientIrd => f.write_str("MPA insufficient IRD"),
            MpaError::NoMatchingRtr => f.write_str("MPA no matching RTR model"),
        }
    }
}

impl std::error::Error for MpaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_codes() {
        assert_eq!(
            MpaError::Crc {
                computed: 1,
                received: 2
            }
            .term_code(),
            (2, 0, 2)
        );
        assert_eq!(
            MpaError::Marker {
                fpduptr: 1,
                expected: 2
            }
            .term_code(),
            (2, 0, 3)
        );
        assert_eq!(MpaError::UlpduLength(1).term_code(), (2, 0, 3));
        assert_eq!(MpaError::InvalidReqRep.term_code(), (2, 0, 4));
        assert_eq!(MpaError::LocalCatastrophic.term_code(), (2, 0, 5));
        assert_eq!(MpaError::InsufficientIrd.term_code(), (2, 0, 6));
        assert_eq!(MpaError::NoMatchingRtr.term_code(), (2, 0, 7));
    }
}
