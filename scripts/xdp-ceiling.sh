#!/usr/bin/env bash
# The AF_XDP packet-rate ceiling on a veth (bar (c), BENCHMARKS.md §4): DPDK's own generator and
# sink, dpdk-testpmd txonly -> rxonly, each on one end of a veth between two network namespaces,
# with net_af_xdp as our af_xdp engines configure it in scripts/bench-rdma.sh (one queue,
# busy_budget=0, XSK rings of DESC descriptors, bursts of 32, EAL --in-memory on the reserved
# 2 MiB hugepages as our EAL plan does: no hugetlbfs mount needed), the sink in namespace A on
# core 0 (the receiving engine's), the generator in namespace B on core 1 (the sending engine's).
# Each testpmd keeps its main lcore on its forwarding lcore's CPU (--lcores 0@C,1@C): the main
# lcore only prints statistics once a second.
#
# GEN=xsk replaces the generator by scripts/xsk-txgen.c (built here with cc; Debian's libxdp-dev
# and libbpf-dev), paced at each rate of RATES (Mpps, "0": unpaced), one configuration per rate:
# testpmd's txonly cannot be paced, and with threaded NAPI an unpaced generator keeps the
# SCHED_FIFO kthread busy on the sink's core, which then starves (BENCHMARKS.md §4).
#
# For each round (ROUNDS, default 3), NAPI mode (NAPIS, default "softirq threaded"), frame size
# (SIZES, default "1514 64": Ethernet frames without FCS; 1514 = one MTU-1500 TCP segment, MSS
# 1448 with timestamps) and rate, alternating the order every other round: a fresh netns pair
# and veth, the sink started (its XDP program attached), with NAPI "threaded" the receiving veth
# end's NAPI kthread pinned to core 0 at SCHED_FIFO 1 exactly as bench-rdma.sh's
# XDP_NAPI=threaded, then the generator; after WARM s (1) the counters are read, again after SECS
# s (4): rates from the deltas (the receiving veth end's XDP counters, the sending end's TX
# packets, the NAPI kthread's run time from its schedstat; per-CPU /proc/stat shares too, but
# those are tick-sampled and alias with a paced generator: read them with care), then the
# processes are stopped by SIGINT (testpmd prints its forward statistics and, with
# --record-core-cycles, its forwarding core's cycles per packet) and the namespaces deleted.
# The sink's rate is the frames the XDP program redirected into its socket (a redirect that
# fails, the XSK RX ring full, counts as a drop, not as a redirect). Each process is bounded by
# RUN_TIMEOUT (30 s). One directory per run under OUT, and OUT/summary.txt: medians of the
# received rate in Mpps and as TCP goodput at MSS 1448 and at the iWARP payload of write_bw's
# FPDUs at MTU 1500 (1428 B per frame).
# Environment: ROUNDS, FIRST_ROUND (1: the first round's number, so that invocations into the
# same OUT, interleaved with other benchmarks, add rounds; the summary takes every run in OUT),
# NAPIS, SIZES, GEN (testpmd|xsk), RATES, SINKS (testpmd; xsk: scripts/xsk-rxsink.c, frames given
# back untouched; xsk-touch: the same, each frame copied out first as our placement does), SECS, WARM, DESC (1024), BURST (32), RUN_TIMEOUT, OUT
# (results/xdp-ceiling-<date>), LOAD_MAX/LOAD_WAIT (as bench-rdma.sh), PROFILE (any value:
# `perf record -a -g` over the measured window of every run, kept as perf.data in its directory).
# Run as root, under the e2e lock: `flock /tmp/iwarp-e2e.lock scripts/xdp-ceiling.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
FIRST_ROUND=${FIRST_ROUND:-1}
NAPIS=${NAPIS:-"softirq threaded"}
SIZES=${SIZES:-"1514 64"}
SECS=${SECS:-4}
WARM=${WARM:-1}
DESC=${DESC:-1024}
BURST=${BURST:-32}
RUN_TIMEOUT=${RUN_TIMEOUT:-30}
GEN=${GEN:-testpmd}
RATES=${RATES:-0}
[[ $GEN == xsk ]] || RATES=0
SINKS=${SINKS:-testpmd}
OUT=${OUT:-results/xdp-ceiling-$(date +%Y%m%d-%H%M)}
[[ $(id -u) -eq 0 ]] || { echo "xdp-ceiling: run as root"; exit 1; }
command -v dpdk-testpmd > /dev/null || { echo "xdp-ceiling: dpdk-testpmd missing (apt-get install dpdk)"; exit 1; }
TXGEN="" RXSINK=""
build() { # source: the binary's path on stdout
    local b
    b=$(mktemp "/tmp/$(basename "$1" .c).XXXXXX")
    cc -O2 -o "$b" "$1" -lxdp -lbpf \
        || { echo "xdp-ceiling: cannot build $1 (libxdp-dev, libbpf-dev: libdpdk-dev of scripts/deps.sh pulls them in)" >&2; rm -f "$b"; return 1; }
    echo "$b"
}
[[ $GEN != xsk ]] || TXGEN=$(build scripts/xsk-txgen.c) # the paced generator
[[ " $SINKS " != *" xsk"* ]] || RXSINK=$(build scripts/xsk-rxsink.c)
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
NA=iwxca$$ NB=iwxcb$$ VA=xca$$ VB=xcb$$
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -INT "$p" 2> /dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
    pids=()
    ip netns del "$NA" 2> /dev/null || true; ip netns del "$NB" 2> /dev/null || true
    rm -rf /var/run/dpdk/iwxc-rx-$$ /var/run/dpdk/iwxc-tx-$$
    rm -f "$TXGEN" "$RXSINK"
}
trap cleanup EXIT
{ lscpu | grep -E "Model name|CPU family|^Model:|^CPU\(s\)"; uptime; uname -r; dpdk-testpmd -v 2>&1 | grep -m1 -o "DPDK [0-9.]*" || true
  grep -E "HugePages_(Total|Free)" /proc/meminfo; } > "$OUT/machine.txt"
quiet() { # as bench-rdma.sh: wait up to LOAD_WAIT s for the 1-min load to fall below LOAD_MAX
    local t=0
    while [[ -n ${LOAD_MAX:-} && $t -lt ${LOAD_WAIT:-300} ]] && \
        awk -v m="$LOAD_MAX" '{ exit !($1 >= m) }' /proc/loadavg; do sleep 5; t=$((t + 5)); done
    echo "$1 $(date +%T) waited ${t}s load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
}
snap() { # dir tag: the counters the summary reads, each with its own time stamp; read from core 1
    # (core 0 may be taken by the SCHED_FIFO NAPI kthread: a read delayed there would not match
    # its time stamp)
    taskset -pc 1 $$ > /dev/null
    { echo "tA $(date +%s.%N)"
      ip netns exec "$NA" ethtool -S "$VA" | sed -n 's/^ *\(rx_queue_0_[a-z_]*\): /A_\1 /p'
      echo "tB $(date +%s.%N)"
      ip -n "$NB" -s link show "$VB" | awk '/TX:/{getline; print "B_tx_packets", $2; print "B_tx_dropped", $4}'
      echo "tC $(date +%s.%N)"
      awk '/^cpu[0-9]/{print $1 "_user", $2 + $3; print $1 "_sys", $4; print $1 "_softirq", $8; print $1 "_idle", $5 + $6; print $1 "_steal", $9}' /proc/stat
      for p in $(pgrep "^napi/$VA-" || true); do echo "napi_run_ns $(cut -d' ' -f1 "/proc/$p/schedstat")"; done
    } > "$1/$2.snap"
    taskset -pc 0,1 $$ > /dev/null
}
pin_napi() { # veth core: as bench-rdma.sh's XDP_NAPI=threaded
    local p
    for p in $(pgrep "^napi/$1-"); do taskset -pc "$2" "$p"; chrt -v -f -p 1 "$p"; done
}
testpmd() { # netns veth cpu prefix mode size log
    ip netns exec "$1" timeout -k 5 "$RUN_TIMEOUT" dpdk-testpmd --lcores "0@$3,1@$3" --main-lcore 0 \
        --no-pci --no-telemetry --in-memory --file-prefix "$4" \
        --vdev "net_af_xdp0,iface=$2,start_queue=0,queue_count=1,busy_budget=0" -- \
        --forward-mode="$5" --txpkts="$6" --nb-cores=1 --rxq=1 --txq=1 --rxd="$DESC" --txd="$DESC" \
        --burst="$BURST" --total-num-mbufs=16384 --record-core-cycles --auto-start --stats-period 1 \
        > "$7" 2>&1 &
}
run() { # napi size rate sink dir
    local napi=$1 size=$2 rate=$3 sink=$4 d=$5 rx tx prof=""
    mkdir -p "$d"
    ip netns add "$NA"; ip netns add "$NB"
    ip link add "$VA" type veth peer name "$VB"
    ip link set "$VA" netns "$NA"; ip link set "$VB" netns "$NB"
    for n in "$NA" "$NB"; do ip -n "$n" link set lo up; ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
    ip -n "$NA" link set "$VA" up mtu 1500; ip -n "$NB" link set "$VB" up mtu 1500
    if [[ $napi == threaded ]]; then # as bench-rdma.sh: the flag can be set only while NAPI exists
        ip netns exec "$NA" ethtool -K "$VA" gro on
        ip netns exec "$NA" sh -c "echo 1 > /sys/class/net/$VA/threaded"
        ip netns exec "$NA" ethtool -K "$VA" gro off
    fi
    if [[ $sink == testpmd ]]; then
        testpmd "$NA" "$VA" 0 "iwxc-rx-$$" rxonly "$size" "$d/rx.log"
    else # xsk: frames given back untouched; xsk-touch: each copied out first, as our placement does
        ip netns exec "$NA" taskset -c 0 timeout -k 5 "$RUN_TIMEOUT" "$RXSINK" "$VA" $((WARM + SECS + 3)) \
            "$([[ $sink == xsk-touch ]] && echo 1 || echo 0)" "$DESC" > "$d/rx.log" 2>&1 &
    fi
    rx=$!; pids+=("$rx")
    for _ in $(seq 100); do grep -qE "Port 0: |xsk-rxsink ready" "$d/rx.log" 2> /dev/null && ip -n "$NA" -d link show "$VA" | grep -q "prog/xdp" && break; sleep 0.1; done
    ip -n "$NA" -d link show "$VA" > "$d/xdp-mode.txt"
    [[ $napi != threaded ]] || pin_napi "$VA" 0 >> "$d/xdp-mode.txt"
    if [[ $GEN == xsk ]]; then
        ip netns exec "$NB" taskset -c 1 timeout -k 5 "$RUN_TIMEOUT" "$TXGEN" "$VB" "$size" \
            "$(awk -v r="$rate" 'BEGIN { printf "%d", r * 1e6 }')" $((WARM + SECS + 1)) "$DESC" > "$d/tx.log" 2>&1 &
    else
        testpmd "$NB" "$VB" 1 "iwxc-tx-$$" txonly "$size" "$d/tx.log"
    fi
    tx=$!; pids+=("$tx")
    sleep "$WARM"
    if [[ -n ${PROFILE:-} ]]; then
        timeout -k 5 "$RUN_TIMEOUT" perf record -a -g -o "$d/perf.data" -- sleep "$SECS" > /dev/null 2>&1 & prof=$!
        pids+=("$prof")
    fi
    snap "$d" before
    sleep "$SECS"
    snap "$d" after
    [[ -z $prof ]] || { wait "$prof" || true; }
    [[ $GEN == xsk ]] || kill -INT "$tx" 2> /dev/null || true
    wait "$tx" || true
    [[ $sink != testpmd ]] || kill -INT "$rx" 2> /dev/null || true
    wait "$rx" || true
    pids=()
    ip netns del "$NA"; ip netns del "$NB"
    rm -rf /var/run/dpdk/iwxc-rx-$$ /var/run/dpdk/iwxc-tx-$$
}
set_r() { # round: the configurations, reversed every other round
    local c=() n s p k
    for n in $NAPIS; do for s in $SIZES; do for p in $RATES; do for k in $SINKS; do c+=("$n/$s/$p/$k"); done; done; done; done
    if (( $1 % 2 == 0 )); then
        local i j t
        for ((i = 0, j = ${#c[@]} - 1; i < j; i++, j--)); do t=${c[i]}; c[i]=${c[j]}; c[j]=$t; done
    fi
    echo "${c[@]}"
}
for r in $(seq "$FIRST_ROUND" $((FIRST_ROUND + ROUNDS - 1))); do
    quiet "round $r"
    for c in $(set_r "$r"); do
        IFS=/ read -r napi size rate sink <<< "$c"
        name=$napi-$size; [[ $GEN != xsk ]] || name=$name-xsk$rate
        [[ $sink == testpmd ]] || name=$name-sink-$sink
        run "$napi" "$size" "$rate" "$sink" "$OUT/$name.r$r"
        echo "$name r$r: $(python3 - "$OUT/$name.r$r" <<'PY'
import sys
def rd(p):
    v = {}
    for l in open(p):
        k, x = l.split()[:2]
        v[k] = v.get(k, 0) + float(x)  # napi_run_ns: one kthread per queue
    return v
d = sys.argv[1]; a, b = rd(f"{d}/before.snap"), rd(f"{d}/after.snap")
g = lambda k: (b.get(k, 0) - a.get(k, 0)) / (b["t" + k[0]] - a["t" + k[0]])
print(f"sent {g('B_tx_packets') / 1e6:.3f} Mpps, XDP {g('A_rx_queue_0_xdp_packets') / 1e6:.3f}, redirected {g('A_rx_queue_0_xdp_redirect') / 1e6:.3f}, drops {g('A_rx_queue_0_drops') / 1e6:.3f}")
PY
)"
    done
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import glob, os, re, statistics, sys
out = sys.argv[1]
def rd(p):
    v = {}
    for l in open(p):
        k, x = l.split()[:2]
        v[k] = v.get(k, 0) + float(x)
    return v
def testpmd(p, key):  # the forward statistics printed at exit
    try: t = open(p).read()
    except OSError: return None
    m = re.findall(rf"{key}:\s*(\d+)", t)
    return int(m[-1]) if m else None
def pps(p, key):  # testpmd's once-a-second rates, the first and last (partial) periods left out
    try: v = [int(x) for x in re.findall(rf"{key}:\s*(\d+)", open(p).read())]
    except OSError: return None
    v = [x for x in v if x][1:-1]
    return statistics.median(v) if v else None
def cycles(p):
    try: t = open(p).read()
    except OSError: return None
    m = re.findall(r"CPU cycles/packet=([0-9.]+) .* at (\d+) MHz", t)
    return round(float(m[-1][0]) / int(m[-1][1]) * 1e3) if m else None  # ns per packet
rows = {}
for d in sorted(glob.glob(f"{out}/*.r*")):
    if not os.path.exists(f"{d}/after.snap"): continue
    cfg = os.path.basename(d).rsplit(".r", 1)[0]
    a, b = rd(f"{d}/before.snap"), rd(f"{d}/after.snap")
    def g(k):  # a counter's rate between the two snapshots, by its own time stamps
        t = {"A": "tA", "B": "tB"}.get(k[0], "tC")
        return (b.get(k, 0) - a.get(k, 0)) / (b[t] - a[t])
    # the rate into the sink's socket: frames the receiving veth's XDP program redirected, less
    # those the XSK RX ring had no room for (drops, counted after the redirect's failure)
    sent, xdp, red, drops = g("B_tx_packets"), g("A_rx_queue_0_xdp_packets"), g("A_rx_queue_0_xdp_redirect"), g("A_rx_queue_0_drops")
    rxd = red
    cpu = {}
    for c in ("cpu0", "cpu1"):
        ks = ("user", "sys", "softirq", "idle", "steal")
        tot = sum(g(f"{c}_{k}") for k in ks)
        cpu[c] = {k: g(f"{c}_{k}") / tot if tot else 0 for k in ks}
    napi = g("napi_run_ns") / 1e9
    rows.setdefault(cfg, []).append(dict(sent=sent, xdp=xdp, rx=rxd, drops=drops, cpu=cpu, napi=napi,
        txc=cycles(f"{d}/tx.log"), rxc=cycles(f"{d}/rx.log"), run=os.path.basename(d),
        tpps=pps(f"{d}/tx.log", "Tx-pps"), rpps=pps(f"{d}/rx.log", "Rx-pps"),
        missed=testpmd(f"{d}/rx.log", "RX-missed")))
med = lambda v: statistics.median(v) if v else float("nan")
print("per run: sent = the generator's veth end's TX packets/s, rx = redirected into the sink's XSK/s;")
print("CPU shares over the window (user / sys / softirq / idle / steal), the NAPI kthread's CPU share,")
print("the forwarding cores' cycles per packet (testpmd --record-core-cycles) in ns")
for cfg, rs in rows.items():
    for x in rs:
        c0, c1 = x["cpu"]["cpu0"], x["cpu"]["cpu1"]
        f = lambda c: "/".join(f"{c[k]:.0%}" for k in ("user", "sys", "softirq", "idle", "steal"))
        print(f"  {x['run']:20s} sent {x['sent'] / 1e6:.3f} Mpps  rx {x['rx'] / 1e6:.3f}  drops {x['drops'] / 1e6:.3f}"
              f"  cpu0(rx) {f(c0)}  cpu1(tx) {f(c1)}  napi kthread {x['napi']:.0%}"
              f"  forwarding core ns/pkt tx {x['txc']} rx {x['rxc']}  testpmd Tx-pps {x['tpps']} Rx-pps {x['rpps']} RX-missed {x['missed']}")
print()
print(f"{'config':16s} {'sent Mpps':>10s} {'rx Mpps':>9s} {'Gb/s at 1448':>13s} {'Gb/s at 1428':>13s}  runs (rx Mpps)")
for cfg, rs in rows.items():
    s, r = med([x["sent"] for x in rs]), med([x["rx"] for x in rs])
    print(f"{cfg:16s} {s / 1e6:10.3f} {r / 1e6:9.3f} {r * 1448 * 8 / 1e9:13.2f} {r * 1428 * 8 / 1e9:13.2f}  "
          f"{sorted(round(x['rx'] / 1e6, 3) for x in rs)}")
PY
