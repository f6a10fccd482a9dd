//! RACK-TLP (RFC 8985) loss detection and tail loss probes, and the MSS bound on payload plus
//! options (RFC 9293 §3.7.1, RFC 6691).

use crate::script::run;

/// Passive open with a 10 ms handshake RTT (SRTT 10 ms, RTO 200 ms), RACK-TLP on.
const EST_RACK: &str = "
0   cfg rack on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1
10  < . 1:1(0) ack 1 win 65535
10  event Connected
";

fn run_rack(cfg: &str, text: &str) {
    run(&format!("{cfg}\n{EST_RACK}\n{text}"))
}

/// RFC 8985 §7: the last two segments of a flight are lost. Instead of waiting for the RTO
/// (200 ms), the probe timeout (§7.2: 2*SRTT + 2 ms after the last ACK) resends the last
/// segment (§7.3); its SACK lets RACK mark the other tail segment lost (§6.2) and recovery
/// repairs it. No RTO.
#[test]
fn tail_loss_recovered_by_tlp() {
    run_rack(
        "",
        r"
20  send 5840
20  > . 1:1461(1460) ack 1
20  > . 1461:2921(1460) ack 1
20  > . 2921:4381(1460) ack 1
20  > P. 4381:5841(1460) ack 1
30  < . 1:1(0) ack 2921 win 65535
51  none
52  > P. 4381:5841(1460) ack 1
52  stat tlp_probes 1
62  < . 1:1(0) ack 2921 win 65535 <sack 4381:5841>
62  > . 2921:4381(1460) ack 1
62  stat rack_lost 1
72  < . 1:1(0) ack 5841 win 65535
72  none
300 none
300 stat rtos 0
300 stat retransmissions 2
",
    );
}

/// RFC 8985 §6.2: a retransmission is lost too. RACK compares transmission times, so once a
/// segment sent after the retransmission is SACKed and RACK.rtt has passed, the
/// retransmission is marked lost and resent (no RTO, and no DupThresh counting of the hole).
#[test]
fn lost_retransmission_detected_by_rack() {
    run_rack(
        "0 cfg iw 4",
        r"
20  send 20000
20  > . 1:1461(1460) ack 1
20  > . 1461:2921(1460) ack 1
20  > . 2921:4381(1460) ack 1
20  > . 4381:5841(1460) ack 1
// The first is lost. SACKed data frees pipe for new segments (RFC 6675 pipe).
30  < . 1:1(0) ack 1 win 65535 <sack 1461:2921>
30  > . 5841:7301(1460) ack 1
31  < . 1:1(0) ack 1 win 65535 <sack 1461:4381>
31  > . 7301:8761(1460) ack 1
// Three segments SACKed, no reordering seen: reo_wnd = 0 and segment 1 is lost (§6.2 step 4).
32  < . 1:1(0) ack 1 win 65535 <sack 1461:5841>
32  > . 1:1461(1460) ack 1
32  stat fast_retransmits 1
32  stat rack_lost 1
// Segments sent before the retransmission arrive: they say nothing about it.
40  < . 1:1(0) ack 1 win 65535 <sack 1461:7301>
41  < . 1:1(0) ack 1 win 65535 <sack 1461:8761>
41  > . 8761:10221(1460) ack 1
// 8761:10221, sent at 41 after the retransmission at 32, is SACKed: the retransmission is
// lost (32 + RACK.rtt 10 ms + reo_wnd 0 < 51). Resent at once.
51  < . 1:1(0) ack 1 win 65535 <sack 1461:10221>
51  > . 1:1461(1460) ack 1
51  > . 10221:11681(1460) ack 1
51  stat rack_lost 2
61  < . 1:1(0) ack 11681 win 65535
// Recovery over (RFC 6582 §3.2 step 3): cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
61  > . 11681:13141(1460) ack 1
61  > . 13141:14601(1460) ack 1
61  stat rtos 0
61  stat retransmissions 2
",
    );
}

/// RFC 8985 §6.2 step 4 and §6.3: before three segments are SACKed, a hole is given
/// min_RTT/4 for reordering; when the missing segment arrives late within that window,
/// nothing is retransmitted and the reordering timer is disarmed. Once reordering was seen,
/// the window applies even with three SACKed segments.
#[test]
fn reordering_within_window_not_loss() {
    run_rack(
        "",
        r"
20  send 4380
20  > . 1:1461(1460) ack 1
20  > . 1461:2921(1460) ack 1
20  > P. 2921:4381(1460) ack 1
// Segment 2 arrives before segment 1 (reordered): min_RTT 10 ms, reo_wnd 2.5 ms.
30  < . 1:1(0) ack 1 win 65535 <sack 1461:2921>
32  < . 1:1(0) ack 2921 win 65535
32  none
40  < . 1:1(0) ack 4381 win 65535
40  stat retransmissions 0
40  stat rack_lost 0
// Reordering seen: now even three SACKed segments wait out reo_wnd (RFC 8985 §6.2 step 4).
50  send 5840
50  > . 4381:5841(1460) ack 1
50  > . 5841:7301(1460) ack 1
50  > . 7301:8761(1460) ack 1
50  > P. 8761:10221(1460) ack 1
60  < . 1:1(0) ack 4381 win 65535 <sack 5841:7301>
60  < . 1:1(0) ack 4381 win 65535 <sack 5841:8761>
60  < . 1:1(0) ack 4381 win 65535 <sack 5841:10221>
61  < . 1:1(0) ack 10221 win 65535
70  none
70  stat retransmissions 0
// Without the late arrival, the reordering timer would have marked it lost at 62.5 ms.
",
    );
}

/// Same start as above, but the hole is real: the reordering timer (RFC 8985 §6.3) fires
/// after RACK.rtt + reo_wnd and the segment is retransmitted without waiting for more
/// duplicate ACKs or the RTO.
#[test]
fn reordering_timer_marks_loss() {
    run_rack(
        "",
        r"
20  send 4380
20  > . 1:1461(1460) ack 1
20  > . 1461:2921(1460) ack 1
20  > P. 2921:4381(1460) ack 1
30  < . 1:1(0) ack 1 win 65535 <sack 1461:2921>
32  none
// 20 + RACK.rtt (10) + reo_wnd (10/4) = 32.5 ms.
32.5 > . 1:1461(1460) ack 1
32.5 stat rack_lost 1
40  < . 1:1(0) ack 4381 win 65535
40  stat rtos 0
",
    );
}

/// RFC 9293 §3.7.1 / RFC 6691 (and RFC 2018 §3): the peer announced MSS 1000, so payload plus
/// options never exceed 1000 bytes. An out-of-order segment draws a pure duplicate ACK first
/// (RFC 5681 §4.2), with its SACK block. An in-order segment that leaves a gap is acknowledged
/// on a full-sized data segment, which has no room for a SACK block: the block goes out in a
/// pure ACK right after it instead of being dropped. The harness checks the bound on every
/// data segment we emit.
#[test]
fn sack_blocks_never_exceed_peer_mss() {
    run(r"
0   cfg iw 1
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1000,sackOK>
0   > S. 0:0(0) ack 1
0   < . 1:1(0) ack 1 win 65535
0   event Connected
0   emss 1000
10  send 4000
10  > . 1:1001(1000) ack 1
20  < . 2001:3001(1000) ack 1001 win 65535
20  > . 1001:1001(0) ack 1 <sack 2001:3001>
20  > . 1001:2001(1000) ack 1
20  > . 2001:3001(1000) ack 1
// In-order data that leaves the gap open, while data waits: the ACK rides on a full-sized
// segment and the SACK block follows in a pure ACK.
30  < . 1:1001(1000) ack 3001 win 65535
30  > P. 3001:4001(1000) ack 1001
30  > . 4001:4001(0) ack 1001 <sack 2001:3001>
")
}

/// RFC 8985 §6.3 with RFC 6298 §5.4: when the RTO fires, every segment not SACKed is marked
/// lost and resent from SND.UNA in slow start (cwnd = 1 segment, RFC 5681 §3.1); SACKed
/// segments are not sent again (the receiver did not renege, RFC 2018 §8).
#[test]
fn rto_resends_only_unsacked() {
    run_rack(
        "0 cfg iw 4",
        r"
20  send 5840
20  > . 1:1461(1460) ack 1
20  > . 1461:2921(1460) ack 1
20  > . 2921:4381(1460) ack 1
20  > P. 4381:5841(1460) ack 1
// Only segment 3 arrives. After reo_wnd RACK marks 1 and 2 lost; pipe (segment 4 still
// counts) leaves room for the head only.
30  < . 1:1(0) ack 1 win 65535 <sack 2921:4381>
32.5 > . 1:1461(1460) ack 1
// That retransmission is lost as well and nothing is sent after it: the RTO fires 200 ms
// after it (the head's timer restarts when it is resent).
232.4 none
232.5 > . 1:1461(1460) ack 1
232.5 stat rtos 1
240 < . 1:1(0) ack 1461 win 65535 <sack 2921:4381>
// Slow start (cwnd 2 segments): the next unSACKed segment; 2921:4381 is skipped.
240 > . 1461:2921(1460) ack 1
240 > P. 4381:5841(1460) ack 1
250 < . 1:1(0) ack 5841 win 65535
250 none
250 stat retransmissions 4
",
    );
}

/// RFC 8985 §7.2-§7.4: with one segment in flight the PTO allows for a delayed ACK
/// (2*SRTT + WCDelAckT) and is clamped to the RTO expiry. The probe resends the last segment;
/// when the peer reports it as a duplicate with D-SACK (RFC 2883) the original was not lost
/// and cwnd is left alone.
#[test]
fn tlp_dsack_means_no_loss() {
    run_rack(
        "",
        r"
20  send 2920
20  > . 1:1461(1460) ack 1
20  > P. 1461:2921(1460) ack 1
30  < . 1:1(0) ack 1461 win 65535
// IW (10 segments), not grown: two segments in flight do not use it (cwnd validation, RFC
// 7661; slow start grows a window only below twice the flight used, as Linux's).
30  cwnd 14600
229 none
230 > P. 1461:2921(1460) ack 1
230 stat tlp_probes 1
240 < . 1:1(0) ack 2921 win 65535 <sack 1461:2921>
// No loss response either.
240 cwnd 14600
250 send 1460
250 > P. 2921:4381(1460) ack 1
260 < . 1:1(0) ack 4381 win 65535
260 cwnd 14600
260 stat rtos 0
",
    );
}

/// RFC 8985 §7.4.2: the probe repaired a loss (no D-SACK, and later data is acknowledged
/// beyond it): the congestion response of a fast recovery follows (NewReno: ssthresh and
/// cwnd become half of cwnd, here the IW not grown by two segments in flight: 14600 / 2).
#[test]
fn tlp_repaired_loss_reduces_cwnd() {
    run_rack(
        "",
        r"
20  send 2920
20  > . 1:1461(1460) ack 1
20  > P. 1461:2921(1460) ack 1
30  < . 1:1(0) ack 1461 win 65535
230 > P. 1461:2921(1460) ack 1
240 < . 1:1(0) ack 2921 win 65535
240 cwnd 14600
250 send 1460
250 > P. 2921:4381(1460) ack 1
260 < . 1:1(0) ack 4381 win 65535
260 cwnd 7300
260 stat rtos 0
",
    );
}

/// RFC 3522 §2 detection with the RFC 4015 §2 response, under RACK: ten segments go out, no
/// ACK comes back (the peer's ACKs were only late: a descheduled receiver), and the RTO
/// resends the head. The ACK that finally arrives covers four segments and echoes the TSval
/// of their original transmission (10 ms), not the retransmission's (210 ms): the timeout
/// was spurious. The window comes back (cwnd = FlightSize + min(bytes_acked, IW), ssthresh
/// as before), the loss marks RFC 8985 §6.3 put on the seven segments still outstanding go,
/// and new data follows instead of a go-back-N resend of what is still in flight. RACK does
/// not take the head's ACK for its retransmission (RFC 8985 §6.2 step 2: the echo is older
/// than the retransmission). Everything then arrives: nothing was resent but the head.
#[test]
fn spurious_rto_undone_no_go_back_n() {
    run(r"
0   cfg ts on
0   cfg rack on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK,ts val 100 ecr 0>
0   > S. 0:0(0) ack 1 <mss 1460,sackOK,ts val * ecr 100>
0   < . 1:1(0) ack 1 win 65535 <ts val 101 ecr @0>
0   event Connected
10  send 21720
10  > . 1:1449(1448) ack 1
10  > . 1449:2897(1448) ack 1
10  > . 2897:4345(1448) ack 1
10  > . 4345:5793(1448) ack 1
10  > . 5793:7241(1448) ack 1
10  > . 7241:8689(1448) ack 1
10  > . 8689:10137(1448) ack 1
10  > . 10137:11585(1448) ack 1
10  > . 11585:13033(1448) ack 1
10  > . 13033:14481(1448) ack 1
// The probe timeout (RFC 8985 §7.2, 2 SRTT + 2 ms) sends new data; the RTO is rearmed.
12  > . 14481:15929(1448) ack 1
212 > . 1:1449(1448) ack 1
212 stat rtos 1
213 < . 1:1(0) ack 5793 win 65535 <ts val 102 ecr @10>
213 stat spurious_rtos 1
213 stat rto_undos 1
213 > . 15929:17377(1448) ack 1
213 > . 17377:18825(1448) ack 1
213 > . 18825:20273(1448) ack 1
213 > P. 20273:21721(1448) ack 1
// RFC 4015 §2 step 6: 7 segments in flight + min(4 acknowledged, IW) = 11, then slow start
// (RFC 5681 §3.1, L = 2) adds two for this ACK: 13 segments.
213 cwnd 18824
214 < . 1:1(0) ack 21721 win 65535 <ts val 103 ecr @213>
214 stat retransmissions 1
214 stat rack_lost 0
");
}
