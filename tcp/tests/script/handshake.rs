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
10  > . 1:1(0) ack 1 win 65535
10  state Established
10  event Connected
");
}
