//! CRC32c (Castagnoli), the MPA FPDU CRC (RFC 5044 §4.3, same as iSCSI RFC 3720 B.4).
//!
//! Every caller goes through these functions so the implementation can be chosen in one place
//! by the numbers in BENCHMARKS.md.

/// Running CRC32c state (the finalised value so far, as `crc32c_append` takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Crc32c(u32);

impl Crc32c {
    /// A fresh CRC (of zero bytes).
    pub const fn new() -> Self {
        Crc32c(0)
    }
    /// Feed more bytes.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.0 = crc32c_append(self.0, data);
    }
    /// The CRC of everything fed so far.
    pub const fn value(self) -> u32 {
        self.0
    }
}

/// CRC32c of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continue a CRC32c: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, data)
}

/// Alternative implementations, kept for the benchmark that picks the one above.
pub mod candidates {
    /// `crc32c` crate (SSE4.2 `crc32` instruction, 3-way interleaved).
    pub fn crc32c_crate(data: &[u8]) -> u32 {
        ::crc32c::crc32c(data)
    }
    /// `crc-fast` crate (PCLMULQDQ/VPCLMULQDQ folding).
    pub fn crc_fast(data: &[u8]) -> u32 {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 Appendix B.4 test vectors.
    #[test]
    fn rfc3720_vectors() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&inc), 0x46dd_794e);
        let dec: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&dec), 0x113f_db5c);
    }

    #[test]
    fn append_and_candidates_agree() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut c = Crc32c::new();
        c.update(&data[..1000]);
        c.update(&data[1000..]);
        assert_eq!(c.value(), crc32c(&data));
        assert_eq!(candidates::crc32c_crate(&data), crc32c(&data));
        assert_eq!(candidates::crc_fast(&data), crc32c(&data));
    }
}
