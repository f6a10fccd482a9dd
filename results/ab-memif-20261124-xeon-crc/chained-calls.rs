// copycrc/examples/chain.rs while measuring (not kept): independent calls (throughput) against
// calls chained through the CRC register (the next call's seed is the previous result: latency).
use std::hint::black_box;
use std::time::Instant;
fn main() {
    let mut buf = vec![0u8; 1 << 20];
    let base = buf.as_ptr().align_offset(4096);
    for (i, b) in buf.iter_mut().enumerate() { *b = (i * 31 + 7) as u8; }
    for len in [1428usize, 1448, 8940] {
        let (lo, hi) = buf[base..].split_at_mut(3 * 4096 + 2048 + 128);
        let src = &lo[64..64 + len];
        let dst = &mut hi[..len];
        let n = 2_000_000;
        for rep in 0..3 {
            let t = Instant::now();
            let mut acc = 0u32;
            for _ in 0..n { acc ^= copycrc::copy_crc32c(0, black_box(src), black_box(&mut *dst)); }
            let ind = t.elapsed().as_nanos() as f64 / n as f64;
            black_box(acc);
            let t = Instant::now();
            let mut c = 0u32;
            for _ in 0..n { c = copycrc::copy_crc32c(c, black_box(src), black_box(&mut *dst)); }
            let dep = t.elapsed().as_nanos() as f64 / n as f64;
            black_box(c);
            let t = Instant::now();
            let mut c = 0u32;
            for _ in 0..n { c = copycrc::crc32c_append(c, black_box(src)); }
            let dep_nc = t.elapsed().as_nanos() as f64 / n as f64;
            black_box(c);
            println!("len {len} rep {rep}: copy_crc independent {ind:.1} ns, dependent {dep:.1} ns; crc alone dependent {dep_nc:.1} ns");
        }
    }
}
