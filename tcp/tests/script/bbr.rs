//! BBR (draft-ietf-ccwg-bbr, with Linux's tcp_bbr.c loss response): pacing, Startup's
//! window growth, packet conservation in recovery.

use crate::script::run_est;

/// draft-ietf-ccwg-bbr §5.6.2-§5.6.3: BBR paces. The initial pacing rate is the startup
/// gain × initial window / RTT (1 ms until measured); after the first RTT sample (10 ms here)
/// it is 2.77 × 14600 / 10 ms = 4.04 MB/s, and the send quantum max(2 MSS, 1 ms of it) =
/// 4044 bytes. Startup grows cwnd by what was acknowledged (§5.6.4.4), but the new window
/// leaves one quantum at a time: three segments (the third overdraws the credit by 336
/// bytes, 84 us), then one per 1460 / 4.04 MB/s = 361 us.
#[test]
fn bbr_paces_after_the_first_rtt() {
    run_est(
        "0 cfg bbr",
        r"
0   bbr Startup
10  send 100000
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
20  < . 1:1(0) ack 14601 win 65535
20  cwnd 29200
20  > . 14601:16061(1460) ack 1
20  > . 16061:17521(1460) ack 1
20  > . 17521:18981(1460) ack 1
20.05 none
20.084 > . 18981:20441(1460) ack 1
20.2 none
20.445 > . 20441:21901(1460) ack 1
20.445 bbr Startup
",
    );
}

/// Linux's BBR loss response (tcp_bbr.c `bbr_set_cwnd_to_recover_or_restore`; the draft's
/// §5.6.4.3 in spirit): entering fast recovery saves the window and conserves packets
/// (cwnd = what is in flight, here 9 segments), the head is retransmitted at once, and the full
/// ACK ends recovery with the saved window back, then Startup grows it by what was acked.
#[test]
fn bbr_conserves_packets_in_recovery_and_restores_cwnd() {
    run_est(
        "0 cfg bbr\n0 cfg sack off",
        r"
10  send 14600
10  > . 1:1461(1460) ack 1
10  > . 1461:2921(1460) ack 1
10  > . 2921:4381(1460) ack 1
10  > . 4381:5841(1460) ack 1
10  > . 5841:7301(1460) ack 1
10  > . 7301:8761(1460) ack 1
10  > . 8761:10221(1460) ack 1
10  > . 10221:11681(1460) ack 1
10  > . 11681:13141(1460) ack 1
10  > P. 13141:14601(1460) ack 1
20  < . 1:1(0) ack 1461
20  cwnd 16060
21  < . 1:1(0) ack 1461
22  < . 1:1(0) ack 1461
23  < . 1:1(0) ack 1461
23  > . 1461:2921(1460) ack 1
23  cwnd 13140
23  stat fast_retransmits 1
33  < . 1:1(0) ack 14601
33  cwnd 29200
33  bbr Startup
",
    );
}
