//! What the examples share: the command line (`-s` / `-c ADDR`, `-p`, `-d`, `--crc`) and the
//! connection setup, where each side's region (tagged offset, STag, length) travels in the
//! MPA private data, so no extra message is needed before the first RDMA operation.
#![allow(dead_code, unreachable_pub)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;
use verbs::{CmId, ConnParam, CrcMode, Device, Qp, RemoteMr};

/// Role, address and device of an example.
#[derive(Debug, Clone, clap::Args)]
pub struct Net {
    /// Serve: wait for one client.
    #[arg(short = 's', conflicts_with = "connect")]
    pub server: bool,
    /// Connect to the server at ADDR.
    #[arg(short = 'c', value_name = "ADDR", required_unless_present = "server")]
    pub connect: Option<Ipv4Addr>,
    /// TCP port.
    #[arg(short = 'p', default_value_t = 18515)]
    pub port: u16,
    /// Device: an iwarpd socket (unix:PATH) or config (embedded mode); default $IWARP_DEVICE.
    #[arg(short = 'd', value_name = "DEVICE")]
    pub device: Option<String>,
    /// CRC for this connection: default (the daemon's), on, off, require.
    #[arg(long, default_value = "default", value_parser = parse_crc)]
    pub crc: CrcMode,
    /// Give up waiting for the peer after this many seconds.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Between empty polls: spin, or yield the CPU (`sched_yield`). Default: yield below 4
    /// CPUs, where the engine's threads cannot each have a core of their own.
    #[arg(long, value_parser = ["spin", "yield"])]
    pub idle: Option<String>,
}

static YIELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One turn of a polling loop that found nothing: spin or yield (`--idle`).
pub fn idle() {
    if YIELD.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn parse_crc(s: &str) -> Result<CrcMode, String> {
    match s {
        "default" => Ok(CrcMode::Default),
        "on" => Ok(CrcMode::On),
        "off" => Ok(CrcMode::Off),
        "require" => Ok(CrcMode::Require),
        _ => Err(format!("--crc {s:?}: allowed default, on, off, require")),
    }
}

impl Net {
    pub fn open(&self) -> verbs::Result<Device> {
        let few_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) < 4;
        let y = self.idle.as_deref().map_or(few_cpus, |v| v == "yield");
        YIELD.store(y, std::sync::atomic::Ordering::Relaxed);
        Device::open_or_default(self.device.as_deref())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.max(1))
    }

    /// Connect (client) or accept one client (server) with `qp`, sending `mine` as private
    /// data; returns the CM id and the peer's region.
    pub fn establish(
        &self,
        dev: &Device,
        qp: &Qp,
        mine: RemoteMr,
    ) -> verbs::Result<(CmId, RemoteMr)> {
        let param = ConnParam::new()
            .crc(self.crc)
            .private_data(&mine.to_bytes());
        let (id, peer_pd) = match self.connect {
            Some(ip) => {
                let id = dev.create_cm_id()?;
                id.connect(qp, SocketAddrV4::new(ip, self.port), &param)?;
                let est = id.wait_established(self.timeout())?;
                eprintln!(
                    "connected to {} (CRC {}, MPA rev {})",
                    est.remote, est.crc, est.revision
                );
                (id, est.private_data)
            }
            None => {
                let lis = dev.create_cm_id()?;
                lis.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, self.port), 1)?;
                eprintln!("listening on port {}", self.port);
                let req = lis.get_request(Duration::from_secs(3600))?;
                req.id.accept(qp, &param)?;
                let est = req.id.wait_established(self.timeout())?;
                eprintln!(
                    "accepted {} (CRC {}, MPA rev {})",
                    est.remote, est.crc, est.revision
                );
                (req.id, req.private_data)
            }
        };
        let b: [u8; 16] = peer_pd
            .get(..16)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                verbs::Error::Protocol("peer sent no region in its private data".into())
            })?;
        Ok((id, RemoteMr::from_bytes(&b)))
    }
}

/// Fill `buf` with a pattern that depends on `seed` and the position.
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
