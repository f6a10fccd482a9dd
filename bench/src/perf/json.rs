//! The JSON report: perftest's keys (`write_test_info_to_file`, `REPORT_FMT_JSON`,
//! `REPORT_FMT_LAT_JSON`), as valid JSON (perftest writes the same keys without quotes), plus
//! an `iwarp_perf` object with what perftest does not have: every row of a sweep, the MPA CRC,
//! the device mode, CPU use.

use super::report::{BwRow, LatRow, TestInfo};
use super::session::Row;
use serde_json::{Map, Value, json};

/// `test_info` with perftest's keys.
pub fn test_info(info: &TestInfo, name: &str) -> Value {
    let on = |b: bool| if b { "ON" } else { "OFF" };
    let mut m = Map::new();
    m.insert("test".into(), json!(name));
    m.insert("Dual_port".into(), json!("OFF"));
    m.insert("Device".into(), json!(info.device));
    m.insert("Number_of_qps".into(), json!(info.num_qps));
    m.insert("Transport_type".into(), json!("IW"));
    m.insert("Connection_type".into(), json!("RC"));
    m.insert("Using_SRQ".into(), json!("OFF"));
    m.insert(
        "PCIe_relax_order".into(),
        json!(info.pcie_relax_order.map_or("Unsupported", on)),
    );
    m.insert("ibv_wr_API".into(), json!("OFF"));
    if info.client {
        m.insert("TX_depth".into(), json!(info.tx_depth));
    }
    if info.test.is_bw() {
        m.insert("CQ_Moderation".into(), json!(info.cq_mod));
    }
    m.insert("Mtu".into(), json!(info.mtu));
    m.insert("Link_type".into(), json!("Ethernet"));
    use super::params::Verb;
    if matches!(info.test.verb(), Verb::Read | Verb::Atomic) {
        m.insert("Outstand_reads".into(), json!(info.out_reads));
    } else {
        m.insert("Max_inline_data".into(), json!(info.inline_size));
    }
    m.insert("rdma_cm_QPs".into(), json!(on(info.rdma_cm)));
    m.insert(
        "Data_ex_method".into(),
        json!(if info.rdma_cm { "rdma_cm" } else { "Ethernet" }),
    );
    Value::Object(m)
}

/// `results` with perftest's keys for one row.
pub fn results(row: &Row, cpu: Option<f64>) -> Value {
    let mut v = match *row {
        Row::Bw(BwRow {
            size,
            iters,
            bw_peak,
            bw_avg,
            msg_rate,
        }) => json!({
            "MsgSize": size, "n_iterations": iters, "BW_peak": bw_peak,
            "BW_average": bw_avg, "MsgRate": msg_rate,
        }),
        Row::Lat(LatRow {
            size,
            iters,
            t_min,
            t_max,
            t_typical,
            t_avg,
            t_stdev,
            p99,
            p99_9,
        }) => json!({
            "MsgSize": size, "n_iterations": iters, "t_min": t_min, "t_max": t_max,
            "t_typical": t_typical, "t_avg": t_avg, "t_stdev": t_stdev,
            "percentile_99": p99, "percentile_99.9": p99_9,
        }),
        Row::LatDuration(size, iters, t_avg, tps) => json!({
            "MsgSize": size, "n_iterations": iters, "t_avg": t_avg, "tps_average": tps,
        }),
    };
    if let (Some(c), Value::Object(m)) = (cpu, &mut v) {
        m.insert("CPU_util".into(), json!(c));
    }
    v
}

/// The whole report: `test_info`, `results` (the last row, as perftest leaves it) and
/// `iwarp_perf` (`extra` plus every row).
pub fn report(info: Value, rows: &[(Row, Option<f64>)], mut extra: Map<String, Value>) -> Value {
    let last = rows
        .last()
        .map(|(r, c)| results(r, *c))
        .unwrap_or(Value::Null);
    extra.insert(
        "rows".into(),
        Value::Array(rows.iter().map(|(r, c)| results(r, *c)).collect()),
    );
    json!({ "test_info": info, "results": last, "iwarp_perf": Value::Object(extra) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::params::Test;

    #[test]
    fn perftest_keys() {
        let info = TestInfo {
            test: Test::WriteLat,
            client: true,
            device: "embedded:configs/memif-b.toml".into(),
            num_qps: 1,
            pcie_relax_order: None,
            tx_depth: 1,
            rx_depth: 512,
            cq_mod: 1,
            mtu: 1024,
            gid_index: None,
            inline_size: 0,
            out_reads: 128,
            rdma_cm: true,
            atomic_fetch_add: true,
        };
        let row = Row::Lat(LatRow {
            size: 2,
            iters: 1000,
            t_min: 1.0,
            t_max: 9.0,
            t_typical: 2.0,
            t_avg: 2.5,
            t_stdev: 0.5,
            p99: 5.0,
            p99_9: 8.0,
        });
        let mut extra = Map::new();
        extra.insert("crc".into(), json!("on"));
        let v = report(
            test_info(&info, &Test::WriteLat.json_name(true)),
            &[(row, Some(97.5))],
            extra,
        );
        let s = serde_json::to_string(&v).unwrap();
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["test_info"]["test"], "RDMA_Write_Latency_Test");
        assert_eq!(back["test_info"]["Transport_type"], "IW");
        assert_eq!(back["results"]["percentile_99.9"], 8.0);
        assert_eq!(back["results"]["t_typical"], 2.0);
        assert_eq!(back["results"]["CPU_util"], 97.5);
        assert_eq!(back["iwarp_perf"]["rows"][0]["MsgSize"], 2);
        assert_eq!(back["iwarp_perf"]["crc"], "on");
    }
}
