//! `iwarp-rping`: rdma-core's `rping` over iwarpd (same options, wire exchange and output).
//!
//! Exit status: 0 success; 1 the ping failed (connection refused, data mismatch, peer gone);
//! 2 bad command line.

use clap::{ArgAction, ArgGroup, Parser, ValueEnum};
use iwarp_tools::crc_arg::Crc;
use iwarp_tools::rping::{self, BUFSIZE, DEFAULT_PORT, DEFAULT_SIZE, MIN_SIZE, Options};
use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;
use verbs::{ConnParam, CrcMode, Rtr, tx_fault};

/// rping over iwarpd: an RDMA ping-pong test (RDMA Read, RDMA Write and Sends), compatible
/// with rdma-core's rping on the wire and in its output.
/// Peer-to-peer ready-to-receive message (RFC 6581 §8), client side.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RtrArg {
    /// The daemon's `[mpa] rtr`.
    Default,
    /// No peer-to-peer mode.
    None,
    /// Zero-length RDMA Write.
    Write,
    /// Zero-length RDMA Read.
    Read,
    /// Zero-length Send.
    Send,
}

#[derive(Debug, Parser)]
#[command(
    name = "iwarp-rping",
    version,
    disable_version_flag = true,
    after_help = "Differences from rdma-core's rping: -d takes the device (rping's -d is \
                  --debug here); -q is accepted and ignored (our QPs are always created by the \
                  application). Exit status: 0 success, 1 failure, 2 bad command line."
)]
#[command(group(ArgGroup::new("role").required(true).args(["server", "client"])))]
struct Cli {
    /// Server side.
    #[arg(short = 's')]
    server: bool,
    /// Client side.
    #[arg(short = 'c')]
    client: bool,
    /// Address: the server's (client), or the one to listen on (server; default 0.0.0.0).
    #[arg(short = 'a', value_name = "ADDR")]
    addr: Option<String>,
    /// Source address to bind to (client); must be the device's address.
    #[arg(short = 'I', value_name = "ADDR")]
    source: Option<Ipv4Addr>,
    /// Port.
    #[arg(short = 'p', value_name = "PORT", default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Ping count (0: forever).
    #[arg(short = 'C', value_name = "COUNT", default_value_t = 0)]
    count: u64,
    /// Ping data size in bytes (23 to 65535).
    #[arg(short = 'S', value_name = "SIZE", default_value_t = DEFAULT_SIZE)]
    size: usize,
    /// Display ping data to stdout.
    #[arg(short = 'v')]
    verbose: bool,
    /// Validate ping data.
    #[arg(short = 'V')]
    validate: bool,
    /// Persistent server mode allowing multiple connections.
    #[arg(short = 'P')]
    persistent: bool,
    /// Use a self-created QP (accepted for compatibility; always the case here).
    #[arg(short = 'q')]
    self_qp: bool,
    /// Device: an iwarpd socket (unix:PATH) or an iwarpd config (embedded mode); default
    /// $IWARP_DEVICE, else /run/iwarpd.sock.
    #[arg(short = 'd', value_name = "DEVICE")]
    device: Option<String>,
    /// Debug messages on stderr.
    #[arg(long)]
    debug: bool,
    /// CRC for this connection.
    #[arg(long, value_enum, default_value_t = Crc::Default)]
    crc: Crc,
    /// Ask for MPA markers.
    #[arg(long)]
    markers: bool,
    /// Peer-to-peer mode (RFC 6581) with this RTR message (client; a server honours what
    /// the client offers).
    #[arg(long, value_enum, default_value_t = RtrArg::Default)]
    rtr: RtrArg,
    /// Print the version (long form only: -V is rping's validate).
    #[arg(long, action = ArgAction::Version)]
    version: Option<bool>,
    /// Test only: the server's RDMA Write crosses the end of the client's buffer by 8
    /// bytes (the peer must answer with a TERMINATE; used by `make interop`).
    #[arg(long, hide_short_help = true)]
    fault_write_past_end: bool,
    /// Test only: break the client's first Send on the wire (badcrc, truncate, fin, rst);
    /// the daemon needs `[control] allow_faults = true`.
    #[arg(long, value_name = "FAULT", hide_short_help = true, value_parser = ["badcrc", "truncate", "fin", "rst"])]
    fault: Option<String>,
    /// Give up when the peer does not answer within this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    timeout: u64,
}

fn resolve(addr: &str, port: u16) -> Result<SocketAddrV4, String> {
    (addr, port)
        .to_socket_addrs()
        .map_err(|e| format!("getaddrinfo failed ({e}) - invalid hostname or IP address"))?
        .find_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(v4),
            _ => None,
        })
        .ok_or_else(|| format!("{addr}: no IPv4 address (iwarpd speaks IPv4)"))
}

fn options(cli: &Cli) -> Result<Options, String> {
    if !(MIN_SIZE..BUFSIZE).contains(&cli.size) {
        return Err(format!(
            "Invalid size {} (valid range is {MIN_SIZE} to {BUFSIZE})",
            cli.size
        ));
    }
    let addr = match (&cli.addr, cli.client) {
        (Some(a), _) => resolve(a, cli.port)?,
        (None, false) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, cli.port),
        (None, true) => return Err("the client needs the server's address: -a ADDR".into()),
    };
    let crc = CrcMode::from(cli.crc);
    // rping_init_conn_param: responder_resources = initiator_depth = 1.
    let mut conn = ConnParam::new().ird(1).ord(1).crc(crc);
    if cli.markers {
        conn = conn.markers(true);
    }
    conn = conn.rtr(match cli.rtr {
        RtrArg::Default => Rtr::Default,
        RtrArg::None => Rtr::None,
        RtrArg::Write => Rtr::Write,
        RtrArg::Read => Rtr::Read,
        RtrArg::Send => Rtr::Send,
    });
    Ok(Options {
        device: cli.device.clone(),
        addr,
        size: cli.size,
        count: cli.count,
        verbose: cli.verbose,
        validate: cli.validate,
        debug: cli.debug,
        conn,
        persistent: cli.persistent,
        timeout: Duration::from_secs(cli.timeout.max(1)),
        source: cli.source,
        write_past_end: cli.fault_write_past_end,
        fault: cli.fault.as_deref().map(|f| match f {
            "badcrc" => tx_fault::BAD_CRC,
            "truncate" => tx_fault::TRUNCATE,
            "fin" => tx_fault::FIN,
            _ => tx_fault::RST,
        }),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let opts = match options(&cli) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let r = if cli.server {
        rping::run_server(&opts)
    } else {
        rping::run_client(&opts).map(|_| ())
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
