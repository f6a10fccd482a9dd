//! The DPDK layer on real virtual devices (root: EAL with `--no-huge`): mbuf chains and
//! external-buffer mbufs sent over a memif pair inside one process, the pin's release callback,
//! read-only rules of `data_mut`, one owner per queue, and the shutdown rules of `dataplane::eal`
//! (an mbuf kept past shutdown keeps its memory).
//!
//! EAL can be initialised once per process, so this binary has a single test that runs the
//! phases in order on one thread (the EAL main thread).

mod common;

use common::root_or_skip;
use dataplane::eal::{Eal, ShutdownOutcome, shutdown_outcome};
use dataplane::extbuf::{AlignedBuf, AttachError, ExtPin, ExtRegion, ExternalMemory};
use dataplane::mbuf::Mbuf;
use dataplane::mempool::{ALLOC_BULK_MAX, Mempool};
use dataplane::port::{Port, PortConfig, Queue};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn port_cfg() -> PortConfig {
    PortConfig {
        rx_queues: 1,
        tx_queues: 1,
        rx_desc: 512,
        tx_desc: 512,
        mtu: 1500,
        promiscuous: false,
    }
}

/// Deterministic test bytes.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Send `pkts` on `tx` and collect what arrives on `rx` (as flat byte vectors).
fn send_and_receive(tx: &mut Queue, rx: &mut Queue, mut pkts: Vec<Mbuf>) -> Vec<Vec<u8>> {
    let want = pkts.len();
    let mut got = Vec::new();
    let mut buf = Vec::new();
    let t0 = Instant::now();
    while got.len() < want && t0.elapsed() < Duration::from_secs(5) {
        if !pkts.is_empty() {
            tx.tx_burst(&mut pkts);
        }
        rx.rx_burst(&mut buf);
        for m in buf.drain(..) {
            let mut v = vec![0u8; m.pkt_len()];
            assert_eq!(m.copy_to(0, &mut v), v.len());
            got.push(v);
        }
    }
    got
}

fn frame(payload_len: usize, seed: u8) -> Vec<u8> {
    // Broadcast Ethernet header, a local ethertype: memif delivers anything.
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.extend(pattern(payload_len, seed));
    f
}

#[test]
fn mbufs_chains_extbufs_and_ownership() {
    if !root_or_skip("mbufs_chains_extbufs_and_ownership") {
        return;
    }
    // Removed when dropped, also when the test fails (dropped after the EAL).
    let (dirs, sock) = common::memif_socket_dir("dpdk-mbuf");
    let mut vdevs = common::memif_pair_vdevs(&sock);
    vdevs.push("net_null0".into());
    let args = common::eal_args("dpdk-mbuf", &vdevs);
    let eal = Eal::init(&args).expect("EAL");
    assert!(Eal::init(&args).is_err(), "EAL initialised twice");
    let pool = Mempool::new(&eal, "t_pool", 4095, 0, 2048 + 128, -1).expect("pool");
    let a = Port::start("net_memif0", &port_cfg(), &pool).expect("port a");
    let b = Port::start("net_memif1", &port_cfg(), &pool).expect("port b");
    let null = Port::start("net_null0", &port_cfg(), &pool).expect("null port");
    for p in [&a, &b] {
        assert!(p.info().is_virtual, "{:?}", p.info());
    }

    // One owner per queue pair.
    let mut qa = a.queue(0).expect("queue a");
    assert_eq!(a.queue(0).expect_err("taken twice").code, libc::EBUSY);
    assert_eq!(a.queue(1).expect_err("no such queue").code, libc::EINVAL);
    let mut qb = b.queue(0).expect("queue b");
    let mut qn = null.queue(0).expect("queue null");
    let t0 = Instant::now();
    while !(qa.link_up() && qb.link_up()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "memif link did not come up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    chains(&pool, &mut qa, &mut qb);
    bulk(&pool);
    writability(&pool);
    ext_buffers(&eal, &pool, &a, &mut qa, &mut qb, &mut qn);

    // Shutdown with an mbuf still out: everything else is dropped, the final check sees it
    // and leaks instead of freeing, so the mbuf stays valid.
    let kept = pool.alloc_copy(b"still here").expect("mbuf");
    drop((qa, qb, qn, a, b, null, pool));
    assert_eq!(shutdown_outcome(), None, "EAL is still held by the test");
    drop(eal);
    assert_eq!(shutdown_outcome(), Some(ShutdownOutcome::MbufsOutstanding));
    assert_eq!(kept.data(), b"still here");
    drop(kept);
    drop(dirs);
}

/// A chain of three segments goes out as one frame with the bytes in order; a received frame
/// larger than one buffer arrives as a chain and linearizes back into one buffer of a pool
/// with a larger data room.
fn chains(pool: &Mempool, qa: &mut Queue, qb: &mut Queue) {
    let f = frame(3000, 7);
    let (h, rest) = f.split_at(14);
    let (p1, p2) = rest.split_at(1000);
    let mut m = pool.alloc_copy(h).expect("head");
    m.chain(pool.alloc_copy(p1).expect("seg1")).expect("chain");
    m.chain(pool.alloc_copy(p2).expect("seg2")).expect("chain");
    assert_eq!(m.nb_segs(), 3);
    assert_eq!(m.pkt_len(), f.len());
    assert_eq!(m.data(), h, "data() is the first segment");
    let lens: Vec<usize> = m.segments().map(|s| s.len()).collect();
    assert_eq!(lens, vec![14, 1000, 2000]);
    assert!(
        m.segments()
            .all(|s| !s.is_external() && s.bytes().is_some())
    );
    let mut mid = [0u8; 20];
    assert_eq!(m.copy_to(1005, &mut mid), 20);
    assert_eq!(&mid[..], &f[1005..1025]);
    // set_len is for single segments only.
    assert!(!m.set_len(10));
    assert!(m.resize(10).is_none());
    assert_eq!((m.nb_segs(), m.pkt_len()), (3, f.len()));
    lengths(pool);

    let got = send_and_receive(qa, qb, vec![m]);
    assert_eq!(got.len(), 1, "the chain arrived as one frame");
    assert_eq!(got[0], f);

    // Receive side: memif hands a 3000-byte frame to a 2 KiB data room as a chain.
    let mut buf = Vec::new();
    let mut sent = vec![pool.alloc_copy(&f[..2000]).expect("m")];
    let tail = pool.alloc_copy(&f[2000..]).expect("m");
    sent[0].chain(tail).expect("chain");
    qa.tx_burst(&mut sent);
    let t0 = Instant::now();
    while buf.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        qb.rx_burst(&mut buf);
    }
    let rx = buf.pop().expect("received");
    assert!(
        rx.nb_segs() > 1,
        "a 3000-byte frame in 2 KiB mbufs is a chain"
    );
    let big = Mempool::new(pool.eal(), "t_big", 63, 0, 4096 + 128, -1).expect("big pool");
    let flat = rx.linearize(&big).expect("fits 4 KiB");
    assert_eq!(flat.nb_segs(), 1);
    assert_eq!(flat.data(), &f[..]);
    assert!(rx.linearize(pool).is_none(), "does not fit 2 KiB");
}

/// `set_len` and `resize` set a single segment's lengths as `append` and `trim` do: growing
/// keeps the bytes before, the frame's room is the buffer past the headroom, a length past it
/// is refused and changes nothing.
fn lengths(pool: &Mempool) {
    let mut m = pool.alloc().expect("mbuf");
    let room = m.data_len() + m.tailroom();
    assert!(room >= 2048, "{room}");
    let b = m.resize(94).expect("room for a header");
    assert_eq!(b.len(), 94);
    b.copy_from_slice(&pattern(94, 3));
    assert_eq!((m.data_len(), m.pkt_len()), (94, 94));
    assert!(m.set_len(66), "shrink");
    assert_eq!(m.data(), &pattern(94, 3)[..66]);
    let f = m.resize(1514).expect("a full frame");
    assert_eq!(&f[..66], &pattern(94, 3)[..66], "grown in place");
    assert_eq!(
        (m.data_len(), m.pkt_len(), m.tailroom()),
        (1514, 1514, room - 1514)
    );
    assert!(m.resize(room + 1).is_none());
    assert!(!m.set_len(usize::from(u16::MAX) + 1));
    assert_eq!(m.data_len(), 1514, "a refused length changes nothing");
    assert!(m.set_len(room));
    assert_eq!(m.tailroom(), 0);
    assert!(m.append(1).is_none(), "append agrees on the room");
    assert!(m.set_len(0));
    assert_eq!(
        m.append(5).map(|b| b.len()),
        Some(5),
        "and appends after it"
    );
    assert_eq!((m.data_len(), m.pkt_len()), (5, 5));
}

/// `alloc_bulk` gives `n` fresh, distinct, empty mbufs or none at all: none for 0 or more
/// than its maximum, none when the pool holds fewer, and what is left is still there.
fn bulk(pool: &Mempool) {
    let mut v = Vec::new();
    assert!(!pool.alloc_bulk(&mut v, 0));
    assert!(!pool.alloc_bulk(&mut v, ALLOC_BULK_MAX + 1));
    assert!(v.is_empty());
    assert!(pool.alloc_bulk(&mut v, 5));
    assert!(pool.alloc_bulk(&mut v, ALLOC_BULK_MAX));
    assert_eq!(v.len(), 5 + ALLOC_BULK_MAX);
    let mut ptrs: Vec<_> = v.iter().map(|m| m.data().as_ptr()).collect();
    ptrs.sort_unstable();
    ptrs.dedup();
    assert_eq!(ptrs.len(), v.len(), "distinct buffers");
    assert!(
        v.iter()
            .all(|m| m.nb_segs() == 1 && m.pkt_len() == 0 && m.is_writable())
    );
    // Drain the pool in bulk: the last request larger than what is left adds nothing.
    while pool.alloc_bulk(&mut v, ALLOC_BULK_MAX) {}
    let n = v.len();
    assert!(!pool.alloc_bulk(&mut v, ALLOC_BULK_MAX));
    assert_eq!(v.len(), n);
    let mut rest = Vec::new();
    while let Some(m) = pool.alloc() {
        rest.push(m);
    }
    assert!(!pool.alloc_bulk(&mut v, 1), "empty");
    drop((v, rest));
    assert!(
        pool.alloc_bulk(&mut Vec::new(), ALLOC_BULK_MAX),
        "freed back"
    );
}

/// `data_mut`/`append` refuse buffers that are shared (refcount > 1).
#[allow(unsafe_code)]
fn writability(pool: &Mempool) {
    let mut m = pool.alloc_copy(&[1, 2, 3]).expect("mbuf");
    assert!(m.is_writable());
    m.data_mut().expect("own buffer")[0] = 9;
    assert_eq!(m.data(), &[9, 2, 3]);
    let raw = m.into_raw();
    // SAFETY: raw is a valid mbuf we own; a second reference simulates a shared buffer (as
    // rte_pktmbuf_clone makes); it is dropped again below before the mbuf is freed.
    unsafe { dpdk_sys::shim_mbuf_refcnt_update(raw, 1) };
    // SAFETY: still one owner of the Rust handle; the extra reference is ours.
    let mut m = unsafe { Mbuf::from_raw(std::ptr::NonNull::new(raw).expect("non-null")) };
    assert!(!m.is_writable());
    assert!(m.data_mut().is_none(), "shared buffer must be read-only");
    assert!(m.append(1).is_none());
    assert!(!m.set_len(4), "no growing a shared buffer");
    assert!(m.resize(3).is_none(), "nor writing it");
    assert_eq!(m.tailroom(), 0);
    assert_eq!(m.data(), &[9, 2, 3], "still readable");
    assert!(m.adj(1), "offsets may move");
    let raw = m.into_raw();
    // SAFETY: drop the extra reference taken above; raw stays valid (one reference left).
    unsafe { dpdk_sys::shim_mbuf_refcnt_update(raw, -1) };
    // SAFETY: the one remaining reference, owned by the new handle.
    let mut m = unsafe { Mbuf::from_raw(std::ptr::NonNull::new(raw).expect("non-null")) };
    assert!(m.data_mut().is_some());
}

/// Payload attached from external memory: sent over memif with the header in front, bytes
/// exact; the pin's release runs once the pin is gone and the NIC freed every attached mbuf,
/// not before; bad ranges are refused; devices without DMA need no mapping.
fn ext_buffers(
    eal: &Eal,
    pool: &Mempool,
    a: &Port,
    qa: &mut Queue,
    qb: &mut Queue,
    qn: &mut Queue,
) {
    let payload = pattern(3 * 4096 + 100, 3);
    let mem: Arc<dyn ExternalMemory> = Arc::new(AlignedBuf::from_bytes(&payload));
    let region = ExtRegion::register(eal, mem, &[a]).expect("register");
    assert!(!region.is_dma_mapped(), "virtual devices need no DMA map");
    assert!(region.len() >= payload.len());

    let released = Arc::new(AtomicUsize::new(0));
    let r = released.clone();
    let pin = ExtPin::new(&region, move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(
        pin.attach(pool, 0, 0).expect_err("empty"),
        AttachError::BadRange
    );
    assert_eq!(
        pin.attach(pool, region.len() - 10, 11)
            .expect_err("past the end"),
        AttachError::BadRange
    );
    assert_eq!(
        pin.attach(pool, 0, 70_000).expect_err("too long"),
        AttachError::BadRange
    );

    // Header (pool memory) + two pieces of the region, one across a page boundary.
    let hdr = frame(0, 0);
    let mut pkts = Vec::new();
    let mut expect = Vec::new();
    for (off, len) in [(100usize, 1400usize), (4000, 1200)] {
        let mut m = pool.alloc_copy(&hdr).expect("header");
        m.chain_ext(pin.attach(pool, off, len).expect("attach"))
            .expect("chain");
        assert_eq!(m.pkt_len(), hdr.len() + len);
        let segs: Vec<bool> = m.segments().map(|s| s.is_external()).collect();
        assert_eq!(segs, vec![false, true]);
        assert!(m.segments().nth(1).expect("seg").bytes().is_none());
        assert!(m.data_mut().is_some(), "the header stays writable");
        let mut e = hdr.clone();
        e.extend_from_slice(&payload[off..off + len]);
        expect.push(e);
        pkts.push(m);
    }
    assert_eq!(pin.attached(), 2);
    let got = send_and_receive(qa, qb, pkts);
    assert_eq!(got, expect, "bytes on the wire are the region's");
    // memif copied and freed the mbufs inside tx_burst; the pin still holds the bytes.
    assert_eq!(pin.attached(), 0);
    assert_eq!(released.load(Ordering::SeqCst), 0, "pin still alive");
    drop(pin);
    assert_eq!(released.load(Ordering::SeqCst), 1);

    // Pin dropped first: the release waits for the last mbuf.
    let released2 = Arc::new(AtomicUsize::new(0));
    let r = released2.clone();
    let pin = ExtPin::new(&region, move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    let mut m = pool.alloc_copy(&hdr).expect("header");
    m.chain_ext(pin.attach(pool, 8192, 64).expect("attach"))
        .expect("chain");
    let loose = pin.attach(pool, 0, 10).expect("attach");
    drop(pin);
    assert_eq!(released2.load(Ordering::SeqCst), 0, "two mbufs still out");
    drop(loose);
    assert_eq!(released2.load(Ordering::SeqCst), 0, "one mbuf still out");
    // net_null frees what it is given: the NIC "completes" it.
    let mut v = vec![m];
    let t0 = Instant::now();
    while !v.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        qn.tx_burst(&mut v);
    }
    assert!(v.is_empty());
    assert_eq!(
        released2.load(Ordering::SeqCst),
        1,
        "released by the NIC's free"
    );
    assert_eq!(Arc::strong_count(&region), 1, "pins gave their region back");
    drop(region);
}
