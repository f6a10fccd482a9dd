//! The immediate pure duplicate ACK (RFC 5681 §4.2, RFC 9293 §3.10.7.4) and the recovery
//! paths of peers without SACK (RFC 5681 §3.2, RFC 6582), with timestamps and window scaling
//! off (the script default) and on.
//!
//! Without SACK a sender counts only ACKs that carry no data and leave the window unchanged
//! as duplicates (RFC 5681 §2). A receiver that answers out-of-order data only by
//! piggybacking on its own data segments never triggers the peer's fast retransmit: the peer
//! waits for its RTO instead (the defect of issue 10 item 4, seen against Linux).

use crate::script::run_est;

/// RFC 5681 §4.2: each out-of-order segment draws an immediate duplicate ACK, a pure one,
/// ahead of the data we have waiting (it goes out before, not on, our data segments), with
/// an unchanged window (RFC 5681 §2 (e)); filling the gap is acknowledged at once.
#[test]
fn out_of_order_draws_pure_dupack_before_waiting_data() {
    run_est(
        "0 cfg sack off\n0 cfg iw 2",
        r"
10  send 14600
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
// The peer's first segment is lost; the next three arrive and acknowledge our data, so
// cwnd opens and our data is ready in the same poll.
20  < . 1461:2921(1460) ack 1461 win 65535
20  > . 2921:2921(0) ack 1 win 65535
20  > . 2921:4381(1460) ack 1
20  > . 4381:5841(1460) ack 1
21  < . 2921:4381(1460) ack 2921 win 65535
21  > . 5841:5841(0) ack 1 win 65535
21  > . 5841:7301(1460) ack 1
21  > . 7301:8761(1460) ack 1
22  < . 4381:5841(1460) ack 2921 win 65535
22  > . 8761:8761(0) ack 1 win 65535
22  stat ooo_held 3
// The retransmission fills the gap: cumulative ACK at once (RFC 5681 §4.2).
30  < . 1:1461(1460) ack 2921 win 65535
30  > . 8761:8761(0) ack 5841
30  read 5840
",
    );
}

/// Several out-of-order segments, each polled: one pure duplicate ACK each, with SACK blocks
/// (RFC 2018 §4: the first block holds the most recent segment). (The interpreter polls
/// before each inbound segment. Segments handled in one poll get one ACK each without SACK,
/// where the sender counts duplicates, and one in all with SACK, where it counts SACKed
/// data.)
#[test]
fn one_dupack_per_out_of_order_segment() {
    run_est(
        "0 cfg iw 2",
        r"
10  send 14600
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
20  < . 1461:2921(1460) ack 1 win 65535
20  < . 2921:4381(1460) ack 1 win 65535
20  < . 4381:5841(1460) ack 1 win 65535
20  > . 2921:2921(0) ack 1 win 65535 <sack 1461:2921>
20  > . 2921:2921(0) ack 1 win 65535 <sack 1461:4381>
20  > . 2921:2921(0) ack 1 win 65535 <sack 1461:5841>
20  none
",
    );
}

/// Timestamps and window scaling on: the duplicate ACKs echo TS.Recent (RFC 7323 §4.3: the
/// out-of-order segments do not update it) and carry the same scaled window.
#[test]
fn dupacks_with_timestamps_and_window_scaling() {
    crate::script::run(
        r"
0   cfg sack off
0   cfg ts on
0   cfg ws 2
0   cfg rwnd 200000
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,ts val 100 ecr 0,ws 3>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460,ts val * ecr 100,ws 2>
0   < . 1:1(0) ack 1 win 8192 <ts val 101 ecr 0>
0   event Connected
10  send 2000
10  > . 1:1449(1448) ack 1 win 50000 <ts val * ecr 101>
10  > P. 1449:2001(552) ack 1 win 50000 <ts val * ecr 101>
20  < . 1449:2897(1448) ack 2001 win 8192 <ts val 102 ecr 0>
20  > . 2001:2001(0) ack 1 win 50000 <ts val * ecr 101>
21  < . 2897:4345(1448) ack 2001 win 8192 <ts val 103 ecr 0>
21  > . 2001:2001(0) ack 1 win 50000 <ts val * ecr 101>
30  < . 1:1449(1448) ack 2001 win 8192 <ts val 104 ecr 0>
30  > . 2001:2001(0) ack 4345 <ts val * ecr 104>
",
    );
}

/// RFC 9293 §3.10.7.4 first check: a segment beyond the window is unacceptable and draws a
/// pure ACK, also while our data waits; an out-of-order FIN draws a duplicate ACK too.
#[test]
fn unacceptable_and_out_of_order_fin_draw_pure_acks() {
    run_est(
        "0 cfg sack off\n0 cfg iw 1",
        r"
10  send 4380
10  > . 1:1461(1460) ack 1
// Unacceptable: answered with a pure ACK and otherwise dropped (its ACK field too).
20  < . 70000:71000(1000) ack 1461 win 65535
20  > . 1461:1461(0) ack 1
20  none
30  < . 1:1(0) ack 1461 win 65535
30  > . 1461:2921(1460) ack 1
30  > . 2921:4381(1460) ack 1
40  < F. 101:101(0) ack 1461 win 65535
40  > . 4381:4381(0) ack 1
",
    );
}

/// RFC 5681 §2: ACKs carrying data are not duplicates even with SEG.ACK = SND.UNA; three
/// pure duplicates then trigger the fast retransmit (RFC 5681 §3.2, no SACK: NewReno) while
/// the peer keeps sending data too.
#[test]
fn newreno_counts_only_pure_duplicates() {
    run_est(
        "0 cfg sack off",
        r"
10  send 7300
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > P. 5841:7301(1460) ack 1
20  < . 1:1(0) ack 1461
21  < P. 1:101(100) ack 1461
21  > . 7301:7301(0) ack 101
22  < P. 101:201(100) ack 1461
22  > . 7301:7301(0) ack 201
23  < . 201:201(0) ack 1461
24  < . 201:201(0) ack 1461
24  none
25  < . 201:201(0) ack 1461
25  > . 1461:2921(1460) ack 201
25  stat fast_retransmits 1
30  < . 201:201(0) ack 7301
30  none
30  read 200
30  stat rtos 0
",
    );
}
