//! The CRC32c implementation for this process, chosen once at startup (issue #8): the MPA CRC
//! (RFC 5044 §4.3) is half the receive cost per FPDU, and which implementation is faster depends
//! on the CPU, not only on its feature flags (BENCHMARKS.md §3). `netcore::crc` reads no clock,
//! so the measurement is driven from here.

use anyhow::{Result, bail};
use netcore::crc::{self, CrcImpl};
use std::time::Instant;

/// Environment variable that overrides the measurement: `auto` (default), `crc32c`, `crc-fast`, `copycrc`.
pub const CRC_IMPL_ENV: &str = "IWARP_CRC_IMPL";

/// What [`choose`] decided and why (for the log line and for benchmark reports).
#[derive(Debug, Clone)]
pub struct CrcChoice {
    /// The implementation now in use.
    pub chosen: CrcImpl,
    /// `calibrated`, or `forced by IWARP_CRC_IMPL`.
    pub how: &'static str,
    /// The measurement, when one was made.
    pub calibration: Option<crc::Calibration>,
}

/// Parse an `IWARP_CRC_IMPL` value: `None` means measure.
pub fn parse_setting(value: &str) -> Result<Option<CrcImpl>> {
    match value {
        "" | "auto" => Ok(None),
        v => match CrcImpl::from_name(v) {
            Some(i) => Ok(Some(i)),
            None => {
                bail!("{CRC_IMPL_ENV}={v:?}: allowed values are auto, crc32c, crc-fast, copycrc")
            }
        },
    }
}

/// Measure both implementations (a few milliseconds) unless `IWARP_CRC_IMPL` names one, make
/// the winner process-wide, and log the choice with the measured GB/s.
pub fn choose() -> Result<CrcChoice> {
    let setting = std::env::var(CRC_IMPL_ENV).unwrap_or_default();
    let choice = match parse_setting(&setting)? {
        Some(imp) => CrcChoice {
            chosen: imp,
            how: "forced by IWARP_CRC_IMPL",
            calibration: None,
        },
        None => {
            let t0 = Instant::now();
            let cal = crc::calibrate(|| t0.elapsed().as_nanos() as u64);
            CrcChoice {
                chosen: cal.best,
                how: "calibrated",
                calibration: Some(cal),
            }
        }
    };
    crc::set_impl(choice.chosen);
    match &choice.calibration {
        Some(cal) => tracing::info!(
            crc32c = %choice.chosen,
            feature_guess = %crc::detect(),
            "CRC32c implementation {}: {}",
            choice.how,
            cal.summary()
        ),
        None => tracing::info!(crc32c = %choice.chosen, "CRC32c implementation {}", choice.how),
    }
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings() {
        assert_eq!(parse_setting("").unwrap(), None);
        assert_eq!(parse_setting("auto").unwrap(), None);
        assert_eq!(parse_setting("crc-fast").unwrap(), Some(CrcImpl::CrcFast));
        assert_eq!(parse_setting("crc32c").unwrap(), Some(CrcImpl::Crc32cCrate));
        let e = parse_setting("zlib").unwrap_err().to_string();
        assert!(
            e.contains("IWARP_CRC_IMPL") && e.contains("crc-fast"),
            "{e}"
        );
    }
}
