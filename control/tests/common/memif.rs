//! Two iwarpd instances on one memif wire (A: server, 10.77.0.1; B: client, 10.77.0.2).

use super::{Proc, TempDir};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Instance A (memif server, 10.77.0.1) runs in the background while B (memif client,
/// 10.77.0.2) runs to completion; returns A (still running), B's exit code and output.
pub struct MemifPair {
    /// Where configs and logs go.
    pub dir: TempDir,
    sock: PathBuf,
    prefix: String,
    /// How long B may run.
    pub b_timeout: Duration,
    /// Extra `[port]` keys for both instances (e.g. `mtu = 9000`).
    pub port_extra: String,
    /// Extra net_memif device arguments for both instances (e.g. `,rsize=6`).
    pub device_extra: String,
}

impl MemifPair {
    pub fn new(name: &str) -> Self {
        let dir = TempDir::new(name);
        let sock = dir.path("memif.sock");
        MemifPair {
            dir,
            sock,
            prefix: format!("iwt-{name}-{}", std::process::id()),
            b_timeout: Duration::from_secs(60),
            port_extra: String::new(),
            device_extra: String::new(),
        }
    }

    pub fn conf(&self, side: &str, role: &str, ip: &str, cores: &str, rest: &str) -> PathBuf {
        let text = format!(
            "[eal]\nhugepages = \"off\"\nmemory_mb = 512\nfile_prefix = \"{}-{side}\"\n\
             [port]\ndevice = \"net_memif0,role={role},id=0,socket={},socket-abstract=no{}\"\nip = \"{ip}/24\"\n{}\n\
             [dataplane]\ncores = {cores}\nmbufs = 16384\n[diag]\nrun_seconds = {}\n{rest}",
            self.prefix,
            self.sock.display(),
            self.device_extra,
            self.port_extra,
            self.b_timeout.as_secs() + 30
        );
        self.dir.write(&format!("{side}.toml"), &text)
    }

    pub fn run(
        &self,
        a_cores: &str,
        a_diag: &str,
        b_cores: &str,
        b_diag: &str,
    ) -> (Proc, Option<i32>, String) {
        let a_cfg = self.conf("a", "server", "10.77.0.1", a_cores, a_diag);
        let b_cfg = self.conf("b", "client", "10.77.0.2", b_cores, b_diag);
        let a = Proc::spawn(
            &[super::iwarpd(), "--config", a_cfg.to_str().unwrap()],
            &self.dir.path("a.log"),
        );
        assert!(
            a.wait_for("iwarpd: port", Duration::from_secs(20)),
            "A did not start:\n{}",
            a.output()
        );
        let mut b = Proc::spawn(
            &[super::iwarpd(), "--config", b_cfg.to_str().unwrap()],
            &self.dir.path("b.log"),
        );
        let code = b.wait(self.b_timeout);
        let out_b = b.output();
        (a, code, out_b)
    }

    /// Stop A with SIGTERM; expect a clean exit and nothing left behind. Returns A's output.
    pub fn stop(&self, mut a: Proc) -> String {
        a.signal("TERM");
        let code = a.wait(Duration::from_secs(15));
        let out_a = a.output();
        assert_eq!(code, Some(0), "A did not stop cleanly:\n{out_a}");
        assert!(
            out_a.contains("iwarpd: EAL shutdown: cleaned up"),
            "pools or EAL not released:\n{out_a}"
        );
        assert!(!self.sock.exists(), "memif socket left behind");
        for side in ["a", "b"] {
            let dir = format!("/var/run/dpdk/{}-{side}", self.prefix);
            assert!(!Path::new(&dir).exists(), "runtime dir of {side} left");
        }
        out_a
    }
}
