//! Issue #4 benchmark, end to end through the QP: `Qp::handle_stream` on a tagged RDMA Write
//! stream (MPA deframe + CRC32c check + DDP/RDMAP header parse + STag/PD/rights/bounds check =
//! placement decision), one FPDU per call as TCP segments arrive, for 1440-octet and
//! 8940-octet FPDUs. Two placers: `record` records each placement (region, offset, length)
//! and copies nothing; `copy` copies the payload into a `Vec`. Plus the CRC32c candidates at
//! the same sizes in the same run. With CRC on, the QP path runs once per CRC32c implementation
//! (`netcore::crc::set_impl`), so both are measured on the CPU at hand; the bench first prints
//! what `netcore::crc::calibrate` would choose here.
//!
//! Run: `cargo bench -p iwarp --bench qp_rx`. Throughput is in bytes of TCP payload (whole
//! FPDUs); FPDUs/s = bytes/s / FPDU size (every FPDU of the stream has exactly that size).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use iwarp::error::AccessError;
use iwarp::rdmap::{Qp, QpConfig, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, AtomicOp, MemoryTable, MrHandle, MrInfo, PdId, Placer, Stag};
use iwarp::testing::{VecMemory, test_now};
use netcore::crc::{self, Crc32c, CrcImpl, candidates, crc32c};

const PD: PdId = PdId(1);
/// Payload octets per FPDU after the 14-octet tagged DDP header, for FPDU = 2 + 14 + payload
/// + 4 (no pad: 2 + 14 + payload is a multiple of 4).
fn payload_per_fpdu(fpdu: usize) -> usize {
    fpdu - 2 - 14 - 4
}

/// One registered sink region; placements are recorded or copied.
struct SinkMem {
    info: MrInfo,
    copy: bool,
    bytes: Vec<u8>,
    placements: u64,
    placed: u64,
    last: (MrHandle, u64),
}

impl MemoryTable for SinkMem {
    fn lookup(&self, stag: Stag) -> Option<MrInfo> {
        (stag == self.info.stag).then_some(self.info)
    }
    fn by_handle(&self, mr: MrHandle) -> Option<MrInfo> {
        (mr == self.info.handle).then_some(self.info)
    }
    fn invalidate(&mut self, _stag: Stag) -> Result<(), AccessError> {
        Err(AccessError::InvalidStag)
    }
}

impl Placer for SinkMem {
    fn place(&mut self, mr: MrHandle, offset: u64, data: &[u8], crc: Option<&mut Crc32c>) {
        if let Some(c) = crc {
            c.update(data);
        }
        self.placements += 1;
        self.placed += data.len() as u64;
        self.last = (mr, offset);
        if self.copy {
            let o = offset as usize;
            self.bytes[o..o + data.len()].copy_from_slice(data);
        }
    }
    fn read(&self, _mr: MrHandle, _offset: u64, _dst: &mut [u8]) {}
    fn atomic(&mut self, _mr: MrHandle, _offset: u64, _op: AtomicOp) -> u64 {
        0
    }
}

/// FPDUs of one RDMA Write of `n` FPDUs of exactly `fpdu` octets, built by a sending QP.
fn write_stream(fpdu: usize, n: usize, crc: bool) -> (Vec<Vec<u8>>, MrInfo) {
    let len = payload_per_fpdu(fpdu) * n;
    let mut tx_mem = VecMemory::new(1);
    let src = tx_mem.register(PD, Access::LOCAL_READ | Access::LOCAL_WRITE, 0, len);
    tx_mem.bytes_mut(src.handle).fill(0x5a);
    // The receiver's region: same STag on both sides (the sink is what matters).
    let mut rx_mem = VecMemory::new(2);
    let sink = rx_mem.register(
        PD,
        Access::REMOTE_WRITE | Access::LOCAL_READ,
        0x10_0000,
        len,
    );
    let cfg = QpConfig {
        pd: PD,
        crc,
        ..Default::default()
    };
    let mut qp = Qp::new(cfg);
    qp.establish();
    let mut wr = WorkRequest::new(
        1,
        WrOpcode::Write,
        vec![Sge {
            mr: src.handle,
            offset: 0,
            len: len as u32,
        }],
    );
    wr.remote_stag = sink.stag;
    wr.remote_to = 0x10_0000;
    qp.post_send(wr).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; fpdu];
    while let Some(k) = qp.poll_fpdu(test_now(), fpdu, &mut tx_mem, &mut buf) {
        assert_eq!(k, fpdu, "every FPDU is exactly {fpdu} octets");
        out.push(buf[..k].to_vec());
    }
    assert_eq!(out.len(), n);
    (out, sink)
}

fn bench_qp_rx(c: &mut Criterion) {
    let mut g = c.benchmark_group("qp_rx_write");
    for (fpdu, n) in [(1440usize, 700usize), (8940, 112)] {
        let cases = [
            (Some(CrcImpl::Crc32cCrate), false),
            (Some(CrcImpl::CrcFast), false),
            (Some(CrcImpl::Crc32cCrate), true),
            (Some(CrcImpl::CrcFast), true),
            (None, false),
        ];
        for (imp, copy) in cases {
            let crc = imp.is_some();
            if let Some(imp) = imp {
                crc::set_impl(imp);
            }
            let (fpdus, sink) = write_stream(fpdu, n, crc);
            let total: usize = fpdus.iter().map(Vec::len).sum();
            let mut mem = SinkMem {
                info: sink,
                copy,
                bytes: vec![0; sink.len as usize],
                placements: 0,
                placed: 0,
                last: (sink.handle, 0),
            };
            let mut qp = Qp::new(QpConfig {
                pd: PD,
                crc,
                ..Default::default()
            });
            qp.establish();
            g.throughput(Throughput::Bytes(total as u64));
            let id = format!(
                "{fpdu}B_crc_{}_{}",
                imp.map_or("off", CrcImpl::name),
                if copy { "copy" } else { "record" }
            );
            g.bench_function(BenchmarkId::from_parameter(&id), |b| {
                b.iter(|| {
                    let now = test_now();
                    for f in &fpdus {
                        let used = qp.handle_stream(now, &mut mem, black_box(f));
                        debug_assert_eq!(used, f.len());
                    }
                    black_box(mem.last)
                })
            });
            // The same stream was placed every iteration: no error, every payload octet placed
            // (unless a name filter skipped this case).
            assert!(qp.local_error().is_none(), "{id}: {:?}", qp.local_error());
            assert_eq!(mem.placed % (payload_per_fpdu(fpdu) * n) as u64, 0);
            if mem.placements == 0 {
                continue;
            }
            assert!(mem.placements >= n as u64);
            if copy {
                assert!(mem.bytes.iter().all(|&b| b == 0x5a));
            }
        }
    }
    g.finish();
}

// A benchmark binary, not the sans-IO library: it may read the clock to drive the calibration.
#[allow(clippy::disallowed_methods)]
fn bench_crc(c: &mut Criterion) {
    let t0 = std::time::Instant::now();
    let cal = crc::calibrate(|| t0.elapsed().as_nanos() as u64);
    println!("calibration here: {}", cal.summary());
    crc::set_impl(cal.best);
    let mut g = c.benchmark_group("crc32c");
    for len in [1440usize, 8940] {
        let data: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(
            BenchmarkId::new(format!("netcore_{}", cal.best), len),
            &data,
            |b, d| b.iter(|| crc32c(black_box(d))),
        );
        g.bench_with_input(BenchmarkId::new("crc32c_crate", len), &data, |b, d| {
            b.iter(|| candidates::crc32c_crate(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("crc_fast", len), &data, |b, d| {
            b.iter(|| candidates::crc_fast(black_box(d)))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_qp_rx, bench_crc
}
criterion_main!(benches);
