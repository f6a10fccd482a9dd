//! Embedded mode: the whole daemon (EAL, port, dataplane threads, the service) inside an
//! application's process, for the `verbs` library (`Device::open` on a config file).
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let cfg = control::config::Config::load(std::path::Path::new("configs/memif-a.toml"))?;
//! let engine = control::embedded::start(cfg)?;
//! // A control connection served exactly as one on the daemon's socket: speak `abi::ctl`
//! // over it (the verbs library does).
//! let sock = engine.connect()?;
//! # drop(sock);
//! let status = engine.stop()?;
//! # let _ = status;
//! # Ok(())
//! # }
//! ```
//!
//! The same bring-up code as `iwarpd` runs (`daemon::run_with`), with two differences: no
//! signal handlers are installed (the application owns its signals) and no control socket is
//! bound (clients of this process connect through [`Embedded::connect`], a socket pair served
//! by the same server code). DPDK allows one EAL per process and the stop flag is process-wide,
//! so a process starts at most one embedded engine in its lifetime.

use crate::config::Config;
use crate::daemon::{RunOptions, run_with};
use crate::server::ControlServer;
use anyhow::{Context, Result, anyhow};
use dataplane::pump::Pump;
use shm::SeqPacket;
use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long bring-up (EAL, port, dataplane threads) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running embedded engine; stopped by [`Embedded::stop`] or on drop.
#[derive(Debug)]
pub struct Embedded {
    server: Arc<ControlServer>,
    pumps: Vec<Arc<Pump>>,
    thread: Option<JoinHandle<Result<i32>>>,
}

/// Bring the engine up in background threads; returns once its threads (control and
/// dataplane) run and clients can connect.
pub fn start(cfg: Config) -> Result<Embedded> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<(Arc<ControlServer>, Vec<Arc<Pump>>)>(1);
    let thread = std::thread::Builder::new()
        .name("iwarpd-embedded".into())
        .spawn(move || {
            // Every thread of the engine (control loop, control clients, dataplane threads)
            // inherits this thread's timer slack: their periodic wake-ups are served by the
            // scheduler tick's interrupt instead of interrupts of their own on the cores where
            // applications spin (`dataplane::pump::PARK_SLACK`).
            if let Err(e) = dataplane::pump::set_timer_slack(dataplane::pump::PARK_SLACK) {
                tracing::debug!("engine threads keep the default timer slack: {e}");
            }
            let opts = RunOptions {
                embedded: Some(Box::new(move |srv, pumps| {
                    let _ = tx.send((srv, pumps));
                })),
            };
            run_with(&cfg, &opts)
        })
        .context("spawn the embedded engine")?;
    match rx.recv_timeout(START_TIMEOUT) {
        Ok((server, pumps)) => Ok(Embedded {
            server,
            pumps,
            thread: Some(thread),
        }),
        // The engine's thread dropped the callback unused: it is ending.
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Ok(Ok(code)) => Err(anyhow!(
                "embedded engine stopped during bring-up (status {code})"
            )),
            Ok(Err(e)) => Err(e.context("embedded engine bring-up")),
            Err(_) => Err(anyhow!("embedded engine panicked during bring-up")),
        },
        Err(RecvTimeoutError::Timeout) => {
            dataplane::signal::request_stop();
            Err(anyhow!("embedded engine not up after {START_TIMEOUT:?}"))
        }
    }
}

impl Embedded {
    /// A new control connection, served like one accepted on the daemon's socket.
    pub fn connect(&self) -> std::io::Result<SeqPacket> {
        self.server.connect_pair()
    }

    /// Step every dataplane loop once from the calling thread (run-to-completion mode,
    /// `dataplane::pump`): a loop another thread is stepping is skipped. While a thread keeps
    /// calling this, the dataplane threads nap instead of polling. Returns whether any ran.
    pub fn poll(&self) -> bool {
        let mut ran = false;
        for p in &self.pumps {
            ran |= p.poll();
        }
        ran
    }

    /// The calling thread stops polling for a while (it is about to block): the dataplane
    /// threads take their loops back now (`dataplane::pump::Pump::release`).
    pub fn release(&self) {
        for p in &self.pumps {
            p.release();
        }
    }

    /// Pin the calling thread to the core of the first dataplane thread, so a thread that
    /// drives the loop ([`Embedded::poll`]) shares that core with a parked dataplane thread
    /// instead of racing it from another CPU. Returns the core, or `None` when the loop has
    /// no core or pinning failed.
    pub fn pin_current_thread(&self) -> Option<usize> {
        let core = self.pumps.first().and_then(|p| p.core())?;
        let id = core_affinity::get_core_ids()?
            .into_iter()
            .find(|c| c.id == core)?;
        core_affinity::set_for_current(id).then_some(core)
    }

    /// The `[control]` and `[client.N]` counters.
    pub fn stats(&self) -> String {
        self.server
            .service()
            .lock()
            .map(|s| s.render_stats())
            .unwrap_or_else(|p| p.into_inner().render_stats())
    }

    /// Stop the engine (clients are disconnected, the port closed, EAL cleaned up) and
    /// return the daemon's exit status.
    pub fn stop(mut self) -> Result<i32> {
        self.finish()
    }

    fn finish(&mut self) -> Result<i32> {
        let Some(t) = self.thread.take() else {
            return Ok(0);
        };
        // A registration of this thread (made while it stepped the loops) holds the EAL: drop
        // it, so EAL is cleaned up on the engine's thread.
        dataplane::pump::leave_current_thread();
        dataplane::signal::request_stop();
        // Parked dataplane threads see the stop at once.
        self.release();
        t.join().map_err(|_| anyhow!("embedded engine panicked"))?
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::error!("embedded engine: {e:#}");
        }
    }
}
