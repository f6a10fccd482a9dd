//! Connection establishment (RFC 9293 §3.5, §3.10.7.1-§3.10.7.3, RFC 7323, RFC 2018).

use crate::script::run;

/// RFC 9293 §3.5 figure 6: passive three-way handshake.
#[test]
fn passive_open() {
    run(r"
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK>
1   < . 1:1(0) ack 1 win 65535
1   state Established
1   event Connected
");
}

/// RFC 9293 §3.5 figure 6: active three-way handshake.
#[test]
fn active_open() {
    run(r"
0   connect
0   > S 0:0(0) win 65535 <mss 1460,sackOK>
10  < S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK>
10  > . 1:1(0) ack 1 win 65534
10  state Established
10  event Connected
");
}

/// RFC 7323 §2.2 (the SYN window is never scaled, later ones are), §3.2 (timestamps),
/// RFC 9293 §3.7.1 (EMSS = MSS minus the 12 option bytes of timestamps).
#[test]
fn active_open_negotiates_wscale_ts_sack() {
    run(r"
0   cfg ws 7
0   cfg ts on
0   connect
0   > S 0:0(0) win 65535 <mss 1460,sackOK,ws 7,ts val * ecr 0>
10  < S. 0:0(0) ack 1 win 1000 <mss 1400,sackOK,ws 2,ts val 500 ecr 1>
10  > . 1:1(0) ack 1 win 512 <ts val * ecr 500>
10  emss 1388
20  send 3000
20  > . 1:1001(1000) ack 1 <ts val * ecr 500>
30  < . 1:1(0) ack 1001 win 1000 <ts val 501 ecr 0>
30  > . 1001:2389(1388) ack 1 <ts val * ecr 501>
30  > P. 2389:3001(612) ack 1 <ts val * ecr 501>
");
}

/// RFC 7323 §1.3/§2.2 and RFC 2018 §2: options the peer did not offer are not sent back.
#[test]
fn passive_open_without_peer_options() {
    run(r"
0   cfg ws 7
0   cfg ts on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460>
1   < . 1:1(0) ack 1 win 65535
1   state Established
1   emss 1460
");
}

/// RFC 7323 §2.2: a passive open echoes window scale and timestamps when offered.
#[test]
fn passive_open_with_peer_options() {
    run(r"
0   cfg ws 3
0   cfg ts on
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK,ts val 10 ecr 0,ws 5>
0   > S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK,ws 3,ts val * ecr 10>
1   < . 1:1(0) ack 1 win 100 <ts val 11 ecr 1>
1   state Established
1   emss 1448
// The peer's window is 100 << 5 = 3200 bytes.
2   send 5000
2   > . 1:1449(1448) ack 1 <ts val * ecr 11>
2   > . 1449:2897(1448) ack 1 <ts val * ecr 11>
");
}

/// RFC 9293 §3.5 figure 8: simultaneous open.
#[test]
fn simultaneous_open() {
    run(r"
0   connect
0   > S 0:0(0) <mss 1460,sackOK>
5   < S 0:0(0) win 65535 <mss 1460,sackOK>
5   > S. 0:0(0) ack 1 <mss 1460,sackOK>
5   state SynReceived
6   < S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK>
6   state Established
6   event Connected
");
}

/// RFC 9293 §3.10.7.3: in SYN-SENT an unacceptable ACK gets <SEQ=SEG.ACK><CTL=RST>.
#[test]
fn syn_sent_bad_ack_gets_reset() {
    run(r"
0   connect
0   > S 0:0(0)
5   < S. 0:0(0) ack 5 win 65535
5   > R 5:5(0)
5   state SynSent
5   stat resets_sent 1
");
}

/// RFC 6298 §5.5 / RFC 9293 §3.8.1: the SYN is retransmitted with exponential backoff from
/// the 1 s initial RTO (RFC 6298 §2.1).
#[test]
fn syn_retransmit_backoff() {
    run(r"
0     connect
0     > S 0:0(0)
1000  > S 0:0(0)
3000  > S 0:0(0)
7000  > S 0:0(0)
7100  < S. 0:0(0) ack 1 win 65535
7100  > . 1:1(0) ack 1
7100  state Established
");
}

/// RFC 9293 §3.8.3 (R2 for SYN): give up after the retry limit.
#[test]
fn syn_timeout_closes() {
    run(r"
0     cfg retries 2
0     connect
0     > S 0:0(0)
1000  > S 0:0(0)
3000  > S 0:0(0)
7000  event Closed(Timeout)
7000  gone
");
}

/// RFC 6298 §5.4: a lost SYN-ACK is retransmitted on RTO by the passive side.
#[test]
fn syn_ack_retransmitted() {
    run(r"
0     listen 8080
0     < S 0:0(0) win 65535 <mss 1460,sackOK>
0     > S. 0:0(0) ack 1
1000  > S. 0:0(0) ack 1
3000  > S. 0:0(0) ack 1
3001  < . 1:1(0) ack 1 win 65535
3001  state Established
");
}

/// RFC 9293 §3.10.7.4: a retransmitted SYN in SYN-RECEIVED means the SYN-ACK was lost.
#[test]
fn duplicate_syn_in_syn_received() {
    run(r"
0     listen 8080
0     < S 0:0(0) win 65535 <mss 1460,sackOK>
0     > S. 0:0(0) ack 1
500   < S 0:0(0) win 65535 <mss 1460,sackOK>
500   > S. 0:0(0) ack 1
501   < . 1:1(0) ack 1 win 65535
501   state Established
");
}

/// RFC 9293 §3.10.7.4 (fifth, SYN-RECEIVED): an unacceptable ACK gets a reset.
#[test]
fn syn_received_bad_ack_gets_reset() {
    run(r"
0   listen 8080
0   < S 0:0(0) win 65535 <mss 1460,sackOK>
0   > S. 0:0(0) ack 1
1   < . 1:1(0) ack 10 win 65535
1   > R 10:10(0)
1   state SynReceived
1   stat resets_sent 1
");
}

/// RFC 9293 §3.7.1: without an MSS option the send MSS defaults to 536.
#[test]
fn default_mss_536() {
    run(r"
0   listen 8080
0   < S 0:0(0) win 65535
0   > S. 0:0(0) ack 1 <mss 1460>
1   < . 1:1(0) ack 1 win 65535
1   emss 536
1   send 1000
1   > . 1:537(536) ack 1
1   > P. 537:1001(464) ack 1
");
}

/// RFC 9293 §3.10.7.2: in LISTEN an ACK gets <SEQ=SEG.ACK><CTL=RST>.
#[test]
fn listen_ack_gets_reset() {
    run(r"
0   listen 8080
0   < . 100:100(0) ack 77 win 65535
0   > R 77:77(0)
0   stat resets_sent 1
");
}

/// RFC 9293 §3.10.7.2: in LISTEN a RST is ignored.
#[test]
fn listen_rst_ignored() {
    run(r"
0   listen 8080
0   < R 100:100(0)
0   none
");
}

/// RFC 9293 §3.10.7.1: a SYN to a closed port gets <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
#[test]
fn closed_port_syn_gets_reset() {
    run(r"
0   < S 0:0(0) win 65535
0   > R. 0:0(0) ack 1
");
}

/// RFC 9293 §3.10.7.1: data with ACK to a closed port gets <SEQ=SEG.ACK><CTL=RST>.
#[test]
fn closed_port_data_gets_reset() {
    run(r"
0   < P. 1:11(10) ack 5 win 100
0   > R 5:5(0)
");
}

/// RFC 9293 §3.10.7.1: a RST to a closed port is dropped without reply.
#[test]
fn closed_port_rst_ignored() {
    run(r"
0   < R. 1:1(0) ack 5
0   none
");
}

/// RFC 9293 §3.10.7.3 / RFC 5961 §3.2: in SYN-SENT a RST with an acceptable ACK resets.
#[test]
fn syn_sent_rst_with_ack() {
    run(r"
0   connect
0   > S 0:0(0)
5   < R. 0:0(0) ack 1
5   event Closed(Reset)
5   gone
");
}

/// RFC 9293 §3.10.7.3: in SYN-SENT a RST without ACK is dropped.
#[test]
fn syn_sent_rst_without_ack_ignored() {
    run(r"
0   connect
0   > S 0:0(0)
5   < R 0:0(0)
5   state SynSent
5   none
");
}

/// RFC 9293 §3.1: segments with a bad checksum are dropped (and counted).
#[test]
fn bad_checksum_dropped() {
    run(r"
0   listen 8080
0   < S 0:0(0) win 65535 corrupt
0   none
0   stat bad_checksum 1
");
}

/// RFC 9293 §3.10.7.1 and §3.6: after close, a new SYN on the same 4-tuple opens a new
/// connection; a connect on an in-use tuple fails.
#[test]
fn close_in_syn_sent() {
    run(r"
0   connect
0   > S 0:0(0)
1   close
1   event Closed(Normal)
1   gone
2   < S. 0:0(0) ack 1 win 65535
2   > R 1:1(0)
");
}
