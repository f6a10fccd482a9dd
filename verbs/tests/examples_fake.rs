//! The examples, as client and server processes, against the library's test double of the
//! daemon (`common/fake.rs`). Against real daemons they run in `tools/tests/e2e_memif.rs`.
mod common;

use common::fake::FakeDaemon;
use common::ready::Server;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name)
}

fn server(name: &str, spec: &str, port: &str, extra: &[&str]) -> Server {
    let mut c = Command::new(example(name));
    c.args(["-s", "-d", spec, "-p", port]).args(extra);
    Server::start(c, "listening on port", Duration::from_secs(30))
}

fn client(name: &str, spec: &str, port: &str, extra: &[&str]) -> Output {
    Command::new(example(name))
        .args(["-c", "10.99.0.1", "-d", spec, "-p", port])
        .args(extra)
        .output()
        .unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what} failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn every_example_runs_against_the_double() {
    let d = FakeDaemon::start("examples");
    let spec = d.spec();
    let cases: &[(&str, &[&str], &[&str], &str)] = &[
        (
            "write_pingpong",
            &["-S", "64", "-n", "200"],
            &["-S", "64", "-n", "200"],
            "write_lat size=64",
        ),
        (
            "write_bw",
            &["-S", "4096"],
            &["-S", "4096", "-n", "500"],
            "write_bw size=4096",
        ),
        (
            "send_echo",
            &["-S", "512"],
            &["-S", "512", "-n", "20"],
            "verified=yes",
        ),
        (
            "read_remote",
            &["-S", "100000"],
            &["--chunk", "4096"],
            "sha256=ok",
        ),
        (
            "atomic_counter",
            &["-n", "50"],
            &["-n", "50"],
            "50 FetchAdds",
        ),
    ];
    for (i, (name, sargs, cargs, want)) in cases.iter().enumerate() {
        let port = format!("{}", 19000 + i);
        let s = server(name, &spec, &port, sargs);
        let c = client(name, &spec, &port, cargs);
        let out = ok(&c, &format!("{name} client"));
        assert!(out.contains(want), "{name}: {out}");
        let (good, so) = s.finish(Duration::from_secs(30));
        assert!(good, "{name} server failed:\n{so}");
    }
}
