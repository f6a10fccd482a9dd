//! Connection termination (RFC 9293 §3.6, §3.10.4, §3.10.7.4 eighth, §3.10.8).

use crate::script::run_est;

/// RFC 9293 §3.6 figure 12: active close through FIN-WAIT-1/2 and TIME-WAIT (2*MSL,
/// configurable), then CLOSED.
#[test]
fn active_close() {
    run_est(
        "0 cfg timewait 1000",
        r"
10    close
10    > F. 1:1(0) ack 1
10    state FinWait1
20    < . 1:1(0) ack 2
20    state FinWait2
30    < F. 1:1(0) ack 2
30    > . 2:2(0) ack 2
30    state TimeWait
30    event PeerClosed
1029  state TimeWait
1030  event Closed(Normal)
1030  gone
",
    );
}

/// RFC 9293 §3.6 figure 12 (the other side): CLOSE-WAIT, LAST-ACK, CLOSED.
#[test]
fn passive_close() {
    run_est(
        "",
        r"
10  < F. 1:1(0) ack 1
10  > . 1:1(0) ack 2
10  event PeerClosed
10  state CloseWait
20  close
20  > F. 1:1(0) ack 2
20  state LastAck
30  < . 2:2(0) ack 2
30  event Closed(Normal)
30  gone
",
    );
}

/// RFC 9293 §3.6 figure 13: simultaneous close through CLOSING to TIME-WAIT.
#[test]
fn simultaneous_close() {
    run_est(
        "0 cfg timewait 500",
        r"
10   close
10   > F. 1:1(0) ack 1
11   < F. 1:1(0) ack 1
11   > . 2:2(0) ack 2
11   state Closing
20   < . 2:2(0) ack 2
20   state TimeWait
520  event Closed(Normal)
",
    );
}

/// RFC 9293 §3.10.7.4 eighth (FIN-WAIT-1): a FIN that also acks our FIN goes straight to
/// TIME-WAIT.
#[test]
fn fin_ack_in_fin_wait_1() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
20  < F. 1:1(0) ack 2
20  > . 2:2(0) ack 2
20  state TimeWait
",
    );
}

/// RFC 9293 §3.10.7.4 seventh and eighth: data and FIN in one segment.
#[test]
fn fin_with_data() {
    run_est(
        "",
        r"
10  < FP. 1:101(100) ack 1
10  > . 1:1(0) ack 102
10  read 100
10  event PeerClosed
10  state CloseWait
",
    );
}

/// RFC 9293 §3.10.7.4 eighth: a FIN ahead of a gap waits until the gap fills.
#[test]
fn out_of_order_fin() {
    run_est(
        "",
        r"
10  < F. 101:101(0) ack 1
10  > . 1:1(0) ack 1
10  state Established
10  noevent PeerClosed
20  < . 1:101(100) ack 1
20  > . 1:1(0) ack 102
20  read 100
20  state CloseWait
20  event PeerClosed
",
    );
}

/// RFC 9293 §3.10.7.4 eighth (TIME-WAIT): a retransmitted FIN is acknowledged and restarts
/// the 2 MSL timer.
#[test]
fn time_wait_restarts_on_fin() {
    run_est(
        "0 cfg timewait 1000",
        r"
10    close
10    > F. 1:1(0) ack 1
11    < F. 1:1(0) ack 2
11    > . 2:2(0) ack 2
500   < F. 1:1(0) ack 2
500   > . 2:2(0) ack 2
1200  state TimeWait
1500  event Closed(Normal)
",
    );
}

/// RFC 6298 §5.4: a lost FIN is retransmitted on RTO (200 ms: the handshake measured an
/// RTT of 0, so RTO = max(RTO.min, SRTT + 4*RTTVAR), RFC 6298 §2.4), then backs off.
#[test]
fn fin_retransmitted() {
    run_est(
        "",
        r"
10    close
10    > F. 1:1(0) ack 1
210   > F. 1:1(0) ack 1
610   > F. 1:1(0) ack 1
620   < . 1:1(0) ack 2
1020  state FinWait2
",
    );
}

/// RFC 9293 §3.10.2: SEND after CLOSE is an error.
#[test]
fn send_after_close_fails() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
10  send_err 10
",
    );
}

/// RFC 9293 §3.10.7.4 eighth (SYN-RECEIVED): an ACK+FIN completes the handshake and closes.
#[test]
fn fin_in_syn_received() {
    crate::script::run(
        r"
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1
5   < F. 1:1(0) ack 1
5   > . 1:1(0) ack 2
5   state CloseWait
5   event Connected
5   event PeerClosed
",
    );
}

/// RFC 9293 §3.10.7.4 seventh: FIN-WAIT-2 still receives data (half close).
#[test]
fn data_in_fin_wait_2() {
    run_est(
        "",
        r"
10  close
10  > F. 1:1(0) ack 1
20  < . 1:1(0) ack 2
30  < P. 1:501(500) ack 2
30  > . 2:2(0) ack 501
30  read 500
30  state FinWait2
",
    );
}

/// RFC 9293 §3.10.4: CLOSE with queued data sends the FIN after the data (here in the same
/// segment as the last bytes).
#[test]
fn close_with_pending_data() {
    run_est(
        "",
        r"
10  send 1000
10  > P. 1:1001(1000) ack 1
10  send 500
10  close
10  > F. 1001:1501(500) ack 1
20  < . 1:1(0) ack 1502
20  state FinWait2
",
    );
}

/// RFC 9293 §3.10.7.4 first check: a duplicate FIN in CLOSE-WAIT is old, and gets an ACK.
#[test]
fn duplicate_fin_in_close_wait() {
    run_est(
        "",
        r"
10  < F. 1:1(0) ack 1
10  > . 1:1(0) ack 2
20  < F. 1:1(0) ack 1
20  > . 1:1(0) ack 2
20  state CloseWait
",
    );
}

/// RFC 9293 §3.10.7.1: once TIME-WAIT expired the tuple is unknown: segments get resets.
#[test]
fn after_time_wait_resets() {
    run_est(
        "0 cfg timewait 100",
        r"
10    close
10    > F. 1:1(0) ack 1
11    < F. 1:1(0) ack 2
11    > . 2:2(0) ack 2
111   event Closed(Normal)
200   < F. 1:1(0) ack 2
200   > R 2:2(0)
",
    );
}

/// RFC 9293 §3.10.7.4 (fifth, LAST-ACK): a lost FIN in LAST-ACK is retransmitted.
#[test]
fn last_ack_retransmits_fin() {
    run_est(
        "",
        r"
10    < F. 1:1(0) ack 1
10    > . 1:1(0) ack 2
20    close
20    > F. 1:1(0) ack 2
220   > F. 1:1(0) ack 2
230   < . 2:2(0) ack 2
1030  event Closed(Normal)
",
    );
}

/// RFC 9293 §3.10.4 (CLOSE in SYN-RECEIVED): the FIN is queued until the handshake
/// completes; the SYN-ACK is still retransmitted meanwhile.
#[test]
fn close_in_syn_received() {
    crate::script::run(
        r"
0     listen 8080
0     < S 0:0(0) win 65535 <mss 1460,sackOK>
0     > S. 0:0(0) ack 1
1     close
1     state SynReceived
1000  > S. 0:0(0) ack 1
1010  < . 1:1(0) ack 1 win 65535
1010  > F. 1:1(0) ack 1
1010  state FinWait1
1020  < . 1:1(0) ack 2
1020  state FinWait2
",
    );
}

/// FIN-WAIT-2 timeout (RFC 9293 sets none; Linux's `tcp_fin_timeout`): our FIN is
/// acknowledged and the peer never closes. Its segments restart the timer; after the timeout
/// of silence the connection is reset and closed with a timeout.
#[test]
fn fin_wait2_times_out() {
    run_est(
        "0 cfg finwait2 5000",
        r"
10  close
10  > F. 1:1(0) ack 1
20  < . 1:1(0) ack 2
20  state FinWait2
3000 < P. 1:101(100) ack 2
3000 > . 2:2(0) ack 101
3000 read 100
7999 state FinWait2
8000 > R 2:2(0)
8000 event Closed(Timeout)
8000 stat fin_wait2_timeouts 1
",
    );
}

/// A peer that closes in time ends FIN-WAIT-2 normally (TIME-WAIT, no timeout).
#[test]
fn fin_wait2_ends_with_peer_fin() {
    run_est(
        "0 cfg finwait2 5000\n0 cfg timewait 100",
        r"
10  close
10  > F. 1:1(0) ack 1
20  < . 1:1(0) ack 2
4000 < F. 1:1(0) ack 2
4000 > . 2:2(0) ack 2
4000 state TimeWait
4100 event Closed(Normal)
9000 stat fin_wait2_timeouts 0
",
    );
}
