// Measuring (not kept): copy+CRC and a plain copy at data-path alignments.
use std::hint::black_box;
use std::time::Instant;
fn main() {
    let mut buf = vec![0u8; 1 << 22];
    let base = buf.as_ptr().align_offset(4096);
    for (i, b) in buf.iter_mut().enumerate() { *b = (i * 31 + 7) as u8; }
    let len: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1428);
    let n = 1_000_000;
    for (so, dof) in [(0usize, 0usize), (18, 0), (0, 18), (18, 18), (18, 46), (37, 18), (5, 51)] {
        for _rep in 0..2 {
            // rotate over 64 buffers so it is not all in L1 the same lines? keep simple: one pair.
            let (lo, hi) = buf[base..].split_at_mut(3 * 4096 + 2048 + 128);
            let src = &lo[64 + so..64 + so + len];
            let dst = &mut hi[dof..dof + len];
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
            for _ in 0..n { black_box(&mut *dst).copy_from_slice(black_box(src)); }
            let cp = t.elapsed().as_nanos() as f64 / n as f64;
            let t = Instant::now();
            let mut c = 0u32;
            for _ in 0..n { c = copycrc::crc32c_append(c, black_box(src)); }
            let crc = t.elapsed().as_nanos() as f64 / n as f64;
            black_box(c);
            println!("len {len} src%64 {so:2} dst%64 {dof:2}: copy_crc ind {ind:5.1} dep {dep:5.1}  memcpy {cp:5.1}  crc alone dep {crc:5.1} ns");
        }
    }
}
