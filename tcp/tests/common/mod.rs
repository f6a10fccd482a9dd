//! Pieces shared by the instruction-cost harnesses (`tx_cost`, `pingpong_cost`): a send
//! source as the RDMA engine's copy-at-emit path sees it, and the hand-over of a segment
//! built by `poll_transmit_header` to the peer endpoint.

use netcore::Instant;
use smoltcp::wire::Ipv4Address;
use tcp::{ConnHandle, Dispatch, Endpoint, SendSource, TcpConfig, Transmit};

/// Two endpoints with default configurations, `b` listening on port 80 and `a` connecting
/// to it (the handshake is the caller's): `(a, b, a's connection, (a's address, b's))`.
pub(crate) type Pair = (
    Endpoint<Vec<u8>>,
    Endpoint<Vec<u8>>,
    ConnHandle,
    (Ipv4Address, Ipv4Address),
);

/// [`Pair`], `a`'s connect at `now`.
pub(crate) fn connecting_pair(now: Instant) -> Pair {
    let (a_ip, b_ip) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
    let cfg = TcpConfig::default();
    let mut a: Endpoint<Vec<u8>> = Endpoint::new(cfg.clone(), a_ip, [1; 16]);
    let mut b: Endpoint<Vec<u8>> = Endpoint::new(cfg, b_ip, [2; 16]);
    b.listen(80);
    let ca = a.connect(now, 0, (b_ip, 80)).expect("connect");
    (a, b, ca, (a_ip, b_ip))
}

/// Stream bytes whose owner sums them itself (the RDMA engine's `SumLater`): zeros, whose
/// sum is 0, so the checksum the header carries is right.
pub(crate) struct SumLater;

impl SendSource for SumLater {
    fn read(&mut self, _stream_offset: u64, dst: &mut [u8]) {
        dst.fill(0);
    }
    fn checksum(&mut self, _stream_offset: u64, _len: usize) -> u16 {
        0
    }
}

/// Hand the segment of `t` (its header in `hdr`, then its payload as zeros) from `src` to
/// `rx` at `now`, and read what it makes readable there; returns the payload bytes read.
pub(crate) fn deliver(
    now: Instant,
    hdr: &[u8],
    t: &Transmit,
    rx: &mut Endpoint<Vec<u8>>,
    (src, dst): (Ipv4Address, Ipv4Address),
) -> u64 {
    let plen = (t.payload.end - t.payload.start) as usize;
    let mut seg = vec![0u8; t.header_len + plen];
    seg[..t.header_len].copy_from_slice(&hdr[..t.header_len]);
    let n = seg.len();
    let mut got = 0;
    if let Dispatch::NewConn(r) | Dispatch::Conn(r) = rx.handle_segment(now, src, dst, seg, 0..n)
        && let Some(r) = rx.conn_mut(r)
    {
        while let Some((_, range)) = r.poll_readable() {
            got += range.len() as u64;
        }
    }
    got
}
