//! The `--crc` option every tool shares: what our side asks for in MPA (RFC 5044 §7.1).

use clap::ValueEnum;
use verbs::CrcMode;

/// MPA CRC choice for this connection.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Crc {
    /// The daemon's `[mpa] crc`.
    Default,
    /// Ask for CRC32c.
    On,
    /// Do not ask.
    Off,
    /// Refuse a peer without CRC.
    Require,
}

impl From<Crc> for CrcMode {
    fn from(c: Crc) -> Self {
        match c {
            Crc::Default => CrcMode::Default,
            Crc::On => CrcMode::On,
            Crc::Off => CrcMode::Off,
            Crc::Require => CrcMode::Require,
        }
    }
}
