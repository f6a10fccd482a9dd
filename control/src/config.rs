//! `iwarpd` configuration (TOML). Unknown keys and bad values are errors that name the key and
//! the allowed values; see configs/README.md for every key.

use dataplane::rdma::diag::DiagOp;
use serde::Deserialize;
use std::net::Ipv4Addr;
use std::path::Path;

/// A configuration error: the key (dotted path) and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {err}")]
    Io {
        /// File path.
        path: String,
        /// OS error.
        err: std::io::Error,
    },
    /// TOML syntax, unknown key or wrong type (toml's message names the key and what it expected).
    #[error("config {path}: {msg}")]
    Parse {
        /// File path.
        path: String,
        /// Parser message.
        msg: String,
    },
    /// A value is out of range or malformed.
    #[error("config {path}: key `{key}`: {msg}")]
    Value {
        /// File path.
        path: String,
        /// Dotted key.
        key: String,
        /// What is wrong and what is allowed.
        msg: String,
    },
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[eal]`
    #[serde(default)]
    pub eal: EalSection,
    /// `[port]`
    pub port: PortSection,
    /// `[dataplane]`
    #[serde(default)]
    pub dataplane: DataplaneSection,
    /// `[stats]`
    #[serde(default)]
    pub stats: StatsSection,
    /// `[tcp]`
    #[serde(default)]
    pub tcp: TcpSection,
    /// `[diag]`
    #[serde(default)]
    pub diag: DiagSection,
    /// `[log]`
    #[serde(default)]
    pub log: LogSection,
    /// `[control]`
    #[serde(default)]
    pub control: ControlSection,
    /// `[mpa]`
    #[serde(default)]
    pub mpa: MpaSection,
}

/// `[control]`: the clients' control socket.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSection {
    /// Unix socket (`SOCK_SEQPACKET`) clients connect to.
    pub socket: String,
    /// Most clients connected at once (1..=4096).
    pub max_clients: u32,
    /// Permission bits of the socket file, octal ("0600".."0777"): who may connect.
    pub socket_mode: String,
    /// Test only: clients may break their QPs' next FPDU (`InjectFault`; default false).
    pub allow_faults: bool,
}

impl Default for ControlSection {
    fn default() -> Self {
        ControlSection {
            socket: "/run/iwarpd.sock".into(),
            max_clients: 256,
            socket_mode: "0660".into(),
            allow_faults: false,
        }
    }
}

impl ControlSection {
    /// `socket_mode` as bits (validated: 0o600..=0o777).
    pub fn mode(&self) -> Option<u32> {
        let m = u32::from_str_radix(self.socket_mode.trim_start_matches("0o"), 8).ok()?;
        (0o600..=0o777).contains(&m).then_some(m)
    }
}

/// `[mpa]`: MPA negotiation defaults (RFC 5044 §7, RFC 6581); a client may override CRC,
/// markers, revision and RTR per connect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MpaSection {
    /// "on" (ask for CRC), "off" (use it only if the peer asks), "require" (refuse a peer
    /// without CRC).
    pub crc: String,
    /// Ask the peer for markers (RFC 5044 §5).
    pub markers: bool,
    /// MPA revision: 1, or 2 (RFC 6581 enhanced connection setup).
    pub revision: u8,
    /// Peer-to-peer ready-to-receive message we offer as initiator: "none", "write", "read",
    /// "send" (RFC 6581 §5).
    pub rtr: String,
    /// Inbound RDMA Read/atomic depth (0..=16383).
    pub ird: u16,
    /// Outbound RDMA Read/atomic depth (0..=16383).
    pub ord: u16,
    /// Largest ULP private data in MPA Request/Reply, bytes (0..=508).
    pub private_data_max: usize,
    /// MPA startup timeout in milliseconds (100..=600000).
    pub timeout_ms: u64,
    /// An FPDU that stays half-received this long ends the stream with a TERMINATE, in
    /// milliseconds (100..=600000; siw has no such timer and hangs).
    pub rx_timeout_ms: u64,
    /// How FPDU payload goes into frames: "by_ref" (attached to the registered memory, no
    /// copy by us), "copy" (copied behind the headers), "auto" (copy on devices that copy
    /// frames with the CPU anyway, such as memif and af_xdp; by reference on NICs).
    pub tx_payload: String,
    /// Initiator: milliseconds between the MPA Reply and our first FPDU (RTR included), 0..=1000.
    /// Stock Linux siw as responder may leave an FPDU that arrives right after its Reply
    /// unprocessed (its receive upcall is not hooked yet); 50 ms avoided that in every try.
    /// 0 when no peer is such a siw (our stack, hardware RNICs).
    pub first_fpdu_delay_ms: u64,
}

impl Default for MpaSection {
    fn default() -> Self {
        MpaSection {
            crc: "off".into(),
            markers: false,
            revision: 2,
            rtr: "none".into(),
            ird: 16,
            ord: 16,
            private_data_max: 252,
            timeout_ms: 10_000,
            rx_timeout_ms: 5_000,
            tx_payload: "auto".into(),
            first_fpdu_delay_ms: 50,
        }
    }
}

/// Hugepage policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Hugepages {
    /// Use hugepages (`--in-memory`) if any are free, else `--no-huge`.
    #[default]
    Auto,
    /// Require hugepages.
    On,
    /// Never use hugepages (`--no-huge`).
    Off,
}

/// `[eal]`: DPDK Environment Abstraction Layer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EalSection {
    /// Hugepage policy: "auto", "on" or "off".
    #[serde(default)]
    pub hugepages: Hugepages,
    /// Memory in MiB when running without hugepages (`-m`).
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u32,
    /// `--file-prefix`, needed to run several instances without hugepages. Default: iwarpd-<pid>.
    #[serde(default)]
    pub file_prefix: Option<String>,
    /// Extra EAL arguments, appended verbatim.
    #[serde(default)]
    pub extra_args: Vec<String>,
}

fn default_memory_mb() -> u32 {
    512
}

impl Default for EalSection {
    fn default() -> Self {
        EalSection {
            hugepages: Hugepages::Auto,
            memory_mb: 512,
            file_prefix: None,
            extra_args: vec![],
        }
    }
}

/// `[port]`: the NIC (one port per daemon for now).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSection {
    /// A DPDK virtual device string (`net_memif0,role=server,...`, `net_af_xdp0,iface=veth0`,
    /// `net_af_packet0,iface=veth0`, `net_tap0,iface=tap0`) or a PCI address (`0000:3b:00.0`).
    pub device: String,
    /// Our IPv4 address with prefix length, e.g. "10.77.0.1/24".
    pub ip: String,
    /// Default gateway (optional).
    #[serde(default)]
    pub gateway: Option<String>,
    /// IP MTU (576..=9000).
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    /// RX descriptors per queue (power of two, 64..=16384).
    #[serde(default = "default_desc")]
    pub rx_desc: u16,
    /// TX descriptors per queue (power of two, 64..=16384).
    #[serde(default = "default_desc")]
    pub tx_desc: u16,
    /// Promiscuous mode.
    #[serde(default)]
    pub promiscuous: bool,
}

fn default_mtu() -> u16 {
    1500
}
fn default_desc() -> u16 {
    1024
}

/// `[dataplane]`: poll-mode threads.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataplaneSection {
    /// Cores to pin one dataplane thread each to (one RX/TX queue pair per thread).
    #[serde(default = "default_cores")]
    pub cores: Vec<usize>,
    /// Mbufs in the pool (per daemon).
    #[serde(default = "default_mbufs")]
    pub mbufs: u32,
    /// Per-core mempool cache.
    #[serde(default = "default_mbuf_cache")]
    pub mbuf_cache: u32,
    /// "stack" (full processing) or "echo" (swap MACs and bounce: the poll-loop benchmark).
    #[serde(default = "default_mode")]
    pub mode: String,
    /// "spin" (poll without pause, a core of its own) or "yield" (`sched_yield` after an
    /// iteration that received and sent nothing: for cores shared with the application's
    /// polling thread, as in embedded mode on a 2-core machine).
    #[serde(default = "default_idle")]
    pub idle: String,
    /// Nanoseconds the loop holds its frames after a TX burst the device took only part of
    /// (its ring full) before offering them again; 0 offers them at every iteration.
    #[serde(default = "default_tx_backoff_ns")]
    pub tx_backoff_ns: u64,
}

fn default_cores() -> Vec<usize> {
    vec![0]
}
fn default_mbufs() -> u32 {
    32767
}
fn default_mbuf_cache() -> u32 {
    256
}
fn default_mode() -> String {
    "stack".into()
}
fn default_idle() -> String {
    "spin".into()
}
/// The longest `dataplane.tx_backoff_ns` allowed: a hold is meant to last a few of the peer's
/// RX bursts, far below the ring's drain time and any TCP timer.
pub const MAX_TX_BACKOFF_NS: u64 = 100_000;
fn default_tx_backoff_ns() -> u64 {
    0
}

impl Default for DataplaneSection {
    fn default() -> Self {
        DataplaneSection {
            cores: default_cores(),
            mbufs: default_mbufs(),
            mbuf_cache: 256,
            mode: default_mode(),
            idle: default_idle(),
            tx_backoff_ns: default_tx_backoff_ns(),
        }
    }
}

/// `[stats]`: counters readable while running.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsSection {
    /// File rewritten every `interval_ms` with all counters (atomically, via rename).
    #[serde(default)]
    pub file: Option<String>,
    /// Refresh interval in ms (>= 10).
    #[serde(default = "default_stats_interval")]
    pub interval_ms: u64,
}

fn default_stats_interval() -> u64 {
    1000
}

impl Default for StatsSection {
    fn default() -> Self {
        StatsSection {
            file: None,
            interval_ms: default_stats_interval(),
        }
    }
}

/// `[tcp]`: the userspace TCP (defaults suit 10/40GbE).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpSection {
    /// MSS we announce; 0 means MTU - 40.
    pub mss: u16,
    /// Receive window in bytes (16 KiB..=1 GiB).
    pub recv_window: u32,
    /// Send buffer in bytes (16 KiB..=1 GiB).
    pub send_window: u32,
    /// Window scale shift we offer (0..=14); -1 disables the option.
    pub window_scale: i8,
    /// Offer/accept SACK.
    pub sack: bool,
    /// Offer/accept timestamps.
    pub timestamps: bool,
    /// "cubic", "newreno" or "bbr".
    pub cc: String,
    /// Delayed-ACK timeout in microseconds (0: acknowledge at once; at most 500000).
    pub delayed_ack_us: u64,
    /// Stretch ACKs: in-order segments acknowledged together (2..=4096; 2: every second
    /// segment, RFC 9293 §3.8.6.3), or a quarter of the window if that comes first; tcp's
    /// `TcpConfig::ack_stretch_segments` tells the immediate ACKs that stay.
    pub ack_stretch_segs: u32,
    /// Nagle's algorithm.
    pub nagle: bool,
    /// Keepalive idle time in seconds (0: off).
    pub keepalive_secs: u64,
    /// TIME-WAIT duration in milliseconds.
    pub time_wait_ms: u64,
    /// Minimum RTO in milliseconds. 200 (Linux's value) by default: a smaller one fires before
    /// a Linux peer's delayed ACK (40 ms and more) and collapses the congestion window.
    pub rto_min_ms: u64,
    /// Minimum RTO in milliseconds while two or more full segments are outstanding (the peer
    /// ACKs every second segment at once, so no delayed-ACK allowance); at most rto_min_ms.
    pub rto_min_bulk_ms: u64,
    /// Initial RTO in milliseconds.
    pub rto_initial_ms: u64,
    /// Maximum RTO in milliseconds.
    pub rto_max_ms: u64,
    /// Bytes held out of order per connection.
    pub max_ooo_bytes: usize,
    /// Segments held out of order per connection.
    pub max_ooo_segments: usize,
    /// Out-of-order segments smaller than a quarter of the MSS held per connection.
    pub max_ooo_small_segments: usize,
    /// Out-of-order segments (mbufs) held over all connections of a dataplane thread; 0: a
    /// quarter of `dataplane.mbufs` split between the threads (the pool is shared).
    pub max_ooo_mbufs: usize,
    /// SYN cookies (RFC 4987) once `syn_backlog` half-open connections wait on a listener.
    pub syn_cookies: bool,
    /// RACK-TLP loss detection (RFC 8985) with SACK peers; off: RFC 6675 DupThresh.
    pub rack_tlp: bool,
    /// Proportional Rate Reduction (RFC 6937) in loss recovery (CUBIC, NewReno).
    pub prr: bool,
    /// HyStart++ (RFC 9406) in the initial slow start (CUBIC, NewReno).
    pub hystart: bool,
    /// Undo spurious retransmission timeouts (RFC 3522 detection, RFC 4015 response).
    pub rto_undo: bool,
    /// SACK compression (Linux's `tcp_comp_sack_nr`): with a SACK peer, after three immediate
    /// ACKs for the same cumulative ACK, out-of-order segments that only add SACK blocks are
    /// acknowledged together (once `sack_compress_min_held` are held), at the latest after
    /// this many (0:
    /// off, every receive burst).
    pub sack_compress_segs: u32,
    /// Upper bound of the SACK compression delay in microseconds (Linux's
    /// `tcp_comp_sack_delay_ns`; the delay is RTT/20, at least 100 us).
    pub sack_compress_delay_us: u64,
    /// Out-of-order segments held before SACK compression starts (small flights are not
    /// compressed: each of their few ACKs counts when ACKs are lost too).
    pub sack_compress_min_held: usize,
    /// Half-open connections per listener before SYN cookies.
    pub syn_backlog: usize,
    /// Connections per dataplane thread.
    pub max_connections: usize,
    /// Connections per listening port (per dataplane thread).
    pub max_listener_connections: usize,
    /// FIN-WAIT-2 timeout in milliseconds (0: none).
    pub fin_wait2_ms: u64,
}

impl Default for TcpSection {
    fn default() -> Self {
        TcpSection {
            mss: 0,
            recv_window: 4 << 20,
            send_window: 4 << 20,
            window_scale: 7,
            sack: true,
            timestamps: true,
            cc: "cubic".into(),
            delayed_ack_us: 1000,
            ack_stretch_segs: tcp::DEFAULT_ACK_STRETCH,
            nagle: false,
            keepalive_secs: 0,
            time_wait_ms: 60_000,
            rto_min_ms: 200,
            rto_min_bulk_ms: 20,
            rto_initial_ms: 1000,
            rto_max_ms: 60_000,
            max_ooo_bytes: 4 << 20,
            max_ooo_segments: 4096,
            max_ooo_small_segments: 64,
            max_ooo_mbufs: 0,
            syn_cookies: true,
            rack_tlp: true,
            prr: true,
            hystart: true,
            rto_undo: true,
            sack_compress_segs: 44,
            sack_compress_delay_us: 1000,
            sack_compress_min_held: 64,
            syn_backlog: 256,
            max_connections: 65536,
            max_listener_connections: 65536,
            fin_wait2_ms: 60_000,
        }
    }
}

/// `[diag]`: diagnostics for testing with ordinary tools.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagSection {
    /// Ping this address once the link is up.
    #[serde(default)]
    pub ping: Option<String>,
    /// Echo requests to send.
    #[serde(default = "default_ping_count")]
    pub ping_count: u32,
    /// Interval between them in ms.
    #[serde(default = "default_ping_interval")]
    pub ping_interval_ms: u64,
    /// ICMP payload bytes (0..=1472).
    #[serde(default = "default_ping_size")]
    pub ping_size: usize,
    /// Exit when the ping is done (status 0 if every reply came back, 1 otherwise).
    #[serde(default)]
    pub exit_after_ping: bool,
    /// Stop after this many seconds (0: run until SIGINT/SIGTERM).
    #[serde(default)]
    pub run_seconds: u64,
    /// TCP echo service port.
    #[serde(default)]
    pub echo_port: Option<u16>,
    /// TCP discard service port.
    #[serde(default)]
    pub discard_port: Option<u16>,
    /// Hash what the discard service receives (SHA-256 printed per connection).
    #[serde(default = "default_true")]
    pub discard_sha256: bool,
    /// Echo ring per connection in bytes.
    #[serde(default = "default_echo_buffer")]
    pub echo_buffer: usize,
    /// Connect to "a.b.c.d:port" and send `send_bytes` pattern bytes plus their SHA-256.
    #[serde(default)]
    pub send_to: Option<String>,
    /// Pattern bytes per connection.
    #[serde(default = "default_send_bytes")]
    pub send_bytes: u64,
    /// Parallel sender connections.
    #[serde(default = "default_one")]
    pub send_connections: u32,
    /// Append the SHA-256 of the sent bytes (off: a zero trailer, for benchmarks).
    #[serde(default = "default_true")]
    pub send_sha256: bool,
    /// Exit when every sender connection is done (status 1 if one failed).
    #[serde(default)]
    pub exit_after_send: bool,
    /// Diagnostic RDMA sink/responder port (every dataplane thread listens on it).
    #[serde(default)]
    pub rdma_port: Option<u16>,
    /// Diagnostic RDMA generator: connect to "a.b.c.d:port" and run the operations.
    #[serde(default)]
    pub rdma_connect: Option<String>,
    /// Generator operations, in order: "write", "send", "read", "oob" (a Write across the
    /// end of the sink, which must draw the TERMINATE), "send_inv", "send_se", "write_imm",
    /// "fetch_add", "cmp_swap", and the test-only fault ops "badcrc", "truncate", "fin",
    /// "rst" (a Write whose first FPDU is broken: docs/rdma-seams.md "Fault switches").
    #[serde(default = "default_rdma_ops")]
    pub rdma_ops: Vec<String>,
    /// Generator sizes in bytes (each operation runs at each size), each <= `rdma_buffer`.
    #[serde(default = "default_rdma_sizes")]
    pub rdma_sizes: Vec<u64>,
    /// Repetitions of the whole plan (1..=1000000).
    #[serde(default = "default_one")]
    pub rdma_iterations: u32,
    /// Buffer size of the sink, source and receives, and the generator's (4096..=1 GiB).
    #[serde(default = "default_rdma_buffer")]
    pub rdma_buffer: u64,
    /// SHA-256 of every operation on both ends (off for throughput runs).
    #[serde(default = "default_true")]
    pub rdma_sha256: bool,
    /// Override `[mpa] crc` for the diagnostic service: "on", "off", "require".
    #[serde(default)]
    pub rdma_crc: Option<String>,
    /// Override `[mpa] markers` for the diagnostic service.
    #[serde(default)]
    pub rdma_markers: Option<bool>,
    /// Exit when the generator is done (status 1 if an operation failed).
    #[serde(default)]
    pub exit_after_rdma: bool,
}

fn default_rdma_ops() -> Vec<String> {
    vec!["write".into(), "send".into(), "read".into()]
}
fn default_rdma_sizes() -> Vec<u64> {
    vec![0, 1, 4096, 1 << 20, 8 << 20]
}
fn default_rdma_buffer() -> u64 {
    8 << 20
}

fn default_true() -> bool {
    true
}
fn default_echo_buffer() -> usize {
    4 << 20
}
fn default_send_bytes() -> u64 {
    1 << 20
}
fn default_one() -> u32 {
    1
}

impl Default for DiagSection {
    fn default() -> Self {
        DiagSection {
            ping: None,
            ping_count: default_ping_count(),
            ping_interval_ms: default_ping_interval(),
            ping_size: default_ping_size(),
            exit_after_ping: false,
            run_seconds: 0,
            echo_port: None,
            discard_port: None,
            discard_sha256: true,
            echo_buffer: default_echo_buffer(),
            send_to: None,
            send_bytes: default_send_bytes(),
            send_connections: 1,
            send_sha256: true,
            exit_after_send: false,
            rdma_port: None,
            rdma_connect: None,
            rdma_ops: default_rdma_ops(),
            rdma_sizes: default_rdma_sizes(),
            rdma_iterations: 1,
            rdma_buffer: default_rdma_buffer(),
            rdma_sha256: true,
            rdma_crc: None,
            rdma_markers: None,
            exit_after_rdma: false,
        }
    }
}

fn default_ping_count() -> u32 {
    5
}
fn default_ping_interval() -> u64 {
    100
}
fn default_ping_size() -> usize {
    56
}

/// `[log]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// "error", "warn", "info", "debug" or "trace" (RUST_LOG overrides).
    #[serde(default = "default_level")]
    pub level: String,
}

fn default_level() -> String {
    "info".into()
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            level: default_level(),
        }
    }
}

/// An IPv4 address with a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// Address.
    pub addr: Ipv4Addr,
    /// Prefix length 1..=32.
    pub prefix: u8,
}

/// Parse "a.b.c.d/len".
pub fn parse_cidr(s: &str) -> Option<Cidr> {
    let (a, p) = s.split_once('/')?;
    let addr: Ipv4Addr = a.trim().parse().ok()?;
    let prefix: u8 = p.trim().parse().ok()?;
    (1..=32).contains(&prefix).then_some(Cidr { addr, prefix })
}

impl Config {
    /// Read and validate a file, with the keys set by `IWARPD_<SECTION>__<KEY>` environment
    /// variables applied on top (config_env.rs).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        crate::config_env::load(path, std::env::vars_os())
    }

    /// Parse and validate TOML text (`path` is used in messages).
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            msg: e.to_string(),
        })?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::Value {
            path: path.into(),
            key: key.into(),
            msg,
        };
        let dev = self.port.device.trim();
        if !(dev.starts_with("net_") || is_pci_address(dev)) {
            return Err(bad(
                "port.device",
                format!(
                    "{dev:?} is neither a DPDK virtual device (net_memif*, net_af_xdp*, net_af_packet*, net_tap*, ...) nor a PCI address (dddd:bb:dd.f)"
                ),
            ));
        }
        if parse_cidr(&self.port.ip).is_none() {
            return Err(bad(
                "port.ip",
                format!(
                    "{:?} is not an IPv4 address with prefix, expected e.g. \"10.77.0.1/24\"",
                    self.port.ip
                ),
            ));
        }
        if let Some(g) = &self.port.gateway
            && g.parse::<Ipv4Addr>().is_err()
        {
            return Err(bad("port.gateway", format!("{g:?} is not an IPv4 address")));
        }
        if !(576..=9000).contains(&self.port.mtu) {
            return Err(bad(
                "port.mtu",
                format!("{} is out of range, allowed 576..=9000", self.port.mtu),
            ));
        }
        for (k, v) in [
            ("port.rx_desc", self.port.rx_desc),
            ("port.tx_desc", self.port.tx_desc),
        ] {
            if !(64..=16384).contains(&v) || !v.is_power_of_two() {
                return Err(bad(
                    k,
                    format!("{v} is not allowed: a power of two in 64..=16384"),
                ));
            }
        }
        let ncores = core_affinity::get_core_ids().map(|c| c.len()).unwrap_or(1);
        if self.dataplane.cores.is_empty() {
            return Err(bad("dataplane.cores", "must list at least one core".into()));
        }
        for &c in &self.dataplane.cores {
            if c >= ncores {
                return Err(bad(
                    "dataplane.cores",
                    format!("core {c} does not exist, allowed 0..={}", ncores - 1),
                ));
            }
        }
        if let Some(msg) = not_one_of(&self.dataplane.mode, &["stack", "echo"]) {
            return Err(bad("dataplane.mode", msg));
        }
        if let Some(msg) = not_one_of(&self.dataplane.idle, &["spin", "yield"]) {
            return Err(bad("dataplane.idle", msg));
        }
        if self.dataplane.tx_backoff_ns > MAX_TX_BACKOFF_NS {
            return Err(bad(
                "dataplane.tx_backoff_ns",
                format!(
                    "{} is too long, allowed 0..={MAX_TX_BACKOFF_NS}",
                    self.dataplane.tx_backoff_ns
                ),
            ));
        }
        if self.dataplane.mbufs < 1024 {
            return Err(bad(
                "dataplane.mbufs",
                format!("{} is too small, allowed >= 1024", self.dataplane.mbufs),
            ));
        }
        if self.dataplane.mbuf_cache > 512 {
            return Err(bad(
                "dataplane.mbuf_cache",
                format!(
                    "{} is too large, allowed 0..=512",
                    self.dataplane.mbuf_cache
                ),
            ));
        }
        if self.eal.memory_mb < 64 {
            return Err(bad(
                "eal.memory_mb",
                format!("{} is too small, allowed >= 64", self.eal.memory_mb),
            ));
        }
        if self.stats.interval_ms < 10 {
            return Err(bad(
                "stats.interval_ms",
                format!("{} is too small, allowed >= 10", self.stats.interval_ms),
            ));
        }
        if let Some(p) = &self.diag.ping
            && p.parse::<Ipv4Addr>().is_err()
        {
            return Err(bad("diag.ping", format!("{p:?} is not an IPv4 address")));
        }
        if self.diag.ping_size > 1472 {
            return Err(bad(
                "diag.ping_size",
                format!("{} is too large, allowed 0..=1472", self.diag.ping_size),
            ));
        }
        self.validate_tcp(path)?;
        self.validate_control(&bad)?;
        self.validate_mpa(&bad)?;
        self.validate_diag_rdma(&bad)?;
        if !matches!(
            self.log.level.as_str(),
            "error" | "warn" | "info" | "debug" | "trace"
        ) {
            return Err(bad(
                "log.level",
                format!(
                    "{:?} is not allowed, expected one of error, warn, info, debug, trace",
                    self.log.level
                ),
            ));
        }
        Ok(())
    }

    /// The `[tcp]` keys: ranges, allowed names, and the RTO ordering.
    fn validate_tcp(&self, path: &str) -> Result<(), ConfigError> {
        let t = &self.tcp;
        let bad = |key: &str, msg: String| {
            Err(ConfigError::Value {
                path: path.into(),
                key: format!("tcp.{key}"),
                msg,
            })
        };
        if let Some(msg) = not_one_of(&t.cc, &["cubic", "newreno", "bbr"]) {
            return bad("cc", msg);
        }
        if t.mss != 0 && !(536..=9000).contains(&t.mss) {
            return bad(
                "mss",
                format!("{} is out of range, allowed 0 or 536..=9000", t.mss),
            );
        }
        for (k, v) in [
            ("recv_window", t.recv_window),
            ("send_window", t.send_window),
        ] {
            if !(16 << 10..=1 << 30).contains(&v) {
                return bad(
                    k,
                    format!("{v} is out of range, allowed 16384..=1073741824"),
                );
            }
        }
        if !(-1..=14).contains(&t.window_scale) {
            return bad(
                "window_scale",
                format!(
                    "{} is out of range, allowed -1 (off) or 0..=14",
                    t.window_scale
                ),
            );
        }
        if t.window_scale < 0 && t.recv_window > 65535 {
            return bad(
                "recv_window",
                format!(
                    "{} needs window scaling, allowed <= 65535 with window_scale = -1",
                    t.recv_window
                ),
            );
        }
        if t.delayed_ack_us > 500_000 {
            return bad(
                "delayed_ack_us",
                format!("{} is too large, allowed 0..=500000", t.delayed_ack_us),
            );
        }
        if !(2..=tcp::MAX_ACK_STRETCH).contains(&t.ack_stretch_segs) {
            return bad(
                "ack_stretch_segs",
                format!(
                    "{} is out of range, allowed 2 (every second segment) ..=4096",
                    t.ack_stretch_segs
                ),
            );
        }
        if t.sack_compress_segs > 1024 {
            return bad(
                "sack_compress_segs",
                format!(
                    "{} is too large, allowed 0 (off) ..=1024",
                    t.sack_compress_segs
                ),
            );
        }
        if t.sack_compress_min_held > 65536 {
            return bad(
                "sack_compress_min_held",
                format!(
                    "{} is too large, allowed 0..=65536",
                    t.sack_compress_min_held
                ),
            );
        }
        if !(1..=500_000).contains(&t.sack_compress_delay_us) {
            return bad(
                "sack_compress_delay_us",
                format!(
                    "{} is out of range, allowed 1..=500000",
                    t.sack_compress_delay_us
                ),
            );
        }
        if t.rto_min_ms == 0 || t.rto_min_ms > t.rto_initial_ms || t.rto_min_ms > t.rto_max_ms {
            return bad(
                "rto_min_ms",
                format!(
                    "{} is not allowed: 0 < rto_min_ms <= rto_initial_ms ({}) and <= rto_max_ms ({})",
                    t.rto_min_ms, t.rto_initial_ms, t.rto_max_ms
                ),
            );
        }
        if t.rto_min_bulk_ms == 0 {
            return bad(
                "rto_min_bulk_ms",
                "0 is not allowed: 0 < rto_min_bulk_ms (values above rto_min_ms act as rto_min_ms)"
                    .to_string(),
            );
        }
        if t.rto_initial_ms > t.rto_max_ms {
            return bad(
                "rto_initial_ms",
                format!(
                    "{} is above rto_max_ms ({})",
                    t.rto_initial_ms, t.rto_max_ms
                ),
            );
        }
        for (k, v) in [
            ("max_ooo_segments", t.max_ooo_segments),
            ("syn_backlog", t.syn_backlog),
            ("max_connections", t.max_connections),
            ("max_listener_connections", t.max_listener_connections),
        ] {
            if v == 0 {
                return bad(k, "0 is not allowed, must be >= 1".into());
            }
        }
        Ok(())
    }

    fn validate_control(
        &self,
        bad: &dyn Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let sock = &self.control.socket;
        // sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
        if sock.is_empty() || sock.len() > 107 || !sock.starts_with('/') || sock.contains('\0') {
            return Err(bad(
                "control.socket",
                format!("{sock:?} is not allowed: an absolute path of 1..=107 bytes"),
            ));
        }
        if self.control.mode().is_none() {
            return Err(bad(
                "control.socket_mode",
                format!(
                    "{:?} is not allowed: octal permission bits in \"0600\"..=\"0777\" (the owner must keep read and write)",
                    self.control.socket_mode
                ),
            ));
        }
        if !(1..=4096).contains(&self.control.max_clients) {
            return Err(bad(
                "control.max_clients",
                format!(
                    "{} is out of range, allowed 1..=4096",
                    self.control.max_clients
                ),
            ));
        }
        Ok(())
    }

    /// The diagnostic RDMA service's `[diag] rdma_*` keys.
    fn validate_diag_rdma(
        &self,
        bad: &dyn Fn(&str, String) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let d = &self.diag;
        if d.rdma_port == Some(0) {
            return Err(bad(
                "diag.rdma_port",
                "0 is not allowed, allowed 1..=65535".into(),
            ));
        }
        if let Some(a) = &d.rdma_connect
            && parse_sockaddr(a).is_none()
        {
            return Err(bad(
                "diag.rdma_connect",
                format!("{a:?} is not an address and port, expected e.g. \"10.77.0.1:7174\""),
            ));
        }
        if d.rdma_ops.is_empty() {
            return Err(bad(
                "diag.rdma_ops",
                "must list at least one operation".into(),
            ));
        }
        for op in &d.rdma_ops {
            if DiagOp::parse(op).is_none() {
                return Err(bad(
                    "diag.rdma_ops",
                    format!(
                        "{op:?} is not allowed, expected one of {}",
                        DiagOp::NAMES.map(|o| format!("{o:?}")).join(", ")
                    ),
                ));
            }
        }
        if !(4096..=1 << 30).contains(&d.rdma_buffer) {
            return Err(bad(
                "diag.rdma_buffer",
                format!(
                    "{} is out of range, allowed 4096..=1073741824",
                    d.rdma_buffer
                ),
            ));
        }
        if d.rdma_sizes.is_empty() {
            return Err(bad("diag.rdma_sizes", "must list at least one size".into()));
        }
        if d.rdma_connect.is_some()
            && let Some(s) = d.rdma_sizes.iter().find(|&&s| s > d.rdma_buffer)
        {
            return Err(bad(
                "diag.rdma_sizes",
                format!(
                    "{s} exceeds diag.rdma_buffer ({}), allowed 0..=rdma_buffer",
                    d.rdma_buffer
                ),
            ));
        }
        if !(1..=1_000_000).contains(&d.rdma_iterations) {
            return Err(bad(
                "diag.rdma_iterations",
                format!("{} is out of range, allowed 1..=1000000", d.rdma_iterations),
            ));
        }
        if let Some(msg) = d.rdma_crc.as_ref().and_then(|c| not_one_of(c, CRC_MODES)) {
            return Err(bad("diag.rdma_crc", msg));
        }
        Ok(())
    }

    fn validate_mpa(&self, bad: &dyn Fn(&str, String) -> ConfigError) -> Result<(), ConfigError> {
        let m = &self.mpa;
        if let Some(msg) = not_one_of(&m.crc, CRC_MODES) {
            return Err(bad("mpa.crc", msg));
        }
        if !matches!(m.revision, 1 | 2) {
            return Err(bad(
                "mpa.revision",
                format!("{} is not allowed, expected 1 or 2", m.revision),
            ));
        }
        if let Some(msg) = not_one_of(&m.rtr, &["none", "write", "read", "send"]) {
            return Err(bad("mpa.rtr", msg));
        }
        for (k, v) in [("mpa.ird", m.ird), ("mpa.ord", m.ord)] {
            if v > 16383 {
                return Err(bad(k, format!("{v} is out of range, allowed 0..=16383")));
            }
        }
        if m.private_data_max > 508 {
            return Err(bad(
                "mpa.private_data_max",
                format!("{} is out of range, allowed 0..=508", m.private_data_max),
            ));
        }
        if !(100..=600_000).contains(&m.timeout_ms) {
            return Err(bad(
                "mpa.timeout_ms",
                format!("{} is out of range, allowed 100..=600000", m.timeout_ms),
            ));
        }
        if !(100..=600_000).contains(&m.rx_timeout_ms) {
            return Err(bad(
                "mpa.rx_timeout_ms",
                format!("{} is out of range, allowed 100..=600000", m.rx_timeout_ms),
            ));
        }
        if m.first_fpdu_delay_ms > 1000 {
            return Err(bad(
                "mpa.first_fpdu_delay_ms",
                format!(
                    "{} is out of range, allowed 0..=1000",
                    m.first_fpdu_delay_ms
                ),
            ));
        }
        if let Some(msg) = not_one_of(&m.tx_payload, &["auto", "copy", "by_ref"]) {
            return Err(bad("mpa.tx_payload", msg));
        }
        Ok(())
    }

    /// The DPDK port name for `port.device`: the vdev name before the first comma, or the PCI
    /// address itself.
    pub fn port_name(&self) -> &str {
        let d = self.port.device.trim();
        d.split(',').next().unwrap_or(d)
    }
}

/// Parse "a.b.c.d:port".
pub fn parse_sockaddr(s: &str) -> Option<(Ipv4Addr, u16)> {
    let (a, p) = s.split_once(':')?;
    Some((
        a.trim().parse().ok()?,
        p.trim().parse().ok().filter(|&p: &u16| p != 0)?,
    ))
}

/// `dddd:bb:dd.f` or `bb:dd.f`.
pub fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
    let devfn = |p: &str| {
        p.split_once('.').is_some_and(|(d, f)| {
            hex(d, 2) && f.len() == 1 && f.chars().all(|c| ('0'..='7').contains(&c))
        })
    };
    match parts.as_slice() {
        [dom, bus, df] => hex(dom, 4) && hex(bus, 2) && devfn(df),
        [bus, df] => hex(bus, 2) && devfn(df),
        _ => false,
    }
}

/// `[mpa] crc` and `[diag] rdma_crc`.
const CRC_MODES: &[&str] = &["on", "off", "require"];

/// The error message for a string key whose `value` is not one of `allowed` (`None` when it
/// is): `"x" is not allowed, expected "a", "b" or "c"`.
fn not_one_of(value: &str, allowed: &[&str]) -> Option<String> {
    if allowed.contains(&value) {
        return None;
    }
    let quoted: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    let list = match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    };
    Some(format!("{value:?} is not allowed, expected {list}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_one_of_names_the_allowed_values() {
        assert_eq!(not_one_of("on", CRC_MODES), None);
        assert_eq!(
            not_one_of("maybe", CRC_MODES).unwrap(),
            r#""maybe" is not allowed, expected "on", "off" or "require""#
        );
        assert_eq!(
            not_one_of("x", &["spin", "yield"]).unwrap(),
            r#""x" is not allowed, expected "spin" or "yield""#
        );
        assert_eq!(
            not_one_of("x", &["none", "write", "read", "send"]).unwrap(),
            r#""x" is not allowed, expected "none", "write", "read" or "send""#
        );
    }

    const MINIMAL: &str = "[port]\ndevice = \"net_memif0,role=server\"\nip = \"10.0.0.1/24\"\n";

    fn err(text: &str) -> String {
        Config::parse(text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn minimal_config_gets_valid_defaults() {
        let c = Config::parse(MINIMAL, "t.toml").unwrap();
        assert_eq!(c.stats.interval_ms, 1000);
        assert_eq!(c.diag.ping_count, 5);
        assert_eq!(c.diag.ping_size, 56);
        assert_eq!(c.dataplane.cores, vec![0]);
        assert_eq!(c.port.mtu, 1500);
        assert_eq!(c.port_name(), "net_memif0");
        assert_eq!(c.log.level, "info");
        assert_eq!(c.control.socket, "/run/iwarpd.sock");
        assert_eq!(c.mpa.crc, "off");
        assert_eq!((c.mpa.revision, c.mpa.ird, c.mpa.ord), (2, 16, 16));
        assert_eq!(c.mpa.rtr, "none");
    }

    #[test]
    fn mpa_and_control_sections_parse() {
        let c = Config::parse(
            &format!(
                "{MINIMAL}[control]\nsocket = \"/tmp/x.sock\"\n[mpa]\ncrc = \"require\"\nmarkers = true\nrevision = 1\nrtr = \"read\"\nird = 0\nord = 4\nprivate_data_max = 508\n"
            ),
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.control.socket, "/tmp/x.sock");
        assert_eq!(c.mpa.crc, "require");
        assert!(c.mpa.markers);
        assert_eq!((c.mpa.revision, c.mpa.ird, c.mpa.ord), (1, 0, 4));
        assert_eq!(c.mpa.rtr, "read");
        assert_eq!(c.mpa.private_data_max, 508);
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err(&format!("{MINIMAL}bogus = 1\n"));
        assert!(e.contains("bogus"), "{e}");
        assert!(e.contains("expected one of"), "{e}");
        let e = err("[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\nspeed = 4\n");
        assert!(e.contains("speed") && e.contains("`mtu`"), "{e}");
        let e = err(&format!("{MINIMAL}[nonsense]\n"));
        assert!(e.contains("nonsense"), "{e}");
    }

    #[test]
    fn bad_values_name_key_and_allowed_values() {
        let cases = [
            (
                "[port]\ndevice = \"eth0\"\nip = \"10.0.0.1/24\"\n",
                "port.device",
                "PCI address",
            ),
            (
                "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1\"\n",
                "port.ip",
                "10.77.0.1/24",
            ),
            (
                "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\nmtu = 100\n",
                "port.mtu",
                "576..=9000",
            ),
            (
                "[port]\ndevice = \"net_tap0\"\nip = \"10.0.0.1/24\"\nrx_desc = 1000\n",
                "port.rx_desc",
                "power of two",
            ),
            (
                &format!("{MINIMAL}[dataplane]\nmode = \"fast\"\n"),
                "dataplane.mode",
                "\"stack\" or \"echo\"",
            ),
            (
                &format!("{MINIMAL}[dataplane]\nidle = \"nap\"\n"),
                "dataplane.idle",
                "\"spin\" or \"yield\"",
            ),
            (
                &format!("{MINIMAL}[dataplane]\ntx_backoff_ns = 100001\n"),
                "dataplane.tx_backoff_ns",
                "0..=100000",
            ),
            (
                &format!("{MINIMAL}[dataplane]\ncores = [999]\n"),
                "dataplane.cores",
                "does not exist",
            ),
            (
                &format!("{MINIMAL}[eal]\nhugepages = \"maybe\"\n"),
                "hugepages",
                "auto",
            ),
            (
                &format!("{MINIMAL}[log]\nlevel = \"loud\"\n"),
                "log.level",
                "error, warn, info",
            ),
            (
                &format!("{MINIMAL}[diag]\nping = \"x\"\n"),
                "diag.ping",
                "IPv4",
            ),
            (
                &format!("{MINIMAL}[stats]\ninterval_ms = 1\n"),
                "stats.interval_ms",
                ">= 10",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_connect = \"10.0.0.2\"\n"),
                "diag.rdma_connect",
                "10.77.0.1:7174",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_ops = [\"write\", \"copy\"]\n"),
                "diag.rdma_ops",
                "\"oob\"",
            ),
            (
                &format!(
                    "{MINIMAL}[diag]\nrdma_connect = \"10.0.0.2:7\"\nrdma_sizes = [1, 9000000]\n"
                ),
                "diag.rdma_sizes",
                "exceeds diag.rdma_buffer",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_buffer = 100\n"),
                "diag.rdma_buffer",
                "4096..=1073741824",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_crc = \"maybe\"\n"),
                "diag.rdma_crc",
                "\"require\"",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_iterations = 0\n"),
                "diag.rdma_iterations",
                "1..=1000000",
            ),
            (
                &format!("{MINIMAL}[diag]\nrdma_port = 0\n"),
                "diag.rdma_port",
                "1..=65535",
            ),
            (
                &format!("{MINIMAL}[tcp]\ncc = \"vegas\"\n"),
                "tcp.cc",
                "\"cubic\", \"newreno\" or \"bbr\"",
            ),
            (
                &format!("{MINIMAL}[tcp]\nmss = 100\n"),
                "tcp.mss",
                "536..=9000",
            ),
            (
                &format!("{MINIMAL}[tcp]\nwindow_scale = -1\n"),
                "tcp.recv_window",
                "<= 65535",
            ),
            (
                &format!("{MINIMAL}[tcp]\nrto_min_ms = 2000\n"),
                "tcp.rto_min_ms",
                "rto_initial_ms",
            ),
            (
                &format!("{MINIMAL}[tcp]\nrto_min_bulk_ms = 0\n"),
                "tcp.rto_min_bulk_ms",
                "0 < rto_min_bulk_ms",
            ),
            (
                &format!("{MINIMAL}[tcp]\nack_stretch_segs = 1\n"),
                "tcp.ack_stretch_segs",
                "2 (every second segment) ..=4096",
            ),
            (
                &format!("{MINIMAL}[tcp]\nack_stretch_segs = 4097\n"),
                "tcp.ack_stretch_segs",
                "..=4096",
            ),
            (
                &format!("{MINIMAL}[tcp]\nsack_compress_segs = 5000\n"),
                "tcp.sack_compress_segs",
                "0 (off) ..=1024",
            ),
            (
                &format!("{MINIMAL}[tcp]\nsack_compress_delay_us = 0\n"),
                "tcp.sack_compress_delay_us",
                "1..=500000",
            ),
            (
                &format!("{MINIMAL}[tcp]\nsyn_backlog = 0\n"),
                "tcp.syn_backlog",
                ">= 1",
            ),
            (
                &format!("{MINIMAL}[control]\nsocket = \"relative.sock\"\n"),
                "control.socket",
                "absolute path",
            ),
            (
                &format!("{MINIMAL}[control]\nsocket_mode = \"0999\"\n"),
                "control.socket_mode",
                "\"0600\"..=\"0777\"",
            ),
            (
                &format!("{MINIMAL}[control]\nsocket_mode = \"0066\"\n"),
                "control.socket_mode",
                "owner",
            ),
            (
                &format!("{MINIMAL}[control]\nmax_clients = 0\n"),
                "control.max_clients",
                "1..=4096",
            ),
            (
                &format!("{MINIMAL}[mpa]\ncrc = \"maybe\"\n"),
                "mpa.crc",
                "\"on\", \"off\" or \"require\"",
            ),
            (
                &format!("{MINIMAL}[mpa]\ntx_payload = \"zero\"\n"),
                "mpa.tx_payload",
                "\"auto\", \"copy\" or \"by_ref\"",
            ),
            (
                &format!("{MINIMAL}[mpa]\nrevision = 3\n"),
                "mpa.revision",
                "1 or 2",
            ),
            (
                &format!("{MINIMAL}[mpa]\nrtr = \"atomic\"\n"),
                "mpa.rtr",
                "\"write\", \"read\" or \"send\"",
            ),
            (
                &format!("{MINIMAL}[mpa]\nird = 20000\n"),
                "mpa.ird",
                "0..=16383",
            ),
            (
                &format!("{MINIMAL}[mpa]\nord = 16384\n"),
                "mpa.ord",
                "0..=16383",
            ),
            (
                &format!("{MINIMAL}[mpa]\nprivate_data_max = 600\n"),
                "mpa.private_data_max",
                "0..=508",
            ),
            (
                &format!("{MINIMAL}[mpa]\ntimeout_ms = 5\n"),
                "mpa.timeout_ms",
                "out of range",
            ),
            (
                &format!("{MINIMAL}[mpa]\nrx_timeout_ms = 700000\n"),
                "mpa.rx_timeout_ms",
                "100..=600000",
            ),
            (
                &format!("{MINIMAL}[mpa]\nfirst_fpdu_delay_ms = 5000\n"),
                "mpa.first_fpdu_delay_ms",
                "0..=1000",
            ),
            (
                &format!("{MINIMAL}[mpa]\nmarkers = \"yes\"\n"),
                "markers",
                "bool",
            ),
        ];
        for (text, key, allowed) in cases {
            let e = err(text);
            assert!(e.contains(key), "{key}: {e}");
            assert!(e.contains(allowed), "{key}: {e}");
        }
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:3b:00.0"));
        assert!(is_pci_address("3b:00.1"));
        assert!(!is_pci_address("3b:00.8"));
        assert!(!is_pci_address("net_tap0"));
        assert!(!is_pci_address("0000:3b:00"));
    }

    #[test]
    fn shipped_configs_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                Config::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 5, "expected the shipped configs, found {n}");
    }
}
