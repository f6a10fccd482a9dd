//! `iwarp-perf` server and client processes against the verbs library's test double of the
//! daemon (it carries work requests out with memory copies between its clients; the real
//! daemons come with the dataplane's RDMA engine): the whole -R exchange, every test's loop,
//! the printed tables and the JSON.
#[path = "../../verbs/tests/common/fake.rs"]
mod fake;

use std::process::{Command, Stdio};
use std::time::Duration;

fn perf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iwarp-perf"))
}

fn pair(
    d: &fake::FakeDaemon,
    test: &str,
    port: u16,
    extra: &[&str],
) -> (String, String, serde_json::Value) {
    let spec = d.spec();
    let dir = std::env::temp_dir().join(format!("iwarp-perf-fake-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("client.json");
    let port_s = port.to_string();
    let mut sargs = vec![test, "-d", &spec, "-p", &port_s, "-R"];
    sargs.extend_from_slice(extra);
    let server = perf()
        .args(&sargs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let ip = fake::IP.to_string();
    let js = json.to_str().unwrap().to_string();
    let mut cargs = sargs.clone();
    cargs.extend_from_slice(&["--out_json_file", &js, &ip]);
    let c = perf().args(&cargs).output().unwrap();
    let cout = String::from_utf8_lossy(&c.stdout).to_string();
    let cerr = String::from_utf8_lossy(&c.stderr).to_string();
    let s = server.wait_with_output().unwrap();
    let sout = String::from_utf8_lossy(&s.stdout).to_string();
    let serr = String::from_utf8_lossy(&s.stderr).to_string();
    assert!(
        c.status.success(),
        "{test} client failed:\n{cout}\n{cerr}\nserver:\n{sout}\n{serr}"
    );
    assert!(
        s.status.success(),
        "{test} server failed:\n{sout}\n{serr}\nclient:\n{cout}\n{cerr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (cout, sout, v)
}

#[test]
fn every_test_runs_against_the_test_double() {
    let d = fake::FakeDaemon::start("iwarp-perf");
    let (c, s, v) = pair(
        &d,
        "write_bw",
        18601,
        &["-s", "4096", "-n", "300", "--report_gbits"],
    );
    assert!(
        c.contains(" #bytes     #iterations    BW peak[Gb/sec]"),
        "{c}"
    );
    assert!(c.contains(" 4096       300 "), "{c}");
    assert!(
        s.contains("* Waiting for client to connect... *") && s.contains(" 4096       300 "),
        "{s}"
    );
    assert_eq!(v["test_info"]["test"], "RDMA_Write_BW_Test");
    assert_eq!(v["results"]["MsgSize"], 4096);
    assert!(v["results"]["BW_average"].as_f64().unwrap() > 0.0);
    for (t, port) in [
        ("write_lat", 18602),
        ("send_lat", 18603),
        ("read_lat", 18604),
    ] {
        let (c, s, v) = pair(&d, t, port, &["-n", "200"]);
        assert!(
            c.contains("t_typical[usec]") && c.contains(" 2       200 "),
            "{t}: {c}"
        );
        assert!(
            v["results"]["t_typical"].as_f64().unwrap() > 0.0,
            "{t}: {v}"
        );
        let _ = s;
    }
    for (t, port) in [("send_bw", 18605), ("read_bw", 18606), ("atomic_bw", 18607)] {
        let (c, s, v) = pair(&d, t, port, &["-n", "200", "--report_gbits"]);
        assert!(
            c.contains("BW average[Gb/sec]") && v["results"]["n_iterations"] == 200,
            "{t}: {c}\n{v}"
        );
        assert!(s.contains("BW average[Gb/sec]"), "{t}: {s}");
    }
}
