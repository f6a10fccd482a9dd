//! Test harnesses: a `Vec<u8>`-backed memory table/placer and a [`Pair`] of queue pairs over
//! an in-memory byte pipe with seeded random segmentation (quinn `Pair` style).

use netcore::crc::Crc32c;
use netcore::rng::Xoshiro256;
use netcore::{Instant, Rng};

use crate::error::AccessError;
use crate::rdmap::qp::{Completion, Qp, QpConfig};
use crate::stag::{
    Access, AtomicOp, MemoryTable, MrHandle, MrInfo, PdId, Placer, Stag, StagAllocator,
};

#[derive(Debug, Clone)]
struct Region {
    info: MrInfo,
    bytes: Vec<u8>,
    registered: bool,
}

/// Registered memory of one host, held in `Vec<u8>`s. Atomics are little-endian.
#[derive(Debug, Clone)]
pub struct VecMemory {
    regions: Vec<Region>,
    stags: StagAllocator,
    rng: Xoshiro256,
}

impl VecMemory {
    /// An empty table; STags come from a generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        VecMemory {
            regions: Vec::new(),
            stags: StagAllocator::new(1 << 16),
            rng: Xoshiro256::seed_from_u64(seed),
        }
    }

    /// Register `len` zero bytes at tagged offset `base_to`.
    pub fn register(&mut self, pd: PdId, access: Access, base_to: u64, len: usize) -> MrInfo {
        let stag = self.stags.alloc(&mut self.rng).unwrap_or(Stag(0));
        let info = MrInfo {
            stag,
            handle: MrHandle(self.regions.len() as u32),
            pd,
            access,
            base_to,
            len: len as u64,
            valid: true,
            remote_invalidate: true,
        };
        self.regions.push(Region {
            info,
            bytes: vec![0; len],
            registered: true,
        });
        info
    }

    /// Deregister: the STag index goes back to the pool.
    pub fn deregister(&mut self, mr: MrHandle) {
        if let Some(r) = self.regions.get_mut(mr.0 as usize) {
            r.registered = false;
            r.info.valid = false;
            self.stags.free(r.info.stag);
        }
    }

    /// Current metadata of a region.
    pub fn info(&self, mr: MrHandle) -> MrInfo {
        self.regions[mr.0 as usize].info
    }

    /// Region bytes.
    pub fn bytes(&self, mr: MrHandle) -> &[u8] {
        &self.regions[mr.0 as usize].bytes
    }

    /// Region bytes, writable (test setup).
    pub fn bytes_mut(&mut self, mr: MrHandle) -> &mut [u8] {
        &mut self.regions[mr.0 as usize].bytes
    }
}

impl MemoryTable for VecMemory {
    fn lookup(&self, stag: Stag) -> Option<MrInfo> {
        self.regions
            .iter()
            .find(|r| r.registered && r.info.stag == stag)
            .map(|r| r.info)
    }

    fn by_handle(&self, mr: MrHandle) -> Option<MrInfo> {
        self.regions
            .get(mr.0 as usize)
            .filter(|r| r.registered)
            .map(|r| r.info)
    }

    fn invalidate(&mut self, stag: Stag) -> Result<(), AccessError> {
        let r = self
            .regions
            .iter_mut()
            .find(|r| r.registered && r.info.stag == stag)
            .ok_or(AccessError::InvalidStag)?;
        r.info.valid = false;
        Ok(())
    }
}

impl Placer for VecMemory {
    fn place(&mut self, mr: MrHandle, offset: u64, data: &[u8], crc: Option<&mut Crc32c>) {
        let r = &mut self.regions[mr.0 as usize].bytes;
        let o = offset as usize;
        r[o..o + data.len()].copy_from_slice(data);
        if let Some(c) = crc {
            c.update(data);
        }
    }

    fn read(&self, mr: MrHandle, offset: u64, dst: &mut [u8]) {
        let r = &self.regions[mr.0 as usize].bytes;
        let o = offset as usize;
        dst.copy_from_slice(&r[o..o + dst.len()]);
    }

    fn atomic(&mut self, mr: MrHandle, offset: u64, op: AtomicOp) -> u64 {
        let r = &mut self.regions[mr.0 as usize].bytes;
        let o = offset as usize;
        let mut b = [0u8; 8];
        b.copy_from_slice(&r[o..o + 8]);
        let orig = u64::from_le_bytes(b);
        r[o..o + 8].copy_from_slice(&op.apply(orig).to_le_bytes());
        orig
    }
}

/// A fixed test time (no test reads a clock).
pub fn test_now() -> Instant {
    Instant::from_nanos(1_000_000_000)
}

/// Two QPs joined by an in-memory byte pipe. Each `step` lets both sides emit FPDUs sized
/// to a random EMSS, then delivers a random number of pipe bytes (so FPDUs are split and
/// coalesced arbitrarily, as TCP does).
#[derive(Debug)]
pub struct Pair {
    /// Side A.
    pub a: Qp,
    /// Side B.
    pub b: Qp,
    /// A's memory.
    pub mem_a: VecMemory,
    /// B's memory.
    pub mem_b: VecMemory,
    a_to_b: Vec<u8>,
    b_to_a: Vec<u8>,
    rng: Xoshiro256,
    /// EMSS choices for each poll.
    pub emss: Vec<usize>,
    /// Largest chunk of stream bytes delivered at once.
    pub max_chunk: usize,
    /// Every FPDU A sent (for inspection).
    pub sent_a: Vec<Vec<u8>>,
    /// Every FPDU B sent.
    pub sent_b: Vec<Vec<u8>>,
}

impl Pair {
    /// A pair with the given configurations, both established, randomness from `seed`.
    pub fn new(cfg_a: QpConfig, cfg_b: QpConfig, seed: u64) -> Self {
        let mut a = Qp::new(cfg_a);
        let mut b = Qp::new(cfg_b);
        a.establish();
        b.establish();
        Pair {
            a,
            b,
            mem_a: VecMemory::new(seed ^ 0xa),
            mem_b: VecMemory::new(seed ^ 0xb),
            a_to_b: Vec::new(),
            b_to_a: Vec::new(),
            rng: Xoshiro256::seed_from_u64(seed),
            emss: vec![100, 128, 536, 1448, 1460, 9000],
            max_chunk: 2000,
            sent_a: Vec::new(),
            sent_b: Vec::new(),
        }
    }

    fn pick_emss(&mut self) -> usize {
        let i = (self.rng.next_u64() % self.emss.len() as u64) as usize;
        self.emss[i]
    }

    /// One round; returns true if anything moved.
    pub fn step(&mut self) -> bool {
        let now = test_now();
        let mut moved = false;
        let mut buf = vec![0u8; 9100];
        let e = self.pick_emss();
        while let Some(n) = self.a.poll_fpdu(now, e, &mut self.mem_a, &mut buf) {
            assert!(n <= e, "FPDU of {n} bytes exceeds EMSS {e}");
            self.a_to_b.extend_from_slice(&buf[..n]);
            self.sent_a.push(buf[..n].to_vec());
            moved = true;
        }
        let e = self.pick_emss();
        while let Some(n) = self.b.poll_fpdu(now, e, &mut self.mem_b, &mut buf) {
            assert!(n <= e, "FPDU of {n} bytes exceeds EMSS {e}");
            self.b_to_a.extend_from_slice(&buf[..n]);
            self.sent_b.push(buf[..n].to_vec());
            moved = true;
        }
        for dir in 0..2 {
            let pipe = if dir == 0 {
                &mut self.a_to_b
            } else {
                &mut self.b_to_a
            };
            if pipe.is_empty() {
                continue;
            }
            let k = 1 + (self.rng.next_u64() % self.max_chunk as u64) as usize;
            let k = k.min(pipe.len());
            let chunk: Vec<u8> = pipe.drain(..k).collect();
            let n = if dir == 0 {
                self.b.handle_stream(now, &mut self.mem_b, &chunk)
            } else {
                self.a.handle_stream(now, &mut self.mem_a, &chunk)
            };
            assert_eq!(
                n,
                chunk.len(),
                "handle_stream must consume everything it is given"
            );
            moved = true;
        }
        moved
    }

    /// Step until nothing moves for a few rounds (bounded).
    pub fn drive(&mut self) {
        let mut idle = 0;
        for _ in 0..100_000 {
            if self.step() {
                idle = 0;
            } else {
                idle += 1;
                if idle == 8 {
                    return;
                }
            }
        }
        panic!("pair did not settle");
    }

    /// Drain A's completions.
    pub fn completions_a(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.a.poll_completion()).collect()
    }

    /// Drain B's completions.
    pub fn completions_b(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.b.poll_completion()).collect()
    }

    /// Inject raw stream bytes into B as if A had sent them.
    pub fn inject_to_b(&mut self, bytes: &[u8]) {
        self.a_to_b.extend_from_slice(bytes);
    }
}
