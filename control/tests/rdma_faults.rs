//! Broken streams between two iwarpd on a memif wire, driven by the test-only fault switches
//! (docs/rdma-seams.md "Fault switches"): B's diagnostic generator arms a fault on its own
//! QP and posts a 64 KiB RDMA Write whose first FPDU goes out broken; A's sink must end the
//! connection the way RFC 5040 §5.1 / RFC 5044 §8 and issue 7 ask, never with a graceful
//! close, and flush its outstanding receives. A good operation before and after each fault
//! (on a new connection) shows the daemons keep serving.
//!
//! - `truncate`: half an FPDU, then silence: A's receive timer (`[mpa] rx_timeout_ms`) fires,
//!   TERMINATE (LLP, stream lost) to B, `QpError(RxTimeout)`;
//! - `badcrc`: a whole FPDU with a wrong MPA CRC: TERMINATE (LLP, CRC error);
//! - `fin`: half an FPDU, then FIN: `QpError(StreamBroken)` at A, TERMINATE to B;
//! - `rst`: half an FPDU, acknowledged, then RST: `QpError(StreamBroken)` at A.
mod common;

use common::memif::MemifPair;
use common::root_or_skip;
use std::time::Duration;

/// The value of `key=` on a line (space separated; `terminate=` runs to the end of line).
fn val<'a>(line: &'a str, key: &str) -> &'a str {
    if key == "terminate" {
        return line.split_once(" terminate=").map_or("", |(_, v)| v.trim());
    }
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or("")
}

/// The generator's line for fault op `op`.
fn gen_line<'a>(out: &'a str, op: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("iwarpd: rdma op={op} ")))
        .unwrap_or_else(|| panic!("no line for {op}:\n{out}"))
}

/// The sink's `ended=` lines, in order.
fn sink_ends(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.starts_with("iwarpd: rdma-sink conn=") && l.contains(" ended="))
        .collect()
}

fn run(name: &str, ops: &str, extra: &str) -> (String, String) {
    let mut pair = MemifPair::new(name);
    pair.b_timeout = Duration::from_secs(90);
    let (a, code, out_b) = pair.run(
        "[0]",
        &format!("rdma_port = 7174\nrdma_buffer = 65536\nrdma_crc = \"on\"\n{extra}"),
        "[1]",
        &format!(
            "rdma_connect = \"10.77.0.1:7174\"\nrdma_ops = {ops}\nrdma_sizes = [65536]\n\
             rdma_buffer = 65536\nrdma_crc = \"on\"\nexit_after_rdma = true\n{extra}"
        ),
    );
    let out_a = pair.stop(a);
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    println!("---- A ----\n{out_a}\n---- B ----\n{out_b}");
    (out_a, out_b)
}

#[test]
fn a_truncated_fpdu_times_out_and_a_bad_crc_draws_the_terminate() {
    if !root_or_skip("a_truncated_fpdu_times_out_and_a_bad_crc_draws_the_terminate") {
        return;
    }
    let (out_a, out_b) = run(
        "rdmatrunc",
        "[\"write\", \"truncate\", \"badcrc\", \"send\"]",
        "[mpa]\nrx_timeout_ms = 1500\n",
    );
    assert!(
        out_b.contains("rdma-diag done ok=4 failed=0"),
        "{out_b}\nA:\n{out_a}"
    );
    let t = gen_line(&out_b, "truncate");
    // B's TX froze after half an FPDU; only A's receive timer can end it.
    let secs: f64 = val(t, "secs").parse().unwrap();
    assert!((1.4..15.0).contains(&secs), "{t}");
    assert_eq!(val(t, "ended"), "TerminateReceived", "{t}");
    assert_eq!(val(t, "terminate"), "Llp/etype 0x0/ecode 0x01", "{t}");
    // The broken Write, and the posted reply receives, flushed at B.
    assert!(val(t, "flushed").parse::<u32>().unwrap() >= 1, "{t}");
    let c = gen_line(&out_b, "badcrc");
    assert_eq!(val(c, "terminate"), "Llp/etype 0x0/ecode 0x02", "{c}");
    // The first connection ran `write` then `truncate`, the second `badcrc`; the third, for
    // `send`, was still open when A stopped, and A reset it (a stopping thread resets its
    // connections).
    let ends = sink_ends(&out_a);
    assert_eq!(ends.len(), 3, "{out_a}");
    assert_eq!(val(ends[2], "ended"), "QpError(StreamLost)", "{out_a}");
    assert_eq!(val(ends[0], "ended"), "QpError(RxTimeout)", "{out_a}");
    assert_eq!(
        val(ends[1], "ended"),
        "QpError(TerminateSent(TermCode{layer:Llp,etype:0,ecode:2}))",
        "{out_a}"
    );
    for e in &ends {
        // Both posted receives of A's sink came back flushed.
        assert_eq!(val(e, "flushed"), "2", "{out_a}");
    }
    assert_eq!(
        common::counter_sum(&out_a, "rdma.qp.", "crc_errors"),
        1,
        "{out_a}"
    );
    assert_eq!(
        common::counter_sum(&out_a, "rdma.qp.", "terminate_tx_2_0_01"),
        1,
        "{out_a}"
    );
    assert_eq!(
        common::counter_sum(&out_a, "rdma.qp.", "terminate_tx_2_0_02"),
        1,
        "{out_a}"
    );
}

#[test]
fn fin_or_rst_inside_an_fpdu_flushes_every_work_request() {
    if !root_or_skip("fin_or_rst_inside_an_fpdu_flushes_every_work_request") {
        return;
    }
    // A long receive timer: only the FIN or the RST may end these streams.
    let (out_a, out_b) = run(
        "rdmafin",
        "[\"write\", \"fin\", \"rst\", \"read\"]",
        "[mpa]\nrx_timeout_ms = 60000\n",
    );
    assert!(
        out_b.contains("rdma-diag done ok=4 failed=0"),
        "{out_b}\nA:\n{out_a}"
    );
    let f = gen_line(&out_b, "fin");
    // A answered the FIN inside the FPDU with a TERMINATE (LLP, stream lost) on its half.
    assert_eq!(val(f, "terminate"), "Llp/etype 0x0/ecode 0x01", "{f}");
    let r = gen_line(&out_b, "rst");
    assert_eq!(val(r, "ended"), "QpError(StreamLost)", "{r}");
    for l in [f, r] {
        let secs: f64 = val(l, "secs").parse().unwrap();
        assert!(secs < 10.0, "{l}");
    }
    // The `fin` and `rst` connections broke; the last one (`read`) was still open when A
    // stopped, and A reset it.
    let ends = sink_ends(&out_a);
    assert_eq!(ends.len(), 3, "{out_a}");
    assert_eq!(val(ends[2], "ended"), "QpError(StreamLost)", "{out_a}");
    for e in &ends[..2] {
        assert_eq!(val(e, "ended"), "QpError(StreamBroken)", "{out_a}");
        assert_eq!(val(e, "flushed"), "2", "{out_a}");
    }
    assert_eq!(
        common::counter_sum(&out_a, "rdma.qp.", "terminate_tx_2_0_01"),
        1,
        "{out_a}"
    );
}
