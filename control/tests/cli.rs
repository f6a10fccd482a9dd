//! iwarpd's command line and config errors: exit status 2 and the key named.
mod common;

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(common::iwarpd())
        .args(args)
        .output()
        .expect("run iwarpd");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), s)
}

#[test]
fn bad_cli_exits_2_with_usage() {
    let (code, out) = run(&["--frobnicate"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("--frobnicate") && out.contains("Usage: iwarpd"),
        "{out}"
    );
    let (code, out) = run(&[]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("--config <FILE>") && out.contains("--check-config <FILE>"),
        "{out}"
    );
    let (code, out) = run(&["--config", "a.toml", "--check-config", "b.toml"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cannot be used with"), "{out}");
    let (code, out) = run(&["--config"]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn help_and_version_exit_0() {
    let (code, out) = run(&["--help"]);
    assert_eq!(code, 0, "{out}");
    for want in [
        "--config <FILE>",
        "--check-config <FILE>",
        "--version",
        "Exit status",
    ] {
        assert!(out.contains(want), "--help lacks {want}: {out}");
    }
    let (code, out) = run(&["-h"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = run(&["--version"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&format!("iwarpd {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(out.contains("ABI"), "{out}");
}

#[test]
fn missing_file_exits_2() {
    let (code, out) = run(&["--check-config", "/nonexistent/iwarpd.toml"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("cannot read config /nonexistent/iwarpd.toml"),
        "{out}"
    );
}

#[test]
fn bad_config_names_the_key_and_allowed_values() {
    let dir = common::TempDir::new("cli");
    let cases = [
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\nmtuu = 1500\n",
            "mtuu",
            "expected one of",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\nmtu = 20000\n",
            "port.mtu",
            "576..=9000",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.300/24\"\n",
            "port.ip",
            "IPv4",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\n[dataplane]\nmode = \"turbo\"\n",
            "dataplane.mode",
            "\"stack\" or \"echo\"",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\n[eal]\nhugepages = 3\n",
            "hugepages",
            "string",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\n[mpa]\ncrc = \"sometimes\"\n",
            "mpa.crc",
            "\"on\", \"off\" or \"require\"",
        ),
        (
            "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\n[control]\nsocket = \"x\"\n",
            "control.socket",
            "absolute path",
        ),
    ];
    for (i, (text, key, allowed)) in cases.iter().enumerate() {
        let f = dir.write(&format!("bad{i}.toml"), text);
        for flag in ["--check-config", "--config"] {
            let (code, out) = run(&[flag, f.to_str().unwrap()]);
            assert_eq!(code, 2, "{flag} case {i}: {out}");
            assert!(out.contains(key), "case {i} should name {key}: {out}");
            assert!(
                out.contains(allowed),
                "case {i} should say {allowed}: {out}"
            );
        }
    }
}

#[test]
fn shipped_default_config_checks_ok() {
    let f = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml");
    let (code, out) = run(&["--check-config", f]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("config OK"), "{out}");
    assert!(out.contains("--no-pci"), "{out}");
}
