use super::*;
use crate::wqe::{Sge, WqeOpcode};
use crate::{CqeOpcode, CqeStatus};
use std::sync::Arc;

fn wqe(i: u64) -> Wqe {
    let mut w = Wqe::new(
        i,
        WqeOpcode::Write,
        &[Sge {
            lkey: i as u32,
            len: (i as u32).wrapping_mul(3),
            offset: !i,
        }],
    );
    w.remote_addr = i.rotate_left(17);
    w.swap = i ^ 0x5555;
    w
}

#[test]
fn fifo_full_and_wrap() {
    let mem = HeapMemory::new(ring_bytes::<Wqe>(8));
    init_ring::<Wqe, _>(&mem, 0, 8).unwrap();
    let mut p = Producer::<Wqe, _>::attach(&mem, 0, 8).unwrap();
    let mut c = Consumer::<Wqe, _>::attach(&mem, 0, 8).unwrap();
    let mut next_out = 0u64;
    for round in 0..5u64 {
        for i in 0..8 {
            p.push(wqe(round * 8 + i)).unwrap();
        }
        assert_eq!(p.push(wqe(99)), Err(PushError::Full));
        assert_eq!(c.available(), Ok(8));
        for _ in 0..8 {
            assert_eq!(c.pop().unwrap(), Some(wqe(next_out)));
            next_out += 1;
        }
        assert_eq!(c.pop().unwrap(), None);
        assert_eq!(p.free(), Ok(8));
    }
}

#[test]
fn indices_wrap_around_u32() {
    let mem = HeapMemory::new(ring_bytes::<Cqe>(4));
    let start = u32::MAX - 2;
    mem.u32_at(0).unwrap().store(start, Ordering::Relaxed);
    mem.u32_at(64).unwrap().store(start, Ordering::Relaxed);
    let mut p = Producer::<Cqe, _>::attach(&mem, 0, 4).unwrap();
    let mut c = Consumer::<Cqe, _>::attach(&mem, 0, 4).unwrap();
    for i in 0..20u64 {
        let cqe = Cqe::new(i, 7, CqeOpcode::Recv, CqeStatus::Success, i as u32);
        p.push(cqe).unwrap();
        assert_eq!(c.pop().unwrap(), Some(cqe));
    }
    assert_eq!(
        mem.u32_at(0).unwrap().load(Ordering::Relaxed),
        start.wrapping_add(20)
    );
}

#[test]
fn corrupt_indices_are_reported_not_followed() {
    let mem = HeapMemory::new(ring_bytes::<Wqe>(8));
    let mut c = Consumer::<Wqe, _>::attach(&mem, 0, 8).unwrap();
    // A hostile producer claims 9 entries in a ring of 8.
    mem.u32_at(0).unwrap().store(9, Ordering::Relaxed);
    assert_eq!(c.pop(), Err(RingError::Corrupt { head: 9, tail: 0 }));
    // A hostile consumer moves the tail past the head.
    let mem = HeapMemory::new(ring_bytes::<Wqe>(8));
    let mut p = Producer::<Wqe, _>::attach(&mem, 0, 8).unwrap();
    mem.u32_at(64).unwrap().store(1000, Ordering::Relaxed);
    assert!(matches!(p.free(), Err(RingError::Corrupt { .. })));
    for _ in 0..8 {
        p.push(wqe(1)).unwrap_or(());
    }
    assert!(matches!(
        p.push(wqe(1)),
        Err(PushError::Ring(RingError::Corrupt { .. }))
    ));
    // Attaching to a corrupt ring fails too.
    assert!(Producer::<Wqe, _>::attach(&mem, 0, 8).is_err());
}

#[test]
fn bad_sizes_and_places_are_refused() {
    let mem = HeapMemory::new(4096);
    for n in [0, 3, 12, MAX_ENTRIES * 2] {
        assert_eq!(
            Producer::<Cqe, _>::attach(&mem, 0, n).unwrap_err(),
            RingError::BadSize(n)
        );
    }
    assert!(matches!(
        Consumer::<Cqe, _>::attach(&mem, 8, 4),
        Err(RingError::OutOfBounds { .. })
    ));
    assert!(matches!(
        Consumer::<Cqe, _>::attach(&mem, 4096 - 128, 4),
        Err(RingError::OutOfBounds { .. })
    ));
    assert!(matches!(
        Consumer::<Cqe, _>::attach(&mem, usize::MAX - 63, 4),
        Err(RingError::OutOfBounds { .. })
    ));
    let layout = CqLayout {
        offset: 0,
        subs: 100,
        entries: 4,
    };
    assert!(init_cq(&mem, &layout).is_err());
    assert!(CqProducer::attach(&mem, &CqLayout { subs: 2, ..layout }, 2).is_err());
}

#[test]
fn garbage_in_shared_memory_never_panics() {
    // A hostile peer scribbles over the whole ring while we consume: we see errors or
    // entries, never a panic or an out-of-bounds access.
    let mem = Arc::new(HeapMemory::new(ring_bytes::<Wqe>(16)));
    let mut c = Consumer::<Wqe, _>::attach(mem.clone(), 0, 16).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let words = mem.u64s_at(0, mem.len() / 8).unwrap();
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words[(x as usize) % words.len()].store(x, Ordering::Relaxed);
        if let Ok(Some(w)) = c.pop() {
            let _ = w.validate();
        }
    }
}

#[test]
fn threads_stress_spsc_in_order() {
    const N: u64 = 200_000;
    let mem = Arc::new(HeapMemory::new(ring_bytes::<Wqe>(64)));
    init_ring::<Wqe, _>(&*mem, 0, 64).unwrap();
    let mut p = Producer::<Wqe, _>::attach(mem.clone(), 0, 64).unwrap();
    let mut c = Consumer::<Wqe, _>::attach(mem, 0, 64).unwrap();
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < N {
            match p.push(wqe(i)) {
                Ok(()) => i += 1,
                Err(PushError::Full) => std::hint::spin_loop(),
                Err(e) => panic!("{e:?}"),
            }
        }
    });
    let mut expect = 0;
    while expect < N {
        if let Some(w) = c.pop().unwrap() {
            assert_eq!(w, wqe(expect), "entry {expect} torn or out of order");
            expect += 1;
        } else {
            std::hint::spin_loop();
        }
    }
    t.join().unwrap();
    assert_eq!(c.pop().unwrap(), None);
}

#[test]
fn cq_threads_and_armed_notifications() {
    const PER: u64 = 50_000;
    const SUBS: u32 = 3;
    let layout = CqLayout {
        offset: 128,
        subs: SUBS,
        entries: 32,
    };
    let mem = Arc::new(HeapMemory::new(128 + layout.bytes()));
    init_cq(&*mem, &layout).unwrap();
    let mut cq = CqConsumer::attach(mem.clone(), &layout).unwrap();
    let notes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..SUBS)
        .map(|s| {
            let mut p = CqProducer::attach(mem.clone(), &layout, s).unwrap();
            let notes = notes.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while i < PER {
                    let cqe = Cqe::new(i, s, CqeOpcode::Send, CqeStatus::Success, 0);
                    match p.push(cqe) {
                        Ok(armed) => {
                            i += 1;
                            if armed {
                                notes.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(PushError::Full) => std::hint::spin_loop(),
                        Err(e) => panic!("{e:?}"),
                    }
                }
            })
        })
        .collect();
    let mut next = [0u64; SUBS as usize];
    let mut buf = [Cqe::default(); 16];
    let mut arms = 0u64;
    while next.iter().sum::<u64>() < PER * u64::from(SUBS) {
        let n = cq.poll(&mut buf).unwrap();
        for c in &buf[..n] {
            let s = c.qp_num as usize;
            assert_eq!(c.wr_id, next[s], "sub-ring {s} out of order");
            next[s] += 1;
        }
        if n == 0 && arms < 1000 {
            arms += 1;
            let _ = cq.arm().unwrap();
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    // Every notification consumed one arm; never more notifications than arms.
    assert!(notes.load(Ordering::Relaxed) <= arms);
    // After the producers are done: arming an empty CQ reports nothing waiting, and the next
    // push notifies exactly once.
    assert!(!cq.arm().unwrap());
    let mut p = CqProducer::attach(mem.clone(), &layout, 1).unwrap();
    let c = Cqe::new(1, 1, CqeOpcode::Send, CqeStatus::Success, 0);
    assert_eq!(p.push(c), Ok(true));
    assert_eq!(p.push(c), Ok(false));
    assert!(cq.arm().unwrap(), "completions waiting");
}

/// A CQE whose every field follows from `i`, so a torn copy shows.
fn cqe(i: u64) -> Cqe {
    let mut c = Cqe::new(
        i,
        !(i as u32),
        CqeOpcode::Recv,
        CqeStatus::Success,
        i as u32,
    );
    c.imm = i.rotate_left(17) ^ 0x5a5a_5a5a_5a5a_5a5a;
    c
}

/// The way `verbs::Cq::poll` polls: the lock-free probe first, the consumer only when it says
/// a completion may wait. A producer thread pushes through a small ring that wraps many times;
/// every completion arrives once, whole and in order (none lost behind a probe that said
/// empty: the loop would not end), and the probe of an empty CQ says so.
#[test]
fn cq_probe_gated_poll_loses_nothing() {
    const N: u64 = 200_000;
    let layout = CqLayout {
        offset: 0,
        subs: 1,
        entries: 8,
    };
    let mem = Arc::new(HeapMemory::new(layout.bytes()));
    init_cq(&*mem, &layout).unwrap();
    let mut cq = CqConsumer::attach(mem.clone(), &layout).unwrap();
    let probe = cq.probe();
    assert!(!probe.ready(), "fresh CQ");
    let mut p = CqProducer::attach(mem, &layout, 0).unwrap();
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < N {
            match p.push(cqe(i)) {
                Ok(_) => i += 1,
                Err(PushError::Full) => std::hint::spin_loop(),
                Err(e) => panic!("{e:?}"),
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut expect = 0;
    let mut buf = [Cqe::default(); 3];
    let mut empty_polls = 0u64;
    while expect < N {
        if !probe.ready() {
            assert!(std::time::Instant::now() < deadline, "stuck at {expect}");
            std::hint::spin_loop();
            continue;
        }
        let n = cq.poll(&mut buf).unwrap();
        if n == 0 {
            empty_polls += 1;
        }
        for c in &buf[..n] {
            assert_eq!(*c, cqe(expect), "completion {expect} torn or out of order");
            expect += 1;
        }
    }
    t.join().unwrap();
    // With one consumer thread, the probe's yes is never stale.
    assert_eq!(empty_polls, 0, "the probe said ready on an empty CQ");
    assert!(!probe.ready(), "drained CQ");
    assert_eq!(cq.poll(&mut buf).unwrap(), 0);
}

/// The probe looks at every sub-ring, and a clone held by another thread sees what the
/// consumer took.
#[test]
fn cq_probe_sees_every_sub_ring() {
    let layout = CqLayout {
        offset: 64,
        subs: 3,
        entries: 4,
    };
    let mem = Arc::new(HeapMemory::new(64 + layout.bytes()));
    init_cq(&*mem, &layout).unwrap();
    let mut cq = CqConsumer::attach(mem.clone(), &layout).unwrap();
    let probe = cq.probe();
    let mut buf = [Cqe::default(); 4];
    for s in 0..3 {
        let mut p = CqProducer::attach(mem.clone(), &layout, s).unwrap();
        assert!(!probe.ready());
        p.push(cqe(u64::from(s))).unwrap();
        let other = probe.clone();
        assert!(std::thread::spawn(move || other.ready()).join().unwrap());
        assert_eq!(cq.poll(&mut buf).unwrap(), 1);
        assert_eq!(buf[0], cqe(u64::from(s)));
        let other = probe.clone();
        assert!(!std::thread::spawn(move || other.ready()).join().unwrap());
    }
}
