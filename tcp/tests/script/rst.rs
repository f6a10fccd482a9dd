//! Resets in every state, challenge ACKs and ACK validation (RFC 9293 §3.10.7.4, RFC 5961).

use crate::script::{run, run_est};

/// RFC 5961 §3.2: a RST with SEG.SEQ == RCV.NXT resets the connection.
#[test]
fn rst_exact_in_established() {
    run_est(
        "",
        r"
10  < R. 1:1(0) ack 1
10  event Closed(Reset)
10  gone
10  stat resets_received 1
",
    );
}

/// RFC 5961 §3.2: an in-window RST that is not exactly RCV.NXT gets a challenge ACK.
#[test]
fn rst_in_window_gets_challenge_ack() {
    run_est(
        "",
        r"
10  < R 100:100(0)
10  > . 1:1(0) ack 1
10  state Established
10  stat challenge_acks 1
",
    );
}

/// RFC 9293 §3.10.7.4 (first check): an out-of-window RST is dropped silently.
#[test]
fn rst_out_of_window_dropped() {
    run_est(
        "",
        r"
10  < R 100000:100000(0)
10  none
10  state Established
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, SYN-RECEIVED): a RST closes the embryonic connection.
#[test]
fn rst_in_syn_received() {
    run(r"
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1
5   < R 1:1(0)
5   event Closed(Reset)
5   gone
");
}

/// RFC 9293 §3.10.7.4 (second check, FIN-WAIT-1).
#[test]
fn rst_in_fin_wait_1() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
10  state FinWait1
20  < R 1:1(0)
20  event Closed(Reset)
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, FIN-WAIT-2).
#[test]
fn rst_in_fin_wait_2() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
20  < . 1:1(0) ack 2
20  state FinWait2
30  < R 1:1(0)
30  event Closed(Reset)
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, CLOSE-WAIT).
#[test]
fn rst_in_close_wait() {
    run_est(
        "",
        r"
10  < F. 1:1(0) ack 1
10  > . 1:1(0) ack 2
10  state CloseWait
20  < R 2:2(0)
20  event Closed(Reset)
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, LAST-ACK).
#[test]
fn rst_in_last_ack() {
    run_est(
        "",
        r"
10  < F. 1:1(0) ack 1
10  > . 1:1(0) ack 2
11  close
11  > F. 1:1(0) ack 2
11  state LastAck
20  < R 2:2(0)
20  event Closed(Reset)
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, CLOSING).
#[test]
fn rst_in_closing() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
11  < F. 1:1(0) ack 1
11  > . 2:2(0) ack 2
11  state Closing
20  < R 2:2(0)
20  event Closed(Reset)
",
    );
}

/// RFC 9293 §3.10.7.4 (second check, TIME-WAIT): a RST deletes the TCB.
#[test]
fn rst_in_time_wait() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
11  < F. 1:1(0) ack 2
11  > . 2:2(0) ack 2
11  state TimeWait
20  < R 2:2(0)
20  event Closed(Reset)
",
    );
}

/// RFC 5961 §4.2: a SYN in a synchronized state gets a challenge ACK, never a reset.
#[test]
fn syn_in_established_gets_challenge_ack() {
    run_est(
        "",
        r"
10  < S 500:500(0) win 65535
10  > . 1:1(0) ack 1
10  state Established
10  stat challenge_acks 1
",
    );
}

/// RFC 5961 §4.2: an old SYN (out of window) is answered with an ACK too.
#[test]
fn old_syn_in_established_gets_ack() {
    run_est(
        "",
        r"
10  < S 0:0(0) win 65535
10  > . 1:1(0) ack 1
10  state Established
",
    );
}

/// RFC 9293 §3.10.5: ABORT sends <SEQ=SND.NXT><CTL=RST> and closes.
#[test]
fn abort_sends_reset() {
    run_est(
        "",
        r"
10  abort
10  > R 1:1(0)
10  event Closed(Aborted)
10  gone
10  stat resets_sent 1
",
    );
}

/// RFC 5961 §7: challenge ACKs are rate limited.
#[test]
fn challenge_ack_rate_limited() {
    run_est(
        "0 cfg challenge 2",
        r"
10  < R 100:100(0)
10  > . 1:1(0) ack 1
11  < R 200:200(0)
11  > . 1:1(0) ack 1
12  < R 300:300(0)
12  none
12  stat challenge_acks 2
1100 < R 300:300(0)
1100 > . 1:1(0) ack 1
",
    );
}

/// RFC 9293 §3.10.7.4 (fifth) / RFC 5961 §5.2: an ACK of unsent data gets an ACK and is
/// dropped.
#[test]
fn ack_of_unsent_data() {
    run_est(
        "",
        r"
10  < P. 1:11(10) ack 100
10  > . 1:1(0) ack 1
10  read 0
10  stat challenge_acks 1
",
    );
}

/// RFC 5961 §5.2: an ACK far below SND.UNA - MAX.SND.WND is not acceptable.
#[test]
fn ack_too_old() {
    run_est(
        "",
        r"
10  < P. 1:11(10) ack 4000000000
10  > . 1:1(0) ack 1
10  read 0
",
    );
}

/// RFC 9293 §3.10.7.1: after an abort the 4-tuple is free, so stray segments get resets.
#[test]
fn segment_after_abort_gets_reset() {
    run_est(
        "",
        r"
10  abort
10  > R 1:1(0)
20  < P. 1:11(10) ack 1
20  > R 1:1(0)
",
    );
}
