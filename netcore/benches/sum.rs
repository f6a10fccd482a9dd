//! The RFC 1071 ones-complement sum kernels (`copycrc::SumKernel`) against the portable loop
//! (`netcore::csum::portable`, `tcp::wire`'s before them: eight 64-bit accumulators,
//! auto-vectorized, AVX2 chosen at run time by `multiversion`), at a 1448-byte TCP payload and other sizes, three ways:
//!
//! - `l1`: the same bytes summed again and again (in L1);
//! - `l2`: each call a different 1448-byte segment of 128 (~256 KiB, as a receive burst's
//!   frames after the device's copy: in L2, not L1);
//! - `written`: the bytes copied into the buffer just before the sum (the sender's sum of the
//!   payload it just copied into the frame: the loads meet stores still in flight).
//!
//! The buffers start 2 bytes past a 64-byte boundary, as a TCP payload does in a frame whose
//! Ethernet header starts on one (14 + 20 + 32 bytes of headers), unless the id says `al0`.
//!
//! `cargo bench -p netcore --bench sum`

use copycrc::SumKernel;
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use netcore::csum::portable;

/// A sum implementation.
type SumFn = fn(&[u8]) -> u16;

/// The candidates: the portable loop and every kernel this CPU runs.
fn candidates() -> Vec<(&'static str, SumFn)> {
    let mut c: Vec<(&'static str, SumFn)> = vec![("portable", portable)];
    for k in SumKernel::ALL.into_iter().filter(|k| k.available()) {
        let f: SumFn = match k {
            SumKernel::Avx512 => |d| SumKernel::Avx512.sum(d).unwrap_or(0),
            SumKernel::Avx2 => |d| SumKernel::Avx2.sum(d).unwrap_or(0),
        };
        c.push((k.name(), f));
    }
    c
}

/// Segments of the `l2` case and their stride.
const SEGS: usize = 128;
const STRIDE: usize = 2048;
/// Where a payload starts past a 64-byte boundary.
const PAYLOAD_AT: usize = 2;

fn sums(c: &mut Criterion) {
    let mut g = c.benchmark_group("ones_sum");
    g.sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    let mut buf = vec![0u8; SEGS * STRIDE + 4096];
    let base = buf.as_ptr().align_offset(4096);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0];
    }
    let src: Vec<u8> = buf[base..base + 1448].to_vec();
    for (name, f) in candidates() {
        for (len, at) in [
            (64, PAYLOAD_AT),
            (512, PAYLOAD_AT),
            (1448, PAYLOAD_AT),
            (1448, 0),
            (8948, PAYLOAD_AT),
            (65536, 0),
        ] {
            let d = &buf[base + at..base + at + len];
            g.throughput(Throughput::Bytes(len as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("l1-al{at}/{name}"), len),
                d,
                |b, d| b.iter(|| f(black_box(d))),
            );
        }
        let mut i = 0;
        g.throughput(Throughput::Bytes(1448));
        g.bench_function(
            BenchmarkId::new(format!("l2-al{PAYLOAD_AT}/{name}"), 1448),
            |b| {
                b.iter(|| {
                    let at = next_payload(&mut i, base);
                    f(black_box(&buf[at..at + 1448]))
                })
            },
        );
        let mut j = 0;
        g.bench_function(
            BenchmarkId::new(format!("written-al{PAYLOAD_AT}/{name}"), 1448),
            |b| {
                b.iter(|| {
                    let at = next_payload(&mut j, base);
                    let d = &mut buf[at..at + 1448];
                    d.copy_from_slice(black_box(&src));
                    f(black_box(d))
                })
            },
        );
    }
    // The `written` case's copy alone, to subtract.
    let mut j = 0;
    g.bench_function(
        BenchmarkId::new(format!("written-al{PAYLOAD_AT}/copy-only"), 1448),
        |b| {
            b.iter(|| {
                let at = next_payload(&mut j, base);
                let d = &mut buf[at..at + 1448];
                d.copy_from_slice(black_box(&src));
                black_box(d);
            })
        },
    );
    g.finish();
}

/// The offset of the next segment's payload: segment `*i` advanced by 37 (of `SEGS`, so
/// consecutive calls do not walk memory in order).
fn next_payload(i: &mut usize, base: usize) -> usize {
    *i = (*i + 37) % SEGS;
    base + *i * STRIDE + PAYLOAD_AT
}

criterion_group!(benches, sums);
criterion_main!(benches);
