//! Per-client counters for the stats file.

use super::Service;
use super::client::{ClientCounters, Held, QpTotals};
use dataplane::rdma::ClientId;
use dataplane::stats::render;

/// One client's line in the stats file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientStats {
    /// Client id.
    pub client: u32,
    /// Its process id (from Hello).
    pub pid: u32,
    /// Its name (from Hello).
    pub name: String,
    /// False once it left (its QPs are being released).
    pub connected: bool,
    /// What it holds.
    pub held: Held,
    /// Completions pushed into its CQs (live and destroyed).
    pub completions: u64,
    /// Event counters.
    pub counters: ClientCounters,
    /// The dataplane's counters of its QPs (live and destroyed).
    pub qp: QpTotals,
}

impl Service {
    /// Every client's counters, connected ones first.
    pub fn client_stats(&self) -> Vec<ClientStats> {
        let live = self.engine.qp_stats();
        let mut v: Vec<ClientStats> = self
            .clients
            .iter()
            .map(|(ClientId(id), c)| ClientStats {
                qp: {
                    let mut t = c.qp_retired;
                    for q in c.qps.values() {
                        if let Some(qc) = live.get(&q.qp_num) {
                            t.add(qc);
                        }
                    }
                    t
                },
                client: *id,
                pid: c.pid,
                name: c.name.clone(),
                connected: true,
                held: c.held(),
                completions: c.completions_retired + c.live_completions(),
                counters: c.counters,
            })
            .collect();
        v.extend(self.departed.iter().map(|(ClientId(id), d)| ClientStats {
            client: *id,
            pid: d.pid,
            name: d.name.clone(),
            connected: false,
            held: Held {
                releasing_qps: d.releasing.len(),
                ..Held::default()
            },
            completions: d.completions,
            counters: d.counters,
            qp: d.qp_totals,
        }));
        v
    }

    /// The `[control]` and `[client.N]` sections of the stats file.
    pub fn render_stats(&self) -> String {
        let mut out = String::new();
        let t = self.totals;
        render(
            "control",
            &[
                ("clients", self.clients.len() as u64),
                ("clients_releasing", self.departed.len() as u64),
                ("clients_seen", t.clients_seen),
                ("clients_freed", t.clients_freed),
                ("requests", t.requests),
                ("errors", t.errors),
                ("orphan_events", t.orphan_events),
                ("late_events", t.late_events),
                ("late_requests", t.late_requests),
                ("refused_requests", t.refused_requests),
                ("registered_mrs", self.engine.mem.len() as u64),
            ],
            &mut out,
        );
        for s in self.client_stats() {
            let h = s.held;
            let c = s.counters;
            out.push_str(&format!(
                "# client {} pid {} name {:?}\n",
                s.client, s.pid, s.name
            ));
            render(
                &format!("client.{}", s.client),
                &[
                    ("pid", u64::from(s.pid)),
                    ("connected", u64::from(s.connected)),
                    ("segments", h.segments as u64),
                    ("pds", h.pds as u64),
                    ("mrs", h.mrs as u64),
                    ("cqs", h.cqs as u64),
                    ("qps", h.qps as u64),
                    ("cm_ids", h.cm_ids as u64),
                    ("releasing_qps", h.releasing_qps as u64),
                    ("completions", s.completions),
                    ("established", c.established),
                    ("connect_requests", c.connect_requests),
                    ("rejected", c.rejected),
                    ("connect_failed", c.connect_failed),
                    ("disconnected", c.disconnected),
                    ("terminates_received", c.terminates_received),
                    ("terminates_sent", c.terminates_sent),
                    ("qp_errors", c.qp_errors),
                    ("errors", c.errors),
                ]
                .into_iter()
                .chain(s.qp.fields())
                .collect::<Vec<_>>(),
                &mut out,
            );
        }
        out.push_str("# the QP counters of every client that has left and been freed\n");
        render(
            "freed_clients",
            &[("completions", t.freed_completions)]
                .into_iter()
                .chain(t.freed_qps.fields())
                .collect::<Vec<_>>(),
            &mut out,
        );
        out
    }
}
