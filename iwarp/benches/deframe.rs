//! Issue #4 benchmark: MPA deframe + CRC rate for 1440-octet and 8940-octet FPDUs, the framer,
//! and the CRC32c candidates (`crc32c` crate vs `crc-fast`) at the same sizes.
//!
//! Run: `cargo bench -p iwarp --bench deframe`.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use iwarp::mpa::{Deframed, Deframer, DeframerConfig, Framer, FramerConfig};
use netcore::crc::{candidates, crc32c};

/// Total stream size per iteration.
const STREAM: usize = 1 << 20;

fn stream_of(fpdu_len: usize, crc: bool) -> (Vec<u8>, usize) {
    let ulpdu = vec![0x5au8; fpdu_len - 6];
    let mut f = Framer::new(FramerConfig {
        crc,
        markers: false,
        stream_pos: 0,
    });
    let mut out = Vec::with_capacity(STREAM + fpdu_len);
    let mut n = 0;
    let mut buf = vec![0u8; fpdu_len];
    while out.len() + fpdu_len <= STREAM {
        let len = f.frame(&[&ulpdu], &mut buf).unwrap();
        assert_eq!(len, fpdu_len);
        out.extend_from_slice(&buf);
        n += 1;
    }
    (out, n)
}

fn deframe_all(cfg: DeframerConfig, stream: &[u8], seg: usize) -> usize {
    let mut d = Deframer::new(cfg);
    let mut payload = 0;
    for mut chunk in stream.chunks(seg) {
        loop {
            let (used, ev) = d.deframe(chunk);
            chunk = &chunk[used..];
            match ev {
                Some(Ok(Deframed::Data(x))) => payload += x.len(),
                Some(Ok(_)) => {}
                None => break,
                Some(Err(e)) => panic!("{e}"),
            }
        }
    }
    payload
}

fn bench_deframe(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpa_deframe");
    for fpdu in [1440usize, 8940] {
        for crc in [false, true] {
            let (stream, n) = stream_of(fpdu, crc);
            let cfg = DeframerConfig {
                crc,
                ..Default::default()
            };
            g.throughput(Throughput::Bytes(stream.len() as u64));
            let id = format!("{fpdu}B_crc_{}", if crc { "on" } else { "off" });
            // Fed one TCP segment (= one FPDU) at a time, as the dataplane does.
            g.bench_with_input(BenchmarkId::new("fpdus", &id), &stream, |b, s| {
                b.iter(|| black_box(deframe_all(cfg, s, fpdu)))
            });
            eprintln!("mpa_deframe/{id}: {n} FPDUs per iteration");
        }
    }
    g.finish();
}

fn bench_frame(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpa_frame");
    for fpdu in [1440usize, 8940] {
        let ulpdu = vec![0xa5u8; fpdu - 6];
        let mut buf = vec![0u8; fpdu];
        g.throughput(Throughput::Bytes(fpdu as u64));
        g.bench_function(BenchmarkId::new("copy_crc", fpdu), |b| {
            let mut f = Framer::new(FramerConfig {
                crc: true,
                ..Default::default()
            });
            b.iter(|| black_box(f.frame(&[&ulpdu], &mut buf).unwrap()))
        });
        g.bench_function(BenchmarkId::new("gather_crc", fpdu), |b| {
            let mut f = Framer::new(FramerConfig {
                crc: true,
                ..Default::default()
            });
            b.iter(|| {
                let mut gth = f.gather(ulpdu.len() as u16).unwrap();
                gth.update(&ulpdu);
                black_box(gth.trailer())
            })
        });
    }
    g.finish();
}

fn bench_crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    for len in [1440usize, 8940] {
        let data: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("netcore", len), &data, |b, d| {
            b.iter(|| crc32c(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("crc32c_crate", len), &data, |b, d| {
            b.iter(|| candidates::crc32c_crate(black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("crc_fast", len), &data, |b, d| {
            b.iter(|| candidates::crc_fast(black_box(d)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_deframe, bench_frame, bench_crc);
criterion_main!(benches);
