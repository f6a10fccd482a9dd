//! The iWARP data path end to end between two iwarpd on a memif wire, with the diagnostic RDMA
//! service: B's generator runs RDMA Write, Send and Read of 0 B, 1 B, 4 KiB, 1 MiB and 8 MiB
//! against A's sink, and both ends print the SHA-256 of every operation. CRC off (payload sent
//! by reference), CRC on (payload copied, the default on memif), and markers on; then an RDMA
//! Write across the end of the sink's STag must draw the TERMINATE and leave the bytes after
//! the region untouched.
mod common;

use common::memif::MemifPair;
use common::{diag_ops as ops, root_or_skip};
use std::time::Duration;

const SIZES: [u64; 5] = [0, 1, 4096, 1 << 20, 8 << 20];

fn run(name: &str, extra: &str, by_ref: bool) {
    let mut pair = MemifPair::new(name);
    pair.b_timeout = Duration::from_secs(240);
    let sizes = format!("{SIZES:?}");
    let (a, code, out_b) = pair.run(
        "[0]",
        &format!("rdma_port = 7174\nrdma_buffer = 8388608\n{extra}"),
        "[1]",
        &format!(
            "rdma_connect = \"10.77.0.1:7174\"\nrdma_ops = [\"write\", \"send\", \"read\"]\n\
             rdma_sizes = {sizes}\nrdma_buffer = 8388608\nexit_after_rdma = true\n{extra}"
        ),
    );
    let out_a = pair.stop(a);
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    let gen_ops = ops(&out_b, "iwarpd: rdma op=");
    let sink_ops = ops(&out_a, "iwarpd: rdma-sink op=");
    assert_eq!(gen_ops.len(), 15, "{out_b}");
    assert_eq!(sink_ops.len(), 15, "{out_a}");
    let mut i = 0;
    for size in SIZES {
        for op in ["write", "send", "read"] {
            let (g, s) = (&gen_ops[i], &sink_ops[i]);
            assert_eq!((g.0.as_str(), g.1), (op, size), "{out_b}");
            assert_eq!((s.0.as_str(), s.1), (op, size), "{out_a}");
            assert!(g.4 && s.4, "{op} {size}: not ok\nB:\n{out_b}\nA:\n{out_a}");
            // Each end computed its own digest and saw the other's: the same bytes.
            assert_eq!(g.2, s.2, "{op} {size}");
            assert_eq!(g.2.len(), 64);
            assert_eq!((g.3.as_str(), s.3.as_str()), (s.2.as_str(), g.2.as_str()));
            i += 1;
        }
    }
    assert!(out_b.contains("rdma-diag done ok=15 failed=0"), "{out_b}");
    // Per-QP counters reach the report: both QPs placed and sent FPDUs.
    for out in [&out_a, &out_b] {
        assert!(out.contains("[rdma.qp."), "{out}");
        assert!(
            common::counter_sum(out, "rdma.qp.", "fpdus_tx") > 0,
            "{out}"
        );
        assert!(
            common::counter_sum(out, "rdma.qp.", "bytes_placed") > (8 << 20),
            "{out}"
        );
    }
    // With `tx_payload = "by_ref"` payload went to the NIC by reference to the registered
    // memory; by default ("auto") a memif port gets it copied behind the headers, as it copies
    // frames anyway (with markers the framer writes whole FPDUs, so they are copied).
    let zc = common::counter_sum(&out_b, "rdma.qp.", "bytes_tx_by_ref");
    if by_ref {
        assert!(zc > 2 * (8 << 20), "bytes_tx_by_ref {zc}:\n{out_b}");
    } else {
        assert_eq!(zc, 0, "{out_b}");
    }
}

#[test]
fn rdma_every_operation_over_memif_crc_off() {
    if !root_or_skip("rdma_every_operation_over_memif_crc_off") {
        return;
    }
    run(
        "rdmaoff",
        "rdma_crc = \"off\"\n[mpa]\ntx_payload = \"by_ref\"\n",
        true,
    );
}

#[test]
fn rdma_every_operation_over_memif_crc_on() {
    if !root_or_skip("rdma_every_operation_over_memif_crc_on") {
        return;
    }
    run("rdmacrc", "rdma_crc = \"on\"\n", false);
}

#[test]
fn rdma_every_operation_over_memif_markers() {
    if !root_or_skip("rdma_every_operation_over_memif_markers") {
        return;
    }
    run("rdmamrk", "rdma_crc = \"on\"\nrdma_markers = true\n", false);
}

#[test]
fn rdma_write_outside_the_stag_draws_the_terminate() {
    if !root_or_skip("rdma_write_outside_the_stag_draws_the_terminate") {
        return;
    }
    let mut pair = MemifPair::new("rdmaoob");
    pair.b_timeout = Duration::from_secs(60);
    let (a, code, out_b) = pair.run(
        "[0]",
        "rdma_port = 7174\nrdma_buffer = 65536\nrdma_crc = \"on\"\n",
        "[1]",
        "rdma_connect = \"10.77.0.1:7174\"\nrdma_ops = [\"write\", \"oob\", \"read\"]\n\
         rdma_sizes = [8192]\nrdma_buffer = 65536\nrdma_crc = \"on\"\nexit_after_rdma = true\n",
    );
    let out_a = pair.stop(a);
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    // The generator got DDP / tagged buffer / base or bounds (RFC 5041 §7.2: 1/1/0x01).
    assert!(
        out_b.contains("iwarpd: rdma op=oob bytes=8192 terminate=Ddp/etype 0x1/ecode 0x01 ok=true"),
        "{out_b}"
    );
    // The sink sent it, and the 4 KiB guard after its region is untouched.
    assert!(
        out_a.contains("guard_intact=true") && !out_a.contains("guard_intact=false"),
        "{out_a}"
    );
    assert!(out_a.contains("ended=QpError"), "{out_a}");
    assert_eq!(
        common::counter_sum(&out_a, "rdma.qp.", "terminate_tx_1_1_01"),
        1,
        "{out_a}"
    );
    assert!(out_b.contains("rdma-diag done ok=3 failed=0"), "{out_b}");
}
