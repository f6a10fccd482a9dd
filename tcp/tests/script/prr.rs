//! Proportional Rate Reduction (RFC 6937) in SACK loss recovery (RFC 6675), and the window at
//! the end of recovery.

use crate::script::run_est;

/// Twenty segments out, the first lost (RFC 6937 Appendix A, with NewReno's beta = 1/2). On
/// the third SACKed segment recovery starts (RFC 6675 §5): ssthresh = pipe / 2 = 8 segments,
/// RecoverFS = 20 segments. Without PRR the sender would resend the head and then fall silent
/// until pipe drops below ssthresh (eight more ACKs), then burst. With PRR (§3) each ACK
/// lets out `prr_delivered * ssthresh / RecoverFS - prr_out` bytes while pipe > ssthresh:
/// one new segment for every two or three segments delivered, in step with the ACK clock
/// (segments are sent whole: sender SWS avoidance holds a partial one). A full ACK ends
/// recovery with cwnd = ssthresh (§3).
#[test]
fn prr_spreads_the_reduction_over_the_recovery() {
    run_est(
        "0 cfg prr on\n0 cfg iw 20\n0 cfg rwnd 65535",
        r"
10  send 60000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > . 5841:7301(1460) ack 1
10  > . 7301:8761(1460) ack 1
10  > . 8761:10221(1460) ack 1
10  > . 10221:11681(1460) ack 1
10  > . 11681:13141(1460) ack 1
10  > . 13141:14601(1460) ack 1
10  > . 14601:16061(1460) ack 1
10  > . 16061:17521(1460) ack 1
10  > . 17521:18981(1460) ack 1
10  > . 18981:20441(1460) ack 1
10  > . 20441:21901(1460) ack 1
10  > . 21901:23361(1460) ack 1
10  > . 23361:24821(1460) ack 1
10  > . 24821:26281(1460) ack 1
10  > . 26281:27741(1460) ack 1
10  > . 27741:29201(1460) ack 1
// RFC 3042 limited transmit: the first two duplicates each release a new segment.
20  < . 1:1(0) ack 1 <sack 1461:2921>
20  > . 29201:30661(1460) ack 1
21  < . 1:1(0) ack 1 <sack 1461:4381>
21  > . 30661:32121(1460) ack 1
22  < . 1:1(0) ack 1 <sack 1461:5841>
22  > . 1:1461(1460) ack 1
22  stat fast_retransmits 1
23  < . 1:1(0) ack 1 <sack 1461:7301>
24  < . 1:1(0) ack 1 <sack 1461:8761>
25  < . 1:1(0) ack 1 <sack 1461:10221>
26  < . 1:1(0) ack 1 <sack 1461:11681>
26  > . 32121:33581(1460) ack 1
27  < . 1:1(0) ack 1 <sack 1461:13141>
28  < . 1:1(0) ack 1 <sack 1461:14601>
29  < . 1:1(0) ack 1 <sack 1461:16061>
29  > . 33581:35041(1460) ack 1
30  < . 1:1(0) ack 1 <sack 1461:17521>
31  < . 1:1(0) ack 1 <sack 1461:18981>
31  > . 35041:36501(1460) ack 1
32  < . 1:1(0) ack 1 <sack 1461:20441>
33  < . 1:1(0) ack 1 <sack 1461:21901>
34  none
// One new segment per ~2.4 delivered (ssthresh / RecoverFS = 9/22), none in a burst.
34  stat retransmissions 1
// The full ACK (RFC 6582 §3.2 step 3 / RFC 6675 §5): cwnd = ssthresh = 9 segments, three
// are in flight, six more go out.
40  < . 1:1(0) ack 32121
40  cwnd 13140
40  > . 36501:37961(1460) ack 1
40  > . 37961:39421(1460) ack 1
40  > . 39421:40881(1460) ack 1
40  > . 40881:42341(1460) ack 1
40  > . 42341:43801(1460) ack 1
40  > . 43801:45261(1460) ack 1
40  none
",
    );
}

/// RFC 6937 §3 PRR-SSRB: five of ten segments lost. On the third SACKed segment (after two
/// limited-transmit segments, RFC 3042) pipe is 12 - 3 SACKed - 5 lost = 4 segments, already
/// below ssthresh (CUBIC, RFC 9438 §4.6: 0.7 x 10 = 7 segments). RFC 6675 alone would send
/// cwnd - pipe = 3 segments at once; PRR lets out what was delivered plus one segment (slow
/// start's pace): two now; on the next ACK, which delivers both, three more.
#[test]
fn prr_slow_start_reduction_bound_after_heavy_loss() {
    run_est(
        "0 cfg prr on\n0 cfg cubic",
        r"
10  send 30000
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > . 5841:7301(1460) ack 1
10  > . 7301:8761(1460) ack 1
10  > . 8761:10221(1460) ack 1
10  > . 10221:11681(1460) ack 1
10  > . 11681:13141(1460) ack 1
10  > . 13141:14601(1460) ack 1
20  < . 1:1(0) ack 1 <sack 7301:8761>
20  > . 14601:16061(1460) ack 1
21  < . 1:1(0) ack 1 <sack 7301:10221>
21  > . 16061:17521(1460) ack 1
22  < . 1:1(0) ack 1 <sack 7301:11681>
22  > . 1:1461(1460) ack 1
22  > . 1461:2921(1460) ack 1
22  stat fast_retransmits 1
23  none
30  < . 1:1(0) ack 2921 <sack 7301:11681>
30  > . 2921:4381(1460) ack 1
30  > . 4381:5841(1460) ack 1
30  > . 5841:7301(1460) ack 1
31  none
",
    );
}
