//! `iwarp-rdma-server`: rdma-core's `librdmacm/examples/rdma_server` over iwarpd (same
//! option `-p`, exchange and output; see `iwarp_tools::rdmacs`).
//!
//! Exit status: 0 success; 255 the exchange failed (rdma_server returns -1); 2 bad command line.

use clap::Parser;
use iwarp_tools::rdmacs::{self, CommonArgs, DEFAULT_PORT};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;

/// rdma_server over iwarpd: accept one connection, receive 16 bytes, send 16 bytes, disconnect.
#[derive(Debug, Parser)]
#[command(name = "iwarp-rdma-server", version, disable_version_flag = true)]
struct Cli {
    /// Port to listen on (every address of the device).
    #[arg(short = 'p', value_name = "PORT", default_value_t = DEFAULT_PORT)]
    port: u16,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, cli.port);
    let opts = cli.common.options(addr);
    println!("rdma_server: start");
    let ret = rdmacs::run_server(&opts);
    println!("rdma_server: end {ret}");
    ExitCode::from(ret as u8)
}
