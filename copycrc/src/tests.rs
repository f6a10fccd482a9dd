//! The kernels against the `crc32c` crate at every length around each path's boundaries,
//! from several registers, at unaligned offsets, and the copies byte for byte.

use super::*;

fn data(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(0x9e37_79b9)) as u8 >> (i % 3))
        .collect()
}

/// Lengths 0..=2100 (every path and every tail), then sizes FPDUs have.
fn lengths() -> impl Iterator<Item = usize> {
    (0..=2100).chain([2200, 4096, 8940, 9000, 65536 + 7, 200_003])
}

#[test]
fn rfc3720_vectors() {
    let inc: Vec<u8> = (0u8..32).collect();
    let dec: Vec<u8> = (0u8..32).rev().collect();
    assert_eq!(crc32c_append(0, &[0u8; 32]), 0x8a91_36aa);
    assert_eq!(crc32c_append(0, &[0xffu8; 32]), 0x62a8_ab43);
    assert_eq!(crc32c_append(0, &inc), 0x46dd_794e);
    assert_eq!(crc32c_append(0, &dec), 0x113f_db5c);
    assert_eq!(crc32c_append(0, b"123456789"), 0xe306_9283);
}

#[test]
fn every_length_and_offset_matches_the_reference() {
    let buf = data(200_003 + 100, 1);
    for len in lengths() {
        for off in [0usize, 1, 7, 13, 63] {
            for crc in [0u32, 0xffff_ffff, 0x1234_5678] {
                let d = &buf[off..off + len];
                let want = ::crc32c::crc32c_append(crc, d);
                assert_eq!(
                    crc32c_append(crc, d),
                    want,
                    "len {len} off {off} crc {crc:#x}"
                );
                let mut out = vec![0xa5u8; len + 2];
                let got = copy_crc32c(crc, d, &mut out[1..]);
                assert_eq!(got, want, "copy: len {len} off {off} crc {crc:#x}");
                assert_eq!(&out[1..=len], d, "copied bytes: len {len} off {off}");
                assert_eq!((out[0], out[len + 1]), (0xa5, 0xa5), "outside: len {len}");
            }
        }
    }
}

/// The folding kernel's paths by the count of 512-byte steps, of whole 64-byte blocks after
/// them (0-7), of whole 16-byte blocks after those (0-3) and of the last 0-15 bytes: every
/// length 0..=2100 from every source offset within a 64-byte block, the destination offset
/// varied, nothing written within 64 bytes around; then past 1 MiB.
#[test]
fn every_length_from_every_offset_copies_and_hashes() {
    let buf = data(2100 + 64, 9);
    let mut out = vec![0u8; 2100 + 192];
    for off in 0..64 {
        for len in 0..=2100 {
            let d = &buf[off..off + len];
            let crc = [0u32, !0, 0x1234_5678, 0x8000_0001][len % 4];
            let want = ::crc32c::crc32c_append(crc, d);
            assert_eq!(crc32c_append(crc, d), want, "len {len} off {off}");
            let doff = 64 + (off * 7 + len) % 64;
            let fill = (len as u8) ^ 0x3c;
            out.fill(fill);
            assert_eq!(
                copy_crc32c(crc, d, &mut out[doff..]),
                want,
                "copy: len {len} off {off} doff {doff}"
            );
            assert_copied(&out, doff, d, fill, &format!("len {len} off {off}"));
        }
    }
    let long = data((1 << 21) + 300, 10);
    let mut out = vec![0u8; (1 << 21) + 300];
    for off in [0, 1, 63] {
        for d in [&long[off..], &long[off..off + (1 << 20) + 77]] {
            let want = ::crc32c::crc32c_append(3, d);
            assert_eq!(crc32c_append(3, d), want, "long off {off} len {}", d.len());
            assert_eq!(copy_crc32c(3, d, &mut out), want, "long copy off {off}");
            assert_eq!(&out[..d.len()], d);
        }
    }
}

#[test]
fn appending_pieces_gives_the_whole() {
    let buf = data(9000, 2);
    let whole = ::crc32c::crc32c_append(0, &buf);
    for split in [0usize, 1, 63, 64, 255, 256, 257, 1448, 4095, 8999, 9000] {
        let (a, b) = buf.split_at(split);
        assert_eq!(
            crc32c_append(crc32c_append(0, a), b),
            whole,
            "split {split}"
        );
        let mut out = vec![0u8; 9000];
        let (oa, ob) = out.split_at_mut(split);
        let c = copy_crc32c(copy_crc32c(0, a, oa), b, ob);
        assert_eq!(c, whole, "copy split {split}");
        assert_eq!(out, buf);
    }
}

#[test]
fn the_copy_into_a_longer_destination_leaves_the_rest() {
    let src = data(300, 3);
    let mut dst = vec![7u8; 400];
    copy_crc32c(0, &src, &mut dst);
    assert_eq!(&dst[..300], &src[..]);
    assert!(dst[300..].iter().all(|&b| b == 7));
}

#[test]
#[should_panic(expected = "destination of 10 bytes for 11 bytes")]
fn a_short_destination_panics_before_writing() {
    copy_crc32c(0, &[0u8; 11], &mut [0u8; 10]);
}

#[test]
fn reports_the_path() {
    #[cfg(target_arch = "x86_64")]
    {
        let want = std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse4.2");
        assert_eq!(accelerated(), want);
        let streams =
            std::is_x86_feature_detected!("sse4.2") && std::is_x86_feature_detected!("pclmulqdq");
        assert_eq!(fuses_copy(), want || streams);
        assert_eq!(copy_crc32c_streams(0, &[], &mut []).is_some(), streams);
    }
}

/// The path of CPUs without the kernels, called directly: the same copies and CRCs.
#[test]
fn the_portable_copy_agrees() {
    let buf = data(5000, 4);
    for len in [0usize, 1, 1023, 1024, 1025, 1448, 4999] {
        let mut out = vec![0x5au8; len + 1];
        // SAFETY: both ranges are ours, len bytes each, disjoint.
        let c = unsafe { copy_crc_portable(7, buf.as_ptr(), out.as_mut_ptr(), len) };
        assert_eq!(c, ::crc32c::crc32c_append(7, &buf[..len]), "len {len}");
        assert_eq!(&out[..len], &buf[..len]);
        assert_eq!(out[len], 0x5a);
    }
}

/// The three-stream kernel of CPUs without AVX-512, called whatever this CPU has: every length
/// and offset against the reference, the copies byte for byte, nothing written outside.
#[test]
fn the_stream_kernel_matches_the_reference() {
    #[cfg(target_arch = "x86_64")]
    let has = std::is_x86_feature_detected!("sse4.2") && std::is_x86_feature_detected!("pclmulqdq");
    #[cfg(not(target_arch = "x86_64"))]
    let has = false;
    let buf = data(200_003 + 100, 5);
    // Beyond 2100: around the pieces of 3 * 4 KiB the streams' shifts are tabled for.
    let more = [12_288 - 1, 12_288, 12_288 + 47, 12_288 + 48, 24_576 + 100];
    for len in lengths().chain(more) {
        for off in [0usize, 1, 7, 13, 63] {
            for crc in [0u32, 0xffff_ffff, 0x1234_5678] {
                let d = &buf[off..off + len];
                let mut out = vec![0xa5u8; len + 2];
                let got = copy_crc32c_streams(crc, d, &mut out[1..]);
                if !has {
                    assert_eq!(got, None);
                    return;
                }
                let want = ::crc32c::crc32c_append(crc, d);
                assert_eq!(got, Some(want), "len {len} off {off} crc {crc:#x}");
                assert_eq!(&out[1..=len], d, "copied bytes: len {len} off {off}");
                assert_eq!((out[0], out[len + 1]), (0xa5, 0xa5), "outside: len {len}");
            }
        }
    }
    let inc: Vec<u8> = (0u8..32).collect();
    let mut out = [0u8; 32];
    assert_eq!(copy_crc32c_streams(0, &inc, &mut out), Some(0x46dd_794e));
    assert_eq!(
        copy_crc32c_streams(0, &[0xffu8; 32], &mut out),
        Some(0x62a8_ab43)
    );
    let nine = b"123456789";
    assert_eq!(copy_crc32c_streams(0, nine, &mut out), Some(0xe306_9283));
    // 48 bytes: one step of the three streams exactly (RFC 3720 B.4's 32-byte vectors and zeros).
    let mut two = [0u8; 48];
    two[16..].copy_from_slice(&inc);
    let mut out = [0u8; 48];
    let zeros16 = ::crc32c::crc32c_append(0, &[0u8; 16]);
    assert_eq!(
        copy_crc32c_streams(0, &two, &mut out),
        Some(::crc32c::crc32c_append(zeros16, &inc))
    );
    assert_eq!(out, two);
}

/// The short single-stream CRC (inputs under `SHORT` bytes where the folding kernels do not
/// run), called directly: every length, offset and register.
#[test]
fn the_short_kernel_matches_the_reference() {
    #[cfg(target_arch = "x86_64")]
    if sse42::available() {
        let buf = data(SHORT + 64, 6);
        for len in 0..SHORT {
            for off in 0..8 {
                for crc in [0u32, 0xffff_ffff, 0x1234_5678] {
                    let d = &buf[off..off + len];
                    // SAFETY: the features were detected; d is valid for reads of its length.
                    let got = unsafe { sse42::crc(!crc, d.as_ptr(), d.len()) } ^ !0;
                    assert_eq!(got, ::crc32c::crc32c_append(crc, d), "len {len} off {off}");
                }
            }
        }
    }
}

/// A small deterministic generator for the split tests (xorshift64*).
struct Rand(u64);

impl Rand {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform enough in `0..n` for test inputs.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A message cut at random points into pieces of 0 bytes to past the stream kernel's 12 KiB
/// chunks, each piece continued from the previous piece's CRC, with the source and the
/// destination misaligned independently: every entry point gives the CRC of the whole, and
/// the copies give the message, nothing written around it.
#[test]
fn random_pieces_misaligned_give_the_whole() {
    let buf = data(40_000 + 128, 7);
    let streams = copy_crc32c_streams(0, &[], &mut []).is_some();
    let mut rng = Rand(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let len = match round % 3 {
            0 => rng.below(300),
            1 => rng.below(3000),
            _ => rng.below(40_000),
        };
        let (so, dof) = (rng.below(64), rng.below(64));
        let msg = &buf[so..so + len];
        let crc0 = [0u32, !0, rng.next() as u32][round % 3];
        let want = ::crc32c::crc32c_append(crc0, msg);
        let mut out = vec![0xa5u8; len + 128];
        let mut outs = out.clone();
        let (mut c, mut cc, mut cs, mut at) = (crc0, crc0, crc0, 0);
        while at < len {
            // Pieces mostly short (headers, pads, a TCP segment's share), sometimes long.
            let max = [8, 64, 1500, 13_000][rng.below(4)];
            let n = rng.below(max + 1).min(len - at);
            let piece = &msg[at..at + n];
            c = crc32c_append(c, piece);
            let d = &mut out[dof + at..];
            cc = copy_crc32c(cc, piece, d);
            if streams {
                let d = &mut outs[dof + at..];
                cs = copy_crc32c_streams(cs, piece, d).unwrap();
            }
            at += n;
        }
        let what = format!("round {round} len {len} src +{so} dst +{dof} crc {crc0:#x}");
        assert_eq!(c, want, "crc32c_append: {what}");
        assert_eq!(cc, want, "copy_crc32c: {what}");
        assert_copied(&out, dof, msg, 0xa5, &format!("copy_crc32c: {what}"));
        if streams {
            assert_eq!(cs, want, "copy_crc32c_streams: {what}");
            assert_copied(
                &outs,
                dof,
                msg,
                0xa5,
                &format!("copy_crc32c_streams: {what}"),
            );
        }
    }
}

/// Every length to a few of the stream kernel's 48-byte steps, with the source and the
/// destination at every offset modulo 16 independently.
#[test]
fn short_copies_at_every_alignment() {
    let buf = data(256 + 32, 8);
    let streams = copy_crc32c_streams(0, &[], &mut []).is_some();
    for len in 0..=200 {
        for so in 0..16 {
            for dof in 0..16 {
                let d = &buf[so..so + len];
                let want = ::crc32c::crc32c_append(0x0bad_cafe, d);
                let mut out = vec![0x5au8; len + 32];
                assert_eq!(
                    copy_crc32c(0x0bad_cafe, d, &mut out[dof..]),
                    want,
                    "{len} {so} {dof}"
                );
                assert_copied(&out, dof, d, 0x5a, &format!("{len} {so} {dof}"));
                if streams {
                    let mut out = vec![0x5au8; len + 32];
                    let got = copy_crc32c_streams(0x0bad_cafe, d, &mut out[dof..]);
                    assert_eq!(got, Some(want), "streams {len} {so} {dof}");
                    assert_copied(&out, dof, d, 0x5a, &format!("streams {len} {so} {dof}"));
                }
            }
        }
    }
}

/// `out` holds `msg` at `at` and, around it, only the `fill` it was made of.
fn assert_copied(out: &[u8], at: usize, msg: &[u8], fill: u8, what: &str) {
    assert_eq!(&out[at..at + msg.len()], msg, "the copy's bytes: {what}");
    let mut around = out[..at].iter().chain(&out[at + msg.len()..]);
    assert!(
        around.all(|&b| b == fill),
        "written around the copy: {what}"
    );
}

/// RFC 1071 §1's definition: 16-bit big-endian words, an odd last byte padded with zero, added
/// with end-around carry.
fn ones_sum_reference(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    for c in data.chunks(2) {
        acc += u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Every sum kernel this CPU runs equals the definition at every length 0..=300 and beyond,
/// at every start offset within a 64-byte block (the AVX-512 kernels' masked first and last
/// blocks, odd starts), over random bytes and over all-ones bytes (the largest lane sums), and
/// across the kernels' 1 MiB pieces.
#[test]
fn the_sum_kernels_match_the_definition() {
    let buf = data(200_003 + 128, 3);
    let ones = vec![0xffu8; (1 << 21) + 300];
    let zeros = vec![0u8; 300];
    let check = |k: SumKernel, d: &[u8], what: &str| {
        assert_eq!(
            k.sum(d),
            Some(ones_sum_reference(d)),
            "{k} {what} len {}",
            d.len()
        );
    };
    for k in SumKernel::ALL.into_iter().filter(|k| k.available()) {
        for off in 0..64 {
            for len in (0..=300).chain([1447, 1448, 1449, 2048, 4096, 8940, 9000, 65543]) {
                check(k, &buf[off..off + len], &format!("off {off}"));
            }
            for len in [0, 1, 63, 64, 65, 1448, 65539] {
                check(k, &ones[off..off + len], &format!("ones off {off}"));
            }
            for len in [0, 1, 2, 64, 200] {
                assert_eq!(
                    k.sum(&zeros[off..off + len]),
                    Some(0),
                    "{k} zeros off {off}"
                );
            }
        }
        // Longer than one piece of the AVX-512 kernel (1 MiB), from a few offsets.
        for off in [0, 1, 2, 63] {
            check(k, &buf[off..off + 200_003], &format!("off {off}"));
            for len in [(1 << 20) + 77, 1 << 21] {
                check(k, &ones[off..off + len], &format!("ones off {off}"));
            }
        }
    }
}

/// A kernel this CPU does not run answers `None`; `available` and `sum` agree.
#[test]
fn the_sum_kernels_report_availability() {
    for k in SumKernel::ALL {
        assert_eq!(k.sum(&[1, 2, 3]).is_some(), k.available(), "{k}");
    }
    assert_eq!(SumKernel::Avx512.name(), "avx512");
}

/// The fused copy, CRC and sum equals the references (the `crc32c` crate, RFC 1071 §1's
/// definition) and copies byte for byte, writing nothing around: every length 0..=2100 from
/// every start offset within a 64-byte block (destination offsets varied too), random and
/// all-ones bytes (the largest lane sums), and across its 1 MiB pieces.
#[test]
fn the_fused_sum_matches_the_references() {
    if !fuses_sum() {
        let mut out = [0u8; 4];
        assert_eq!(copy_crc32c_sum(0, &[1, 2, 3], &mut out), None);
        assert_eq!(out, [0; 4], "nothing written without the kernel");
        return;
    }
    let buf = data(2100 + 64, 4);
    let ones = vec![0xffu8; 2100 + 64];
    let mut out = vec![0u8; 2100 + 130];
    let mut check = |d: &[u8], crc: u32, doff: usize, what: &str| {
        let fill = (d.len() as u8) ^ 0x5a;
        out.fill(fill);
        let got = copy_crc32c_sum(crc, d, &mut out[doff..]);
        let want = (::crc32c::crc32c_append(crc, d), ones_sum_reference(d));
        assert_eq!(got, Some(want), "{what} len {} doff {doff}", d.len());
        assert_copied(&out, doff, d, fill, what);
    };
    for off in 0..64 {
        for len in 0..=2100 {
            let crc = [0u32, !0, 0x1234_5678][len % 3];
            check(
                &buf[off..off + len],
                crc,
                (off * 7 + len) % 64,
                &format!("off {off}"),
            );
        }
        for len in [0, 1, 63, 64, 65, 511, 512, 513, 1448, 2100] {
            check(&ones[off..off + len], 0, off, &format!("ones off {off}"));
        }
    }
    // Longer than a piece (1 MiB): the CRC and the sum carry over.
    let long = data((1 << 21) + 300, 5);
    let ff = vec![0xffu8; (1 << 21) + 300];
    let mut out = vec![0u8; (1 << 21) + 300];
    for off in [0, 1, 63] {
        for d in [&long[off..], &ff[off..], &long[off..off + (1 << 20) + 77]] {
            let got = copy_crc32c_sum(7, d, &mut out);
            let want = (::crc32c::crc32c_append(7, d), ones_sum_reference(d));
            assert_eq!(got, Some(want), "long off {off} len {}", d.len());
            assert_eq!(&out[..d.len()], d);
        }
    }
}

/// The fused copy, CRC and sum after a head: the head and the bytes copied one after the
/// other, nothing written around, the CRC of both (the `crc32c` crate), the sum of the bytes
/// after the head only (RFC 1071 §1): heads of 0-20 bytes before every length 0..=1600 from
/// several source offsets, and across the 1 MiB pieces.
#[test]
fn the_fused_sum_after_a_head_matches_the_references() {
    let head_buf = data(24 + 8, 6);
    let buf = data(1600 + 64, 7);
    let mut out = vec![0u8; 24 + 1600 + 130];
    let mut check = |head: &[u8], d: &[u8], crc: u32, doff: usize| {
        let fill = (d.len() as u8) ^ (head.len() as u8) ^ 0xa5;
        out.fill(fill);
        let room = &mut out[doff..doff + head.len() + d.len()];
        // SAFETY: `d` is valid for reads of its length, `room` for writes of the head's and
        // its lengths; `out` is borrowed mutably, so it overlaps neither source.
        let got =
            unsafe { copy_crc32c_sum_after_raw(crc, head, d.as_ptr(), room.as_mut_ptr(), d.len()) };
        if !fuses_sum() {
            assert_eq!(got, None);
            assert!(
                out.iter().all(|&b| b == fill),
                "nothing written without the kernel"
            );
            return;
        }
        let whole: Vec<u8> = head.iter().chain(d).copied().collect();
        let want = (::crc32c::crc32c_append(crc, &whole), ones_sum_reference(d));
        assert_eq!(
            got,
            Some(want),
            "head {} len {} doff {doff}",
            head.len(),
            d.len()
        );
        assert_copied(&out, doff, &whole, fill, "after a head");
    };
    for hlen in 0..=20 {
        for off in [0, 1, 63] {
            for len in 0..=1600 {
                let crc = [0u32, !0, 0x1234_5678][len % 3];
                let hoff = (hlen + off) % 8;
                check(
                    &head_buf[hoff..hoff + hlen],
                    &buf[off..off + len],
                    crc,
                    (off * 5 + len + hlen) % 64,
                );
            }
        }
    }
    let long = data((1 << 21) + 300, 8);
    let mut out = vec![0u8; (1 << 21) + 400];
    for hlen in [0, 5, 16] {
        let head = &head_buf[..hlen];
        for d in [&long[..], &long[1..(1 << 20) + 77], &long[3..1 << 20]] {
            let room = &mut out[..hlen + d.len()];
            // SAFETY: as above.
            let got = unsafe {
                copy_crc32c_sum_after_raw(9, head, d.as_ptr(), room.as_mut_ptr(), d.len())
            };
            if !fuses_sum() {
                assert_eq!(got, None);
                continue;
            }
            let whole: Vec<u8> = head.iter().chain(d).copied().collect();
            let want = (::crc32c::crc32c_append(9, &whole), ones_sum_reference(d));
            assert_eq!(got, Some(want), "long head {hlen} len {}", d.len());
            assert_eq!(&out[..whole.len()], &whole[..]);
        }
    }
}

/// The fused copy and sum (no CRC) equals RFC 1071 §1's definition and copies byte for byte,
/// writing nothing around: every length 0..=2100 from every start offset within a 64-byte
/// block (destination offsets varied too), random and all-ones bytes (the largest lane sums),
/// and across its 1 MiB pieces.
#[test]
fn the_fused_copy_sum_matches_the_definition() {
    if !fuses_copy_sum() {
        let mut out = [0u8; 4];
        assert_eq!(copy_sum(&[1, 2, 3], &mut out), None);
        assert_eq!(out, [0; 4], "nothing written without the kernel");
        return;
    }
    let buf = data(2100 + 64, 6);
    let ones = vec![0xffu8; 2100 + 64];
    let mut out = vec![0u8; 2100 + 130];
    let mut check = |d: &[u8], doff: usize, what: &str| {
        let fill = (d.len() as u8) ^ 0xa5;
        out.fill(fill);
        let got = copy_sum(d, &mut out[doff..]);
        assert_eq!(
            got,
            Some(ones_sum_reference(d)),
            "{what} len {} doff {doff}",
            d.len()
        );
        assert_copied(&out, doff, d, fill, what);
    };
    for off in 0..64 {
        for len in 0..=2100 {
            check(
                &buf[off..off + len],
                (off * 5 + len) % 64,
                &format!("off {off}"),
            );
        }
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 1448, 2100] {
            check(&ones[off..off + len], off, &format!("ones off {off}"));
        }
    }
    // Longer than a piece (1 MiB): the sum carries over.
    let long = data((1 << 21) + 300, 7);
    let ff = vec![0xffu8; (1 << 21) + 300];
    let mut out = vec![0u8; (1 << 21) + 300];
    for off in [0, 1, 63] {
        for d in [&long[off..], &ff[off..], &long[off..off + (1 << 20) + 77]] {
            let got = copy_sum(d, &mut out);
            assert_eq!(
                got,
                Some(ones_sum_reference(d)),
                "long off {off} len {}",
                d.len()
            );
            assert_eq!(&out[..d.len()], d);
        }
    }
}
