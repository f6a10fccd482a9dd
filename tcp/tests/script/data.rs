//! Data transfer, loss recovery, windows and timers (RFC 9293 §3.8-§3.10, RFC 6298, RFC 5681,
//! RFC 6582, RFC 6675, RFC 2018, RFC 7323).

use crate::script::{run, run_est};

/// RFC 9293 §3.10.7.4 fifth: data is sent in EMSS segments and released when acknowledged.
#[test]
fn send_data_acked() {
    run_est(
        "",
        r"
10  send 3000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > P. 2921:3001(80) ack 1
15  acked 0
20  < . 1:1(0) ack 3001 win 65535
20  acked 3000
20  none
",
    );
}

/// RFC 9293 §3.10.7.4 seventh; §3.8.6.2.2 (receiver SWS avoidance: no window update for a
/// small read).
#[test]
fn receive_in_order() {
    run_est(
        "",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001 win 64535
11  read 1000
11  none
",
    );
}

/// RFC 2018 §4 / RFC 5681 §4.2: an out-of-order segment is held and triggers an immediate
/// duplicate ACK carrying a SACK block; filling the hole is acknowledged at once.
#[test]
fn out_of_order_held_and_sacked() {
    run_est(
        "",
        r"
10  < . 1001:2001(1000) ack 1
10  > . 1:1(0) ack 1 <sack 1001:2001>
10  stat ooo_held 1
10  read 0
20  < . 1:1001(1000) ack 1
20  > . 1:1(0) ack 2001
20  read 2000
",
    );
}

/// RFC 2018 §4: the first SACK block reports the most recent segment; blocks merge.
#[test]
fn sack_block_order_and_merge() {
    run_est(
        "",
        r"
10  < . 1001:2001(1000) ack 1
10  > . 1:1(0) ack 1 <sack 1001:2001>
11  < . 3001:4001(1000) ack 1
11  > . 1:1(0) ack 1 <sack 3001:4001 1001:2001>
12  < . 2001:3001(1000) ack 1
12  > . 1:1(0) ack 1 <sack 1001:4001>
13  < . 1:1001(1000) ack 1
13  > . 1:1(0) ack 4001
13  read 4000
",
    );
}

/// RFC 9293 §3.10.7.4 first check: duplicate data is acknowledged and dropped; RFC 2883
/// §4.1.1: the ACK carries a D-SACK block for it (once).
#[test]
fn duplicate_data_acked() {
    run_est(
        "",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001 <>
11  < P. 1:1001(1000) ack 1
11  > . 1:1(0) ack 1001 <sack 1:1001>
12  < P. 1001:1101(100) ack 1
12  > . 1:1(0) ack 1101 <>
12  read 1100
",
    );
}

/// RFC 2883 §4.1.2/§4.1.3: a partly duplicate segment and a twice-received out-of-order
/// segment are D-SACKed, the D-SACK block first, then the ordinary SACK blocks.
#[test]
fn dsack_partial_and_out_of_order() {
    run_est(
        "",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001
11  < P. 501:1501(1000) ack 1
11  > . 1:1(0) ack 1501 <sack 501:1001>
12  < . 2001:3001(1000) ack 1
12  > . 1:1(0) ack 1501 <sack 2001:3001>
13  < . 2001:3001(1000) ack 1
13  > . 1:1(0) ack 1501 <sack 2001:3001 2001:3001>
13  read 1500
",
    );
}

/// RFC 6298 §2.2/§2.3 (first sample: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4*RTTVAR),
/// §5.4-§5.6 (retransmit on RTO, exponential backoff), Karn's rule (no sample from
/// retransmitted data), §2.3 (update with alpha = 1/8, beta = 1/4).
#[test]
fn rto_backoff_and_karn() {
    run(r"
0     connect
0     > S 0:0(0)
100   < S. 0:0(0) ack 1 win 65535 <mss 1460>
100   > . 1:1(0) ack 1
100   rto 300
110   send 1000
110   > P. 1:1001(1000) ack 1
410   > P. 1:1001(1000) ack 1
1010  > P. 1:1001(1000) ack 1
1020  < . 1:1(0) ack 1001
1020  stat rtos 2
1020  stat retransmissions 2
1020  rto 300
1100  send 100
1100  > P. 1001:1101(100) ack 1
1300  < . 1:1(0) ack 1101
1300  rto 362
");
}

/// RFC 5681 §3.1 (loss window after RTO, then slow start) and RFC 6298 §5.4 (resend the
/// earliest unacknowledged segment).
#[test]
fn rto_collapses_cwnd() {
    run_est(
        "",
        r"
10   send 7300
10   > . 1:1461(1460) ack 1
10   > . 1461:2921(1460) ack 1
10   > . 2921:4381(1460) ack 1
10   > . 4381:5841(1460) ack 1
10   > P. 5841:7301(1460) ack 1
210  > . 1:1461(1460) ack 1
220  < . 1:1(0) ack 1461
220  > . 1461:2921(1460) ack 1
220  > . 2921:4381(1460) ack 1
230  < . 1:1(0) ack 4381
230  > . 4381:5841(1460) ack 1
230  > P. 5841:7301(1460) ack 1
240  < . 1:1(0) ack 7301
240  stat rtos 1
",
    );
}

/// RFC 5681 §3.2: the third duplicate ACK triggers a fast retransmit (no SACK: NewReno).
#[test]
fn fast_retransmit_newreno() {
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
21  < . 1:1(0) ack 1461
22  < . 1:1(0) ack 1461
22  none
23  < . 1:1(0) ack 1461
23  > . 1461:2921(1460) ack 1
23  stat fast_retransmits 1
",
    );
}

/// RFC 6582 §3.2 step 4: a partial ACK retransmits the next hole at once; a full ACK ends
/// recovery.
#[test]
fn newreno_partial_ack() {
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
21  < . 1:1(0) ack 1461
22  < . 1:1(0) ack 1461
23  < . 1:1(0) ack 1461
23  > . 1461:2921(1460) ack 1
30  < . 1:1(0) ack 2921
30  > . 2921:4381(1460) ack 1
40  < . 1:1(0) ack 7301
40  none
40  stat retransmissions 2
40  stat rtos 0
",
    );
}

/// RFC 6675 §5 (and RFC 2018): SACK-based recovery resends every hole below the highest
/// SACKed byte, limited by pipe < cwnd, and nothing that was SACKed.
#[test]
fn sack_recovery_fills_holes() {
    run_est(
        "",
        r"
10  send 7300
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > P. 5841:7301(1460) ack 1
20  < . 1:1(0) ack 1 <sack 1461:2921>
21  < . 1:1(0) ack 1 <sack 4381:5841 1461:2921>
21  none
22  < . 1:1(0) ack 1 <sack 4381:7301 1461:2921>
22  > . 1:1461(1460) ack 1
22  > . 2921:4381(1460) ack 1
22  stat fast_retransmits 1
30  < . 1:1(0) ack 7301
30  none
30  stat rtos 0
",
    );
}

/// RFC 3042 limited transmit: each of the first two duplicate ACKs sends one new segment
/// beyond cwnd; the third triggers the fast retransmit (RFC 5681 §3.2).
#[test]
fn limited_transmit() {
    run_est(
        "0 cfg iw 2",
        r"
10  send 8760
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
20  < . 1:1(0) ack 1 <sack 1461:2921>
20  > . 2921:4381(1460) ack 1
21  < . 1:1(0) ack 1 <sack 1461:4381>
21  > . 4381:5841(1460) ack 1
22  < . 1:1(0) ack 1 <sack 1461:5841>
22  > . 1:1461(1460) ack 1
// RFC 6675 §5 NextSeg rule 2: with pipe (1460) < cwnd (2920) new data may follow.
22  > . 5841:7301(1460) ack 1
22  stat fast_retransmits 1
",
    );
}

/// RFC 5827 early retransmit: three segments outstanding and nothing more to send, so two
/// duplicate ACKs suffice.
#[test]
fn early_retransmit() {
    run_est(
        "",
        r"
10  send 4380
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > P. 2921:4381(1460) ack 1
20  < . 1:1(0) ack 1 <sack 1461:2921>
20  none
21  < . 1:1(0) ack 1 <sack 1461:4381>
21  > . 1:1461(1460) ack 1
21  stat fast_retransmits 1
30  < . 1:1(0) ack 4381
30  stat rtos 0
",
    );
}

/// A lost fast retransmission is detected when data sent after it is SACKed three segments
/// beyond (RFC 8985's idea, applied to the head hole) and resent without waiting for the RTO
/// (RFC 6298 would otherwise be the only way out, RFC 6675 §5.1).
#[test]
fn lost_retransmission_resent() {
    run_est(
        "0 cfg iw 4",
        r"
10  send 20000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
20  < . 1:1(0) ack 1 <sack 1461:2921>
20  > . 5841:7301(1460) ack 1
21  < . 1:1(0) ack 1 <sack 1461:4381>
21  > . 7301:8761(1460) ack 1
22  < . 1:1(0) ack 1 <sack 1461:5841>
22  > . 1:1461(1460) ack 1
23  < . 1:1(0) ack 1 <sack 1461:7301>
23  none
24  < . 1:1(0) ack 1 <sack 1461:8761>
24  > . 8761:10221(1460) ack 1
25  < . 1:1(0) ack 1 <sack 1461:10221>
25  > . 10221:11681(1460) ack 1
26  < . 1:1(0) ack 1 <sack 1461:11681>
26  > . 11681:13141(1460) ack 1
27  < . 1:1(0) ack 1 <sack 1461:13141>
27  > . 1:1461(1460) ack 1
27  > . 13141:14601(1460) ack 1
30  < . 1:1(0) ack 14601
// Recovery ends (RFC 6582 §3.2 step 3): cwnd = min(ssthresh, FlightSize + SMSS) = 2 segments.
30  > . 14601:16061(1460) ack 1
30  > . 16061:17521(1460) ack 1
30  stat rtos 0
30  stat retransmissions 2
",
    );
}

/// RFC 9293 §3.8.3 (R2): too many retransmissions close the connection.
#[test]
fn retransmission_limit() {
    run_est(
        "0 cfg retries 2",
        r"
10    send 100
10    > P. 1:101(100) ack 1
210   > P. 1:101(100) ack 1
610   > P. 1:101(100) ack 1
1410  event Closed(Timeout)
1410  gone
",
    );
}

/// A transmit buffer smaller than 60 + EMSS caps the payload (here 1500 - 60 = 1440 bytes);
/// such segments count as full for sender SWS avoidance (RFC 9293 §3.8.6.2.1), so the sender
/// does not stall waiting for ACKs.
#[test]
fn small_tx_buffer_segments_are_full() {
    run_est(
        "0 cfg txbuf 1500",
        r"
10  send 5000
10  > . 1:1441(1440) ack 1
10  > . 1441:2881(1440) ack 1
10  > . 2881:4321(1440) ack 1
10  > P. 4321:5001(680) ack 1
",
    );
}

/// Records (MPA FPDUs) are never coalesced into one segment.
#[test]
fn records_not_coalesced() {
    run_est(
        "",
        r"
10  record 1000
10  record 1000
10  > P. 1:1001(1000) ack 1
10  > P. 1001:2001(1000) ack 1
",
    );
}

/// A record longer than the EMSS is cut at EMSS, and the next record starts a new segment.
#[test]
fn record_larger_than_emss() {
    run_est(
        "",
        r"
10  record 2000
10  record 100
10  > . 1:1461(1460) ack 1
10  > P. 1461:2001(540) ack 1
10  > P. 2001:2101(100) ack 1
",
    );
}

/// RFC 9293 §3.7.4: with Nagle on, a small segment waits while data is unacknowledged.
#[test]
fn nagle_holds_small_segment() {
    run_est(
        "0 cfg nagle on",
        r"
10  send 100
10  > P. 1:101(100) ack 1
11  send 100
11  none
20  < . 1:1(0) ack 101
20  > P. 101:201(100) ack 1
",
    );
}

/// Nagle off (the default): small segments go at once.
#[test]
fn nagle_off_sends_immediately() {
    run_est(
        "",
        r"
10  send 100
10  > P. 1:101(100) ack 1
11  send 100
11  > P. 101:201(100) ack 1
",
    );
}

/// RFC 9293 §3.8.6.3 / RFC 5681 §4.2: delayed ACK fires after the timeout, and at least every
/// second full-sized segment is acknowledged at once.
#[test]
fn delayed_ack() {
    run_est(
        "0 cfg delack 40",
        r"
10  < P. 1:101(100) ack 1
10  none
49  none
50  > . 1:1(0) ack 101
60  < . 101:1561(1460) ack 1
61  < . 1561:3021(1460) ack 1
61  > . 1:1(0) ack 3021
61  read 3020
",
    );
}

/// RFC 9293 §3.8.6.1: persist timer and zero-window probes with backoff; data flows when
/// the window reopens.
#[test]
fn zero_window_probe() {
    run_est(
        "",
        r"
10   send 1460
10   > P. 1:1461(1460) ack 1
20   < . 1:1(0) ack 1461 win 0
30   send 1000
30   none
230  > . 1460:1460(0) ack 1
240  < . 1:1(0) ack 1461 win 0
630  > . 1460:1460(0) ack 1
640  < . 1:1(0) ack 1461 win 65535
640  > P. 1461:2461(1000) ack 1
",
    );
}

/// RFC 9293 §3.8.6.2.2 / §3.10.7.4: a full receive buffer advertises zero, data beyond it is
/// refused with an ACK, and reading reopens the window with an update.
#[test]
fn zero_receive_window() {
    run_est(
        "0 cfg rwnd 1000",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001 win 0
20  < P. 1001:1101(100) ack 1
20  > . 1:1(0) ack 1001 win 0
30  read 1000
30  > . 1:1(0) ack 1001 win 1000
",
    );
}

/// Partial in-place consumption (an MPA deframer holding back a partial FPDU): the window
/// reopens by what was consumed (RFC 9293 §3.8.6.2.2: only once by at least min(RCV.BUFF/2,
/// MSS)).
#[test]
fn partial_consume_reopens_window() {
    run_est(
        "0 cfg rwnd 3000",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001 win 2000
11  < P. 1001:3001(2000) ack 1
11  > . 1:1(0) ack 3001 win 0
20  consume 700
20  none
30  consume 300
30  none
40  consume 1500
40  > . 1:1(0) ack 3001 win 2500
40  read 500
",
    );
}

/// RFC 9293 §3.10.7.4 (zero window): the ACK of a data segment we cannot take is still
/// processed.
#[test]
fn zero_window_still_processes_acks() {
    run_est(
        "0 cfg rwnd 1000",
        r"
10  send 500
10  > P. 1:501(500) ack 1
11  < P. 1:1001(1000) ack 1
11  > . 501:501(0) ack 1001 win 0
12  < P. 1001:1101(100) ack 501
12  > . 501:501(0) ack 1001 win 0
12  acked 500
12  read 1000
12  > . 501:501(0) ack 1001 win 1000
",
    );
}

/// RFC 9293 §3.10.7.4 seventh: data past the right window edge is trimmed.
#[test]
fn data_trimmed_to_window() {
    run_est(
        "0 cfg rwnd 1000",
        r"
10  < P. 1:1501(1500) ack 1
10  > . 1:1(0) ack 1001 win 0
10  read 1000
10  > . 1:1(0) ack 1001 win 1000
",
    );
}

/// RFC 7323 §5.3 (PAWS): a segment with an old TSval is dropped and acknowledged;
/// §4.3: TS.Recent follows in-order segments and is echoed in TSecr.
#[test]
fn paws_and_ts_echo() {
    run(r"
0   cfg ts on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK,ts val 100 ecr 0>
0   > S. 0:0(0) ack 1 <mss 1460,sackOK,ts val * ecr 100>
0   < . 1:1(0) ack 1 win 65535 <ts val 101 ecr 0>
10  < P. 1:101(100) ack 1 <ts val 50 ecr 0>
10  > . 1:1(0) ack 1 <ts val * ecr 101>
10  stat paws_drops 1
10  read 0
20  < P. 1:101(100) ack 1 <ts val 102 ecr 0>
20  > . 1:1(0) ack 101 <ts val * ecr 102>
20  read 100
");
}

/// RFC 9293 §3.8.4: keepalive probes (SEG.SEQ = SND.NXT - 1) and the drop after the count.
#[test]
fn keepalive_times_out() {
    run_est(
        "0 cfg keepalive 1000 100 2",
        r"
1000  > . 0:0(0) ack 1
1100  > . 0:0(0) ack 1
1200  event Closed(Timeout)
",
    );
}

/// RFC 9293 §3.8.4: an answered keepalive keeps the connection and restarts the idle timer.
#[test]
fn keepalive_answered() {
    run_est(
        "0 cfg keepalive 1000 100 2",
        r"
1000  > . 0:0(0) ack 1
1010  < . 1:1(0) ack 1
2009  none
2010  > . 0:0(0) ack 1
2010  state Established
",
    );
}

/// RFC 9293 §3.4: sequence numbers wrap modulo 2^32.
#[test]
fn sequence_wraparound() {
    run_est(
        "0 cfg isn 4294967000",
        r"
10  < P. 1:1001(1000) ack 1
10  > . 1:1(0) ack 1001
20  < P. 1001:2001(1000) ack 1
20  > . 1:1(0) ack 2001
20  read 2000
",
    );
}

/// Out-of-order memory is bounded: segments over the limit are dropped and counted.
#[test]
fn ooo_memory_bounded() {
    run_est(
        "0 cfg ooo 1500",
        r"
10  < . 1001:2001(1000) ack 1
10  > . 1:1(0) ack 1 <sack 1001:2001>
11  < . 3001:4001(1000) ack 1
11  > . 1:1(0) ack 1 <sack 1001:2001>
11  stat ooo_dropped 1
",
    );
}

/// RFC 5681 §3.1: the initial window limits the first flight; slow start doubles it.
#[test]
fn initial_window_and_slow_start() {
    run_est(
        "0 cfg iw 2",
        r"
10  send 20000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  none
20  < . 1:1(0) ack 2921
20  > . 2921:4381(1460) ack 1
20  > . 4381:5841(1460) ack 1
20  > . 5841:7301(1460) ack 1
20  > . 7301:8761(1460) ack 1
20  none
",
    );
}

/// RFC 9293 §3.8.6.2.1: sender SWS avoidance, no small segment into a small usable window
/// while data is outstanding.
#[test]
fn sender_sws_avoidance() {
    run_est(
        "",
        r"
5   < . 1:1(0) ack 1 win 2000
10  send 5000
10  > . 1:1461(1460) ack 1
10  none
20  < . 1:1(0) ack 1461 win 2000
20  > . 1461:2921(1460) ack 1
20  none
",
    );
}

/// RFC 7323 §2.3: our window is scaled and its right edge never moves left
/// (RFC 9293 §3.8.6.2.2): after 1000 more unread bytes the field is rounded up to 505, since
/// 504 << 7 would end 24 bytes short of the edge already advertised.
#[test]
fn window_scale_receive() {
    run(r"
0   cfg ws 7
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,ws 2>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460,ws 7>
0   < . 1:1(0) ack 1 win 100
10  < P. 1:101(100) ack 1 win 100
10  > . 1:1(0) ack 101 win 512
20  < P. 101:1101(1000) ack 1 win 100
20  > . 1:1(0) ack 1101 win 505
");
}

/// RFC 7323 §2.3: the peer's window is scaled by its shift when we send.
#[test]
fn window_scale_send() {
    run(r"
0   cfg ws 7
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,ws 4>
0   > S. 0:0(0) ack 1 <mss 1460,ws 7>
0   < . 1:1(0) ack 1 win 200
10  send 5000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  none
");
}

/// RFC 9438 (CUBIC, selectable): a fast retransmit works the same way with CUBIC.
#[test]
fn cubic_fast_retransmit() {
    run_est(
        "0 cfg cubic",
        r"
10  send 7300
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > P. 5841:7301(1460) ack 1
20  < . 1:1(0) ack 1 <sack 1461:2921>
21  < . 1:1(0) ack 1 <sack 1461:4381>
22  < . 1:1(0) ack 1 <sack 1461:5841>
22  > . 1:1461(1460) ack 1
30  < . 1:1(0) ack 7301
30  none
",
    );
}

/// RFC 3522 §2 Eifel detection: after a retransmission timeout, the first ACK of new data
/// echoes the TSval of the original transmission (sent at 10 ms), not of the retransmission
/// (at 210 ms): the timeout was spurious, counted. A later genuine timeout, whose ACK echoes
/// the retransmission, is not; nor is a second timeout whose ACK echoes the first
/// retransmission (RFC 3522 §2 compares with the first).
#[test]
fn eifel_detects_spurious_rto() {
    crate::script::run(
        r"
0   cfg ts on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,ts val 100 ecr 0>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460,ts val * ecr 100>
0   < . 1:1(0) ack 1 win 65535 <ts val 101 ecr @0>
0   event Connected
10  send 1000
10  > P. 1:1001(1000) ack 1 <ts val * ecr 101>
210 > P. 1:1001(1000) ack 1 <ts val * ecr 101>
211 < . 1:1(0) ack 1001 win 65535 <ts val 102 ecr @10>
211 stat rtos 1
211 stat spurious_rtos 1
211 stat rto_undos 1
300 send 1000
300 > P. 1001:2001(1000) ack 1 <ts val * ecr 102>
500 > P. 1001:2001(1000) ack 1 <ts val * ecr 102>
501 < . 1:1(0) ack 2001 win 65535 <ts val 103 ecr @500>
501 stat rtos 2
501 stat spurious_rtos 1
501 stat rto_undos 1
// Two timeouts in a row (backoff), then the ACK of the first retransmission: not spurious.
600 send 1000
600 > P. 2001:3001(1000) ack 1 <ts val * ecr 103>
800 > P. 2001:3001(1000) ack 1 <ts val * ecr 103>
1200 > P. 2001:3001(1000) ack 1 <ts val * ecr 103>
1201 < . 1:1(0) ack 3001 win 65535 <ts val 104 ecr @800>
1201 stat rtos 4
1201 stat spurious_rtos 1
1201 stat rto_undos 1
",
    );
}

/// The RTO's lower bound by flight (RFC 6298 §2.4 as relaxed by RFC 8961): with five segments
/// outstanding the peer would have acknowledged every second one at once (RFC 9293
/// §3.8.6.3), so silence means loss and the timer runs from `rto_min_bulk` (here 20 ms, above
/// the estimate from the handshake): the RTO fires at 30 ms, not 210. A lone segment keeps
/// `rto_min` (200 ms): the peer may hold its ACK for its delayed-ACK timer.
#[test]
fn rto_floor_by_flight() {
    run_est(
        "0 cfg rto_min_bulk 20",
        r"
10   send 7300
10   > . 1:1461(1460) ack 1
10   > . 1461:2921(1460) ack 1
10   > . 2921:4381(1460) ack 1
10   > . 4381:5841(1460) ack 1
10   > P. 5841:7301(1460) ack 1
10   rto 20
29   none
30   > . 1:1461(1460) ack 1
30   stat rtos 1
31   < . 1:1(0) ack 7301
31   none
50   send 500
50   > P. 7301:7801(500) ack 1
249  none
250  > P. 7301:7801(500) ack 1
250  stat rtos 2
",
    );
}
