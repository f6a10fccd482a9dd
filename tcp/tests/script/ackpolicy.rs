//! The receiver's ACK policy per receive burst (issue 10): one ACK decision per poll, as
//! Linux takes one per GRO batch; RFC 5681 §4.2 / RFC 9293 §3.8.6.3 and §3.10.7.4 duties kept
//! (every second full-sized segment, immediate ACK for out-of-order data and hole fills,
//! the delayed-ACK timer otherwise); SACK compression like Linux's `tcp_comp_sack_nr`; pure
//! duplicate ACKs per segment for peers without SACK; and the upper layer's quick ACK at a
//! message end (`Connection::request_ack`).
//!
//! `<<` is an inbound segment of the same receive burst as the previous one (no poll in
//! between). The handshake of [`crate::script::EST`] gives an RTT sample of 0, so the SACK
//! compression delay is its 100 us floor; the compression scenarios lower
//! `sack_compress_min_held` to 16 (the script window holds 44 segments).

use crate::script::run_est;

/// RFC 5681 §4.2 / RFC 9293 §3.8.6.3: "at least every second full-sized segment" is checked
/// at the burst boundary: a burst of four in-order segments draws one cumulative ACK, a burst
/// of one waits for the delayed-ACK timer, and a second burst of one then completes the pair.
#[test]
fn one_ack_per_burst_of_in_order_segments() {
    run_est(
        "0 cfg delack 40",
        r"
10  < . 1:1461(1460) ack 1 win 65535
10  << . 1461:2921(1460) ack 1 win 65535
10  << . 2921:4381(1460) ack 1 win 65535
10  << . 4381:5841(1460) ack 1 win 65535
10  > . 1:1(0) ack 5841
10  none
// A lone segment: the delayed-ACK timer (RFC 9293 §3.8.6.3).
20  < . 5841:7301(1460) ack 1 win 65535
20  none
60  > . 1:1(0) ack 7301
// Two single-segment bursts: the second one owes the ACK for the pair at once.
70  < . 7301:8761(1460) ack 1 win 65535
70  none
71  < . 8761:10221(1460) ack 1 win 65535
71  > . 1:1(0) ack 10221
71  read 10220
",
    );
}

/// RFC 5681 §4.2, RFC 2018 §4: out-of-order segments of one burst, with SACK, draw one
/// immediate ACK whose first block covers them all; the hole fill is acknowledged at once.
#[test]
fn out_of_order_burst_with_sack_draws_one_ack() {
    run_est(
        "0 cfg delack 40",
        r"
10  < . 1461:2921(1460) ack 1 win 65535
10  << . 2921:4381(1460) ack 1 win 65535
10  << . 4381:5841(1460) ack 1 win 65535
10  > . 1:1(0) ack 1 <sack 1461:5841>
10  none
20  < . 1:1461(1460) ack 1 win 65535
20  > . 1:1(0) ack 5841
20  read 5840
",
    );
}

/// RFC 5681 §3.2 and §4.2 without SACK (issue 10 item 4): a sender counts duplicate ACKs, so
/// each out-of-order segment draws its own pure duplicate ACK, in one burst too; nothing is
/// compressed.
#[test]
fn without_sack_each_out_of_order_segment_draws_a_dupack() {
    run_est(
        "0 cfg sack off\n0 cfg delack 40",
        r"
10  < . 1461:2921(1460) ack 1 win 65535
10  << . 2921:4381(1460) ack 1 win 65535
10  << . 4381:5841(1460) ack 1 win 65535
10  << . 5841:7301(1460) ack 1 win 65535
10  << . 7301:8761(1460) ack 1 win 65535
10  > . 1:1(0) ack 1 win 65535
10  > . 1:1(0) ack 1 win 65535
10  > . 1:1(0) ack 1 win 65535
10  > . 1:1(0) ack 1 win 65535
10  > . 1:1(0) ack 1 win 65535
10  none
11  < . 8761:10221(1460) ack 1 win 65535
11  > . 1:1(0) ack 1 win 65535
12  < . 10221:11681(1460) ack 1 win 65535
12  > . 1:1(0) ack 1 win 65535
12  stat sack_compressed 0
",
    );
}

/// Script lines: at `t`, one burst of `n` out-of-order segments from sequence 1461 (the
/// first segment, 1:1461, is missing), and our one SACK-bearing ACK for it; returns the lines
/// and the end of the held data.
fn held_burst(t: u32, n: u32) -> (String, u32) {
    let mut s = String::new();
    let end = 1461 + n * 1460;
    for i in 0..n {
        let a = 1461 + i * 1460;
        let dir = if i == 0 { "<" } else { "<<" };
        s += &format!("{t} {dir} . {a}:{}(1460) ack 1 win 65535\n", a + 1460);
    }
    s += &format!("{t} > . 1:1(0) ack 1 <sack 1461:{end}>\n");
    (s, end)
}

/// Script lines: from `t` ms, one out-of-order segment per ms from `from`, each drawing an
/// immediate ACK whose first block grows; returns the lines and the new end.
fn held_singles(t: u32, from: u32, n: u32) -> (String, u32) {
    let mut s = String::new();
    let mut end = from;
    for i in 0..n {
        s += &format!("{} < . {end}:{}(1460) ack 1 win 65535\n", t + i, end + 1460);
        end += 1460;
        s += &format!("{} > . 1:1(0) ack 1 <sack 1461:{end}>\n", t + i);
    }
    (s, end)
}

/// SACK compression (Linux's `tcp_comp_sack_nr`, `tcp_comp_sack_delay_ns`): with RCV.NXT
/// unchanged and a large flight held (16 segments here), the first three SACK-bearing ACKs go at
/// once (a duplicate-ACK counting sender sees its three, RFC 5681 §3.2); after that a newly
/// held segment's ACK waits for the compression delay (100 us here), and one ACK then
/// carries every block.
#[test]
fn sack_compression_after_three_immediate_acks() {
    let (burst, e) = held_burst(10, 16);
    let (singles, e) = held_singles(11, e, 2);
    let (e1, e2) = (e + 1460, e + 2920);
    run_est(
        "0 cfg delack 40\n0 cfg sackcomp_held 16",
        &format!(
            r"{burst}{singles}
// Compressed from here: two bursts of new blocks, one ACK when the delay runs out.
13  < . {e}:{e1}(1460) ack 1 win 65535
13  none
13.05 < . {e1}:{e2}(1460) ack 1 win 65535
13.05 none
13.1 > . 1:1(0) ack 1 <sack 1461:{e2}>
13.1 stat sack_compressed 2
// RFC 5681 §4.2: a segment that fills the gap is acknowledged at once, and the new RCV.NXT
// gets its three immediate ACKs again.
20  < . 1:1461(1460) ack 1 win 65535
20  > . 1:1(0) ack {e2}
20  read {r}
30  < . {f}:{f1}(1460) ack 1 win 65535
30  > . 1:1(0) ack {e2} <sack {f}:{f1}>
",
            r = e2 - 1,
            f = e2 + 1460,
            f1 = e2 + 2920,
        ),
    );
}

/// With a small flight (fewer than `sack_compress_min_held` segments held: a loss-based sender at high loss keeps
/// only a few in flight, and with ACKs lost too each one counts) nothing is compressed: every
/// newly held segment draws its immediate ACK (RFC 5681 §4.2).
#[test]
fn small_flights_are_not_compressed() {
    let (singles, _) = held_singles(10, 1461, 8);
    run_est(
        "0 cfg delack 40",
        &format!("{singles}20 stat sack_compressed 0\n"),
    );
}

/// `sack_compress_min_held = 0`: a small flight is compressed like a large one.
#[test]
fn min_held_zero_compresses_small_flights() {
    let (singles, e) = held_singles(10, 1461, 3);
    let e1 = e + 1460;
    run_est(
        "0 cfg delack 40\n0 cfg sackcomp_held 0",
        &format!(
            r"{singles}
13  < . {e}:{e1}(1460) ack 1 win 65535
13  none
13.1 > . 1:1(0) ack 1 <sack 1461:{e1}>
13.1 stat sack_compressed 1
"
        ),
    );
}

/// The cap on consecutive compressed segments (`sack_compress_segments`, Linux's
/// `tcp_comp_sack_nr`): the Nth held segment while compressing draws the ACK at once.
#[test]
fn sack_compression_cap_sends_at_once() {
    let (burst, e) = held_burst(10, 16);
    let (singles, e) = held_singles(11, e, 2);
    let (e1, e2, e3) = (e + 1460, e + 2920, e + 4380);
    run_est(
        "0 cfg delack 40\n0 cfg sackcomp 3\n0 cfg sackcomp_held 16",
        &format!(
            r"{burst}{singles}
13  < . {e}:{e1}(1460) ack 1 win 65535
13  none
13.01 < . {e1}:{e2}(1460) ack 1 win 65535
13.01 none
13.02 < . {e2}:{e3}(1460) ack 1 win 65535
13.02 > . 1:1(0) ack 1 <sack 1461:{e3}>
13.02 stat sack_compressed 2
13.5 none
"
        ),
    );
}

/// RFC 2883 §4: a duplicate segment's D-SACK is not compressed: it goes at once even while
/// new blocks are being compressed, and carries those blocks too.
#[test]
fn dsack_is_not_compressed() {
    let (burst, e) = held_burst(10, 16);
    let (singles, e) = held_singles(11, e, 2);
    let e1 = e + 1460;
    run_est(
        "0 cfg delack 40\n0 cfg sackcomp_held 16",
        &format!(
            r"{burst}{singles}
13  < . {e}:{e1}(1460) ack 1 win 65535
13  none
13.01 < . 2921:4381(1460) ack 1 win 65535
13.01 > . 1:1(0) ack 1 <sack 2921:4381 1461:{e1}>
"
        ),
    );
}

/// `sack_compress_segments = 0` turns compression off: every poll that holds a new segment
/// draws its ACK (one per burst), large flight or not.
#[test]
fn sack_compression_off() {
    let (burst, e) = held_burst(10, 16);
    let (singles, _) = held_singles(11, e, 4);
    run_est(
        "0 cfg delack 40\n0 cfg sackcomp 0",
        &format!("{burst}{singles}20 stat sack_compressed 0\n"),
    );
}

/// The upper layer's quick ACK (`Connection::request_ack`): a lone segment that ended a
/// message is acknowledged at once instead of after the delayed-ACK timer (RFC 9293
/// §3.8.6.3 only bounds that delay); with nothing owed the request does nothing.
#[test]
fn quick_ack_on_request() {
    run_est(
        "0 cfg delack 40",
        r"
10  < . 1:1461(1460) ack 1 win 65535
10  ack_request true
10  > . 1:1(0) ack 1461
10  ack_request false
10  none
10  stat quick_acks 1
20  < . 1461:2921(1460) ack 1 win 65535
20  none
60  > . 1:1(0) ack 2921
60  read 2920
",
    );
}

/// Script lines: at `t`, one burst of in-order segments `from..from + n` (1-based segment
/// numbers of 1460 bytes from sequence 1), the first with `<`, the rest with `<<`.
fn in_order_burst(t: u32, from: u32, n: u32) -> String {
    let mut s = String::new();
    for i in from..from + n {
        let a = 1 + (i - 1) * 1460;
        let dir = if i == from { "<" } else { "<<" };
        s += &format!("{t} {dir} . {a}:{}(1460) ack 1 win 65535\n", a + 1460);
    }
    s
}

/// The quick start of stretch ACKs with `ackstretch 4`: the first 2 x 4 segments are
/// acknowledged as RFC 9293 §3.8.6.3 asks (a burst of eight draws its ACK at once).
const QUICK_START: &str = "0 cfg delack 40\n0 cfg ackstretch 4";

/// Runs `script` on an established connection configured by `cfg`, after the quick start: a
/// burst of eight in-order segments at 10 and its ACK (of everything up to 11681).
fn run_after_quick_start(cfg: &str, script: &str) {
    let quick = in_order_burst(10, 1, 8);
    run_est(cfg, &format!("{quick}10  > . 1:1(0) ack 11681\n{script}"));
}

/// Stretch ACKs (`TcpConfig::ack_stretch_segments`): past the quick start, one ACK per four
/// in-order segments whether they come one per poll or in one burst; no delayed-ACK timeout
/// on the way.
#[test]
fn stretch_ack_after_the_quick_start() {
    run_after_quick_start(
        QUICK_START,
        &format!(
            r"11  < . 11681:13141(1460) ack 1 win 65535
11  none
12  < . 13141:14601(1460) ack 1 win 65535
12  none
13  < . 14601:16061(1460) ack 1 win 65535
13  none
14  < . 16061:17521(1460) ack 1 win 65535
14  > . 1:1(0) ack 17521
{burst}15  > . 1:1(0) ack 23361
15  read 23360
60  stat ack_stretch_cuts 0
",
            burst = in_order_burst(15, 13, 4),
        ),
    );
}

/// The window bound of stretch ACKs: a quarter of the window last advertised (16384 here)
/// draws the ACK before the count does, three segments (4380 bytes) instead of four, so a
/// sender is never held by a window it could already have (RFC 9293 §3.8.6.2.2).
#[test]
fn stretch_ack_bounded_by_a_quarter_of_the_window() {
    run_after_quick_start(
        &format!("{QUICK_START}\n0 cfg rwnd 16384"),
        r"// Reading reopens the window (RFC 9293 §3.8.6.2.2): an update at once.
10  read 11680
10  > . 1:1(0) ack 11681 win 16384
11  < . 11681:13141(1460) ack 1 win 65535
11  none
12  < . 13141:14601(1460) ack 1 win 65535
12  none
13  < . 14601:16061(1460) ack 1 win 65535
13  > . 1:1(0) ack 16061
13  read 4380
13  none
",
    );
}

/// A peer whose flight stops short of the stretch: the delayed-ACK timer bounds the wait
/// (RFC 9293 §3.8.6.3) and the stretch comes down to half the flight (three segments: 2, every
/// second segment), so the peer does not wait once per flight. A lone segment's delayed ACK
/// is the RFCs' own and cuts nothing.
#[test]
fn delayed_ack_after_a_stretch_cuts_the_stretch() {
    run_after_quick_start(
        QUICK_START,
        r"11  < . 11681:13141(1460) ack 1 win 65535
12  < . 13141:14601(1460) ack 1 win 65535
13  < . 14601:16061(1460) ack 1 win 65535
13  none
50  none
51  > . 1:1(0) ack 16061
51  stat ack_stretch_cuts 1
60  < . 16061:17521(1460) ack 1 win 65535
60  none
61  < . 17521:18981(1460) ack 1 win 65535
61  > . 1:1(0) ack 18981
70  < . 18981:20441(1460) ack 1 win 65535
70  none
110 > . 1:1(0) ack 20441
110 stat ack_stretch_cuts 1
110 read 20440
",
    );
}

/// While ACKs are stretched the immediate ones stay immediate: the upper layer's message end
/// (`Connection::request_ack`), an out-of-order segment and the gap's fill (RFC 5681 §4.2),
/// and the FIN (RFC 9293 §3.10.7.4).
#[test]
fn stretch_keeps_the_immediate_acks() {
    run_after_quick_start(
        QUICK_START,
        r"11  < . 11681:13141(1460) ack 1 win 65535
11  none
11  ack_request true
11  > . 1:1(0) ack 13141
12  < . 13141:14601(1460) ack 1 win 65535
12  none
13  < . 16061:17521(1460) ack 1 win 65535
13  > . 1:1(0) ack 14601 <sack 16061:17521>
14  < . 14601:16061(1460) ack 1 win 65535
14  > . 1:1(0) ack 17521
15  < . 17521:18981(1460) ack 1 win 65535
15  none
16  < F. 18981:20441(1460) ack 1 win 65535
16  > . 1:1(0) ack 20442
16  event PeerClosed
16  read 20440
",
    );
}

/// `ackstretch 2` is RFC 9293 §3.8.6.3's rule from the first segment on: past the quick
/// start too, two single-segment polls draw an ACK.
#[test]
fn stretch_two_is_every_second_segment() {
    run_after_quick_start(
        "0 cfg delack 40\n0 cfg ackstretch 2",
        r"11  < . 11681:13141(1460) ack 1 win 65535
11  none
12  < . 13141:14601(1460) ack 1 win 65535
12  > . 1:1(0) ack 14601
12  read 14600
",
    );
}

/// A filled hole (RFC 5681 §4.2: acknowledged at once) also brings back quick ACKs: the peer
/// lost data and cut its window, likely below the stretch, so every second segment is
/// acknowledged again for a while (as Linux's quick-ACK mode after out-of-order data).
#[test]
fn quick_acks_after_a_filled_hole() {
    run_after_quick_start(
        QUICK_START,
        r"11  < . 13141:14601(1460) ack 1 win 65535
11  > . 1:1(0) ack 11681 <sack 13141:14601>
12  < . 11681:13141(1460) ack 1 win 65535
12  > . 1:1(0) ack 14601
13  < . 14601:16061(1460) ack 1 win 65535
13  none
14  < . 16061:17521(1460) ack 1 win 65535
14  > . 1:1(0) ack 17521
14  read 17520
",
    );
}
