//! Segment-level scripted scenarios (packetdrill-like), each citing the RFC rule it checks.
//! The interpreter is in `script/mod.rs`.
#![allow(clippy::collapsible_if)]

#[path = "script/mod.rs"]
mod script;

#[path = "script/handshake.rs"]
mod handshake;

#[path = "script/rst.rs"]
mod rst;

/// The interpreter itself must reject wrong expectations and unexpected output.
mod harness_self_check {
    use crate::script::{run, run_est};

    #[test]
    #[should_panic(expected = "ack mismatch")]
    fn wrong_ack_detected() {
        run(r"
0   connect
0   > S 0:0(0)
10  < S. 0:0(0) ack 1 win 65535
10  > . 1:1(0) ack 2
");
    }

    #[test]
    #[should_panic(expected = "unexpected segment")]
    fn unconsumed_output_detected() {
        run_est(
            "",
            r"
10  < R 100:100(0)
20  none
",
        );
    }

    #[test]
    #[should_panic(expected = "event not seen")]
    fn missing_event_detected() {
        run_est(
            "",
            r"
10  event PeerClosed
",
        );
    }
}

#[path = "script/close.rs"]
mod close;

#[path = "script/data.rs"]
mod data;

#[path = "script/rack.rs"]
mod rack;

#[path = "script/dupack.rs"]
mod dupack;

#[path = "script/bbr.rs"]
mod bbr;

#[path = "script/prr.rs"]
mod prr;

#[path = "script/ackpolicy.rs"]
mod ackpolicy;
