//! The engine's view of a dataplane thread's network stack ([`Net`] over the netstack's
//! TCP endpoint and L2/L3 interface).

use std::net::SocketAddrV4;

use netcore::Instant;
use tcp::Endpoint;
use tcp::iface::{Iface, Resolve};

use super::engine::Net;
use crate::mbuf::Mbuf;
use crate::rss::RssSteering;

/// Borrowed parts of the netstack for one `Engine::poll`.
pub(crate) struct StackNet<'a> {
    pub(crate) tcp: &'a mut Endpoint<Mbuf>,
    pub(crate) iface: &'a mut Iface,
    pub(crate) steering: &'a Option<(RssSteering, u16)>,
    pub(crate) seed: u64,
    pub(crate) next_port_offset: &'a mut u32,
}

impl Net<Mbuf> for StackNet<'_> {
    fn tcp(&mut self) -> &mut Endpoint<Mbuf> {
        self.tcp
    }

    fn resolve(&mut self, now: Instant, ip: [u8; 4]) -> Resolve {
        self.iface.resolve(now, ip)
    }

    fn source_port(&mut self, remote: SocketAddrV4) -> u16 {
        // A random ephemeral port per run (so a new run does not meet the peer's TIME-WAIT
        // state of the last one), steered to our queue when the port uses RSS.
        let start = 49152
            + ((self.seed >> 16).wrapping_add(u64::from(*self.next_port_offset)) % 16384) as u16;
        *self.next_port_offset = self.next_port_offset.wrapping_add(1);
        let Some((s, q)) = self.steering else {
            return start;
        };
        let local = self.iface.config().ip;
        let dst = remote.ip().octets();
        match s.pick_source_port((local, dst, remote.port()), *q, start, |_| false) {
            Some(p) => {
                *self.next_port_offset = self
                    .next_port_offset
                    .wrapping_add(u32::from(p.wrapping_sub(start)));
                p
            }
            None => start,
        }
    }
}
