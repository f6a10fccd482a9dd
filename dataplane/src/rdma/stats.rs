//! Per-QP counters (issue 7 item 6): FPDUs and bytes placed and sent, CRC errors, TERMINATEs
//! sent and received by code, completions by status. Counted by the owning dataplane thread,
//! published now and then to a [`SharedRdmaStats`] the control thread renders into the stats
//! file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use iwarp::error::TermCode;
use iwarp::rdmap::WcStatus;

use super::ids::{ConnId, QpNum};

/// Counters of one QP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QpCounters {
    /// The connection carrying it.
    pub conn: u64,
    /// FPDUs received completely (CRC checked).
    pub fpdus_rx: u64,
    /// Payload bytes placed into registered memory.
    pub bytes_placed: u64,
    /// FPDUs sent (first transmissions; TCP counts retransmissions).
    pub fpdus_tx: u64,
    /// FPDU bytes sent (headers, payload, pad, CRC).
    pub bytes_tx: u64,
    /// Payload bytes handed to the NIC by reference to the registered region (zero-copy
    /// transmit; retransmissions included).
    pub bytes_tx_by_ref: u64,
    /// Work requests completed at transmission: payloads of at most
    /// [`INLINE_MAX`](super::conn::INLINE_MAX) bytes, copied into the transmit log.
    pub inline_tx: u64,
    /// FPDUs refused for a bad CRC.
    pub crc_errors: u64,
    /// TERMINATEs sent, by `(layer, etype, ecode)`.
    pub terminates_tx: BTreeMap<(u8, u8, u8), u64>,
    /// TERMINATEs received, by `(layer, etype, ecode)`.
    pub terminates_rx: BTreeMap<(u8, u8, u8), u64>,
    /// Transmit passes that ran out of work requests while TCP's send buffer had room for
    /// another FPDU: the sender waits on the application (TCP counts the time as
    /// `app_limited_ns`).
    pub tx_dry: u64,
    /// Sum over the `tx_dry` passes of the send work requests not yet completed (sent and
    /// waiting for their ACK): `tx_dry_wrs / tx_dry` against the send queue's depth shows how
    /// many completions the application had not yet reaped and reposted.
    pub tx_dry_wrs: u64,
    /// Transmit passes that stopped at a full TCP send buffer (`tcp.send_window`).
    pub tx_sndbuf_full: u64,
    /// Completions delivered with status success.
    pub cqe_success: u64,
    /// Completions delivered flushed.
    pub cqe_flushed: u64,
    /// Completions delivered with a local error.
    pub cqe_local_error: u64,
}

fn key(c: TermCode) -> (u8, u8, u8) {
    (c.layer as u8, c.etype, c.ecode)
}

impl QpCounters {
    /// Counters of a QP on `conn`.
    pub fn new(conn: ConnId) -> Self {
        QpCounters {
            conn: conn.raw(),
            ..Default::default()
        }
    }
    /// Count a TERMINATE we sent.
    pub fn terminate_sent(&mut self, c: TermCode) {
        *self.terminates_tx.entry(key(c)).or_default() += 1;
    }
    /// Count a TERMINATE we received.
    pub fn terminate_received(&mut self, c: TermCode) {
        *self.terminates_rx.entry(key(c)).or_default() += 1;
    }
    /// Count a delivered completion.
    pub fn completion(&mut self, s: WcStatus) {
        match s {
            WcStatus::Success => self.cqe_success += 1,
            WcStatus::Flushed => self.cqe_flushed += 1,
            WcStatus::LocalError => self.cqe_local_error += 1,
        }
    }

    /// `key = value` lines (zero counters left out).
    pub fn fields(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = [
            ("conn", self.conn),
            ("fpdus_rx", self.fpdus_rx),
            ("bytes_placed", self.bytes_placed),
            ("fpdus_tx", self.fpdus_tx),
            ("bytes_tx", self.bytes_tx),
            ("bytes_tx_by_ref", self.bytes_tx_by_ref),
            ("inline_tx", self.inline_tx),
            ("crc_errors", self.crc_errors),
            ("tx_dry", self.tx_dry),
            ("tx_dry_wrs", self.tx_dry_wrs),
            ("tx_sndbuf_full", self.tx_sndbuf_full),
            ("cqe_success", self.cqe_success),
            ("cqe_flushed", self.cqe_flushed),
            ("cqe_local_error", self.cqe_local_error),
        ]
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        for (dir, m) in [("tx", &self.terminates_tx), ("rx", &self.terminates_rx)] {
            for ((l, t, c), n) in m {
                v.push((format!("terminate_{dir}_{l}_{t:x}_{c:02x}"), *n));
            }
        }
        v
    }
}

/// Counters of one thread's QPs, published for the control thread. QPs that are gone keep
/// their last counters (until `forget`), so a finished connection still shows in the report.
#[derive(Debug, Default)]
pub struct SharedRdmaStats {
    qps: Mutex<BTreeMap<QpNum, QpCounters>>,
}

impl SharedRdmaStats {
    /// Publish the counters of `qp`.
    pub fn publish(&self, qp: QpNum, c: &QpCounters) {
        let mut m = self.qps.lock().unwrap_or_else(|p| p.into_inner());
        match m.get_mut(&qp) {
            Some(old) => old.clone_from(c),
            None => {
                m.insert(qp, c.clone());
            }
        }
    }

    /// Take a QP's last counters out (destroyed QP).
    pub fn take(&self, qp: QpNum) -> Option<QpCounters> {
        self.qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&qp)
    }

    /// A copy of every QP's counters.
    pub fn snapshot(&self) -> BTreeMap<QpNum, QpCounters> {
        self.qps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Render `[rdma.qp.N]` sections for the stats file.
pub fn render(qps: &BTreeMap<QpNum, QpCounters>, out: &mut String) {
    for (qp, c) in qps {
        let _ = writeln!(out, "[rdma.qp.{}]", qp.0);
        for (k, v) in c.fields() {
            let _ = writeln!(out, "{k} = {v}");
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp::error::LlpError;

    #[test]
    fn counts_render_and_publish() {
        let mut c = QpCounters::new(ConnId::from_raw(4));
        c.fpdus_rx = 3;
        c.terminate_sent(LlpError::Crc.into());
        c.terminate_sent(LlpError::Crc.into());
        c.completion(WcStatus::Flushed);
        let s = SharedRdmaStats::default();
        s.publish(QpNum(9), &c);
        let mut out = String::new();
        render(&s.snapshot(), &mut out);
        assert!(out.contains("[rdma.qp.9]\n"), "{out}");
        assert!(out.contains("conn = 4\n"));
        assert!(out.contains("terminate_tx_2_0_02 = 2\n"), "{out}");
        assert!(out.contains("cqe_flushed = 1\n"));
        assert!(!out.contains("bytes_tx"));
        assert_eq!(s.take(QpNum(9)), Some(c));
        assert!(s.snapshot().is_empty());
        assert_eq!(s.take(QpNum(9)), None);
    }
}
