//! A test client speaking raw `abi::ctl` messages on a control socket (shared by the
//! control-socket tests; included with `#[path]`).
#![allow(dead_code, unreachable_pub)]

use abi::ctl::{self, CmId, CqId, ErrorCode, PdId, QpId, Request, Response, SegmentId, access};
use abi::ring::{CqLayout, init_cq, init_ring};
use shm::{HugepagePolicy, Segment, SeqPacket};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// A client speaking raw control messages.
pub struct Raw {
    pub sock: SeqPacket,
    pub next: u32,
    /// Events read while waiting for answers.
    pub events: std::collections::VecDeque<ctl::Event>,
}

impl Raw {
    pub fn connect(path: &Path) -> Raw {
        let start = Instant::now();
        loop {
            match SeqPacket::connect(path) {
                Ok(sock) => {
                    return Raw {
                        sock,
                        next: 1,
                        events: Default::default(),
                    };
                }
                Err(e) if start.elapsed() > Duration::from_secs(20) => {
                    panic!("connect {}: {e}", path.display())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The next CM event, waiting at most `timeout`.
    pub fn event(&mut self, timeout: Duration) -> Option<ctl::Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        let mut buf = vec![0u8; ctl::MAX_MESSAGE];
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.sock.wait_readable(Duration::from_millis(50)).unwrap() {
                continue;
            }
            let m = self.sock.recv(&mut buf).unwrap();
            assert!(m.len > 0, "daemon closed the connection");
            match ctl::decode(&buf[..m.len])
                .expect("daemon sent a bad message")
                .body
            {
                ctl::Body::Event(e) => return Some(e),
                other => panic!("unexpected {other:?}"),
            }
        }
        None
    }

    /// The response to request `id` (events in between are queued).
    pub fn answer(&mut self, id: u32) -> Response {
        let mut buf = vec![0u8; ctl::MAX_MESSAGE];
        loop {
            assert!(
                self.sock.wait_readable(Duration::from_secs(10)).unwrap(),
                "no answer to request {id}"
            );
            let m = self.sock.recv(&mut buf).unwrap();
            assert!(m.len > 0, "daemon closed the connection");
            let msg = ctl::decode(&buf[..m.len]).expect("daemon sent a bad message");
            match msg.body {
                ctl::Body::Response(r) => {
                    assert_eq!(msg.id, id, "answer to another request: {r:?}");
                    return r;
                }
                ctl::Body::Event(e) => self.events.push_back(e),
                ctl::Body::Request(r) => panic!("daemon sent a request {r:?}"),
            }
        }
    }

    pub fn call_fds(&mut self, req: &Request, fds: &[BorrowedFd<'_>]) -> Response {
        let id = self.next;
        self.next += 1;
        self.sock.send(&req.encode(id), fds).unwrap();
        self.answer(id)
    }

    pub fn call(&mut self, req: &Request) -> Response {
        self.call_fds(req, &[])
    }

    /// Send raw bytes; the answer carries the header's id if it could be read, else 0.
    pub fn raw(&mut self, bytes: &[u8], id: u32) -> Response {
        self.sock.send(bytes, &[]).unwrap();
        self.answer(id)
    }

    pub fn hello(&mut self) {
        let r = self.call(&Request::Hello {
            abi_version: abi::ABI_VERSION,
            pid: std::process::id(),
            name: "control-socket-test".into(),
        });
        assert!(matches!(r, Response::Hello { .. }), "{r:?}");
    }
}

#[track_caller]
pub fn expect_err(r: Response, code: ErrorCode, words: &str) {
    match r {
        Response::Error { code: c, message } => {
            assert_eq!(c, code, "{message}");
            assert!(message.contains(words), "{message:?} should say {words:?}");
        }
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

/// What a client that set itself up holds.
pub struct Held {
    pub seg: Segment,
    pub segment: SegmentId,
    pub pd: PdId,
    pub lkey: u32,
    pub rkey: u32,
    pub cq: CqId,
    pub qp: QpId,
    pub cm: CmId,
}

/// Attach a segment, allocate a PD, register an MR, create a CQ and a QP, listen.
pub fn set_up(c: &mut Raw, subs: u32, port: u16) -> Held {
    let seg = Segment::create("ctl-test", 1 << 20, HugepagePolicy::Off).unwrap();
    let layout = CqLayout {
        offset: 0,
        subs,
        entries: 64,
    };
    init_cq(&seg, &layout).unwrap();
    init_ring::<abi::Wqe, _>(&seg, 65536, 64).unwrap();
    init_ring::<abi::RecvWqe, _>(&seg, 131072, 64).unwrap();
    let Response::Segment { segment } = c.call_fds(
        &Request::AttachSegment {
            len: seg.len() as u64,
        },
        &[seg.fd()],
    ) else {
        panic!("attach")
    };
    let Response::Pd { pd } = c.call(&Request::AllocPd {}) else {
        panic!("pd")
    };
    let r = c.call(&Request::RegMr {
        pd,
        segment,
        offset: 262144,
        len: 65536,
        iova: 0,
        access: access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ,
    });
    let Response::Mr { lkey, rkey } = r else {
        panic!("{r:?}")
    };
    let r = c.call(&Request::CreateCq {
        segment,
        offset: 0,
        entries: 64,
        subs,
        channel: false,
    });
    let Response::Cq { cq } = r else {
        panic!("{r:?}")
    };
    let r = c.call(&Request::CreateQp {
        pd,
        send_cq: cq,
        recv_cq: cq,
        segment,
        sq_offset: 65536,
        sq_entries: 64,
        rq_offset: 131072,
        rq_entries: 64,
        sq_sig_all: false,
    });
    let Response::Qp { qp, .. } = r else {
        panic!("{r:?}")
    };
    let Response::CmId { id: cm } = c.call(&Request::CreateCmId {}) else {
        panic!("cm id")
    };
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    let r = c.call(&Request::Listen {
        id: cm,
        addr,
        backlog: 4,
    });
    assert_eq!(r, Response::Done {});
    Held {
        seg,
        segment,
        pd,
        lkey,
        rkey,
        cq,
        qp,
        cm,
    }
}
