//! `iwarp-rping` client and server processes against the library's test double of the daemon
//! (the real daemons: `verbs/tests/e2e_memif.rs`): the exchange, the `-v` output and `-V`.
#[path = "../../verbs/tests/common/fake.rs"]
mod fake;
#[path = "../../verbs/tests/common/ready.rs"]
mod ready;

use std::process::Command;
use std::time::Duration;

fn rping() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iwarp-rping"))
}

#[test]
fn ten_verified_pings_print_what_rping_prints() {
    let d = fake::FakeDaemon::start("rping");
    let spec = d.spec();
    let mut cmd = rping();
    cmd.args(["-s", "-v", "-p", "7999", "-d", &spec]);
    let server = ready::Server::start(cmd, "server listening", Duration::from_secs(30));
    let client = rping()
        .args([
            "-c",
            "-v",
            "-V",
            "-C",
            "10",
            "-a",
            "10.99.0.1",
            "-p",
            "7999",
            "-d",
            &spec,
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&client.stdout);
    let err = String::from_utf8_lossy(&client.stderr);
    assert!(client.status.success(), "client failed:\n{out}\n{err}");
    let expected = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/rping.client.txt"
    ))
    .unwrap();
    let want: Vec<&str> = expected
        .lines()
        .filter(|l| l.starts_with("ping data"))
        .collect();
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got, want, "stdout differs from siw's rping");
    assert!(err.contains("client DISCONNECT EVENT..."), "{err}");
    let (good, sout) = server.finish(Duration::from_secs(30));
    assert!(good, "server failed:\n{sout}");
    assert_eq!(
        sout.matches("server ping data: rdma-ping-").count(),
        10,
        "{sout}"
    );
    assert!(sout.contains("server DISCONNECT EVENT..."), "{sout}");
}

#[test]
fn bad_size_and_missing_role_exit_2() {
    let o = rping()
        .args(["-c", "-a", "1.2.3.4", "-S", "65536"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("valid range is 23 to 65536"));
    let o = rping().args(["-a", "1.2.3.4"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = rping().arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("-C <COUNT>"));
    let o = rping().arg("--version").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn client_without_server_fails_cleanly() {
    let d = fake::FakeDaemon::start("rping-nosrv");
    let o = rping()
        .args([
            "-c",
            "-C",
            "1",
            "-a",
            "10.99.0.1",
            "-p",
            "7998",
            "-d",
            &d.spec(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("RDMA_CM_EVENT_CONNECT_ERROR") && err.contains("refused"),
        "{err}"
    );
}
