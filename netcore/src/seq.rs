//! 32-bit sequence numbers with wrap-around comparison (RFC 9293 §3.4; also DDP MSNs, RFC 5041 §5.3).

use core::cmp::Ordering;
use core::ops::{Add, Sub};

/// A 32-bit sequence number compared modulo 2^32 (RFC 1982 serial arithmetic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq32(pub u32);

impl Seq32 {
    /// Signed distance `self - other`, valid while the two are less than 2^31 apart.
    pub fn diff(self, other: Seq32) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// Larger of the two in sequence space.
    pub fn max(self, other: Seq32) -> Seq32 {
        if self >= other { self } else { other }
    }
    /// Smaller of the two in sequence space.
    pub fn min(self, other: Seq32) -> Seq32 {
        if self <= other { self } else { other }
    }
}

impl PartialOrd for Seq32 {
    fn partial_cmp(&self, other: &Seq32) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl Add<u32> for Seq32 {
    type Output = Seq32;
    fn add(self, n: u32) -> Seq32 {
        Seq32(self.0.wrapping_add(n))
    }
}

impl Add<usize> for Seq32 {
    type Output = Seq32;
    fn add(self, n: usize) -> Seq32 {
        // Truncation is the point: sequence space is modulo 2^32.
        Seq32(self.0.wrapping_add(n as u32))
    }
}

impl Sub<u32> for Seq32 {
    type Output = Seq32;
    fn sub(self, n: u32) -> Seq32 {
        Seq32(self.0.wrapping_sub(n))
    }
}

impl Sub for Seq32 {
    type Output = i32;
    fn sub(self, rhs: Seq32) -> i32 {
        self.diff(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        let a = Seq32(u32::MAX - 1);
        let b = a + 4u32;
        assert_eq!(b, Seq32(2));
        assert!(b > a);
        assert_eq!(b - a, 4);
        assert_eq!(a.max(b), b);
    }
}
