//! Building segments as the scripted peer sends them.

use super::{LOCAL, REMOTE};

/// A segment description for the builder.
#[derive(Default)]
pub struct Hdr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    pub window: u16,
    pub mss: Option<u16>,
    pub ws: Option<u8>,
    pub sack_perm: bool,
    pub sack: [Option<(u32, u32)>; 3],
    pub ts: Option<(u32, u32)>,
}

/// Serialise a TCP segment from the peer (checksummed for REMOTE -> LOCAL).
pub fn build_segment(h: &Hdr, payload: &[u8], corrupt: bool) -> Vec<u8> {
    use smoltcp::wire::{
        IpAddress, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber, TcpTimestampRepr,
    };
    let control = if h.syn {
        TcpControl::Syn
    } else if h.fin {
        TcpControl::Fin
    } else if h.rst {
        TcpControl::Rst
    } else if h.psh {
        TcpControl::Psh
    } else {
        TcpControl::None
    };
    let repr = TcpRepr {
        src_port: h.src_port,
        dst_port: h.dst_port,
        control,
        seq_number: TcpSeqNumber(h.seq as i32),
        ack_number: h.ack.map(|a| TcpSeqNumber(a as i32)),
        window_len: h.window,
        window_scale: h.ws,
        max_seg_size: h.mss,
        sack_permitted: h.sack_perm,
        sack_ranges: h.sack,
        timestamp: h.ts.map(|(v, e)| TcpTimestampRepr::new(v, e)),
        payload,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut pkt = TcpPacket::new_unchecked(&mut buf[..]);
    let caps = smoltcp::phy::ChecksumCapabilities::default();
    repr.emit(
        &mut pkt,
        &IpAddress::Ipv4(REMOTE),
        &IpAddress::Ipv4(LOCAL),
        &caps,
    );
    if corrupt {
        let n = buf.len();
        buf[n - 1] ^= 0x55;
        if payload.is_empty() {
            buf[4] ^= 0x55;
        }
    }
    buf
}
