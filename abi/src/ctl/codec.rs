//! The byte codec of control messages: a panic-free reader and a writer, little-endian (both
//! ends are on the same host), and the [`Wire`] trait for every field type.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Why bytes are not a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside the header or body.
    Truncated,
    /// The first four bytes are not the magic.
    BadMagic,
    /// The sender speaks another ABI version.
    Version(u32),
    /// The message kind is not one we know (or is not allowed in this direction).
    UnknownKind(u16),
    /// The header's length disagrees with the bytes received, or exceeds [`super::MAX_MESSAGE`].
    BadLength(u32),
    /// A field holds a value outside its range (the field's name).
    BadValue(&'static str),
    /// Bytes left after the last field.
    Trailing(usize),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated message"),
            DecodeError::BadMagic => write!(f, "not an iwarpd control message (bad magic)"),
            DecodeError::Version(v) => write!(
                f,
                "ABI version {v} is not supported (this side speaks {})",
                crate::ABI_VERSION
            ),
            DecodeError::UnknownKind(k) => write!(f, "unknown message kind {k:#06x}"),
            DecodeError::BadLength(n) => write!(f, "bad body length {n}"),
            DecodeError::BadValue(name) => write!(f, "bad value in field `{name}`"),
            DecodeError::Trailing(n) => write!(f, "{n} unexpected bytes after the message"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A cursor over received bytes; every read checks the length first.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Read from `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Take `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// Take `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    /// Fail if bytes are left.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// An encoder appending to a `Vec`.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// Append raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
}

/// A field type of a control message.
pub trait Wire: Sized {
    /// Append the encoding.
    fn put(&self, w: &mut Writer);
    /// Decode, never panicking.
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

macro_rules! wire_int {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            fn put(&self, w: &mut Writer) {
                w.bytes(&self.to_le_bytes());
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$t>::from_le_bytes(r.array()?))
            }
        }
    )*};
}
wire_int!(u8, u16, u32, u64);

impl Wire for bool {
    fn put(&self, w: &mut Writer) {
        u8::from(*self).put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match u8::get(r)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::BadValue("bool")),
        }
    }
}

/// Bytes with a `u16` length (private data, names).
impl Wire for Vec<u8> {
    fn put(&self, w: &mut Writer) {
        // Encoders are given at most MAX_PRIVATE_DATA / MAX_NAME bytes; cut rather than panic.
        let n = self.len().min(usize::from(u16::MAX));
        (n as u16).put(w);
        w.bytes(&self[..n]);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let n = u16::get(r)?;
        Ok(r.bytes(usize::from(n))?.to_vec())
    }
}

impl Wire for String {
    fn put(&self, w: &mut Writer) {
        // Cut at a character boundary if too long.
        let mut n = self.len().min(usize::from(u16::MAX));
        while !self.is_char_boundary(n) {
            n -= 1;
        }
        (n as u16).put(w);
        w.bytes(&self.as_bytes()[..n]);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let b = Vec::<u8>::get(r)?;
        String::from_utf8(b).map_err(|_| DecodeError::BadValue("utf-8 string"))
    }
}

impl Wire for SocketAddrV4 {
    fn put(&self, w: &mut Writer) {
        w.bytes(&self.ip().octets());
        self.port().put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let ip = Ipv4Addr::from(r.array::<4>()?);
        Ok(SocketAddrV4::new(ip, u16::get(r)?))
    }
}

impl Wire for [u8; 6] {
    fn put(&self, w: &mut Writer) {
        w.bytes(self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.array()
    }
}

/// Fixed-layout structs: every field in order.
macro_rules! wire_struct {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl $crate::ctl::codec::Wire for $t {
            fn put(&self, w: &mut $crate::ctl::codec::Writer) {
                $( $crate::ctl::codec::Wire::put(&self.$f, w); )*
            }
            fn get(
                r: &mut $crate::ctl::codec::Reader<'_>,
            ) -> Result<Self, $crate::ctl::codec::DecodeError> {
                Ok($t { $( $f: $crate::ctl::codec::Wire::get(r)? ),* })
            }
        }
    };
}
pub(crate) use wire_struct;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip_and_truncate() {
        let mut w = Writer::default();
        0xabu8.put(&mut w);
        0x1234u16.put(&mut w);
        0xdead_beefu32.put(&mut w);
        u64::MAX.put(&mut w);
        true.put(&mut w);
        vec![1u8, 2, 3].put(&mut w);
        "héllo".to_string().put(&mut w);
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4791).put(&mut w);
        let all = w.buf.clone();
        let mut r = Reader::new(&all);
        assert_eq!(u8::get(&mut r), Ok(0xab));
        assert_eq!(u16::get(&mut r), Ok(0x1234));
        assert_eq!(u32::get(&mut r), Ok(0xdead_beef));
        assert_eq!(u64::get(&mut r), Ok(u64::MAX));
        assert_eq!(bool::get(&mut r), Ok(true));
        assert_eq!(Vec::<u8>::get(&mut r), Ok(vec![1, 2, 3]));
        assert_eq!(String::get(&mut r), Ok("héllo".into()));
        assert_eq!(
            SocketAddrV4::get(&mut r),
            Ok(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4791))
        );
        assert_eq!(r.finish(), Ok(()));
        for cut in 0..all.len() {
            let mut r = Reader::new(&all[..cut]);
            let ok = (|| -> Result<(), DecodeError> {
                u8::get(&mut r)?;
                u16::get(&mut r)?;
                u32::get(&mut r)?;
                u64::get(&mut r)?;
                bool::get(&mut r)?;
                Vec::<u8>::get(&mut r)?;
                String::get(&mut r)?;
                SocketAddrV4::get(&mut r)?;
                Ok(())
            })();
            assert_eq!(ok, Err(DecodeError::Truncated), "cut at {cut}");
        }
    }

    #[test]
    fn bad_bool_and_utf8_are_values_errors() {
        assert_eq!(
            bool::get(&mut Reader::new(&[2])),
            Err(DecodeError::BadValue("bool"))
        );
        assert_eq!(
            String::get(&mut Reader::new(&[2, 0, 0xff, 0xfe])),
            Err(DecodeError::BadValue("utf-8 string"))
        );
    }
}
