//! The lock-step control messages between the opcheck client and server: 64 bytes each,
//! carried in Sends on the same QP as the data, always one request then one reply.
//!
//! ```text
//!  0 magic u32 "OPCK"   4 cmd u32   8 size u64   16 arg u64   24 arg2 u64   32 sha256 [32]
//! ```

/// Bytes of a control message.
pub const MSG_LEN: usize = 64;
const MAGIC: u32 = u32::from_le_bytes(*b"OPCK");

/// What the client asks (requests) and what the server answers (replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Cmd {
    /// Tell me your regions: reply `size` = data region length, `arg` = data region tagged
    /// offset, `arg2` = (data rkey << 32) | atomic rkey, `sha[0..8]` = atomic word's tagged
    /// offset, `sha[8..12]` = invalidatable region's rkey.
    Regions = 1,
    /// Post a receive of `size` bytes (plus the next control receive), then reply.
    PrepRecv = 2,
    /// Post an empty receive for a Write with Immediate, then reply.
    PrepImm = 3,
    /// The data Send of `size` bytes (`arg`: 0 Send, 1 SE, 2 Invalidate) arrived? Reply
    /// with the SHA-256 of what was received and, after an invalidate, the new rkey in `arg`.
    CheckRecv = 4,
    /// A Write of `size` bytes at offset 0 with SHA-256 `sha` was done (`arg`: 1 if with
    /// Immediate `arg2`): check the region, reply with its SHA-256.
    CheckWrite = 5,
    /// Fill `size` bytes at offset 0 with pattern `arg`, reply with the SHA-256.
    PrepRead = 6,
    /// Set the atomic word to `arg`.
    SetAtomic = 7,
    /// Reply with the atomic word in `arg`.
    GetAtomic = 8,
    /// Done: the server replies, then the client disconnects.
    Bye = 9,
    /// Reply: OK.
    Ok = 100,
    /// Reply: the check failed (`sha` holds a message).
    Fail = 101,
}

impl Cmd {
    fn from_u32(v: u32) -> Option<Cmd> {
        use Cmd::*;
        [
            Regions, PrepRecv, PrepImm, CheckRecv, CheckWrite, PrepRead, SetAtomic, GetAtomic, Bye,
            Ok, Fail,
        ]
        .into_iter()
        .find(|c| *c as u32 == v)
    }
}

/// One control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    /// The command or reply.
    pub cmd: Cmd,
    /// A size in bytes.
    pub size: u64,
    /// First argument.
    pub arg: u64,
    /// Second argument.
    pub arg2: u64,
    /// A SHA-256 (or a short failure text).
    pub sha: [u8; 32],
}

impl Msg {
    /// A message with `cmd` and zeroes.
    pub fn new(cmd: Cmd) -> Msg {
        Msg {
            cmd,
            size: 0,
            arg: 0,
            arg2: 0,
            sha: [0; 32],
        }
    }

    /// A failure reply with `why` (truncated to 32 bytes).
    pub fn fail(why: &str) -> Msg {
        let mut m = Msg::new(Cmd::Fail);
        let n = why.len().min(32);
        m.sha[..n].copy_from_slice(&why.as_bytes()[..n]);
        m
    }

    /// The failure text of a `Fail` reply.
    pub fn why(&self) -> String {
        String::from_utf8_lossy(&self.sha)
            .trim_end_matches('\0')
            .to_owned()
    }

    /// Encode.
    pub fn to_bytes(&self) -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&(self.cmd as u32).to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.arg.to_le_bytes());
        b[24..32].copy_from_slice(&self.arg2.to_le_bytes());
        b[32..].copy_from_slice(&self.sha);
        b
    }

    /// Decode; `None` for anything that is not a message.
    pub fn from_bytes(b: &[u8]) -> Option<Msg> {
        let b: &[u8; MSG_LEN] = b.get(..MSG_LEN)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if u32_at(0) != MAGIC {
            return None;
        }
        let mut sha = [0u8; 32];
        sha.copy_from_slice(&b[32..]);
        Some(Msg {
            cmd: Cmd::from_u32(u32_at(4))?,
            size: u64_at(8),
            arg: u64_at(16),
            arg2: u64_at(24),
            sha,
        })
    }
}

/// Fill `buf` with a pattern that depends on `seed` and the position (xorshift).
pub fn pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let mut m = Msg::new(Cmd::CheckWrite);
        m.size = 8 << 20;
        m.arg = 1;
        m.arg2 = 0xfeed;
        m.sha = [7; 32];
        assert_eq!(Msg::from_bytes(&m.to_bytes()), Some(m));
        assert_eq!(Msg::from_bytes(&[0u8; 64]), None);
        assert_eq!(Msg::from_bytes(&m.to_bytes()[..63]), None);
        assert_eq!(Msg::fail("sha mismatch").why(), "sha mismatch");
    }

    #[test]
    fn pattern_depends_on_seed_and_is_stable() {
        let (mut a, mut b) = ([0u8; 37], [0u8; 37]);
        pattern(&mut a, 1);
        pattern(&mut b, 1);
        assert_eq!(a, b);
        pattern(&mut b, 2);
        assert_ne!(a, b);
    }
}
