//! The folding constants, computed at compile time from the CRC32c polynomial.
//!
//! Arithmetic is over GF(2) polynomials. The data is bit-reflected (RFC 3720 B.4: the first
//! bit of the stream is the least significant bit of its first byte and the highest power of
//! x), so a 16-byte block loaded little-endian as a `u128` holds its polynomial `S` with the
//! coefficient of x^(127-b) in bit b. Its low 64 bits are the reflected high half `S_hi`
//! (x^64..x^127), its high 64 bits the reflected low half `S_lo`.
//!
//! Folding `S` forward over `D` more bits replaces it by a polynomial congruent to
//! `S * x^D = S_hi * x^(D+64) + S_lo * x^D (mod P)` that lines up with the block `D` bits later.
//! A carry-less product of two bit-reflected 64-bit operands `A'` and `K'` holds `A * K * x`
//! reflected over 128 bits (the product of degree-63 reflections has degree 126, one short of
//! the block's 127), so the constants carry one power of x less:
//! `K_hi = x^(D+63) mod P` multiplies `S_hi`, `K_lo = x^(D-1) mod P` multiplies `S_lo`, each
//! reflected into the top 32 bits of a 64-bit operand. The products have degree at most 95,
//! so they fit the 128-bit block without reduction.

/// The CRC32c generator polynomial without its x^32 term (normal bit order).
pub const POLY: u32 = 0x1EDC_6F41;

/// `x^n mod P` in normal bit order (bit d = coefficient of x^d).
pub const fn xpow_mod(n: u32) -> u32 {
    // Start from x^0 and multiply by x n times, reducing by P whenever x^32 appears.
    let mut r: u32 = 1;
    let mut i = 0;
    while i < n {
        let carry = r & 0x8000_0000 != 0;
        r <<= 1;
        if carry {
            r ^= POLY;
        }
        i += 1;
    }
    r
}

/// `a * b mod P` in normal bit order.
pub const fn mul_mod(a: u32, b: u32) -> u32 {
    // Horner over b's bits from the top: r = r * x + a * b_i.
    let mut r: u32 = 0;
    let mut i = 32;
    while i > 0 {
        i -= 1;
        let carry = r & 0x8000_0000 != 0;
        r <<= 1;
        if carry {
            r ^= POLY;
        }
        if b >> i & 1 == 1 {
            r ^= a;
        }
    }
    r
}

/// `x^n mod P` by squaring (for large `n` at compile time).
pub const fn xpow_mod_fast(n: u32) -> u32 {
    let mut result: u32 = 1;
    let mut base: u32 = 2; // x
    let mut e = n;
    while e > 0 {
        if e & 1 == 1 {
            result = mul_mod(result, base);
        }
        base = mul_mod(base, base);
        e >>= 1;
    }
    result
}

/// The multiplier that moves a 32-bit CRC register forward over `bytes` zero bytes
/// (`bytes` >= 5): a carry-less product of the register (reflected, in the low 32 bits) with
/// it, reduced by the `crc32` instruction from a zero register, is the register after those
/// bytes. The product of two 32-bit reflections carries x^-62 where the instruction's 64-bit
/// operand means x^-63 and the instruction multiplies by x^32, so the constant is
/// `x^(8 * bytes - 33) mod P`, reflected into the low 32 bits.
pub const fn shift_const(bytes: u32) -> u64 {
    xpow_mod_fast(8 * bytes - 33).reverse_bits() as u64
}

/// A polynomial of degree < 32 reflected into the top half of a 64-bit operand (the
/// coefficient of x^d in bit 63-d).
pub const fn reflect64(k: u32) -> u64 {
    (k.reverse_bits() as u64) << 32
}

/// The constant pair folding a 128-bit block forward by `bits` (> 0): `[K_hi, K_lo]`, the
/// multiplier of the block's low 64-bit lane first (see the module comment).
pub const fn fold_pair(bits: u32) -> [u64; 2] {
    [
        reflect64(xpow_mod(bits + 63)),
        reflect64(xpow_mod(bits - 1)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less product of two 64-bit values (the reference for PCLMULQDQ).
    fn clmul(a: u64, b: u64) -> u128 {
        let mut r = 0u128;
        for i in 0..64 {
            if b >> i & 1 == 1 {
                r ^= u128::from(a) << i;
            }
        }
        r
    }

    /// One fold in software: a 16-byte block (a little-endian u128) moved forward by `dist`
    /// bytes and added to the block there has the CRC of the block, `dist - 16` zero bytes and
    /// the block there.
    #[test]
    fn a_software_fold_preserves_the_crc() {
        let data: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        for dist in [16usize, 32, 48] {
            let (a, rest) = data.split_at(16);
            let b = &rest[dist - 16..dist];
            let x = u128::from_le_bytes(a.try_into().unwrap());
            let [khi, klo] = fold_pair(dist as u32 * 8);
            let folded = clmul(x as u64, khi) ^ clmul((x >> 64) as u64, klo);
            let y = folded ^ u128::from_le_bytes(b.try_into().unwrap());
            // CRC with zero state and no final inversion over `a .. b` equals that over `y`.
            let raw = |bytes: &[u8]| !::crc32c::crc32c_append(!0, bytes);
            let mut span = a.to_vec();
            span.resize(dist, 0);
            span.extend_from_slice(b);
            assert_eq!(raw(&y.to_le_bytes()), raw(&span), "distance {dist}");
        }
    }

    #[test]
    fn fast_powers_agree() {
        for n in [0u32, 1, 31, 32, 33, 100, 1000, 4159] {
            assert_eq!(xpow_mod_fast(n), xpow_mod(n), "x^{n}");
        }
    }

    /// Moving a register over n zero bytes with [`shift_const`] equals feeding those zeros.
    #[test]
    fn shifting_a_register_equals_feeding_zeros() {
        let raw = |r: u32, bytes: &[u8]| !::crc32c::crc32c_append(!r, bytes);
        for n in [5usize, 8, 64, 128, 384, 1024] {
            for r in [1u32, 0x8000_0000, 0xdead_beef] {
                let k = shift_const(n as u32);
                let v = clmul(u64::from(r), k) as u64;
                // The crc32 instruction from a zero register over v's 8 little-endian bytes.
                let moved = raw(0, &v.to_le_bytes());
                assert_eq!(moved, raw(r, &vec![0u8; n]), "n {n} r {r:#x}");
            }
        }
    }

    #[test]
    fn powers_of_x() {
        assert_eq!(xpow_mod(0), 1);
        assert_eq!(xpow_mod(31), 0x8000_0000);
        assert_eq!(xpow_mod(32), POLY);
        assert_eq!(reflect64(1), 1 << 63);
    }
}
