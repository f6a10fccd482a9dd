//! The benchmark binaries' command lines (`l2bench`, `placer-cost`; `iwarp-perf`'s in
//! `perf_fake.rs`): `--help` and `--version` answer with exit 0, bad input exits 2 with a
//! message naming the argument and what is allowed. None of these runs DPDK.

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("spawn")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const L2BENCH: &str = env!("CARGO_BIN_EXE_l2bench");
const PLACER_COST: &str = env!("CARGO_BIN_EXE_placer-cost");

#[test]
fn help_and_version_answer() {
    for (bin, name, opt) in [
        (L2BENCH, "l2bench", "--vdev <VDEV>"),
        (PLACER_COST, "placer-cost", "<FPDU_BYTES>"),
    ] {
        let o = run(bin, &["--help"]);
        assert_eq!(o.status.code(), Some(0), "{bin} --help: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(opt), "{bin} --help lists {opt}: {out}");
        let o = run(bin, &["--version"]);
        assert_eq!(o.status.code(), Some(0), "{bin} --version");
        let version = format!("{name} {}", env!("CARGO_PKG_VERSION"));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&version),
            "{bin} --version says {version}: {out}"
        );
    }
}

#[test]
fn l2bench_refuses_bad_input_with_what_is_allowed() {
    let cases: [(&[&str], &str); 5] = [
        (&[], "--vdev <VDEV>"),
        (&["--vdev", "net_null0", "--size", "59"], "60..=1514"),
        (&["--vdev", "net_null0", "--secs", "0"], "above 0"),
        (&["--vdev", "net_null0", "--pings", "0"], "--pings"),
        (&["--vdev", "net_null0", "--frames", "3"], "--frames"),
    ];
    for (args, want) in cases {
        let o = run(L2BENCH, args);
        assert_eq!(o.status.code(), Some(2), "l2bench {args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "l2bench {args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn placer_cost_refuses_bad_input_and_runs_good_input() {
    let cases: [(&[&str], &str); 4] = [
        (&["placer"], "<FPDU_BYTES>"),
        (&["fast", "1440"], "possible values: placer, baseline"),
        (&["placer", "22"], "a multiple of 4 from 24"),
        (&["baseline", "1442"], "a multiple of 4 from 24"),
    ];
    for (args, want) in cases {
        let o = run(PLACER_COST, args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "placer-cost {args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(want),
            "placer-cost {args:?}: {}",
            stderr(&o)
        );
    }
    for mode in ["placer", "baseline"] {
        let o = run(PLACER_COST, &[mode, "1440"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "placer-cost {mode}: {}",
            stderr(&o)
        );
        // 64 FPDUs of 1420 payload bytes, 20 rounds.
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("payload_bytes=1817600 fpdu=1440 fpdus=1280"),
            "{out}"
        );
    }
}
