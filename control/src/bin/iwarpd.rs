//! `iwarpd`: the iWARP daemon.
//!
//! `iwarpd --config FILE` runs it; `iwarpd --check-config FILE` validates and exits.
//! Exit status: 0 success, 1 runtime failure (or a diagnostic ping that lost replies),
//! 2 bad command line or configuration.

use clap::{ArgGroup, Parser};
use control::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--version`: the package version and the client ABI version it serves.
fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        format!(
            "{} (client ABI {})",
            env!("CARGO_PKG_VERSION"),
            abi::ABI_VERSION_STR
        )
    })
}

/// The iWARP daemon: RDMA over a userspace TCP on a DPDK port, serving clients (the `verbs`
/// library) over a Unix socket and shared memory.
#[derive(Debug, Parser)]
#[command(
    name = "iwarpd",
    version = version(),
    after_help = "Exit status: 0 success; 1 runtime failure (or a diagnostic ping that lost \
                  replies); 2 bad command line or configuration.\n\
                  Every config key is described in README.md (\"Configuration keys\"); an \
                  environment variable IWARPD_<SECTION>__<KEY> sets one on top of the file."
)]
#[command(group(ArgGroup::new("mode").required(true).args(["config", "check_config"])))]
struct Cli {
    /// Run the daemon with this config file until SIGINT/SIGTERM.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Validate this config file, print the EAL arguments, and exit.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
}

fn main() -> ExitCode {
    // clap exits with 2 on a usage error and 0 for --help/--version.
    let cli = Cli::parse();
    let (path, check) = match (cli.config, cli.check_config) {
        (_, Some(p)) => (p, true),
        (Some(p), None) => (p, false),
        (None, None) => unreachable!("clap requires one of --config and --check-config"),
    };
    let cfg = match Config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iwarpd: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cfg.log.level.clone());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    if check {
        return match control::daemon::check(&cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iwarpd: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    match control::daemon::run(&cfg) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("iwarpd: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
