#!/usr/bin/env bash
# A/B of bar (c) (BENCHMARKS.md §4): iwarp-perf write_bw 64 KiB over net_af_xdp on a veth, for
# several variants alternating inside each round, with kernel iperf3 (TSO/GSO on and off) over
# the same veth in the same rounds. Each variant is
# NAME=BIN_DIR[:XDP_ARGS[:XDP_DESC[:PERF_ARGS[:IDLE[:CC[:NAPI]]]]]] (extra net_af_xdp devargs,
# ring sizes, iwarp-perf arguments, the engines' dataplane.idle and tcp.cc, the veth's NAPI
# mode ("threaded" or "threaded-other"): XDP_ARGS, XDP_DESC, XDP_PERF_ARGS, XDP_IDLE, XDP_CC and XDP_NAPI of bench-rdma.sh); the order of the variants alternates between rounds.
# Runs scripts/bench-rdma.sh (WIRES=afxdp SETS=bw ROUNDS=1) once per variant per round; take
# the e2e lock around it: `flock /tmp/iwarp-e2e.lock scripts/ab-afxdp.sh base=DIR new=DIR`.
# Environment: ROUNDS (3), OUT (results/ab-afxdp-<date>), LOAD_MAX, ITERS_BW, XDP_DESC: passed on;
# PROFILE (any value) with PROFILE_EVENTS: `perf stat -a` of every af_xdp run into its directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-results/ab-afxdp-$(date +%Y%m%d-%H%M)}
[[ $# -ge 1 ]] || { echo "usage: $0 NAME=BIN_DIR[:XDP_ARGS[:XDP_DESC[:PERF_ARGS[:IDLE[:CC[:NAPI]]]]]]..."; exit 2; }
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
for r in $(seq "$ROUNDS"); do
    vs=("$@")
    if (( r % 2 == 0 )); then # reverse the order every other round
        for ((i = 0, j = ${#vs[@]} - 1; i < j; i++, j--)); do t=${vs[i]}; vs[i]=${vs[j]}; vs[j]=$t; done
    fi
    for v in "${vs[@]}"; do
        name=${v%%=*} spec=${v#*=}
        IFS=: read -r bin args desc pargs idle cc napi <<< "$spec"
        echo "== round $r $name"
        BIN=$bin XDP_ARGS=${args:-} XDP_DESC=${desc:-${XDP_DESC:-}} XDP_PERF_ARGS=${pargs:-} \
            XDP_IDLE=${idle:-yield} XDP_CC=${cc:-} XDP_NAPI=${napi:-} ROUNDS=1 \
            PROFILE=${PROFILE:+$OUT/$name.r$r} PROFILE_MATCH='write_bw_64k_afxdp.r*' \
            WIRES=afxdp SETS=bw OUT="$OUT/$name.r$r" \
            scripts/bench-rdma.sh | grep -E "^(iperf3|write_bw|bench-rdma)" || true
    done
done
python3 - "$OUT" "$@" <<'PY' | tee "$OUT/summary.txt"
import json, glob, statistics, sys
out, names = sys.argv[1], [a.split("=", 1)[0] for a in sys.argv[2:]]
def runs(name, test):
    v = []
    for d in sorted(glob.glob(f"{out}/{name}.r*")):
        for p in glob.glob(f"{d}/{test}.r1.json"):
            try: j = json.load(open(p))
            except ValueError: continue
            if test.startswith("iperf3"): v.append(j["end"]["sum_received"]["bits_per_second"] / 1e9)
            else: v.append(j["results"]["BW_average"])
    return v
ip = [x for n in names for x in runs(n, "iperf3")]
ng = [x for n in names for x in runs(n, "iperf3_nogso")]
fmt = lambda v: f"{statistics.median(v):.2f} {sorted(round(x, 2) for x in v)}" if v else "-"
print(f"iperf3 (all variants' rounds)       {fmt(ip)}")
print(f"iperf3 TSO/GSO off                  {fmt(ng)}")
for n in names:
    w = runs(n, "write_bw_64k_afxdp")
    if not w: continue
    m = statistics.median(w)
    rt = []
    for d in sorted(glob.glob(f"{out}/{n}.r*")):
        for p in glob.glob(f"{d}/write_bw_64k_afxdp.r1.xb.stats"):
            rt += [int(l.split("=")[1]) for l in open(p) if l.startswith("retransmissions =")][:1]
    print(f"{n:12s} retransmissions {sorted(rt)}")
    for d in sorted(glob.glob(f"{out}/{n}.r*")):  # the dataplane gauges of each run (lcore.0)
        g = {}
        for side in ("xb", "xa"):
            for p in glob.glob(f"{d}/write_bw_64k_afxdp.r1.{side}.stats"):
                g[side], sec = {}, ""
                for l in open(p):
                    if l.startswith("["): sec = l.strip()
                    elif " = " in l and sec in ("[lcore.0]", "[lcore.0.tcp]"):
                        k, v = l.split(" = ")
                        g[side][("tcp_" if sec == "[lcore.0.tcp]" else "") + k] = int(v)
        b, a = g.get("xb", {}), g.get("xa", {})
        ns = b.get("tcp_samples", 0)
        if not ns: continue
        try:  # the transfer's duration, from the client's figure (bytes / average)
            j = json.load(open(f"{d}/write_bw_64k_afxdp.r1.json"))["results"]
            secs = b["tcp_bytes_out"] * 8 / (j["BW_average"] * 1e9)
        except (OSError, ValueError, KeyError, ZeroDivisionError):
            secs = 0
        busy = (f"busy during the transfer: sender {b['busy_ns'] / 1e9 / secs:.0%}, receiver "
                f"{a.get('busy_ns', 0) / 1e9 / secs:.0%}; " if secs and "busy_ns" in b else "")
        print(f"{n:12s}   {d.rsplit('.', 1)[1]}: {busy}sender sRTT {b['tcp_srtt_us_sum'] / ns:.0f} us (>1 ms {b['tcp_srtt_over_1ms'] / ns:.0%})"
              f" cwnd {b['tcp_cwnd_sum'] / ns / 1e3:.0f} kB flight {b['tcp_flight_sum'] / ns / 1e3:.0f} kB"
              f" unsent {b['tcp_unsent_sum'] / ns / 1e3:.0f} kB cwnd-limited {b['tcp_cwnd_limited'] / ns:.0%}"
              f" rwnd-limited {b['tcp_rwnd_limited'] / ns:.0%}; idle loops sender {b['idle_loops'] / max(b['loops'], 1):.0%}"
              f" receiver {a.get('idle_loops', 0) / max(a.get('loops', 1), 1):.0%}; frames per TX burst"
              f" {b['tx_packets'] / max(b['tx_bursts'], 1):.1f}, per RX poll at the receiver"
              f" {a.get('rx_packets', 0) / max(a.get('rx_bursts', 1), 1):.1f}; tx_short {b['tx_short']}")
    print(f"{n:12s} write_bw af_xdp {fmt(w)}  / iperf3 {m / statistics.median(ip):.2f}"
          f"  / nogso {m / statistics.median(ng):.2f}" if ip and ng else f"{n} {fmt(w)}")
PY
