//! `IWARPD_<SECTION>__<KEY>` variables through the real `iwarpd` binary: they set keys on top of
//! the file, and a bad one exits 2 naming the variable, the key and the allowed values.
mod common;

use std::process::Command;

fn check_config(vars: &[(&str, &str)]) -> (i32, String) {
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml");
    let out = Command::new(common::iwarpd())
        .args(["--check-config", conf])
        .envs(vars.iter().copied())
        .output()
        .expect("run iwarpd");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), s)
}

#[test]
fn variables_override_the_file() {
    let (code, out) = check_config(&[
        ("IWARPD_PORT__IP", "10.78.0.11/24"),
        ("IWARPD_PORT__DEVICE", "net_af_packet0,iface=eth0"),
        ("IWARPD_EAL__HUGEPAGES", "off"),
        ("IWARPD_EAL__MEMORY_MB", "300"),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("device net_af_packet0,iface=eth0 ip 10.78.0.11/24"),
        "{out}"
    );
    assert!(out.contains("--no-huge") && out.contains("-m 300"), "{out}");
}

#[test]
fn a_bad_variable_exits_2_naming_it() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "IWARPD_PORT__MTU",
            "20000",
            &["IWARPD_PORT__MTU", "port.mtu", "576..=9000"],
        ),
        (
            "IWARPD_TCP__SPEED",
            "1",
            &["IWARPD_TCP__SPEED", "tcp.speed", "expected one of"],
        ),
        ("IWARPD_LOGLEVEL", "info", &["IWARPD_<SECTION>__<KEY>"]),
    ];
    for (var, val, want) in cases {
        let (code, out) = check_config(&[(var, val)]);
        assert_eq!(code, 2, "{var}: {out}");
        for w in *want {
            assert!(out.contains(w), "{var}: want {w:?} in {out}");
        }
    }
}
