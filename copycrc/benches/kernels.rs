//! CRC32c alone and fused with a copy, against `crc-fast`, the `crc32c` crate and a plain copy,
//! at FPDU sizes (MTU 1500 and 9000) and a small and a large message; the three-stream kernel
//! of CPUs without AVX-512 against the `crc32c` crate's CRC and a copy; the copy with the CRC
//! and the RFC 1071 sum in one pass against the copy with the CRC and then the sum, and the
//! copy with the sum alone (FPDUs without CRCs) against the copy and then the sum. The
//! `chained` entries pass each call's CRC into the next call, so that a call's latency (the
//! folds' dependent chain after the last load) shows, not only its throughput: criterion's
//! independent calls overlap one call's chain with the next call's loads.
//!
//! `cargo bench -p copycrc --bench kernels`
//!
//! Source and destination lie 2 KiB + 64 bytes apart modulo 4 KiB: a distance close to a
//! multiple of 4 KiB makes loads wait on earlier stores to other addresses with the same low
//! bits (4K aliasing), which would measure the allocator's placement, not the kernels.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};

/// Where the source and the destination start in one buffer of ours.
const SRC_AT: usize = 64;
const DST_AT: usize = 3 * 4096 + 2048 + 128;

fn kernels(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    let mut buf = vec![0u8; DST_AT + 16384];
    // Page-aligned base, so the distances above hold.
    let base = buf.as_ptr().align_offset(4096);
    for len in [
        64usize, 256, 512, 768, 1024, 1280, 1428, 1440, 1448, 1536, 1984, 2047, 2048, 4096, 8940,
    ] {
        let (lo, hi) = buf[base..].split_at_mut(DST_AT);
        let src = &mut lo[SRC_AT..SRC_AT + len];
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i as u32 * 31 + 7) as u8;
        }
        let src: &[u8] = src;
        let dst = &mut hi[..len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("copycrc", len), src, |b, s| {
            b.iter(|| copycrc::crc32c_append(0, black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("crc-fast", len), src, |b, s| {
            b.iter(|| crc_fast::crc32_iscsi(black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("crc32c", len), src, |b, s| {
            b.iter(|| crc32c::crc32c(black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("copy", len), src, |b, s| {
            b.iter(|| {
                dst.copy_from_slice(black_box(s));
                black_box(&dst);
            })
        });
        g.bench_with_input(BenchmarkId::new("copy+crc-fast", len), src, |b, s| {
            b.iter(|| {
                dst.copy_from_slice(black_box(s));
                crc_fast::crc32_iscsi(black_box(&*dst))
            })
        });
        g.bench_with_input(BenchmarkId::new("copy_crc32c", len), src, |b, s| {
            b.iter(|| copycrc::copy_crc32c(0, black_box(s), dst))
        });
        g.bench_with_input(BenchmarkId::new("copy_crc32c chained", len), src, |b, s| {
            let mut c = 0;
            b.iter(|| {
                c = copycrc::copy_crc32c(c, black_box(s), dst);
                c
            })
        });
        g.bench_with_input(BenchmarkId::new("copycrc chained", len), src, |b, s| {
            let mut c = 0;
            b.iter(|| {
                c = copycrc::crc32c_append(c, black_box(s));
                c
            })
        });
        // The sender's two passes (copy with the CRC, then the TCP checksum's sum of the bytes
        // written) against the one that also sums.
        if let Some(k) = copycrc::SumKernel::ALL.into_iter().find(|k| k.available()) {
            g.bench_with_input(BenchmarkId::new("copy_crc32c+sum", len), src, |b, s| {
                b.iter(|| {
                    let c = copycrc::copy_crc32c(0, black_box(s), dst);
                    (c, k.sum(black_box(&*dst)))
                })
            });
        }
        if copycrc::fuses_sum() {
            g.bench_with_input(BenchmarkId::new("copy_crc32c_sum", len), src, |b, s| {
                b.iter(|| copycrc::copy_crc32c_sum(0, black_box(s), dst))
            });
            g.bench_with_input(
                BenchmarkId::new("copy_crc32c_sum chained", len),
                src,
                |b, s| {
                    let mut c = 0;
                    b.iter(|| {
                        let r = copycrc::copy_crc32c_sum(c, black_box(s), dst);
                        c = r.map_or(0, |(crc, _)| crc);
                        r
                    })
                },
            );
        }
        // FPDUs without CRCs: the copy, then the sum of the bytes written, against the copy
        // that sums in its pass.
        if let Some(k) = copycrc::SumKernel::ALL.into_iter().find(|k| k.available()) {
            g.bench_with_input(BenchmarkId::new("copy+sum", len), src, |b, s| {
                b.iter(|| {
                    dst.copy_from_slice(black_box(s));
                    k.sum(black_box(&*dst))
                })
            });
        }
        if copycrc::fuses_copy_sum() {
            g.bench_with_input(BenchmarkId::new("copy_sum", len), src, |b, s| {
                b.iter(|| copycrc::copy_sum(black_box(s), dst))
            });
        }
        // CPUs without AVX-512: the three-stream kernel, against what the `crc32c` crate does
        // for a copy (`netcore::crc::CrcImpl::copy_append`: the CRC of the source, then the copy).
        if copycrc::copy_crc32c_streams(0, src, dst).is_some() {
            g.bench_with_input(BenchmarkId::new("copy_crc32c_streams", len), src, |b, s| {
                b.iter(|| copycrc::copy_crc32c_streams(0, black_box(s), dst))
            });
        }
        g.bench_with_input(BenchmarkId::new("crc32c+copy", len), src, |b, s| {
            b.iter(|| {
                let c = crc32c::crc32c(black_box(s));
                dst.copy_from_slice(s);
                black_box(&dst);
                c
            })
        });
    }
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
