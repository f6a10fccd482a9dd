//! MPA: Marker PDU Aligned framing for TCP (RFC 5044) with the enhanced connection setup of
//! RFC 6581.
//!
//! Heads up! Before working on this module read RFC 5044 §4–§8 (FPDU format, markers, CRC,
//! connection setup, errors) and RFC 6581 §5–§9 (IRD/ORD exchange, peer-to-peer RTR), and
//! `siw-peer/README.md` §5 for what Linux siw really puts on the wire.
//!
//! Pieces, in the order a connection uses them:
//! - [`wire`]: the MPA Request/Reply/Reject frame (checked view + validated `Repr`) and the
//!   RFC 6581 IRD/ORD private-data words.
//! - [`startup`]: the negotiation state machine for both roles (sans-IO: bytes in through
//!   `handle_stream`, bytes out through `poll_transmit`, time passed in).
//! - [`deframer`]: TCP stream bytes (arbitrary slices) -> ULPDU bytes, markers removed, CRC
//!   checked, zero-copy.
//! - [`framer`]: ULPDU -> FPDU no larger than the EMSS, with markers/CRC when negotiated.
//!
//! All of it is `forbid(unsafe_code)`, reads no clock and never panics on untrusted bytes.

pub mod deframer;
mod error;
pub mod framer;
pub mod startup;
pub mod wire;

pub use deframer::{Deframed, Deframer, DeframerConfig, UncheckedCrc, WholeFpdu, crc_to_wire};
pub use error::{ETYPE_MPA, LAYER_LLP, MpaError};
pub use framer::{FrameError, Framer, FramerConfig, GatherFpdu, seal_fpdu};

/// Distance between two MPA markers in the TCP stream, in octets (RFC 5044 §5).
pub const MARKER_INTERVAL: u32 = 512;
/// Size of one MPA marker: 16 reserved bits and the 16-bit FPDUPTR (RFC 5044 §5).
pub const MARKER_LEN: usize = 4;
/// Size of the ULPDU_LENGTH field that starts every FPDU (RFC 5044 §4.1).
pub const LEN_FIELD: usize = 2;
/// Size of the CRC field that ends every FPDU (RFC 5044 §4.1; zero-filled when CRC is off).
pub const CRC_LEN: usize = 4;

/// Number of pad octets after a ULPDU of `ulpdu_len` octets: the FPDU (length field, ULPDU,
/// pad) is a multiple of 4 octets (RFC 5044 §4.1).
#[inline]
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - ((LEN_FIELD + ulpdu_len) % 4)) % 4
}

/// Whether the octet at `pos` (stream offset relative to the marker origin, the first octet of
/// the first FPDU) is the first octet of a marker (RFC 5044 §5).
#[inline]
pub(crate) const fn is_marker_pos(pos: u32) -> bool {
    pos.is_multiple_of(MARKER_INTERVAL)
}

/// Number of markers that start in the stream range `[pos, pos + len)`.
#[inline]
pub(crate) const fn markers_in(pos: u32, len: u32) -> u32 {
    if len == 0 {
        return 0;
    }
    let off = pos % MARKER_INTERVAL;
    let first = if off == 0 { 0 } else { MARKER_INTERVAL - off };
    if first >= len {
        0
    } else {
        (len - 1 - first) / MARKER_INTERVAL + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_lengths() {
        assert_eq!(pad_len(2), 0);
        assert_eq!(pad_len(3), 3);
        assert_eq!(pad_len(4), 2);
        assert_eq!(pad_len(5), 1);
        assert_eq!(pad_len(1442), 0);
    }

    #[test]
    fn marker_counting() {
        assert_eq!(markers_in(0, 0), 0);
        assert_eq!(markers_in(0, 1), 1);
        assert_eq!(markers_in(0, 512), 1);
        assert_eq!(markers_in(0, 513), 2);
        assert_eq!(markers_in(4, 508), 0);
        assert_eq!(markers_in(4, 509), 1);
        assert_eq!(markers_in(511, 1), 0);
        assert_eq!(markers_in(511, 2), 1);
        // brute force
        for pos in [0u32, 1, 4, 500, 508, 512, 1020, 4_294_966_784] {
            for len in 0..1600u32 {
                let n = (0..len)
                    .filter(|k| is_marker_pos(pos.wrapping_add(*k)))
                    .count() as u32;
                assert_eq!(markers_in(pos, len), n, "pos {pos} len {len}");
            }
        }
    }
}
