//! net_memif's connection teardown against bursts on another thread (root: EAL with
//! `--no-huge`). DPDK 22.11's memif tears a connection down on the EAL interrupt thread
//! (`memif_disconnect`: the connected flag cleared, then the queues' eventfds closed and the
//! shared rings and buffers unmapped) without waiting for a burst in progress, which then reads
//! unmapped memory: the SIGSEGV an `iwarp-perf` run once ended with when its peer exited first.
//! `dataplane::port` holds memif's teardown lock around every burst (`BurstLock`).
//!
//! One process, a memif pair: a thread bursts on the server port without pause (full bursts of
//! 1500-byte frames, so it is inside the driver's copy loops most of the time) while the main
//! thread stops and starts the client port, so the server's interrupt thread tears its side of
//! the connection down (and sets it up again) under the bursts, over and over. The process must
//! survive every cycle, and frames must still cross afterwards, byte for byte.
//! `IWARP_MEMIF_UNGUARDED=1` runs the same without the lock (to watch the race; expect a crash
//! sooner or later).

mod common;

use common::root_or_skip;
use dataplane::eal::Eal;
use dataplane::mbuf::Mbuf;
use dataplane::mempool::Mempool;
use dataplane::port::{Port, PortConfig, Queue};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Stop/start cycles of the client port.
const CYCLES: u32 = 150;

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

fn frame(len: usize, seed: u8) -> Vec<u8> {
    // Broadcast Ethernet header, a local ethertype: memif delivers anything.
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    f
}

fn wait_link(qa: &Queue, qb: &Queue) -> bool {
    let t0 = Instant::now();
    while !(qa.link_up() && qb.link_up()) {
        if t0.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Burst on `q` until `stop`: full TX bursts and RX bursts back to back.
fn hammer(pool: Mempool, mut q: Queue, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> Queue {
    let f = frame(1486, 7);
    let mut tx: Vec<Mbuf> = Vec::new();
    let mut rx: Vec<Mbuf> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        while tx.len() < 32 {
            match pool.alloc_copy(&f) {
                Some(m) => tx.push(m),
                None => break,
            }
        }
        let n = q.tx_burst(&mut tx);
        sent.fetch_add(n as u64, Ordering::Relaxed);
        q.rx_burst(&mut rx);
        rx.clear();
    }
    q
}

fn stop_start(port: &Port) {
    let id = port.info().id;
    // SAFETY: a started port whose only queue is owned by this thread, which does not burst
    // on it meanwhile; stop then start is the documented way to bounce a port.
    unsafe {
        assert_eq!(dpdk_sys::rte_eth_dev_stop(id), 0, "stop");
        assert_eq!(dpdk_sys::rte_eth_dev_start(id), 0, "start");
    }
}

#[test]
fn bursts_survive_the_peer_tearing_the_connection_down() {
    if !root_or_skip("bursts_survive_the_peer_tearing_the_connection_down") {
        return;
    }
    // Removed when dropped, also when the test fails (dropped after the EAL).
    let (dirs, sock) = common::memif_socket_dir("memif-down");
    let vdevs = common::memif_pair_vdevs(&sock);
    let args = common::eal_args("memif-down", &vdevs);
    let eal = Eal::init(&args).expect("EAL");
    let pool = Mempool::new(&eal, "t_pool", 8191, 0, 2048 + 128, -1).expect("pool");
    let a = Port::start("net_memif0", &port_cfg(), &pool).expect("port a");
    let b = Port::start("net_memif1", &port_cfg(), &pool).expect("port b");
    let unguarded = std::env::var_os("IWARP_MEMIF_UNGUARDED").is_some_and(|v| v == "1");
    if !unguarded {
        // This DPDK is 22.11 (the project's dependency): the lock must be found.
        assert!(
            a.burst_guarded() && b.burst_guarded(),
            "net_memif's teardown lock not found"
        );
    }
    let qa = a.queue(0).expect("queue a");
    let mut qb = b.queue(0).expect("queue b");
    assert!(wait_link(&qa, &qb), "memif link did not come up");

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let t = {
        let (pool, stop, sent) = (pool.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || hammer(pool, qa, stop, sent))
    };
    let mut rx = Vec::new();
    for cycle in 0..CYCLES {
        // Let frames flow (the client drains what the server sends), then bounce the client:
        // its stop sends memif's disconnect, which the server's interrupt thread acts on.
        let before = sent.load(Ordering::Relaxed);
        let t0 = Instant::now();
        while sent.load(Ordering::Relaxed) < before + 64 && t0.elapsed() < Duration::from_secs(5) {
            qb.rx_burst(&mut rx);
            rx.clear();
        }
        stop_start(&b);
        let t0 = Instant::now();
        while !qb.link_up() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "cycle {cycle}: memif did not reconnect"
            );
            qb.rx_burst(&mut rx);
            rx.clear();
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut qa = t.join().expect("burst thread");
    assert!(wait_link(&qa, &qb), "memif link down after the cycles");
    // Drain what is in flight, then frames must still cross intact.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(200) {
        qb.rx_burst(&mut rx);
        rx.clear();
    }
    let want: Vec<Vec<u8>> = (0..16).map(|i| frame(100 + i * 80, i as u8)).collect();
    let mut pkts: Vec<Mbuf> = want
        .iter()
        .map(|f| pool.alloc_copy(f).expect("mbuf"))
        .collect();
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < want.len() && t0.elapsed() < Duration::from_secs(5) {
        if !pkts.is_empty() {
            qa.tx_burst(&mut pkts);
        }
        qb.rx_burst(&mut rx);
        for m in rx.drain(..) {
            let mut v = vec![0u8; m.pkt_len()];
            assert_eq!(m.copy_to(0, &mut v), v.len());
            got.push(v);
        }
    }
    assert_eq!(got, want, "frames after {CYCLES} teardowns");
    drop((qa, qb, a, b, pool));
    drop(eal);
    drop(dirs);
}
