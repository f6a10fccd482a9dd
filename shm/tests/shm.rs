//! Segments shared between two mappings (as client and daemon do), fds over SEQPACKET, eventfd.

use abi::ring::{Consumer, Producer, ring_bytes};
use abi::{Wqe, WqeOpcode};
use shm::{Backing, EventFd, HugepagePolicy, Segment, SegmentError, SeqPacket, SeqPacketListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn segment_passed_over_scm_rights_is_the_same_memory() {
    let seg = Segment::create("test-shm", 100_000, HugepagePolicy::Off).unwrap();
    assert_eq!(seg.backing(), Backing::Plain);
    assert_eq!(seg.len(), 102_400);
    let (a, b) = SeqPacket::pair().unwrap();
    a.send(b"attach", &[seg.fd()]).unwrap();
    let mut buf = [0u8; 64];
    let m = b.recv(&mut buf).unwrap();
    assert_eq!(&buf[..m.len], b"attach");
    assert_eq!(m.fds.len(), 1);
    assert!(!m.truncated && !m.fds_truncated);
    let fd = m.fds.into_iter().next().unwrap();
    let other = Segment::from_fd(fd, seg.len() as u64).unwrap();
    // Bytes written through one mapping are read through the other.
    assert!(seg.write_at(5000, b"hello over memfd"));
    let mut got = [0u8; 16];
    assert!(other.read_at(5000, &mut got));
    assert_eq!(&got, b"hello over memfd");
    assert!(
        !other.read_at(other.len() as u64 - 4, &mut got),
        "out of range read refused"
    );
    // A ring produced in one mapping is consumed in the other.
    let n = 64;
    let mut p = Producer::<Wqe, _>::attach(Arc::new(seg), 0, n).unwrap();
    let mut c = Consumer::<Wqe, _>::attach(Arc::new(other), 0, n).unwrap();
    for i in 0..200u64 {
        p.push(Wqe::new(i, WqeOpcode::Send, &[])).unwrap();
        assert_eq!(c.pop().unwrap().unwrap().wr_id, i);
    }
    assert!(ring_bytes::<Wqe>(n) < 102_400);
}

#[test]
fn hugepages_when_free_else_plain() {
    let seg = Segment::create("test-huge", 3 << 20, HugepagePolicy::Auto).unwrap();
    if shm::free_hugepage_bytes() >= 4 << 20 {
        // The kernel may still refuse (another process took them): then plain is right too.
        if seg.backing() == Backing::Hugepages {
            assert_eq!(seg.len(), 4 << 20);
        }
    } else {
        assert_eq!(seg.backing(), Backing::Plain);
    }
    // Attaching reports the same backing.
    let fd: OwnedFd = seg.fd().try_clone_to_owned().unwrap();
    let other = Segment::from_fd(fd, seg.len() as u64).unwrap();
    assert_eq!(other.backing(), seg.backing());
    println!("3 MiB segment backed by {:?}", seg.backing());
}

#[test]
fn unsealed_or_wrong_size_fds_are_refused() {
    let seg = Segment::create("test-size", 8192, HugepagePolicy::Off).unwrap();
    let fd = seg.fd().try_clone_to_owned().unwrap();
    assert!(matches!(
        Segment::from_fd(fd, 4096),
        Err(SegmentError::SizeMismatch {
            expected: 4096,
            actual: 8192
        })
    ));
    // A plain file (or an unsealed memfd) could be truncated under the daemon: refused.
    let f = std::fs::File::open("/proc/self/exe").unwrap();
    assert!(matches!(
        Segment::from_fd(f.into(), 8192),
        Err(SegmentError::NotSealed)
    ));
    let fd = seg.fd().try_clone_to_owned().unwrap();
    assert!(matches!(
        Segment::from_fd(fd, 0),
        Err(SegmentError::BadSize(0))
    ));
}

#[test]
fn listener_accepts_and_removes_its_path() {
    let path = std::env::temp_dir().join(format!("shm-test-{}.sock", std::process::id()));
    let l = SeqPacketListener::bind(&path).unwrap();
    let c = SeqPacket::connect(&path).unwrap();
    assert!(l.wait_readable(Duration::from_secs(5)).unwrap());
    let s = l.accept().unwrap();
    // A second daemon on the same path is refused (its probe connection is then pending
    // on ours and closes at once, as a client that leaves).
    assert!(matches!(
        SeqPacketListener::bind(&path).map(|_| ()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse
    ));
    assert_eq!(s.peer_credentials().unwrap().pid, std::process::id() as i32);
    // Datagram boundaries are kept; an oversize datagram is reported truncated.
    c.send(&[1u8; 100], &[]).unwrap();
    c.send(&[2u8; 10], &[]).unwrap();
    let mut small = [0u8; 50];
    let m = s.recv(&mut small).unwrap();
    assert!(m.truncated && m.len == 50, "{m:?}");
    let m = s.recv(&mut small).unwrap();
    assert_eq!((m.len, m.truncated, small[0]), (10, false, 2));
    // Five fds are more than MAX_FDS: the sender refuses.
    let e = EventFd::new(true).unwrap();
    let fds = [e.as_fd(), e.as_fd(), e.as_fd(), e.as_fd(), e.as_fd()];
    assert!(c.send(b"x", &fds).is_err());
    drop(c);
    let m = s.recv(&mut small).unwrap();
    assert_eq!(m.len, 0, "peer closed");
    drop(l);
    assert!(!path.exists());
}

#[test]
fn eventfd_signals_and_is_checked() {
    let e = EventFd::new(true).unwrap();
    assert!(e.read().is_err(), "nothing yet");
    e.signal(1).unwrap();
    e.signal(2).unwrap();
    assert_eq!(e.read().unwrap(), 3);
    let (a, b) = SeqPacket::pair().unwrap();
    a.send(b"cq", &[e.as_fd()]).unwrap();
    let mut buf = [0u8; 8];
    let m = b.recv(&mut buf).unwrap();
    let got = EventFd::from_fd(m.fds.into_iter().next().unwrap()).unwrap();
    got.signal(5).unwrap();
    assert_eq!(e.read().unwrap(), 5);
    // A socket is not an eventfd.
    let not: OwnedFd = a.as_fd().try_clone_to_owned().unwrap();
    assert!(EventFd::from_fd(not).is_err());
}
