//! ICMP (RFC 792): answer echo requests, hand echo replies to the diagnostic ping.

use smoltcp::wire::{EthernetProtocol, Icmpv4Message, Icmpv4Packet};

use super::ipv4::Ipv4Info;
use super::{
    DropReason, ETH_HEADER_LEN, IP_PROTO_ICMP, IPV4_HEADER_LEN, Iface, Instant, MIN_FRAME_LEN,
    RxAction, pad_frame, write_eth,
};

/// Length of the echo request/reply header (type, code, checksum, identifier, sequence).
pub(super) const ECHO_HEADER_LEN: usize = 8;

/// Fill the 8-byte echo header of `icmp` (whose data is already in place) and its checksum
/// over the whole message (RFC 792: "the 16-bit one's complement of the one's complement sum
/// of the ICMP message starting with the ICMP Type"). `icmp` holds at least 8 bytes.
pub(super) fn write_echo_header(icmp: &mut [u8], request: bool, ident: u16, seq: u16) {
    let mut p = Icmpv4Packet::new_unchecked(icmp);
    p.set_msg_type(if request {
        Icmpv4Message::EchoRequest
    } else {
        Icmpv4Message::EchoReply
    });
    p.set_msg_code(0);
    p.set_echo_ident(ident);
    p.set_echo_seq_no(seq);
    p.fill_checksum();
}

impl Iface {
    /// Handle an ICMP message (`icmp` is the IP payload, total-length bounded).
    pub(super) fn rx_icmp(
        &mut self,
        now: Instant,
        ip: &Ipv4Info,
        src_mac: [u8; 6],
        icmp: &[u8],
        tx: &mut [u8],
    ) -> RxAction {
        if icmp.len() < ECHO_HEADER_LEN {
            return RxAction::Dropped(DropReason::Truncated);
        }
        let pkt = Icmpv4Packet::new_unchecked(icmp);
        // Every accessor used below reads within the first 8 bytes.
        if !pkt.verify_checksum() {
            return RxAction::Dropped(DropReason::BadIcmpChecksum);
        }
        self.stats.rx_icmp += 1;
        let data = icmp.get(ECHO_HEADER_LEN..).unwrap_or_default();
        match (pkt.msg_type(), pkt.msg_code()) {
            (Icmpv4Message::EchoRequest, 0) => {
                self.stats.icmp_echo_request_rx += 1;
                self.echo_reply(ip, src_mac, icmp, tx)
            }
            (Icmpv4Message::EchoReply, 0) => {
                let (ident, seq) = (pkt.echo_ident(), pkt.echo_seq_no());
                if self.rx_echo_reply(now, ip.src, ip.ttl, ident, seq, data) {
                    RxAction::Consumed
                } else {
                    RxAction::Dropped(DropReason::UnmatchedEchoReply)
                }
            }
            _ => RxAction::Dropped(DropReason::UnsupportedIcmp),
        }
    }

    /// RFC 792 echo reply: same identifier, sequence number and data, type 0, new checksum,
    /// addresses swapped. Sent to the requester's MAC (its next hop towards us). IP options of
    /// the request are not reflected (RFC 1122 3.2.2.6 makes that a SHOULD for RR/TS).
    fn echo_reply(
        &mut self,
        ip: &Ipv4Info,
        src_mac: [u8; 6],
        icmp: &[u8],
        tx: &mut [u8],
    ) -> RxAction {
        let ip_end = ETH_HEADER_LEN + IPV4_HEADER_LEN;
        let end = ip_end + icmp.len();
        if IPV4_HEADER_LEN + icmp.len() > usize::from(self.cfg.mtu)
            || tx.len() < end.max(MIN_FRAME_LEN)
        {
            return RxAction::Dropped(DropReason::TxBufferTooSmall);
        }
        let Some(body) = tx.get_mut(ip_end..end) else {
            return RxAction::Dropped(DropReason::TxBufferTooSmall);
        };
        body.copy_from_slice(icmp);
        let pkt = Icmpv4Packet::new_unchecked(&*body);
        let (ident, seq) = (pkt.echo_ident(), pkt.echo_seq_no());
        write_echo_header(body, false, ident, seq);
        write_eth(tx, src_mac, self.cfg.mac, EthernetProtocol::Ipv4);
        if let Some(h) = tx.get_mut(ETH_HEADER_LEN..ip_end) {
            self.write_ipv4(h, ip.src, IP_PROTO_ICMP, icmp.len());
        }
        self.stats.icmp_echo_reply_tx += 1;
        RxAction::Reply(pad_frame(tx, end))
    }
}
