//! CRC32c alone and fused with a copy, against `crc-fast`, the `crc32c` crate and a plain copy,
//! at FPDU sizes (MTU 1500 and 9000) and a small and a large message.
//!
//! `cargo bench -p copycrc --bench kernels`

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};

fn kernels(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    for len in [64usize, 512, 1448, 2048, 4096, 8940] {
        let src: Vec<u8> = (0..len as u32).map(|i| (i * 31 + 7) as u8).collect();
        let mut dst = vec![0u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("copycrc", len), &src, |b, s| {
            b.iter(|| copycrc::crc32c_append(0, black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("crc-fast", len), &src, |b, s| {
            b.iter(|| crc_fast::crc32_iscsi(black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("crc32c", len), &src, |b, s| {
            b.iter(|| crc32c::crc32c(black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("copy", len), &src, |b, s| {
            b.iter(|| {
                dst.copy_from_slice(black_box(s));
                black_box(&dst);
            })
        });
        g.bench_with_input(BenchmarkId::new("copy+crc-fast", len), &src, |b, s| {
            b.iter(|| {
                dst.copy_from_slice(black_box(s));
                crc_fast::crc32_iscsi(black_box(&dst))
            })
        });
        g.bench_with_input(BenchmarkId::new("copy_crc32c", len), &src, |b, s| {
            b.iter(|| copycrc::copy_crc32c(0, black_box(s), &mut dst))
        });
    }
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
