//! Embedded mode: `iwarpd`'s engine and service inside the application's process
//! (`control::embedded`): the same bring-up, dataplane threads (pinned to the config's
//! `dataplane.cores`), service and server code as the daemon, reached over an in-process
//! socket pair instead of the daemon's socket.
//!
//! DPDK allows one EAL per process lifetime, so a process runs at most one embedded engine:
//! every `Device::open` of the same config shares it (each device gets its own control
//! connection, as separate daemon clients do), and the engine stops when the last device
//! using it is dropped. Opening another config meanwhile, or any config after the engine
//! stopped, is an error that says so.

use crate::device::{Device, DeviceSpec};
use crate::error::{Error, Result};
use std::path::Path;

#[cfg(feature = "embedded")]
mod imp {
    use super::*;
    use crate::session::Session;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex, Weak};

    struct Running {
        config: PathBuf,
        engine: Weak<control::embedded::Embedded>,
    }

    /// The engine of this process, and whether one was ever started.
    static ENGINE: Mutex<(Option<Running>, bool)> = Mutex::new((None, false));

    fn engine_for(path: &Path) -> Result<Arc<control::embedded::Embedded>> {
        let canon = path.canonicalize().map_err(|e| Error::Spec {
            spec: format!("embedded:{}", path.display()),
            reason: format!("cannot read the iwarpd config: {e}"),
        })?;
        let mut g = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = &g.0
            && let Some(e) = r.engine.upgrade()
        {
            if r.config == canon {
                return Ok(e);
            }
            return Err(Error::Embedded(format!(
                "this process already runs an embedded engine with {} (one EAL per process): \
                 open that config, or use a daemon",
                r.config.display()
            )));
        }
        if g.1 {
            return Err(Error::Embedded(
                "the embedded engine of this process has stopped (its last device was dropped) \
                 and DPDK cannot start a second one in the same process: keep a Device open \
                 for the whole run"
                    .into(),
            ));
        }
        let cfg = control::config::Config::load(&canon).map_err(|e| Error::Spec {
            spec: format!("embedded:{}", canon.display()),
            reason: e.to_string(),
        })?;
        g.1 = true;
        let engine =
            Arc::new(control::embedded::start(cfg).map_err(|e| Error::Embedded(format!("{e:#}")))?);
        g.0 = Some(Running {
            config: canon,
            engine: Arc::downgrade(&engine),
        });
        Ok(engine)
    }

    pub(crate) fn open(spec: &DeviceSpec, path: &Path) -> Result<Device> {
        let engine = engine_for(path)?;
        let sock = engine
            .connect()
            .map_err(Error::io("embedded control connection"))?;
        // Before it blocks on the control socket the thread may have been driving the
        // loop: give it back to the dataplane thread, which the answer may need.
        let e = engine.clone();
        let session = Session::with_on_block(sock, Box::new(move || e.release()));
        Device::handshake(spec.clone(), session, Some(Box::new(Local(engine))))
    }

    /// The process's engine, stepped from application threads.
    struct Local(Arc<control::embedded::Embedded>);

    impl crate::device::LocalEngine for Local {
        fn poll(&self) -> bool {
            self.0.poll()
        }

        fn release(&self) {
            self.0.release();
        }

        fn pin_current_thread(&self) -> Option<usize> {
            self.0.pin_current_thread()
        }
    }
}

#[cfg(feature = "embedded")]
pub(crate) use imp::open;

#[cfg(not(feature = "embedded"))]
pub(crate) fn open(spec: &DeviceSpec, _path: &Path) -> Result<Device> {
    Err(Error::Embedded(format!(
        "{spec}: this build of verbs has no embedded mode (feature `embedded` is off); \
         connect to a running iwarpd (unix:PATH) instead"
    )))
}
