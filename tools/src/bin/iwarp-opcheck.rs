//! `iwarp-opcheck`: run every RDMA operation against a peer at the given sizes, checking the
//! data by SHA-256 on both sides (the end-to-end check of issue 7).
//!
//! Exit status: 0 every check passed; 1 a check or a connection failed; 2 bad command line.

use clap::{ArgGroup, Parser};
use iwarp_tools::crc_arg::Crc;
use iwarp_tools::opcheck::{Op, client, server};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::Duration;
use verbs::{ConnParam, CrcMode, Device};

/// Every RDMA operation over iwarpd, with SHA-256 checks on both sides.
#[derive(Debug, Parser)]
#[command(
    name = "iwarp-opcheck",
    version,
    after_help = "Exit status: 0 all checks passed, 1 a check failed, 2 bad command line."
)]
#[command(group(ArgGroup::new("role").required(true).args(["server", "connect"])))]
struct Cli {
    /// Serve clients.
    #[arg(short = 's')]
    server: bool,
    /// Connect to the server at ADDR.
    #[arg(short = 'c', value_name = "ADDR")]
    connect: Option<Ipv4Addr>,
    /// TCP port.
    #[arg(short = 'p', default_value_t = 7471)]
    port: u16,
    /// Device: an iwarpd socket (unix:PATH) or an iwarpd config (embedded mode).
    #[arg(short = 'd', value_name = "DEVICE")]
    device: Option<String>,
    /// Operations: all, or a comma list of send, send_se, send_inv, write, write_imm, read,
    /// fetch_add, cmp_swap.
    #[arg(long, default_value = "all")]
    ops: String,
    /// Sizes in bytes, comma separated (suffixes k and m allowed).
    #[arg(long, default_value = "0,1,4k,1m,8m")]
    sizes: String,
    /// Rounds over all operations and sizes.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Connections at once (client).
    #[arg(long, default_value_t = 1)]
    qps: u32,
    /// Server: data region size (the largest size a client may check).
    #[arg(long, default_value = "8m", value_parser = parse_size)]
    max_size: usize,
    /// Server: exit after this many connections (0: serve forever).
    #[arg(long, default_value_t = 0)]
    conns: u64,
    /// CRC for the connections.
    #[arg(long, value_enum, default_value_t = Crc::Default)]
    crc: Crc,
    /// Ask for MPA markers.
    #[arg(long)]
    markers: bool,
    /// Seconds a step may take.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// A line per check.
    #[arg(short = 'v')]
    verbose: bool,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.strip_suffix('k') {
        Some(n) => (n, 1 << 10),
        None => match s.strip_suffix('m') {
            Some(n) => (n, 1 << 20),
            None => (s.as_str(), 1),
        },
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|n| *n <= 1 << 30)
        .ok_or_else(|| {
            format!("size {s:?}: a number of bytes up to 1g, with an optional k or m suffix")
        })
}

fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    s.split(',').map(parse_size).collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (ops, sizes) = match (Op::parse_list(&cli.ops), parse_sizes(&cli.sizes)) {
        (Ok(o), Ok(s)) => (o, s),
        (Err(e), _) => {
            eprintln!("iwarp-opcheck: --ops: {e}");
            return ExitCode::from(2);
        }
        (_, Err(e)) => {
            eprintln!("iwarp-opcheck: --sizes: {e}");
            return ExitCode::from(2);
        }
    };
    let crc = CrcMode::from(cli.crc);
    let mut param = ConnParam::new().crc(crc);
    if cli.markers {
        param = param.markers(true);
    }
    let dev = match Device::open_or_default(cli.device.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("iwarp-opcheck: {e}");
            return ExitCode::FAILURE;
        }
    };
    let timeout = Duration::from_secs(cli.timeout.max(1));
    let r = match cli.connect {
        None => server::run(
            &dev,
            &server::ServerOpts {
                addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, cli.port),
                max_size: cli.max_size,
                conns: cli.conns,
                param,
                timeout,
            },
        )
        .map(|failed| failed == 0),
        Some(ip) => client::run(
            &dev,
            &client::ClientOpts {
                addr: SocketAddrV4::new(ip, cli.port),
                ops,
                sizes,
                repeat: cli.repeat,
                qps: cli.qps,
                param,
                timeout,
                verbose: cli.verbose,
            },
        )
        .map(|_| true),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("iwarp-opcheck: {e}");
            ExitCode::FAILURE
        }
    }
}
