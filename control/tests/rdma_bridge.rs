//! The iWARP data path between two iwarpd on af_packet, each in its own network namespace,
//! joined by a veth/bridge (the `VethPair` of `common`: A in the "iwarpd" namespace, B in the
//! "kernel" one, the bridge in a third where tcpdump captures and nftables drops):
//!
//! - a capture of whole sessions (MPA negotiation; Send, Send with Invalidate, Send with SE,
//!   Write, Write with Immediate, Read, FetchAdd, CompareSwap; a TERMINATE) decodes in tshark's
//!   `iwarp_mpa` and `iwarp_ddp_rdmap` dissectors with no malformed frame, every MPA CRC as
//!   tshark computes it, and the number of messages of each RDMAP opcode the plan implies;
//! - 256 MiB of RDMA Writes and 256 MiB of Sends at 1 % random loss on the bridge arrive
//!   intact (SHA-256 computed on both ends of every 8 MiB operation);
//! - a Linux client that opens TCP to the RDMA port and never sends its MPA Request is closed
//!   on after `[mpa] timeout_ms` (RFC 5044 §7.1 leaves the timer to the implementation); and
//!   a Linux server that takes our MPA Request and never replies is closed on after it too,
//!   the connect failing with the MPA timeout.
mod common;

use common::{
    Proc, TempDir, VethPair, diag_ops as ops, have_tool, root_or_skip, sh_lossy, start_iwarpd_in,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// One test at a time: two busy-polling daemons take both cores.
static SERIAL: Mutex<()> = Mutex::new(());

const A_IP: &str = "10.79.0.2";
const B_IP: &str = "10.79.0.1";

fn config(prefix: &str, iface: &str, ip: &str, core: u32, diag: &str) -> String {
    format!(
        "[eal]\nhugepages = \"off\"\nmemory_mb = 512\nfile_prefix = \"{prefix}-{}\"\n\
         [port]\ndevice = \"net_af_packet0,iface={iface},framecnt=8192\"\nip = \"{ip}/24\"\n\
         [dataplane]\ncores = [{core}]\nmbufs = 16384\n[diag]\nrun_seconds = 900\n{diag}",
        std::process::id()
    )
}

/// Stop with SIGTERM; expect exit status 0; the output.
fn stop(mut d: Proc) -> String {
    d.signal("TERM");
    let code = d.wait(Duration::from_secs(20));
    let out = d.output();
    assert_eq!(code, Some(0), "iwarpd did not stop cleanly:\n{out}");
    out
}

/// A (sink, in the iwarpd namespace) and B (generator, in the kernel namespace, whose own
/// address is elsewhere) with `diag_a` / `diag_b`; B runs to completion. Returns A's and
/// B's output and B's exit code.
fn run_pair(
    veth: &VethPair,
    dir: &TempDir,
    diag_a: &str,
    diag_b: &str,
    secs: u64,
) -> (String, String, Option<i32>) {
    let a = start_iwarpd_in(
        &veth.dns,
        dir,
        "a",
        &config("iwt-bra", &veth.dif, A_IP, 0, diag_a),
    );
    let mut b = start_iwarpd_in(
        &veth.kns,
        dir,
        "b",
        &config("iwt-brb", &veth.kif, B_IP, 1, diag_b),
    );
    let code = b.wait(Duration::from_secs(secs));
    let out_b = b.output();
    drop(b);
    let out_a = stop(a);
    (out_a, out_b, code)
}

/// The kernel namespace gets an address outside the daemons' pair (B uses `B_IP` there).
fn topology(name: &str) -> VethPair {
    VethPair::new(name, "10.79.0.254/24")
}

#[test]
fn a_captured_session_decodes_in_tshark() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "a_captured_session_decodes_in_tshark";
    if !root_or_skip(test) || !have_tool("tshark", test) || !have_tool("tcpdump", test) {
        return;
    }
    let veth = topology("cap");
    let dir = TempDir::new(test);
    let pcap = dir.path("bridge.pcap");
    // On A's bridge port (frames forwarded between ports never show on br0 itself).
    let port = format!("db{}", &veth.dif[1..]);
    let cap_cmd = format!(
        "ip netns exec {} tcpdump -i {port} -U --immediate-mode -s 0 -w {} tcp port 7174",
        veth.bns,
        pcap.display()
    );
    let mut cap = Proc::spawn_ready(
        &cap_cmd,
        &dir.path("tcpdump.log"),
        "listening on",
        Duration::from_secs(10),
    );
    // Every operation at 1 byte and at 20000 (several FPDUs); each size ends with an RDMA
    // Write across the end of the sink, which draws a TERMINATE (then B reconnects).
    let ops_list = "[\"write\", \"send\", \"send_inv\", \"send_se\", \"write_imm\", \"read\", \
                    \"fetch_add\", \"cmp_swap\", \"oob\"]";
    let crc = "rdma_crc = \"on\"\n";
    let (out_a, out_b, code) = run_pair(
        &veth,
        &dir,
        &format!("rdma_port = 7174\nrdma_buffer = 65536\n{crc}"),
        &format!(
            "rdma_connect = \"{A_IP}:7174\"\nrdma_ops = {ops_list}\nrdma_sizes = [1, 20000]\n\
             rdma_buffer = 65536\nexit_after_rdma = true\n{crc}"
        ),
        120,
    );
    std::thread::sleep(Duration::from_millis(300));
    cap.signal("INT");
    let _ = cap.wait(Duration::from_secs(5));
    // tcpdump's own count of frames its capture ring lost (a loaded machine): then some
    // messages are missing from the file, though they were on the wire (both ends check every
    // operation below).
    let dropped = kernel_drops(&cap.output());
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    assert!(
        out_b.contains("rdma-diag done ok=18 failed=0"),
        "{out_b}\nA:\n{out_a}"
    );
    // Both ends agree on every data operation's bytes.
    let g = ops(&out_b, "iwarpd: rdma op=");
    let s = ops(&out_a, "iwarpd: rdma-sink op=");
    assert_eq!(s.len(), 16, "{out_a}");
    for (x, y) in g.iter().filter(|o| o.0 != "oob").zip(&s) {
        assert_eq!((&x.0, x.1, &x.2), (&y.0, y.1, &y.2), "{out_b}\n{out_a}");
        assert!(x.4 && y.4, "{x:?} {y:?}");
    }

    let p = pcap.display();
    // RPC-over-RDMA's heuristic dissector takes our Send payloads for its own headers (as in
    // iwarp/tests): not ours to decode.
    let ts = format!("tshark -r {p} --disable-protocol rpcordma");
    let (ok, full) = sh_lossy(&format!("{ts} -V 2>/dev/null"));
    if let Ok(keep) = std::env::var("IWARP_KEEP_PCAP") {
        let _ = std::fs::copy(&pcap, keep);
    }
    assert!(ok, "tshark failed: {full}");
    assert!(
        !full.contains("Malformed"),
        "tshark found a malformed frame:\n{full}"
    );
    assert!(
        !full.contains("[Expert Info (Error"),
        "tshark reports an error:\n{full}"
    );
    let (_, fields) = sh_lossy(&format!(
        "{ts} -T fields -E separator=/t -e tcp.stream -e tcp.seq -e tcp.srcport \
         -e iwarp_mpa.req -e iwarp_mpa.rep -e iwarp_mpa.ulpdulength -e iwarp_mpa.crc_check \
         -e iwarp_rdma.opcode -e iwarp_ddp.last_flag -e _ws.malformed 2>/dev/null"
    ));
    let d = decode(&fields);
    assert_eq!(d.malformed, 0);
    // Two MPA negotiations (the first connection, a new one after the first TERMINATE),
    // each Request answered.
    assert_eq!((d.requests, d.replies), (2, 2), "{fields}");
    assert!(d.fpdus > 100, "{} FPDUs decoded:\n{fields}", d.fpdus);
    assert_eq!(
        d.crc_checked, d.fpdus,
        "every FPDU's CRC checked:\n{fields}"
    );
    // tshark computed each CRC and found it equal to the one on the wire.
    let good = full.matches("(Good CRC32)").count();
    assert!(!full.contains("Bad CRC"), "tshark found a bad CRC:\n{full}");
    assert!(good >= d.fpdus, "{good} good CRCs for {} FPDUs", d.fpdus);
    // Messages (DDP last flag set) per RDMAP opcode (RFC 5040 §4.4, RFC 7306 §8), for the
    // two sizes: 8 checks each answered by a Send, the checks themselves are Send with SE.
    let want: [(u8, &str, usize); 10] = [
        (1, "Read Request", 2),
        (2, "Read Response", 2),
        (3, "Send", 2 + 16),
        (4, "Send with Invalidate", 2),
        (5, "Send with SE", 2 + 16),
        (7, "Terminate", 2),
        (8, "Immediate Data", 2),
        (10, "Atomic Request", 4),
        (11, "Atomic Response", 4),
        (0, "RDMA Write", 4),
    ];
    for (op, name, n) in want {
        let got = d.messages.get(&op).copied().unwrap_or(0);
        if op == 0 {
            // write, write_imm, and the oob Write (its last FPDU may be refused unsent).
            assert!(
                got >= n,
                "{name}: {got} messages, want >= {n}: {:?}",
                d.messages
            );
        } else if dropped > 0 {
            eprintln!("the capture lost {dropped} frames: {name} seen {got} times of {n}");
            assert!(got <= n, "{name}: {:?}\n{fields}", d.messages);
        } else {
            assert_eq!(got, n, "{name}: {:?}\n{fields}", d.messages);
        }
    }
}

/// The "N packets dropped by kernel" tcpdump prints when it stops (0 when absent).
fn kernel_drops(tcpdump_log: &str) -> u64 {
    tcpdump_log
        .lines()
        .find_map(|l| {
            l.strip_suffix(" packets dropped by kernel")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

#[derive(Debug, Default)]
struct Decoded {
    requests: usize,
    replies: usize,
    fpdus: usize,
    crc_checked: usize,
    malformed: usize,
    /// RDMAP opcode -> messages (FPDUs with the DDP last flag), retransmissions counted once.
    messages: BTreeMap<u8, usize>,
}

/// Tally tshark's fields (one line per frame; several FPDUs in a frame are comma lists).
fn decode(fields: &str) -> Decoded {
    let mut d = Decoded::default();
    let mut seen = BTreeSet::new();
    for line in fields.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 10 {
            continue;
        }
        // Retransmitted frames (same stream, direction and sequence number) are counted once.
        if f[3..10].iter().all(|x| x.is_empty()) {
            continue;
        }
        if !seen.insert((f[0].to_owned(), f[2].to_owned(), f[1].to_owned())) {
            continue;
        }
        let list = |s: &str| -> Vec<String> {
            s.split(',')
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect()
        };
        d.requests += usize::from(!f[3].is_empty());
        d.replies += usize::from(!f[4].is_empty());
        d.fpdus += list(f[5]).len();
        d.crc_checked += list(f[6]).len();
        d.malformed += usize::from(!f[9].is_empty());
        let (opc, last) = (list(f[7]), list(f[8]));
        for (o, l) in opc.iter().zip(&last) {
            let o = if let Some(h) = o.strip_prefix("0x") {
                u8::from_str_radix(h, 16).unwrap_or(255)
            } else {
                o.parse().unwrap_or(255)
            };
            if l == "1" || l == "True" {
                *d.messages.entry(o).or_default() += 1;
            }
        }
    }
    d
}

#[test]
fn writes_and_sends_of_256_mib_survive_1_percent_loss() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "writes_and_sends_of_256_mib_survive_1_percent_loss";
    if !root_or_skip(test) {
        return;
    }
    let veth = topology("loss");
    veth.set_loss(1);
    let dir = TempDir::new(test);
    let iters = std::env::var("IWARP_RDMA_LOSS_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32u64);
    let (out_a, out_b, code) = run_pair(
        &veth,
        &dir,
        "rdma_port = 7174\nrdma_buffer = 8388608\n",
        &format!(
            "rdma_connect = \"{A_IP}:7174\"\nrdma_ops = [\"write\", \"send\"]\n\
             rdma_sizes = [8388608]\nrdma_iterations = {iters}\nrdma_buffer = 8388608\n\
             exit_after_rdma = true\n"
        ),
        900,
    );
    assert_eq!(code, Some(0), "B failed:\n{out_b}\nA:\n{out_a}");
    let n = 2 * iters as usize;
    assert!(
        out_b.contains(&format!("rdma-diag done ok={n} failed=0")),
        "{out_b}\nA:\n{out_a}"
    );
    let g = ops(&out_b, "iwarpd: rdma op=");
    let s = ops(&out_a, "iwarpd: rdma-sink op=");
    assert_eq!((g.len(), s.len()), (n, n), "{out_b}\n{out_a}");
    for (x, y) in g.iter().zip(&s) {
        // Each end hashed what it has; both digests on both sides agree.
        assert_eq!((&x.0, x.1), (&y.0, y.1));
        assert_eq!(x.1, 8 << 20);
        assert_eq!(x.2, y.2, "{x:?} {y:?}");
        assert_eq!((&x.3, &y.3), (&y.2, &x.2), "{x:?} {y:?}");
        assert!(x.4 && y.4 && x.2.len() == 64, "{x:?} {y:?}");
    }
    let bytes: u64 = g.iter().map(|o| o.1).sum();
    assert_eq!(bytes, 2 * iters * (8 << 20));
    // The loss was real: B's TCP retransmitted.
    let rtx = common::counter(&out_b, "lcore.0.tcp", "retransmissions").unwrap_or(0);
    assert!(rtx > 0, "no retransmissions at 1 % loss:\n{out_b}");
}

#[test]
fn a_peer_that_never_sends_its_mpa_request_is_closed_on() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "a_peer_that_never_sends_its_mpa_request_is_closed_on";
    if !root_or_skip(test) {
        return;
    }
    let veth = topology("mpato");
    let dir = TempDir::new(test);
    let a = start_iwarpd_in(
        &veth.dns,
        &dir,
        "a",
        &config(
            "iwt-mpato",
            &veth.dif,
            A_IP,
            0,
            "rdma_port = 7174\n[mpa]\ntimeout_ms = 1500\n",
        ),
    );
    // Linux connects, sends nothing, and times how long until we close (EOF or reset).
    let script = format!(
        "import socket,time\n\
         s=socket.create_connection(('{A_IP}',7174),timeout=10)\n\
         t=time.monotonic()\n\
         s.settimeout(30)\n\
         try:\n  r=s.recv(100)\n  how='eof' if r==b'' else 'data'\n\
         except ConnectionResetError:\n  how='reset'\n\
         except socket.timeout:\n  how='timeout'\n\
         print('closed how=%s secs=%.3f'%(how,time.monotonic()-t))\n"
    );
    let py = dir.write("client.py", &script);
    let (ok, out) = veth.kexec(&format!("python3 {}", py.display()));
    let out_a = stop(a);
    assert!(ok, "{out}\niwarpd:\n{out_a}");
    let line = out
        .lines()
        .find(|l| l.starts_with("closed "))
        .unwrap_or_else(|| panic!("{out}"));
    let how = common::field(line, "closed", "how").unwrap_or("");
    let secs: f64 = common::field(line, "closed", "secs")
        .unwrap_or("0")
        .parse()
        .unwrap();
    assert!(how == "eof" || how == "reset", "{line}\niwarpd:\n{out_a}");
    assert!(
        (1.4..8.0).contains(&secs),
        "closed after {secs} s, timeout 1.5 s: {line}"
    );
    assert!(out_a.contains("MPA negotiation failed"), "{out_a}");
}

#[test]
fn an_initiator_whose_peer_never_replies_gives_up_after_the_mpa_timeout() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "an_initiator_whose_peer_never_replies_gives_up_after_the_mpa_timeout";
    if !root_or_skip(test) {
        return;
    }
    let veth = topology("mparep");
    let dir = TempDir::new(test);
    // Linux accepts, reads the MPA Request, never replies, and times how long until we close.
    let script = "import socket,time\n\
         l=socket.socket()\n\
         l.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         l.bind(('0.0.0.0',7175))\n\
         l.listen(4)\n\
         l.settimeout(30)\n\
         print('listening',flush=True)\n\
         c,_=l.accept()\n\
         c.settimeout(30)\n\
         t=time.monotonic()\n\
         data=b''\n\
         try:\n  while True:\n    r=c.recv(4096)\n    if not r:\n      how='eof'\n      break\n    data+=r\n\
         except ConnectionResetError:\n  how='reset'\n\
         except socket.timeout:\n  how='timeout'\n\
         print('closed req=%s how=%s secs=%.3f'%(data.startswith(b'MPA ID Req Frame'),how,time.monotonic()-t),flush=True)\n";
    let py = dir.write("server.py", script);
    let cmd = format!("ip netns exec {} python3 {}", veth.kns, py.display());
    let mut srv = Proc::spawn_ready(
        &cmd,
        &dir.path("server.log"),
        "listening",
        Duration::from_secs(10),
    );
    let a = start_iwarpd_in(
        &veth.dns,
        &dir,
        "a",
        &config(
            "iwt-mparep",
            &veth.dif,
            A_IP,
            0,
            "rdma_connect = \"10.79.0.254:7175\"\n[mpa]\ntimeout_ms = 1500\n",
        ),
    );
    let code = srv.wait(Duration::from_secs(40));
    let out = srv.output();
    // The generator never got to run its plan: iwarpd reports that with exit status 1.
    let mut a = a;
    a.signal("TERM");
    let a_code = a.wait(Duration::from_secs(20));
    let out_a = a.output();
    assert_eq!(a_code, Some(1), "{out_a}");
    assert!(
        out_a.contains("iwarpd: EAL shutdown: cleaned up"),
        "{out_a}"
    );
    assert_eq!(code, Some(0), "{out}\niwarpd:\n{out_a}");
    let line = out
        .lines()
        .find(|l| l.starts_with("closed "))
        .unwrap_or_else(|| panic!("{out}"));
    let f = |k: &str| common::field(line, "closed", k).unwrap_or("");
    assert_eq!(f("req"), "True", "no MPA Request arrived: {line}");
    assert!(
        f("how") == "eof" || f("how") == "reset",
        "{line}\niwarpd:\n{out_a}"
    );
    let secs: f64 = f("secs").parse().unwrap();
    assert!(
        (1.3..8.0).contains(&secs),
        "closed after {secs} s, timeout 1.5 s: {line}"
    );
    assert!(out_a.contains("MPA setup timed out"), "{out_a}");
    // The connect failed with the MPA timeout (the diagnostic generator then retries).
    assert!(out_a.contains("Mpa(Timeout)"), "{out_a}");
}
