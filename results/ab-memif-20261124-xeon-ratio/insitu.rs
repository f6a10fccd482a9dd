// Measuring (not kept): the sender's copy in situ-like conditions: the source walks a 64 KiB
// region in FPDU steps, the destination cycles over NBUF 2 KiB "mbufs" at offset DOFF, each
// frame then summed (read back) as the TCP checksum pass does.
use std::hint::black_box;
use std::time::Instant;
fn sum(b: &[u8]) -> u64 { let mut s = 0u64; for c in b.chunks_exact(8) { s = s.wrapping_add(u64::from_le_bytes(c.try_into().unwrap())); } s }
fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let len = *args.first().unwrap_or(&1426);
    let nbuf = *args.get(1).unwrap_or(&512);
    let readback = *args.get(2).unwrap_or(&1) == 1;
    let region = vec![7u8; 65536 + 4096 + 64];
    let rbase = region.as_ptr().align_offset(4096);
    let mut mbufs = vec![0u8; nbuf * 2176 + 4096];
    let mbase = mbufs.as_ptr().align_offset(4096);
    let n = 2_000_000usize;
    for doff in [210usize, 192, 256] {
        for mode in 0..3 {
            let t = Instant::now();
            let mut acc = 0u64;
            let mut soff = 0usize;
            for i in 0..n {
                let b = mbase + (i % nbuf) * 2176 + doff;
                if soff + len > 65536 { soff = 0; }
                let src = &region[rbase + soff..rbase + soff + len];
                let dst = &mut mbufs[b..b + len];
                match mode {
                    0 => dst.copy_from_slice(black_box(src)),
                    1 => acc ^= copycrc::copy_crc32c(0, black_box(src), black_box(&mut *dst)) as u64,
                    _ => { acc ^= copycrc::crc32c_append(0, black_box(src)) as u64; dst.copy_from_slice(src); }
                }
                if readback { acc = acc.wrapping_add(sum(&mbufs[b..b + len])); }
                soff += len;
            }
            black_box(acc);
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!("len {len} nbuf {nbuf} readback {readback} dst%64 {:2}: {} {ns:5.1} ns", doff % 64, ["memcpy      ", "copy_crc32c ", "crc then cpy"][mode]);
        }
    }
}
