//! Model checks of the rings with loom: `cargo test -p abi --features loom --release --test loom`
//! (run by `make test`). Each test explores every interleaving (bounded by loom's preemption
//! bound) of a producer and a consumer on a tiny ring, so a wrong ordering (a Relaxed where
//! Release/Acquire is needed, a missing fence in the CQ arm protocol) shows up as a failed
//! assertion or a torn entry.
#![cfg(feature = "loom")]

use abi::ring::{
    Consumer, CqConsumer, CqLayout, CqProducer, LoomMemory, Producer, PushError, init_cq,
    ring_bytes,
};
use abi::{Cqe, CqeOpcode, CqeStatus, Wqe, WqeOpcode};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use std::sync::Arc;

fn wqe(i: u64) -> Wqe {
    let mut w = Wqe::new(i, WqeOpcode::Send, &[]);
    w.remote_addr = !i;
    w.swap = i * 3;
    w
}

type Mem = Arc<LoomMemory>;

/// A CQ of `subs` sub-rings of 2 entries in loom memory, initialized, and its consumer.
fn cq(subs: u32) -> (Mem, CqLayout, CqConsumer<Mem>) {
    let layout = CqLayout {
        offset: 0,
        subs,
        entries: 2,
    };
    let mem = Arc::new(LoomMemory::new(layout.bytes()));
    init_cq(&mem, &layout).unwrap();
    let c = CqConsumer::attach(mem.clone(), &layout).unwrap();
    (mem, layout, c)
}

/// A CQ of one sub-ring: its producer and its consumer.
fn cq_one() -> (CqProducer<Mem>, CqConsumer<Mem>) {
    let (mem, layout, c) = cq(1);
    (CqProducer::attach(mem, &layout, 0).unwrap(), c)
}

/// Entries arrive whole and in order through a ring of 2 that wraps.
#[test]
fn spsc_entries_whole_and_in_order() {
    loom::model(|| {
        let mem = Arc::new(LoomMemory::new(ring_bytes::<Wqe>(2)));
        let mut p = Producer::<Wqe, _>::attach(mem.clone(), 0, 2).unwrap();
        let mut c = Consumer::<Wqe, _>::attach(mem, 0, 2).unwrap();
        const N: u64 = 3;
        let t = thread::spawn(move || {
            let mut i = 0;
            while i < N {
                match p.push(wqe(i)) {
                    Ok(()) => i += 1,
                    Err(PushError::Full) => thread::yield_now(),
                    Err(e) => panic!("{e:?}"),
                }
            }
        });
        let mut next = 0;
        while next < N {
            match c.pop().unwrap() {
                Some(w) => {
                    assert_eq!(w, wqe(next));
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(c.pop().unwrap(), None);
    });
}

/// The arm/notify protocol never loses a wake-up: after the consumer arms and finds nothing,
/// a later push must report `armed` (so the eventfd is written).
#[test]
fn cq_arm_never_misses_a_completion() {
    loom::model(|| {
        let (mut p, mut c) = cq_one();
        let notified = Arc::new(AtomicBool::new(false));
        let n2 = notified.clone();
        let t = thread::spawn(move || {
            let cqe = Cqe::new(1, 1, CqeOpcode::Recv, CqeStatus::Success, 4);
            if p.push(cqe).unwrap() {
                n2.store(true, Ordering::SeqCst);
            }
        });
        let waiting = c.arm().unwrap();
        t.join().unwrap();
        // Either the consumer saw the completion when arming, or the producer saw the flag.
        assert!(
            waiting || notified.load(Ordering::SeqCst),
            "lost wake-up: armed, nothing waiting, producer did not notify"
        );
        let mut buf = [Cqe::default(); 2];
        assert_eq!(c.poll(&mut buf).unwrap(), 1);
        assert_eq!(buf[0].wr_id, 1);
    });
}

/// Two dataplane threads on their own sub-rings, one client: every completion arrives once.
#[test]
fn cq_two_producers_one_consumer() {
    loom::model(|| {
        let (mem, layout, mut c) = cq(2);
        let ts: Vec<_> = (0..2u32)
            .map(|s| {
                let mut p = CqProducer::attach(mem.clone(), &layout, s).unwrap();
                thread::spawn(move || {
                    let cqe = Cqe::new(u64::from(s), s, CqeOpcode::Send, CqeStatus::Success, 0);
                    p.push(cqe).unwrap();
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        let mut buf = [Cqe::default(); 4];
        let n = c.poll(&mut buf).unwrap();
        assert_eq!(n, 2);
        let mut ids: Vec<u64> = buf[..n].iter().map(|c| c.wr_id).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1]);
    });
}

/// The lock-free probe of `verbs::Cq::poll`: a completion it reports is found whole by the
/// poll that follows, it never hides one for good (the loop ends), and once the consumer took
/// everything it reports an empty CQ.
#[test]
fn cq_probe_then_poll() {
    loom::model(|| {
        let (mut p, mut c) = cq_one();
        let probe = c.probe();
        let cqe = |i: u64| {
            let mut e = Cqe::new(i, !(i as u32), CqeOpcode::Recv, CqeStatus::Success, 7);
            e.imm = !i;
            e
        };
        let t = thread::spawn(move || {
            p.push(cqe(1)).unwrap();
            p.push(cqe(2)).unwrap();
        });
        let mut next = 1;
        let mut buf = [Cqe::default(); 2];
        while next <= 2 {
            if !probe.ready() {
                thread::yield_now();
                continue;
            }
            let n = c.poll(&mut buf).unwrap();
            assert!(n > 0, "the probe said ready, the poll found nothing");
            for e in &buf[..n] {
                assert_eq!(*e, cqe(next), "torn or out of order");
                next += 1;
            }
        }
        t.join().unwrap();
        assert!(!probe.ready());
    });
}
