//! Bar (d) of issue #8: instructions per payload byte on the receive path's placer, against
//! memcpy + CRC32c over the same bytes, counted by callgrind (deterministic):
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='placer_cost::placer_path' \
//!     target/release/placer-cost placer 1440
//! valgrind --tool=callgrind --toggle-collect='placer_cost::baseline' \
//!     target/release/placer-cost baseline 1440
//! ```
//!
//! `placer`: a tagged RDMA Write stream of FPDUs of the given size (CRC on) through
//! `iwarp::rdmap::Qp::handle_stream` (MPA deframe, CRC check, DDP/RDMAP parse, STag/bounds
//! checks) into the dataplane's placer (`dataplane::rdma::QpMemory` over a registered heap
//! region: the fused copy + CRC32c). `baseline`: `copy_from_slice` of each FPDU's payload plus
//! `netcore::crc::crc32c` over the whole FPDU. Both print the payload bytes, so
//! instructions / bytes is the figure. `scripts/placer-cost.sh` runs both.

use dataplane::rdma::{ClientId, HeapMemory, MemTable, MrRequest, QpMemory};
use iwarp::rdmap::{Qp, QpConfig, Sge, WorkRequest, WrOpcode};
use iwarp::stag::{Access, PdId};
use iwarp::testing::{VecMemory, test_now};
use std::hint::black_box;

const PD: PdId = PdId(1);
const ROUNDS: usize = 20;

/// FPDUs (of exactly `fpdu` octets, CRC on) of one RDMA Write of `len` bytes to `stag`/`to`.
fn stream(fpdu: usize, len: usize, stag: iwarp::stag::Stag, to: u64) -> Vec<Vec<u8>> {
    let mut tx = VecMemory::new(1);
    let src = tx.register(PD, Access::LOCAL_READ | Access::LOCAL_WRITE, 0, len);
    tx.bytes_mut(src.handle).fill(0x5a);
    let mut qp = Qp::new(QpConfig {
        pd: PD,
        crc: true,
        ..Default::default()
    });
    qp.establish();
    let mut wr = WorkRequest::new(
        1,
        WrOpcode::Write,
        vec![Sge {
            mr: src.handle,
            offset: 0,
            len: len as u32,
        }],
    );
    wr.remote_stag = stag;
    wr.remote_to = to;
    qp.post_send(wr).expect("post");
    let mut out = Vec::new();
    let mut buf = vec![0u8; fpdu];
    while let Some(k) = qp.poll_fpdu(test_now(), fpdu, &mut tx, &mut buf) {
        out.push(buf[..k].to_vec());
    }
    out
}

#[inline(never)]
fn placer_path(qp: &mut Qp, mem: &mut QpMemory, fpdus: &[Vec<u8>]) -> usize {
    let now = test_now();
    let mut used = 0;
    for f in fpdus {
        used += qp.handle_stream(now, mem, black_box(f));
    }
    used
}

#[inline(never)]
fn baseline(dst: &mut [u8], fpdus: &[Vec<u8>], payload: usize) -> u32 {
    let mut acc = 0;
    for (i, f) in fpdus.iter().enumerate() {
        let p = &f[16..16 + payload];
        dst[i * payload..(i + 1) * payload].copy_from_slice(black_box(p));
        acc ^= netcore::crc::crc32c(black_box(&f[..f.len() - 4]));
    }
    acc
}

/// Which path to run under callgrind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// The receive path: deframe, CRC check, parse, checks, placement (fused copy + CRC).
    Placer,
    /// memcpy of each payload plus CRC32c over each whole FPDU.
    Baseline,
}

/// Bar (d) of issue #8: instructions per payload byte of the placer against memcpy + CRC32c,
/// for `valgrind --tool=callgrind` (scripts/placer-cost.sh).
#[derive(Debug, clap::Parser)]
#[command(name = "placer-cost", version)]
struct Args {
    /// The path to run.
    #[arg(value_enum)]
    mode: Mode,
    /// Octets per FPDU: 2 (length) + 14 (tagged header) + payload + 4 (CRC), without a pad, so
    /// a multiple of 4 from 24 to 65536.
    #[arg(value_parser = fpdu_bytes)]
    fpdu_bytes: usize,
}

/// An FPDU size [`stream`] produces exactly: whole 32-bit words, no pad (RFC 5044 §4.2).
fn fpdu_bytes(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (24..=65536).contains(&n) && n % 4 == 0 => Ok(n),
        _ => Err(format!("{s:?}: allowed a multiple of 4 from 24 to 65536")),
    }
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let fpdu = args.fpdu_bytes;
    // 2 (MPA length) + 14 (tagged DDP/RDMAP header) + payload + 4 (CRC), no pad.
    let payload = fpdu - 20;
    let n = 64;
    let len = payload * n;
    let table = MemTable::new(16, 7);
    let heap = HeapMemory::new(len);
    let keys = table
        .register(MrRequest {
            owner: ClientId(1),
            pd: PD,
            mem: heap,
            offset: 0,
            len,
            base_to: 0x10_0000,
            access: Access::REMOTE_WRITE | Access::LOCAL_READ | Access::LOCAL_WRITE,
            remote_invalidate: false,
        })
        .expect("register");
    let fpdus = stream(fpdu, len, keys.rkey, 0x10_0000);
    assert!(
        fpdus.iter().all(|f| f.len() == fpdu),
        "FPDUs of {fpdu} bytes"
    );
    let total = (len * ROUNDS) as u64;
    match args.mode {
        Mode::Placer => {
            // As the engine runs it (dataplane/src/rdma/conn.rs): the placer may compute the
            // CRC of the payload it copies.
            let mut qp = Qp::new(QpConfig {
                pd: PD,
                crc: true,
                crc_by_placer: true,
                ..Default::default()
            });
            qp.establish();
            let mut mem = QpMemory::new(table.clone(), ClientId(1), PD);
            for _ in 0..ROUNDS {
                placer_path(&mut qp, &mut mem, &fpdus);
            }
            assert!(qp.local_error().is_none(), "{:?}", qp.local_error());
            assert_eq!(mem.placed_bytes, total, "every payload byte placed");
        }
        Mode::Baseline => {
            let mut dst = vec![0u8; len];
            let mut x = 0;
            for _ in 0..ROUNDS {
                x ^= baseline(&mut dst, &fpdus, payload);
            }
            black_box(x);
        }
    }
    println!("payload_bytes={total} fpdu={fpdu} fpdus={}", n * ROUNDS);
}
