//! Embedded mode: `iwarpd`'s engine and service inside the application's process.

use crate::device::{Device, DeviceSpec};
use crate::error::{Error, Result};
use std::path::Path;

/// How an embedded engine runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbeddedOptions {
    /// Drive the engine from the caller's loop ([`Device::poll_engine`], and every wait of
    /// this library) instead of its own pinned dataplane thread.
    pub caller_driven: bool,
}

pub(crate) fn open(spec: &DeviceSpec, path: &Path) -> Result<Device> {
    let _ = path;
    Err(Error::Embedded(format!(
        "{spec}: embedded mode needs control's in-process entry point, not built yet"
    )))
}
