//! Control messages from a client (untrusted): decoding never panics, and whatever decodes
//! re-encodes to the same bytes (the codec has one encoding per value).
#![no_main]

use abi::ctl::{Body, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = decode(data) else {
        return;
    };
    let again = match &msg.body {
        Body::Request(r) => r.encode(msg.id),
        Body::Response(r) => r.encode(msg.id),
        Body::Event(e) => e.encode(),
    };
    assert_eq!(again, data, "{msg:?} re-encodes differently");
});
