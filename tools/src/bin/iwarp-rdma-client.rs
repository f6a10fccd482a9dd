//! `iwarp-rdma-client`: rdma-core's `librdmacm/examples/rdma_client` over iwarpd (same
//! options `-s`/`-p`, exchange and output; see `iwarp_tools::rdmacs`).
//!
//! Exit status: 0 success; 255 the exchange failed (rdma_client returns -1); 2 bad command line.

use clap::Parser;
use iwarp_tools::rdmacs::{self, CommonArgs, DEFAULT_PORT};
use std::net::{SocketAddrV4, ToSocketAddrs};
use std::process::ExitCode;

/// rdma_client over iwarpd: connect, send 16 bytes, receive 16 bytes, disconnect.
#[derive(Debug, Parser)]
#[command(name = "iwarp-rdma-client", version, disable_version_flag = true)]
struct Cli {
    /// Server address.
    #[arg(short = 's', value_name = "SERVER", default_value = "127.0.0.1")]
    server: String,
    /// Server port.
    #[arg(short = 'p', value_name = "PORT", default_value_t = DEFAULT_PORT)]
    port: u16,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let addr = match (cli.server.as_str(), cli.port).to_socket_addrs() {
        Ok(mut it) => it.find_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(v4),
            _ => None,
        }),
        Err(e) => {
            println!("rdma_getaddrinfo: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(addr): Option<SocketAddrV4> = addr else {
        println!("rdma_getaddrinfo: {}: no IPv4 address", cli.server);
        return ExitCode::from(2);
    };
    let opts = cli.common.options(addr);
    println!("rdma_client: start");
    let ret = rdmacs::run_client(&opts);
    println!("rdma_client: end {ret}");
    ExitCode::from(ret as u8)
}
