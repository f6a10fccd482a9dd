//! perftest's text output, character for character (perftest 4.5-0.17, `perftest_parameters.c`
//! `ctx_print_test_info`, `print_full_bw_report`, `print_report_lat`; the `*_FMT` macros of
//! `perftest_parameters.h` and `perftest_communication.h`), so scripts that parse
//! `ib_write_bw` output parse ours. Golden tests compare against real siw runs
//! (`../shared/siw-peer/results/`).

use super::params::{Test, Verb};

/// perftest's `RESULT_LINE`.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------\n";
/// `RESULT_FMT` (MB/s) and `RESULT_FMT_G` (Gb/s, `--report_gbits`).
pub const RESULT_FMT: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
/// See [`RESULT_FMT`].
pub const RESULT_FMT_G: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// `RESULT_FMT_LAT` (iterations mode).
pub const RESULT_FMT_LAT: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
/// `RESULT_FMT_LAT_DUR` (duration mode).
pub const RESULT_FMT_LAT_DUR: &str = " #bytes        #iterations       t_avg[usec]    tps average";
/// `RESULT_EXT_CPU_UTIL` (with `--cpu_util`).
pub const RESULT_EXT_CPU_UTIL: &str = "    CPU_Util[%]\n";

/// The banner a server prints before it waits.
pub const SERVER_BANNER: &str = "\n************************************\n* Waiting for client to connect... *\n************************************\n";

/// What the header block (`ctx_print_test_info`) shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TestInfo {
    /// The test.
    pub test: Test,
    /// Client (true) or server.
    pub client: bool,
    /// Device name as given with `-d`.
    pub device: String,
    /// `-q`.
    pub num_qps: u32,
    /// `None` prints `Unsupported` (no PCIe here); `Some` reproduces a perftest build with RO.
    pub pcie_relax_order: Option<bool>,
    /// `-t`.
    pub tx_depth: u32,
    /// `-r` (Send tests, server side).
    pub rx_depth: u32,
    /// CQ moderation (BW tests).
    pub cq_mod: u32,
    /// Path MTU in bytes as the device reports it (256..4096).
    pub mtu: u32,
    /// GID index (perftest prints it when set; siw uses 0).
    pub gid_index: Option<u32>,
    /// Max inline data (Write and Send tests).
    pub inline_size: u32,
    /// Outstanding reads (Read and atomic tests).
    pub out_reads: u32,
    /// `-R`.
    pub rdma_cm: bool,
    /// `CMP_AND_SWAP` or `FETCH_AND_ADD` for atomics.
    pub atomic_fetch_add: bool,
}

impl TestInfo {
    /// The test title: `RDMA_Write BW Test`, `Send Latency Test`, `Atomic FETCH_AND_ADD BW Test`.
    pub fn title(&self) -> String {
        let mut t = format!("{} ", self.test.verb().perftest_name());
        if self.test.verb() == Verb::Atomic {
            t.push_str(if self.atomic_fetch_add {
                "FETCH_AND_ADD "
            } else {
                "CMP_AND_SWAP "
            });
        }
        t.push_str(if self.test.is_bw() { "BW " } else { "Latency " });
        t.push_str("Test");
        t
    }

    /// The whole block, from the first `RESULT_LINE` to the last, as `ctx_print_test_info`.
    pub fn render(&self) -> String {
        let on = |b: bool| if b { "ON" } else { "OFF" };
        let verb = self.test.verb();
        let mut s = String::new();
        s.push_str(RESULT_LINE);
        s.push_str(&format!("                    {}\n", self.title()));
        s.push_str(&format!(
            " Dual-port       : OFF\t\tDevice         : {}\n",
            self.device
        ));
        s.push_str(&format!(
            " Number of qps   : {}\t\tTransport type : IW\n",
            self.num_qps
        ));
        s.push_str(" Connection type : RC\t\tUsing SRQ      : OFF\n");
        match self.pcie_relax_order {
            Some(b) => s.push_str(&format!(" PCIe relax order: {}\n", on(b))),
            None => s.push_str(" PCIe relax order: Unsupported\n"),
        }
        s.push_str(" ibv_wr* API     : OFF\n");
        if self.client {
            s.push_str(&format!(" TX depth        : {}\n", self.tx_depth));
        }
        if verb == Verb::Send && !self.client {
            s.push_str(&format!(" RX depth        : {}\n", self.rx_depth));
        }
        if self.test.is_bw() {
            s.push_str(&format!(" CQ Moderation   : {}\n", self.cq_mod));
        }
        s.push_str(&format!(" Mtu             : {}[B]\n", self.mtu));
        s.push_str(" Link type       : Ethernet\n");
        if let Some(g) = self.gid_index {
            s.push_str(&format!(" GID index       : {g}\n"));
        }
        if verb != Verb::Read && verb != Verb::Atomic {
            s.push_str(&format!(" Max inline data : {}[B]\n", self.inline_size));
        } else {
            s.push_str(&format!(" Outstand reads  : {}\n", self.out_reads));
        }
        s.push_str(&format!(" rdma_cm QPs\t : {}\n", on(self.rdma_cm)));
        s.push_str(&format!(
            " Data ex. method : {}",
            if self.rdma_cm { "rdma_cm" } else { "Ethernet" }
        ));
        if self.rdma_cm && !self.client {
            s.push('\n');
            s.push_str(RESULT_LINE);
            s.push_str(" Waiting for client rdma_cm QP to connect\n");
            s.push_str(" Please run the same command with the IB/RoCE interface IP");
        }
        s.push('\n');
        s.push_str(RESULT_LINE);
        s
    }
}

/// C's `%#0{width}x`: `0x`-prefixed hex zero-padded to `width` characters in all, except
/// that zero prints without the prefix (as glibc does).
pub fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{:#0width$x}", v)
    }
}

/// One side's QP as `ctx_print_pingpong_data` shows it in `-R` mode (the comm QP's verb is
/// Send there, so no RKey/VAddr column): ` local address: LID 0000 QPN 0x0002 PSN 0x7e71f7`
/// and the GID line in decimal bytes.
pub fn render_address(local: bool, lid: u32, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    let mut s = format!(
        " {} address: LID {} QPN {} PSN {}\n",
        if local { "local" } else { "remote" },
        c_alt_hex(u64::from(lid), 4),
        c_alt_hex(u64::from(qpn), 6),
        c_alt_hex(u64::from(psn), 6)
    );
    let g: Vec<String> = gid.iter().map(|b| format!("{b:02}")).collect();
    s.push_str(&format!(" GID: {}\n", g.join(":")));
    s
}

/// The column header line(s) of a bandwidth table (after a `RESULT_LINE`).
pub fn bw_header(gbits: bool, cpu_util: bool) -> String {
    let mut s = String::from(RESULT_LINE);
    s.push_str(if gbits { RESULT_FMT_G } else { RESULT_FMT });
    s.push_str(if cpu_util { RESULT_EXT_CPU_UTIL } else { "\n" });
    s
}

/// The column header line(s) of a latency table.
pub fn lat_header(duration: bool, cpu_util: bool) -> String {
    let mut s = String::from(RESULT_LINE);
    s.push_str(if duration {
        RESULT_FMT_LAT_DUR
    } else {
        RESULT_FMT_LAT
    });
    s.push_str(if cpu_util { RESULT_EXT_CPU_UTIL } else { "\n" });
    s
}

/// One bandwidth result (`bw_report_data`): what the table row and the JSON show.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BwRow {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations measured.
    pub iters: u64,
    /// Peak bandwidth (Gb/s with `--report_gbits`, else MiB/s), 0 when not computed.
    pub bw_peak: f64,
    /// Average bandwidth in the same unit.
    pub bw_avg: f64,
    /// Messages per second, millions.
    pub msg_rate: f64,
}

impl BwRow {
    /// perftest switches to six decimals when the average is below 0.1 Gb/s.
    pub fn inc_accuracy(&self, gbits: bool) -> bool {
        self.bw_avg < 0.1 && gbits
    }

    /// The row, `REPORT_FMT` or `REPORT_FMT_EXT`, plus the CPU column or the newline.
    pub fn render(&self, gbits: bool, cpu_util: Option<f64>) -> String {
        let mut s = if self.inc_accuracy(gbits) {
            format!(
                " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
                self.size, self.iters, self.bw_peak, self.bw_avg, self.msg_rate
            )
        } else {
            format!(
                " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
                self.size, self.iters, self.bw_peak, self.bw_avg, self.msg_rate
            )
        };
        match cpu_util {
            Some(c) => s.push_str(&format!("\t    {c:<3.2}\n")),
            None => s.push('\n'),
        }
        s
    }
}

/// One latency result (`print_report_lat`), microseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LatRow {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations run.
    pub iters: u64,
    /// Minimum.
    pub t_min: f64,
    /// Maximum.
    pub t_max: f64,
    /// Median (`t_typical`).
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

impl LatRow {
    /// The row, `REPORT_FMT_LAT`, plus the CPU column or the newline.
    pub fn render(&self, cpu_util: Option<f64>) -> String {
        let mut s = format!(
            " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
            self.size,
            self.iters,
            self.t_min,
            self.t_max,
            self.t_typical,
            self.t_avg,
            self.t_stdev,
            self.p99,
            self.p99_9
        );
        match cpu_util {
            Some(c) => s.push_str(&format!("\t    {c:<3.2}\n")),
            None => s.push('\n'),
        }
        s
    }
}

/// A latency result in duration mode (`REPORT_FMT_LAT_DUR`).
pub fn render_lat_duration(
    size: u64,
    iters: u64,
    t_avg: f64,
    tps: f64,
    cpu: Option<f64>,
) -> String {
    let mut s = format!(" {size:<7}       {iters}            {t_avg:<7.2}        {tps:<7.2}");
    match cpu {
        Some(c) => s.push_str(&format!("\t    {c:<3.2}\n")),
        None => s.push('\n'),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(test: Test, client: bool) -> TestInfo {
        TestInfo {
            test,
            client,
            device: "siw0".into(),
            num_qps: 1,
            pcie_relax_order: Some(true),
            tx_depth: if test.is_bw() { 128 } else { 1 },
            rx_depth: 512,
            cq_mod: 1,
            mtu: 1024,
            gid_index: Some(0),
            inline_size: 0,
            out_reads: 128,
            rdma_cm: true,
            atomic_fetch_add: true,
        }
    }

    /// Lines of a real perftest output between two markers (inclusive).
    fn golden(file: &str) -> String {
        let path = crate::fixtures::siw_peer_dir().join("results").join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn headers_match_real_perftest() {
        // (file, test, client, pcie relax order as that perftest printed it)
        let cases = [
            ("write_bw.client.txt", Test::WriteBw, true, true),
            ("write_bw.server.txt", Test::WriteBw, false, true),
            ("write_lat.client.txt", Test::WriteLat, true, false),
            ("write_lat.server.txt", Test::WriteLat, false, false),
            ("read_bw.server.txt", Test::ReadBw, false, true),
            ("read_lat.client.txt", Test::ReadLat, true, true),
            ("send_bw.client.txt", Test::SendBw, true, true),
            ("send_bw.server.txt", Test::SendBw, false, true),
            ("send_lat.server.txt", Test::SendLat, false, true),
        ];
        for (file, test, client, ro) in cases {
            let g = golden(file);
            let mut i = info(test, client);
            i.pcie_relax_order = Some(ro);
            // siw printed "GID index : 0" in latency runs only (perftest picked the GID there).
            let text = i.render();
            let with_gid = g.contains(" GID index       : 0\n");
            if !with_gid {
                i.gid_index = None;
            }
            let text = if with_gid { text } else { i.render() };
            assert!(g.contains(&text), "{file}: ours\n{text}\nnot in\n{g}");
        }
    }

    #[test]
    fn rows_match_real_perftest() {
        let bw = BwRow {
            size: 65536,
            iters: 5000,
            bw_peak: 0.095877,
            bw_avg: 0.081465,
            msg_rate: 0.000155,
        };
        let g = golden("write_bw.client.txt");
        assert!(
            g.contains(&(bw_header(true, false) + &bw.render(true, None))),
            "{g}"
        );
        let lat = LatRow {
            size: 2,
            iters: 1000,
            t_min: 171.69,
            t_max: 4162.13,
            t_typical: 307.21,
            t_avg: 477.08,
            t_stdev: 514.37,
            p99: 2778.55,
            p99_9: 4162.13,
        };
        let g = golden("write_lat.client.txt");
        assert!(
            g.contains(&(lat_header(false, false) + &lat.render(None))),
            "{g}"
        );
        let rd = LatRow {
            t_min: 320.11,
            t_max: 9813.82,
            t_typical: 543.78,
            t_avg: 885.44,
            t_stdev: 1027.43,
            p99: 5583.12,
            p99_9: 9813.82,
            ..lat
        };
        assert!(golden("read_lat.client.txt").contains(&rd.render(None)));
        // Above 0.1 Gb/s: two decimals and perftest's tabs.
        let fast = BwRow {
            bw_peak: 37.1234,
            bw_avg: 36.9,
            msg_rate: 0.070381,
            ..bw
        };
        assert_eq!(
            fast.render(true, None),
            format!(
                " 65536{}5000{}37.12{}36.90  \t\t   0.070381\n",
                " ".repeat(6),
                " ".repeat(13),
                " ".repeat(14)
            )
        );
    }

    #[test]
    fn addresses_match_real_perftest() {
        let g = golden("write_lat.server.txt");
        let local = [82, 84, 0, 46, 134, 231, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let remote = [82, 84, 0, 229, 41, 244, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let s = render_address(true, 0, 2, 0x9b4c7e, &local)
            + &render_address(false, 0, 2, 0x4fd29a, &remote);
        assert!(g.contains(&s), "{s}");
        assert_eq!(c_alt_hex(0, 4), "0000");
        assert_eq!(c_alt_hex(0x2, 6), "0x0002");
        assert_eq!(c_alt_hex(0x9b4c7e, 6), "0x9b4c7e");
    }
}
