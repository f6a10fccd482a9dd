//! Helpers for end-to-end tests: root check, network namespaces and processes that clean up
//! after themselves (by name and PID), iwarpd configs in a temporary directory.
#![allow(dead_code, unreachable_pub)]

pub mod memif;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The iwarpd binary: the one cargo built for these tests (control's own tests), else (tests
/// of another package that include this module) `target/<profile>/iwarpd`, brought up to date
/// with `cargo build -p control --bin iwarpd` first.
pub fn iwarpd() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| match option_env!("CARGO_BIN_EXE_iwarpd") {
        Some(p) => p.to_owned(),
        None => workspace_binary("control", "iwarpd").display().to_string(),
    })
}

/// `target/<profile>/<bin>` of package `pkg`, built (or found up to date) by cargo with the
/// profile of the running test.
pub fn workspace_binary(pkg: &str, bin: &str) -> PathBuf {
    // target/<profile>/deps/<this test>
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary in target/<profile>/deps");
    let target = profile_dir.parent().expect("target dir");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-j2", "--quiet", "-p", pkg, "--bin", bin])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("run cargo build");
    assert!(st.success(), "cargo build -p {pkg} --bin {bin} failed");
    let p = profile_dir.join(bin);
    assert!(p.exists(), "{} missing after cargo build", p.display());
    p
}

/// True when running as root; otherwise prints a loud SKIPPED line.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY-free: geteuid through the `id` command keeps this crate free of unsafe.
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    let root = String::from_utf8_lossy(&out.stdout).trim() == "0";
    if !root {
        eprintln!(
            "\n*** SKIPPED {test}: needs root (network namespaces, DPDK). CI runs as root. ***\n"
        );
    }
    root
}

/// True when `tool` is on PATH; otherwise prints a loud SKIPPED line.
pub fn have_tool(tool: &str, test: &str) -> bool {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("\n*** SKIPPED {test}: `{tool}` is not installed (make deps installs it). ***\n");
    }
    ok
}

/// Run a command, panicking with its output if it fails.
pub fn sh(cmd: &str) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    assert!(
        out.status.success(),
        "command failed: {cmd}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Run a command and return (status ok, stdout+stderr).
pub fn sh_lossy(cmd: &str) -> (bool, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn sh");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), s)
}

/// A short unique tag for names (interfaces are limited to 15 characters).
pub fn tag() -> String {
    format!("{:x}", std::process::id() % 0xffff)
}

/// A kernel namespace and an iwarpd namespace joined through a bridge in a third namespace:
/// `kif` (kernel) -- veth -- [bridge] -- veth -- `dif` (iwarpd). Loss is injected on the
/// bridge (nftables `bridge` family, forward hook), so it hits frames in flight in both
/// directions: dropping in the kernel namespace's own output hook would only make Linux TCP
/// requeue its segments (a local transmit failure), never lose them. Deleted on drop.
pub struct VethPair {
    /// Kernel-side namespace.
    pub kns: String,
    /// Kernel-side interface.
    pub kif: String,
    /// Bridge namespace (where loss is injected).
    pub bns: String,
    /// Namespace where iwarpd runs.
    pub dns: String,
    /// iwarpd-side interface.
    pub dif: String,
}

impl VethPair {
    /// Create the three namespaces, with `kernel_ip` on the kernel's interface.
    pub fn new(name: &str, kernel_ip: &str) -> Self {
        let t = format!("{name}{}", tag());
        let p = VethPair {
            kns: format!("iwk{t}"),
            kif: format!("k{t}"),
            bns: format!("iwb{t}"),
            dns: format!("iwd{t}"),
            dif: format!("d{t}"),
        };
        let _ = sh_lossy(&format!(
            "ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null",
            p.kns, p.bns, p.dns
        ));
        for ns in [&p.kns, &p.bns, &p.dns] {
            sh(&format!("ip netns add {ns}"));
        }
        let (kb, db) = (format!("kb{t}"), format!("db{t}"));
        sh(&format!("ip link add {} type veth peer name {kb}", p.kif));
        sh(&format!("ip link add {} type veth peer name {db}", p.dif));
        sh(&format!("ip link set {} netns {}", p.kif, p.kns));
        sh(&format!("ip link set {} netns {}", p.dif, p.dns));
        sh(&format!("ip link set {kb} netns {}", p.bns));
        sh(&format!("ip link set {db} netns {}", p.bns));
        sh(&format!("ip -n {} link add br0 type bridge", p.bns));
        for i in [&kb, &db] {
            sh(&format!("ip -n {} link set {i} master br0", p.bns));
            sh(&format!("ip -n {} link set {i} up", p.bns));
        }
        sh(&format!("ip -n {} link set br0 up", p.bns));
        sh(&format!(
            "ip -n {} addr add {kernel_ip} dev {}",
            p.kns, p.kif
        ));
        sh(&format!("ip -n {} link set {} up", p.kns, p.kif));
        sh(&format!("ip -n {} link set lo up", p.kns));
        sh(&format!("ip -n {} link set {} up", p.dns, p.dif));
        // veth leaves TCP checksums to "hardware" (CHECKSUM_PARTIAL) that does not exist on the
        // AF_PACKET/AF_XDP path: make the kernel fill them in, as a real NIC would.
        sh(&format!(
            "ip netns exec {} ethtool -K {} tx off",
            p.kns, p.kif
        ));
        p
    }

    /// Drop `pct` % of TCP frames at random on the bridge, in both directions (nftables).
    pub fn set_loss(&self, pct: u32) {
        let _ = sh_lossy(&format!(
            "ip netns exec {} nft delete table bridge iwloss",
            self.bns
        ));
        if pct == 0 {
            return;
        }
        let rules = format!(
            "table bridge iwloss {{\n chain lossy {{ type filter hook forward priority 0; meta l4proto tcp numgen random mod 100 < {pct} drop; }}\n}}\n"
        );
        let f = std::env::temp_dir().join(format!("iwloss-{}.nft", self.bns));
        std::fs::write(&f, rules).expect("write nft rules");
        sh(&format!(
            "ip netns exec {} nft -f {}",
            self.bns,
            f.display()
        ));
        let _ = std::fs::remove_file(f);
    }

    /// Set the MTU of every link of the path (both veths, both bridge ports, the bridge).
    pub fn set_mtu(&self, mtu: u16) {
        let t = &self.kif[1..];
        sh(&format!(
            "ip -n {} link set {} mtu {mtu}",
            self.kns, self.kif
        ));
        sh(&format!(
            "ip -n {} link set {} mtu {mtu}",
            self.dns, self.dif
        ));
        for i in [format!("kb{t}"), format!("db{t}"), "br0".to_owned()] {
            sh(&format!("ip -n {} link set {i} mtu {mtu}", self.bns));
        }
    }

    /// Run `cmd` inside the kernel-side namespace.
    pub fn kexec(&self, cmd: &str) -> (bool, String) {
        sh_lossy(&format!("ip netns exec {} {cmd}", self.kns))
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the interfaces inside it.
        let _ = sh_lossy(&format!(
            "ip netns del {}; ip netns del {}; ip netns del {}",
            self.kns, self.bns, self.dns
        ));
    }
}

/// A child process killed (SIGKILL, by PID) on drop unless it already exited.
pub struct Proc {
    /// The child.
    pub child: Option<Child>,
    /// Where its stdout+stderr go.
    pub log: PathBuf,
}

impl Proc {
    /// Spawn `argv` with stdout and stderr to `log`.
    pub fn spawn(argv: &[&str], log: &Path) -> Proc {
        let f = std::fs::File::create(log).expect("create log");
        let child = Command::new(argv[0])
            .args(&argv[1..])
            .stdout(f.try_clone().expect("dup log"))
            .stderr(f)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
        Proc {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    /// Spawn the space-separated command `cmd` (no quoting) with its output to `log`, and
    /// wait up to `timeout` for `ready` in that output; panics with the log if it never comes.
    pub fn spawn_ready(cmd: &str, log: &Path, ready: &str, timeout: Duration) -> Proc {
        let argv: Vec<&str> = cmd.split(' ').collect();
        let p = Proc::spawn(&argv, log);
        assert!(
            p.wait_for(ready, timeout),
            "{} did not print {ready:?} within {timeout:?}:\n{}",
            argv[0],
            p.output()
        );
        p
    }

    /// PID of the child.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Send a signal by PID.
    pub fn signal(&self, sig: &str) {
        let _ = sh_lossy(&format!("kill -{sig} {}", self.pid()));
    }

    /// Wait up to `timeout` for exit; returns the exit code (None: still running or killed).
    pub fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return st.code();
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The log so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until `needle` appears in the log (or timeout).
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if self.output().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A test that failed half-way: ask for a clean stop first (so DPDK removes its
        // runtime files), then kill.
        if self.child.is_some() {
            self.signal("TERM");
            if self.wait(Duration::from_secs(5)).is_none()
                && let Some(mut c) = self.child.take()
            {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Create `/tmp/iwarpd-test-<name>-<pid>`.
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("iwarpd-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("mkdir");
        TempDir(p)
    }

    /// Write a file in the directory and return its path.
    /// An iwarpd config (a `.toml` with `[port]`) without `[control]` gets its own control
    /// socket in this directory, so daemons of concurrent tests never share
    /// `/run/iwarpd.sock`.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        let mut text = text.to_owned();
        if name.ends_with(".toml") && text.contains("[port]") && !text.contains("[control]") {
            text.push_str(&format!(
                "\n[control]\nsocket = \"{}\"\n",
                self.0.join(format!("{name}.ctl.sock")).display()
            ));
        }
        std::fs::write(&p, text).expect("write");
        p
    }

    /// A path in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The Linux-side TCP peer script.
pub fn tcp_peer() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/tcp_peer.py").to_owned()
}

/// Start iwarpd inside `veth`'s namespace with `config` (TOML body); waits until it runs.
pub fn start_iwarpd(veth: &VethPair, dir: &TempDir, name: &str, config: &str) -> Proc {
    start_iwarpd_in(&veth.dns, dir, name, config)
}

/// Start iwarpd inside namespace `ns` with `config` (TOML body, written to `dir/name.toml`,
/// its output to `dir/name.log`); waits until its port is up.
pub fn start_iwarpd_in(ns: &str, dir: &TempDir, name: &str, config: &str) -> Proc {
    let cfg = dir.write(&format!("{name}.toml"), config);
    let cmd = format!("ip netns exec {ns} {} --config {}", iwarpd(), cfg.display());
    Proc::spawn_ready(
        &cmd,
        &dir.path(&format!("{name}.log")),
        "iwarpd: port",
        Duration::from_secs(20),
    )
}

/// Value of `key=value` (space separated) on the first line containing `prefix`.
pub fn field<'a>(text: &'a str, prefix: &str, key: &str) -> Option<&'a str> {
    let line = text.lines().find(|l| l.contains(prefix))?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Sum of `key = N` over every section whose name starts with `section_prefix`.
pub fn counter_sum(report: &str, section_prefix: &str, key: &str) -> u64 {
    let mut in_section = false;
    let mut sum = 0;
    for line in report.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_section = l
                .strip_prefix('[')
                .is_some_and(|s| s.starts_with(section_prefix));
            continue;
        }
        if in_section
            && let Some((k, v)) = l.split_once('=')
            && k.trim() == key
        {
            sum += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    sum
}

/// Value of `key = N` in section `[section]` of an iwarpd counters report.
pub fn counter(report: &str, section: &str, key: &str) -> Option<u64> {
    let mut in_section = false;
    for line in report.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_section = l == format!("[{section}]");
            continue;
        }
        if in_section
            && let Some((k, v)) = l.split_once('=')
            && k.trim() == key
        {
            return v.trim().parse().ok();
        }
    }
    None
}

/// `(op, bytes, sha256, peer_sha256, ok)` of every line of iwarpd's diagnostic RDMA service
/// (`iwarpd: rdma op=...` / `iwarpd: rdma-sink op=...`) that starts with `prefix`.
pub fn diag_ops(out: &str, prefix: &str) -> Vec<(String, u64, String, String, bool)> {
    out.lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| {
            let f = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")))
                    .unwrap_or("")
                    .to_string()
            };
            (
                f("op"),
                f("bytes").parse().unwrap_or(u64::MAX),
                f("sha256"),
                f("peer_sha256"),
                f("ok") == "true",
            )
        })
        .collect()
}
