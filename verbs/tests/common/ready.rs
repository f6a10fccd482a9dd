//! Start a server process and wait until it says it is ready (a line on stdout or stderr),
//! instead of sleeping and hoping (a busy CI machine can take seconds to get there).
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running server whose output is collected in the background.
pub struct Server {
    pub child: Child,
    out: Arc<Mutex<String>>,
    lines: Receiver<String>,
}

fn pump<R: Read + Send + 'static>(
    r: R,
    out: Arc<Mutex<String>>,
    tx: std::sync::mpsc::Sender<String>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            out.lock().unwrap().push_str(&format!("{line}\n"));
            let _ = tx.send(line);
        }
    });
}

impl Server {
    /// Spawn `cmd` and wait up to `timeout` for a line containing `ready`.
    pub fn start(mut cmd: Command, ready: &str, timeout: Duration) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let out = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = channel();
        pump(child.stdout.take().unwrap(), out.clone(), tx.clone());
        pump(child.stderr.take().unwrap(), out.clone(), tx);
        let s = Server {
            child,
            out,
            lines: rx,
        };
        let start = Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            match s.lines.recv_timeout(left) {
                Ok(l) if l.contains(ready) => return s,
                Ok(_) => {}
                Err(_) => panic!(
                    "server not ready ({ready:?}) within {timeout:?}:\n{}",
                    s.output()
                ),
            }
        }
    }

    /// Everything it printed so far.
    pub fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Wait for it to exit (at most `timeout`, then kill it); returns (success, output).
    pub fn finish(mut self, timeout: Duration) -> (bool, String) {
        let start = Instant::now();
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                return (st.success(), self.output());
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return (
                    false,
                    format!("{}\n(killed after {timeout:?})", self.output()),
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
