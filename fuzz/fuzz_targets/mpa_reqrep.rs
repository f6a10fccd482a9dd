//! Fuzz the MPA Request/Reply parser and the negotiation state machine: arbitrary bytes into
//! both roles, in arbitrary pieces. Never panics; a parsed frame re-emits to the same bytes.
#![no_main]

use iwarp::mpa::startup::{Role, Startup, StartupConfig};
use iwarp::mpa::wire::Repr;
use libfuzzer_sys::fuzz_target;
use netcore::Instant;

fuzz_target!(|data: &[u8]| {
    if let Ok((r, len)) = Repr::parse_bytes(data) {
        let mut out = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut out), Ok(len));
        // Re-emitting gives the same frame, except flag bits we do not keep (reserved,
        // GSO_EXP, and the enhanced bit on revision 1).
        assert_eq!(&out[..16], &data[..16]);
        assert_eq!(&out[17..], &data[17..len]);
    }
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    for role in [Role::Initiator, Role::Responder] {
        let mut cfg = StartupConfig::new(role);
        cfg.p2p = sel & 1 != 0;
        cfg.markers_tx_supported = sel & 2 != 0;
        cfg.auto_accept = sel & 4 != 0;
        let now = Instant::from_millis(1);
        let Ok(mut s) = Startup::new(cfg, now) else {
            return;
        };
        let _ = s.poll_transmit();
        let step = usize::from(sel >> 4).max(1);
        let mut at = 0;
        while at < rest.len() {
            let end = (at + step).min(rest.len());
            let used = s.handle_stream(now, &rest[at..end]);
            assert!(used <= end - at);
            if used < end - at {
                break;
            }
            at = end;
        }
        if s.peer_request().is_some() {
            let _ = s.accept(b"pd");
        }
        let _ = s.poll_transmit();
        s.handle_timeout(Instant::from_millis(60_000));
        assert!(s.outcome().is_some());
    }
});
