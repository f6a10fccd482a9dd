use super::*;
use std::net::Ipv4Addr;

fn addr(a: u8, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, a), port)
}

fn device() -> DeviceAttrs {
    DeviceAttrs {
        version: "iwarpd 0.1.0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        ip: addr(1, 0),
        cq_subs: 2,
        max_qp: 1024,
        max_qp_wr: 16384,
        max_send_sge: 5,
        max_recv_sge: 7,
        max_cq: 1024,
        max_cqe: 65536,
        max_mr: 4096,
        max_mr_size: 1 << 40,
        max_pd: 256,
        max_segments: 1024,
        max_ird: 128,
        max_ord: 128,
        max_private_data: 512,
    }
}

pub(crate) fn all_requests() -> Vec<Request> {
    let pd = vec![0xa5; MAX_PRIVATE_DATA];
    vec![
        Request::Hello {
            abi_version: ABI_VERSION,
            pid: 1234,
            name: "rping".into(),
        },
        Request::QueryDevice {},
        Request::AttachSegment { len: 1 << 30 },
        Request::DetachSegment {
            segment: SegmentId(3),
        },
        Request::AllocPd {},
        Request::DeallocPd { pd: PdId(1) },
        Request::RegMr {
            pd: PdId(1),
            segment: SegmentId(2),
            offset: 4096,
            len: 1 << 20,
            iova: 0x7f00_0000_1000,
            access: access::ALL,
        },
        Request::DeregMr { lkey: 0x1234_5678 },
        Request::CreateCq {
            segment: SegmentId(2),
            offset: 0,
            entries: 256,
            subs: 2,
            channel: true,
        },
        Request::DestroyCq { cq: CqId(9) },
        Request::CreateQp {
            pd: PdId(1),
            send_cq: CqId(1),
            recv_cq: CqId(2),
            segment: SegmentId(2),
            sq_offset: 65536,
            sq_entries: 128,
            rq_offset: 131072,
            rq_entries: 64,
            sq_sig_all: false,
        },
        Request::DestroyQp { qp: QpId(4) },
        Request::QueryQp { qp: QpId(4) },
        Request::ModifyQpError { qp: QpId(4) },
        Request::CreateCmId {},
        Request::DestroyCmId { id: CmId(5) },
        Request::Listen {
            id: CmId(5),
            addr: addr(1, 7174),
            backlog: 16,
        },
        Request::Connect {
            id: CmId(6),
            qp: QpId(4),
            remote: addr(2, 7174),
            private_data: pd.clone(),
            ird: 16,
            ord: 16,
            mpa: MpaOverride {
                crc: 3,
                markers: 2,
                revision: 2,
                rtr: 3,
            },
        },
        Request::Accept {
            id: CmId(7),
            qp: QpId(4),
            private_data: b"hello".to_vec(),
            ird: 1,
            ord: 1,
            mpa: MpaOverride {
                crc: 1,
                ..MpaOverride::default()
            },
        },
        Request::Reject {
            id: CmId(7),
            private_data: pd,
        },
        Request::Disconnect { id: CmId(7) },
        Request::InjectFault {
            qp: QpId(4),
            fault: crate::ctl::tx_fault::RST,
        },
    ]
}

fn all_responses() -> Vec<Response> {
    let mut v = vec![
        Response::Hello {
            client: 1,
            abi_version: ABI_VERSION,
            device: device(),
        },
        Response::Device { device: device() },
        Response::Segment {
            segment: SegmentId(1),
        },
        Response::Pd { pd: PdId(1) },
        Response::Mr {
            lkey: 7,
            rkey: 0xabcd_ef01,
        },
        Response::Cq { cq: CqId(1) },
        Response::Qp {
            qp: QpId(1),
            qp_num: 17,
        },
        Response::QpAttrs {
            attrs: QpAttrs {
                qp_num: 17,
                state: qp_state::RTS,
                cm_id: CmId(3),
                sq_entries: 128,
                rq_entries: 64,
                ird: 8,
                ord: 8,
                crc: true,
                markers: false,
                revision: 2,
                local: addr(1, 40000),
                remote: addr(2, 7174),
            },
        },
        Response::CmId { id: CmId(3) },
        Response::Done {},
    ];
    for code in ErrorCode::ALL {
        v.push(Response::error(code, format!("{code:?}: field `pd`")));
    }
    v
}

fn all_events() -> Vec<Event> {
    vec![
        Event::ConnectRequest {
            listener: CmId(1),
            id: CmId(2),
            local: addr(1, 7174),
            remote: addr(2, 50000),
            private_data: b"pd".to_vec(),
            ird: 4,
            ord: 4,
            rtr: 1,
        },
        Event::Established {
            id: CmId(2),
            qp: QpId(3),
            local: addr(1, 7174),
            remote: addr(2, 50000),
            private_data: vec![],
            ird: 4,
            ord: 4,
            crc: true,
            markers: true,
            revision: 1,
        },
        Event::Rejected {
            id: CmId(2),
            private_data: b"go away".to_vec(),
        },
        Event::ConnectFailed {
            id: CmId(2),
            reason: connect_failure::REFUSED,
        },
        Event::Disconnected { id: CmId(2) },
        Event::TerminateReceived {
            id: CmId(2),
            layer: 1,
            etype: 1,
            ecode: 0,
        },
        Event::QpError {
            id: CmId(2),
            qp: QpId(3),
            reason: qp_error::TERMINATE_SENT,
            layer: 0,
            etype: 1,
            ecode: 2,
        },
    ]
}

fn all_encoded() -> Vec<(Vec<u8>, Message)> {
    let mut v = Vec::new();
    for (i, r) in all_requests().into_iter().enumerate() {
        let id = i as u32 + 1;
        v.push((
            r.encode(id),
            Message {
                id,
                body: Body::Request(r),
            },
        ));
    }
    for (i, r) in all_responses().into_iter().enumerate() {
        let id = 1000 + i as u32;
        v.push((
            r.encode(id),
            Message {
                id,
                body: Body::Response(r),
            },
        ));
    }
    for e in all_events() {
        v.push((
            e.encode(),
            Message {
                id: 0,
                body: Body::Event(e),
            },
        ));
    }
    v
}

#[test]
fn every_message_round_trips() {
    let mut kinds = std::collections::HashSet::new();
    for (bytes, msg) in all_encoded() {
        assert!(bytes.len() <= MAX_MESSAGE, "{msg:?} too long");
        assert_eq!(decode(&bytes), Ok(msg.clone()));
        let kind = Header::parse(&bytes).unwrap().kind;
        kinds.insert(kind);
    }
    // The test lists cover every kind of every direction.
    for k in Request::KINDS
        .iter()
        .chain(Response::KINDS)
        .chain(Event::KINDS)
    {
        assert!(kinds.contains(k), "kind {k:#06x} not covered");
    }
}

#[test]
fn every_truncation_is_an_error() {
    for (bytes, msg) in all_encoded() {
        for cut in 0..bytes.len() {
            let r = decode(&bytes[..cut]);
            assert!(r.is_err(), "{} cut at {cut} decoded", msg_name(&msg));
        }
        // A truncated body with a matching (shortened) length field fails too, unless the
        // body is empty.
        if bytes.len() > HEADER_LEN {
            let mut b = bytes[..bytes.len() - 1].to_vec();
            let len = (b.len() - HEADER_LEN) as u32;
            b[16..20].copy_from_slice(&len.to_le_bytes());
            assert!(decode(&b).is_err(), "{} short body decoded", msg_name(&msg));
        }
    }
}

fn msg_name(m: &Message) -> &'static str {
    match &m.body {
        Body::Request(r) => r.name(),
        Body::Response(r) => r.name(),
        Body::Event(e) => e.name(),
    }
}

#[test]
fn header_errors() {
    let good = Request::AllocPd {}.encode(9);
    let mut b = good.clone();
    b[0] ^= 1;
    assert_eq!(decode(&b), Err(DecodeError::BadMagic));
    let mut b = good.clone();
    b[4..8].copy_from_slice(&99u32.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::Version(99)));
    let mut b = good.clone();
    b[8..10].copy_from_slice(&0x00ffu16.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::UnknownKind(0x00ff)));
    let mut b = good.clone();
    b[8..10].copy_from_slice(&0x7001u16.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::UnknownKind(0x7001)));
    let mut ev = Event::Disconnected { id: CmId(1) }.encode();
    ev[12] = 5;
    assert_eq!(
        decode(&ev),
        Err(DecodeError::BadValue("event id (must be 0)"))
    );
    let mut b = good.clone();
    b[10] = 1;
    assert_eq!(decode(&b), Err(DecodeError::BadValue("header rsvd")));
    let mut b = good.clone();
    b.push(0);
    assert_eq!(decode(&b), Err(DecodeError::BadLength(0)));
    let mut b = good.clone();
    b.push(0);
    b[16..20].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::Trailing(1)));
    let mut b = good;
    b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::BadLength(u32::MAX)));
    assert_eq!(decode(&[]), Err(DecodeError::Truncated));
}

#[test]
fn bad_field_values_are_errors() {
    // bool = 2
    let mut b = Request::CreateCq {
        segment: SegmentId(1),
        offset: 0,
        entries: 4,
        subs: 1,
        channel: false,
    }
    .encode(1);
    let last = b.len() - 1;
    b[last] = 2;
    assert_eq!(decode(&b), Err(DecodeError::BadValue("bool")));
    // error code 0
    let mut b = Response::error(ErrorCode::Busy, "").encode(1);
    b[HEADER_LEN..HEADER_LEN + 2].copy_from_slice(&0u16.to_le_bytes());
    assert_eq!(decode(&b), Err(DecodeError::BadValue("error code")));
    // private data over the limit
    let b = Request::Reject {
        id: CmId(1),
        private_data: vec![0; MAX_PRIVATE_DATA + 1],
    }
    .encode(1);
    assert_eq!(decode(&b), Err(DecodeError::BadValue("private_data")));
}

#[test]
fn decode_request_refuses_other_directions() {
    let ev = Event::Disconnected { id: CmId(1) }.encode();
    assert_eq!(decode_request(&ev), Err(DecodeError::UnknownKind(0x0205)));
    let req = Request::AllocPd {}.encode(5);
    assert_eq!(decode_request(&req), Ok((5, Request::AllocPd {})));
}

#[test]
fn random_mutations_never_panic() {
    let msgs = all_encoded();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut decoded = 0;
    for _ in 0..50_000 {
        let (bytes, _) = &msgs[next() as usize % msgs.len()];
        let mut b = bytes.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = next() as usize % b.len();
            b[i] = next() as u8;
        }
        if next() % 4 == 0 {
            let n = next() as usize % (b.len() + 1);
            b.truncate(n);
        }
        if decode(&b).is_ok() {
            decoded += 1;
        }
    }
    // Mutations in field bytes still decode: the test exercised the body decoders.
    assert!(decoded > 1000, "{decoded}");
}
