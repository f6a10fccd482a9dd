//! `iwarp-opcheck` client and server processes against the verbs test double: every
//! operation at every size, and several connections at once. (Real daemons:
//! `e2e_memif.rs`.)
#[path = "../../verbs/tests/common/fake.rs"]
mod fake;
#[path = "../../verbs/tests/common/ready.rs"]
mod ready;

use std::process::Command;
use std::time::Duration;

fn opcheck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iwarp-opcheck"))
}

#[test]
fn all_operations_all_sizes_and_many_connections() {
    let d = fake::FakeDaemon::start("opcheck");
    let spec = d.spec();
    let mut cmd = opcheck();
    cmd.args([
        "-s",
        "-p",
        "7471",
        "-d",
        &spec,
        "--conns",
        "5",
        "--max-size",
        "1m",
    ]);
    let server = ready::Server::start(cmd, "listening on", Duration::from_secs(30));
    let c = opcheck()
        .args([
            "-c",
            "10.99.0.1",
            "-p",
            "7471",
            "-d",
            &spec,
            "-v",
            "--sizes",
            "0,1,4k,1m",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&c.stdout);
    assert!(
        c.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&c.stderr)
    );
    // 6 sized operations x 4 sizes + 2 atomics.
    assert!(
        out.contains("opcheck: 26 checks passed on 1 connection(s)"),
        "{out}"
    );
    for op in [
        "send",
        "send_se",
        "send_inv",
        "write",
        "write_imm",
        "read",
        "fetch_add",
        "cmp_swap",
    ] {
        assert!(out.contains(&format!("op={op} ")), "{op} missing:\n{out}");
    }
    let c = opcheck()
        .args([
            "-c",
            "10.99.0.1",
            "-p",
            "7471",
            "-d",
            &spec,
            "--qps",
            "4",
            "--ops",
            "write,read",
            "--sizes",
            "64k",
            "--timeout",
            "5",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&c.stdout);
    if !c.status.success() {
        panic!(
            "{out}\n{}\nserver:\n{}",
            String::from_utf8_lossy(&c.stderr),
            server.output()
        );
    }
    assert!(
        out.contains("opcheck: 8 checks passed on 4 connection(s)"),
        "{out}"
    );
    let (good, sout) = server.finish(Duration::from_secs(30));
    assert!(good, "{sout}");
    assert_eq!(sout.matches("client said bye").count(), 5, "{sout}");
}

#[test]
fn bad_ops_and_sizes_exit_2() {
    let o = opcheck()
        .args(["-c", "1.2.3.4", "--ops", "write,frob"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown operation \"frob\""));
    let o = opcheck()
        .args(["-c", "1.2.3.4", "--sizes", "4x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
