//! `iwarpd`: the iWARP daemon.
//!
//! Usage: `iwarpd --config FILE` runs it; `iwarpd --check-config FILE` validates and exits.
//! Exit status: 0 success, 1 runtime failure (or a diagnostic ping that lost replies),
//! 2 bad command line or configuration.

use control::config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: iwarpd --config FILE | --check-config FILE | --version";

enum Cmd {
    Run(PathBuf),
    Check(PathBuf),
    Version,
}

fn parse_args() -> Result<Cmd, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, file] if flag == "--config" => Ok(Cmd::Run(file.into())),
        [flag, file] if flag == "--check-config" => Ok(Cmd::Check(file.into())),
        [flag] if flag == "--version" => Ok(Cmd::Version),
        [flag] if flag.starts_with("--config=") => Ok(Cmd::Run(flag["--config=".len()..].into())),
        _ => Err(format!("bad arguments {args:?}\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    let cmd = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iwarpd: {e}");
            return ExitCode::from(2);
        }
    };
    let path = match cmd {
        Cmd::Version => {
            println!("iwarpd {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Cmd::Run(ref p) | Cmd::Check(ref p) => p.clone(),
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
    match cmd {
        Cmd::Check(_) => match control::daemon::check(&cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iwarpd: {e:#}");
                ExitCode::from(2)
            }
        },
        _ => match control::daemon::run(&cfg) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                eprintln!("iwarpd: error: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}
