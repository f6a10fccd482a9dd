//! `iwarp-opcheck`: every RDMA operation between two hosts, at the sizes asked for, with the
//! data checked by SHA-256 on both sides (what the end-to-end tests of issue 7 run).
//!
//! The server exposes a data region, an atomic word and a region the client may invalidate;
//! the client runs each operation in lock step with the server over 64-byte control Sends on
//! the same QP ([`proto`]): e.g. for a Send, "post a receive of N bytes" -> the data Send ->
//! "what did you get?" -> the server's SHA-256 of the received bytes, compared with the
//! client's. Many connections run at once with `--qps`.

pub mod client;
pub mod proto;
pub mod server;

use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};
use verbs::{Cq, Mr, Wc, WcStatus};

/// The operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Send.
    Send,
    /// Send with Solicited Event.
    SendSe,
    /// Send with Invalidate of the server's invalidatable region.
    SendInv,
    /// RDMA Write.
    Write,
    /// RDMA Write with Immediate Data.
    WriteImm,
    /// RDMA Read.
    Read,
    /// Atomic FetchAdd (8 bytes; the size is ignored).
    FetchAdd,
    /// Atomic CompareSwap, a matching and a failing one (8 bytes).
    CmpSwap,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [
        Op::Send,
        Op::SendSe,
        Op::SendInv,
        Op::Write,
        Op::WriteImm,
        Op::Read,
        Op::FetchAdd,
        Op::CmpSwap,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::SendSe => "send_se",
            Op::SendInv => "send_inv",
            Op::Write => "write",
            Op::WriteImm => "write_imm",
            Op::Read => "read",
            Op::FetchAdd => "fetch_add",
            Op::CmpSwap => "cmp_swap",
        }
    }

    /// Parse a name (or `all`) from a comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<Op>, String> {
        let mut v = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if w == "all" {
                v.extend(Op::ALL);
                continue;
            }
            match Op::ALL.into_iter().find(|o| o.name() == w) {
                Some(o) => v.push(o),
                None => {
                    let names: Vec<_> = Op::ALL.iter().map(|o| o.name()).collect();
                    return Err(format!(
                        "unknown operation {w:?}; allowed: all, {}",
                        names.join(", ")
                    ));
                }
            }
        }
        if v.is_empty() {
            return Err("no operation given".into());
        }
        Ok(v)
    }
}

/// A failed check or a failed call.
pub type Res<T> = Result<T, String>;

/// SHA-256 of `len` bytes at the start of `mr`, read in 1 MiB copies.
pub fn sha_of(mr: &Mr, len: usize) -> Res<[u8; 32]> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; len.min(1 << 20)];
    let mut off = 0;
    while off < len {
        let n = buf.len().min(len - off);
        mr.read(off, &mut buf[..n]).map_err(|e| e.to_string())?;
        h.update(&buf[..n]);
        off += n;
    }
    Ok(h.finalize().into())
}

/// Short hex of a digest (logs).
pub fn hex8(d: &[u8; 32]) -> String {
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Completions of one CQ, taken in any order by the waiter that wants them.
pub struct Completions {
    cq: Cq,
    held: Vec<Wc>,
}

impl Completions {
    /// Over `cq`.
    pub fn new(cq: &Cq) -> Completions {
        Completions {
            cq: cq.clone(),
            held: Vec::new(),
        }
    }

    /// Forget held completions `pred` accepts (e.g. send completions nobody waits for).
    pub fn discard(&mut self, mut pred: impl FnMut(&Wc) -> bool) {
        self.held.retain(|w| !pred(w));
    }

    /// Wait for the first completion `want` accepts; an error completion (other than a
    /// flush) is returned at once as an error naming it, a flush as `"flushed: ..."`.
    pub fn wait(&mut self, timeout: Duration, mut want: impl FnMut(&Wc) -> bool) -> Res<Wc> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.held.iter().position(&mut want) {
                return Ok(self.held.remove(i));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let held: Vec<String> = self.held.iter().map(|w| w.to_string()).collect();
                return Err(format!(
                    "no completion within {timeout:?} (holding [{}])",
                    held.join("; ")
                ));
            }
            if let Some(wc) = self
                .cq
                .wait_one(left.min(Duration::from_millis(100)))
                .map_err(|e| e.to_string())?
            {
                if wc.status() == WcStatus::Flushed {
                    return Err(format!("flushed: {wc}"));
                }
                if !wc.is_ok() {
                    return Err(format!("error completion: {wc}"));
                }
                self.held.push(wc);
            }
        }
    }
}
