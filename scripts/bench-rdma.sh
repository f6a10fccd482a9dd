#!/usr/bin/env bash
# The iWARP record of BENCHMARKS.md §4 (issue #8), reproducible: ROUNDS rounds, alternating in
# each round, of iwarp-perf between two stacks (both embedded, MTU 1500) and the baselines:
#   memif:  iwarp-perf over a memif wire; our userspace TCP without iWARP between the same two
#           stacks (iwarpd's diag sender -> discard service over memif, `usertcp`);
#   afxdp:  iwarp-perf write_bw with each engine on net_af_xdp on one end of a veth between two
#           network namespaces (bar (c));
#   kernel: TCP between the same two namespaces over the same veth, MTU 1500 (iwarp-perf
#           tcp_bw/tcp_lat, iperf3 single stream, CUBIC like our stacks' default).
# One JSON per run under OUT (default results/bench-rdma-<date>/), the medians and ratios printed
# at the end (and kept in OUT/summary.txt); then one write_bw, read_bw and send_bw sweep (-a,
# memif, CRC on) each with --plot. The RDMA latency tests run with --mlock (the records of
# BENCHMARKS.md made before it ran without: their p99/p99.9 include the first-pass page faults).
# Environment: ROUNDS (3), ITERS_BW (5000), ITERS_LAT (5000), SWEEP_ITERS (200), OUT, BIN,
#   WIRES ("memif afxdp"; add "daemon" for write_bw/write_lat with two iwarpd and iwarp-perf as
#   their clients over the same memif wire), SETS ("bw lat sweep": which groups run), RUN_TIMEOUT (120 s per
#   process), LOAD_MAX/LOAD_WAIT (before each round wait up to LOAD_WAIT s, default 300, for
#   the 1-min load average to fall below LOAD_MAX; the load is logged in OUT/load.txt either
#   way: this machine is shared), XDP_DESC (af_xdp rx/tx descriptors; default the config's
#   1024), XDP_ARGS (extra net_af_xdp devargs, e.g. ",busy_budget=64"), XDP_PERF_ARGS (extra
#   iwarp-perf arguments of the af_xdp write_bw, both sides, e.g. "--pump on"), XDP_IDLE (the
#   af_xdp engines' `dataplane.idle`, default "yield" as everywhere here), XDP_CC (the af_xdp
#   engines' `tcp.cc`, default the config's "cubic"), XDP_NAPI ("threaded": the receiving veth
#   end's NAPI in a kthread pinned to the receiving engine's core, SCHED_FIFO priority 1;
#   "threaded-other": the same kthread left SCHED_OTHER, which stalls, see below), PROFILE (a directory:
#   `perf record -a -g` while the client runs, in each run whose name matches the glob PROFILE_MATCH,
#   default the round-1 af_xdp write_bw; with PROFILE_EVENTS, a comma-separated event list,
#   `perf stat -a -e PROFILE_EVENTS` instead, e.g. syscalls:sys_enter_sendto to count TX kicks).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/memif.sh
BIN=${BIN:-target/release}
ROUNDS=${ROUNDS:-3}
ITERS_BW=${ITERS_BW:-5000}
ITERS_LAT=${ITERS_LAT:-5000}
SWEEP_ITERS=${SWEEP_ITERS:-200}
WIRES=${WIRES:-"memif afxdp"}
SETS=${SETS:-"bw lat sweep"}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
OUT=${OUT:-results/bench-rdma-$(date +%Y%m%d-%H%M)}
[[ $(id -u) -eq 0 ]] || { echo "bench-rdma: run as root"; exit 1; }
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
work=$(mktemp -d /tmp/iwarp-bench-rdma.XXXXXX)
NA=iwbra$$ NB=iwbrb$$ VA=iwbr-a$$ VB=iwbr-b$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$NA" 2>/dev/null || true; ip netns del "$NB" 2>/dev/null || true
    rm -rf "$work" /var/run/dpdk/iwbr-*-$$
}
trap cleanup EXIT
has() { [[ " $2 " == *" $1 "* ]]; }
T() { timeout -k 5 "$RUN_TIMEOUT" "$@"; }
PERF=$(realpath "$BIN/iwarp-perf")
IWARPD=$(realpath "$BIN/iwarpd")
{ lscpu | grep -E "Model name|CPU family|^Model:|^CPU\(s\)|^Flags" | sed -e 's/^\(Flags:\s*\).*\(avx512f\).*\(vpclmulqdq\).*/\1... \2 ... \3 .../'; uptime; uname -r; } > "$OUT/machine.txt"
conf() { # name device ip core [extra lines] [extra [port] lines]: scripts/lib/memif.sh's, with a stats file
    engine_conf prefix="iwbr-$1-$$" device="$2" ip="$3" core="$4" idle="${IDLE:-yield}" port="${6:-}" extra="[stats]
file = \"$work/$1.stats\"
interval_ms = 100
${5:-}"
}
memif() { memif_device "$1" "$work/memif.sock"; }
xdp() { echo "net_af_xdp0,iface=$1,start_queue=0,queue_count=1${XDP_ARGS:-}"; }
conf a "$(memif server)" 10.77.0.1 0 > "$work/a.toml"; conf b "$(memif client)" 10.77.0.2 1 > "$work/b.toml"
for s in a b; do # daemon mode: the same stacks as two iwarpd, iwarp-perf their clients
    sed "s|^file_prefix = \"iwbr-$s-|file_prefix = \"iwbr-d$s-|" "$work/$s.toml" > "$work/d$s.toml"
    printf '[control]\nsocket = "%s"\n' "$work/d$s.ctl.sock" >> "$work/d$s.toml"
done
xport=${XDP_DESC:+"rx_desc = $XDP_DESC
tx_desc = $XDP_DESC"}
xtcp=${XDP_CC:+"[tcp]
cc = \"$XDP_CC\""}
IDLE=${XDP_IDLE:-yield} conf xa "$(xdp "$VA")" 10.78.0.1 0 "$xtcp" "$xport" > "$work/xa.toml"
IDLE=${XDP_IDLE:-yield} conf xb "$(xdp "$VB")" 10.78.0.2 1 "$xtcp" "$xport" > "$work/xb.toml"
# XDP_NAPI=threaded: the receiving veth end's NAPI (XDP program, copy into the receiver's UMEM)
# runs in a kthread on the receiving engine's core instead of in the sender's `sendto` softirq.
# A veth has NAPI only while an XDP program (or GRO) is on it, and `threaded` can be set only
# then: GRO on, threaded, GRO off at setup (the flag stays; toggling it while the XDP program
# runs lost frames for good in one trial); each run's NAPI, made when the server attaches its
# program, is then a kthread, pinned once the server is up. No effect on the kernel TCP runs
# (no XDP program then, GRO off).
# The kthread gets SCHED_FIFO priority 1 (as threaded NAPI is usually run beside busy-polling
# threads): left SCHED_OTHER on the core where the receiving engine's dataplane thread (and,
# with --pump off, its application thread) poll and `sched_yield`, it sat runnable on the run
# queue without running for up to 4.2 s (its schedstat), while the sender's frames waited for
# it in the veth: transfers paused for seconds, or for good (BENCHMARKS.md §4, "Bar (c): the
# af_xdp stall with threaded NAPI"). XDP_NAPI=threaded-other keeps SCHED_OTHER to show it.
pin_napi() { # veth core
    local p
    for p in $(pgrep "^napi/${1:0:10}"); do
        taskset -pc "$2" "$p"
        [[ ${XDP_NAPI:-} == threaded-other ]] || chrt -v -f -p 1 "$p"
    done
}
vstat() { ip -n "$1" -s link show "$2"; ip netns exec "$1" ethtool -S "$2" 2>/dev/null | grep -vE ': 0$' || true; }
daemons_up() { # array name: start iwarpd A and B (daemon mode), wait for their control sockets
    local -n _p=$1; local s
    rm -f "$work"/d[ab].ctl.sock
    for s in a b; do
        timeout -k 5 "$RUN_TIMEOUT" "$IWARPD" --config "$work/d$s.toml" > "$work/iwarpd-d$s.log" 2>&1 &
        _p+=($!); pids+=($!)
        for _ in $(seq 100); do [[ -S $work/d$s.ctl.sock ]] && break; sleep 0.1; done
        [[ -S $work/d$s.ctl.sock ]] || { tail -n 5 "$work/iwarpd-d$s.log"; daemons_down "$1"; return 1; }
    done
}
daemons_down() { # array name
    local -n _q=$1; local p
    for p in "${_q[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${_q[@]}"; do wait "$p" 2>/dev/null || true; unset 'pids[-1]'; done
    _q=()
}
rdma() { # name wire test args...: wire memif (a.toml/b.toml, embedded), daemon (the same as two
         # iwarpd, iwarp-perf their clients) or afxdp (xa/xb in NA/NB)
    local name=$1 wire=$2 t=$3; shift 3
    local sa=() sb=() ca=a cb=b ip=10.77.0.1
    local da="$work/$ca.toml" db="$work/$cb.toml" dpids=()
    # A server killed after its client failed can leave its memif socket behind, and every
    # later server would then fail to bind it: one failure must not take the rest of the run.
    rm -f "$work/memif.sock"
    if [[ $wire == afxdp ]]; then
        sa=(ip netns exec "$NA"); sb=(ip netns exec "$NB"); ca=xa; cb=xb; ip=10.78.0.1
        da="$work/xa.toml" db="$work/xb.toml"
        for v in "$NA $VA" "$NB $VB"; do vstat ${v% *} ${v#* } > "$work/${v#* }.before"; done
    elif [[ $wire == daemon ]]; then
        ca=da; cb=db; da="unix:$work/da.ctl.sock" db="unix:$work/db.ctl.sock"
        daemons_up dpids || { echo "bench-rdma: $name FAILED (iwarpd did not start)"; return 0; }
    fi
    rm -f "$work/$ca.stats" "$work/$cb.stats"
    "${sa[@]}" timeout -k 5 "$RUN_TIMEOUT" "$PERF" "$t" -d "$da" "$@" > "$work/s.out" 2> "$work/s.err" & local sp=$!
    pids+=($sp)
    for _ in $(seq 300); do grep -q "Waiting for client" "$work/s.out" 2>/dev/null && break; sleep 0.1; done
    if [[ $wire == afxdp ]]; then
        ip -n "$NA" -d link show "$VA" > "$OUT/$name.xdp-mode.txt"
        [[ -z ${XDP_NAPI:-} ]] || pin_napi "$VA" 0 >> "$OUT/$name.xdp-mode.txt"
    fi
    local prof=""
    # shellcheck disable=SC2053 # PROFILE_MATCH is a glob
    if [[ -n ${PROFILE:-} && $name == ${PROFILE_MATCH:-write_bw_64k_afxdp.r1} ]]; then
        mkdir -p "$PROFILE"
        if [[ -n ${PROFILE_EVENTS:-} ]]; then
            timeout -k 5 "$RUN_TIMEOUT" perf stat -a -e "$PROFILE_EVENTS" -o "$PROFILE/$name.perf.stat" -- sleep "$RUN_TIMEOUT" > /dev/null 2>&1 & prof=$!
        else
            timeout -k 5 "$RUN_TIMEOUT" perf record -a -g -o "$PROFILE/$name.perf.data" -- sleep "$RUN_TIMEOUT" > /dev/null 2>&1 & prof=$!
        fi
        pids+=($prof); sleep 0.5
    fi
    if ! "${sb[@]}" timeout -k 5 "$RUN_TIMEOUT" "$PERF" "$t" -d "$db" "$@" \
        --out_json_file "$OUT/$name.json" "$ip" > "$work/c.out" 2> "$work/c.err"; then
        echo "bench-rdma: $name FAILED"; tail -n 5 "$work/c.err" "$work/s.err"; kill "$sp" 2>/dev/null || true
    fi
    wait "$sp" || true; unset 'pids[-1]'
    cp "$work/c.out" "$OUT/$name.out" # the client's table (every size of a sweep; the JSON keeps the last)
    [[ $wire != daemon ]] || daemons_down dpids
    if [[ -n $prof ]]; then kill -INT "$prof"; wait "$prof" || true; unset 'pids[-1]'; fi
    if [[ $wire == afxdp ]]; then
        for s in "$ca" "$cb"; do [[ -f $work/$s.stats ]] && cp "$work/$s.stats" "$OUT/$name.$s.stats"; done
        for v in "$NA $VA" "$NB $VB"; do
            { cat "$work/${v#* }.before"; echo "-- after"; vstat ${v% *} ${v#* }; } > "$OUT/$name.${v#* }.link"
        done
    fi
}
# Two namespaces joined by a veth, MTU 1500: kernel TCP on 10.79.1.0/24, our af_xdp stacks on
# 10.78.0.0/24 (the XDP program takes every frame while they run; the kernel's addresses stay).
ip netns add "$NA"; ip netns add "$NB"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NA"; ip link set "$VB" netns "$NB"
ip -n "$NA" addr add 10.79.1.1/24 dev "$VA"; ip -n "$NB" addr add 10.79.1.2/24 dev "$VB"
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip -n "$NA" link set "$VA" up mtu 1500; ip -n "$NB" link set "$VB" up mtu 1500
ip netns exec "$NA" ethtool -k "$VA" > "$OUT/veth-offloads.txt" 2>&1 || true
if [[ ${XDP_NAPI:-} == threaded* ]]; then
    ip netns exec "$NA" ethtool -K "$VA" gro on
    ip netns exec "$NA" sh -c "echo 1 > /sys/class/net/$VA/threaded"
    ip netns exec "$NA" ethtool -K "$VA" gro off
fi
ktcp() { # name test args...
    local name=$1 t=$2; shift 2
    ip netns exec "$NA" taskset -c 0 timeout -k 5 "$RUN_TIMEOUT" "$PERF" "$t" > /dev/null 2>&1 & local sp=$!
    pids+=($sp)
    ip netns exec "$NB" taskset -c 1 timeout -k 5 "$RUN_TIMEOUT" "$PERF" "$t" "$@" --out_json_file "$OUT/$name.json" 10.79.1.1 \
        > /dev/null 2>&1 || echo "bench-rdma: $name FAILED"
    wait "$sp" || true; unset 'pids[-1]'
}
iperf() { # name
    ip netns exec "$NA" taskset -c 0 timeout -k 5 "$RUN_TIMEOUT" iperf3 -s -1 > /dev/null 2>&1 & local sp=$!
    pids+=($sp); sleep 0.5
    ip netns exec "$NB" taskset -c 1 timeout -k 5 "$RUN_TIMEOUT" iperf3 -c 10.79.1.1 -t 3 -C cubic -J > "$OUT/$1.json" 2>/dev/null \
        || echo "bench-rdma: $1 FAILED"
    wait "$sp" || true; unset 'pids[-1]'
}
# The same iperf3 with TSO/GSO off on both veth ends (GRO is off on a veth by default): the
# kernel then also crosses the veth one MTU-sized frame at a time, as our stacks do on af_xdp.
iperf_nogso() { # name
    for v in "$NA $VA" "$NB $VB"; do ip netns exec ${v% *} ethtool -K ${v#* } tso off gso off; done
    iperf "$1"
    for v in "$NA $VA" "$NB $VB"; do ip netns exec ${v% *} ethtool -K ${v#* } tso on gso on; done
}
# Our userspace TCP without iWARP between the same two stacks (memif, same cores, MTU, CUBIC):
# iwarpd A's discard service, iwarpd B's pattern sender of ITERS_BW x 64 KiB (no hashing).
usertcp() { # name
    local d="[control]
socket = \"$work/u.ctl.sock\"
[diag]
run_seconds = $RUN_TIMEOUT"
    conf ua "$(memif server)" 10.77.0.1 0 "$d
discard_port = 9
discard_sha256 = false" > "$work/ua.toml"
    conf ub "$(memif client)" 10.77.0.2 1 "${d/u.ctl/ub.ctl}
send_to = \"10.77.0.1:9\"
send_bytes = $(( 65536 * ITERS_BW ))
send_sha256 = false
exit_after_send = true" > "$work/ub.toml"
    timeout -k 5 "$RUN_TIMEOUT" "$IWARPD" --config "$work/ua.toml" > "$work/ua.log" 2>&1 & local sp=$!
    pids+=($sp); sleep 1.5
    timeout -k 5 "$RUN_TIMEOUT" "$IWARPD" --config "$work/ub.toml" > "$work/ub.log" 2>&1 || true
    kill -INT "$sp" 2>/dev/null || true; wait "$sp" || true; unset 'pids[-1]'
    local line g rtx
    line=$(grep -m1 'iwarpd: sender conn=' "$work/ub.log" || true)
    g=$(grep -o 'gbps=[0-9.]*' <<< "$line" | cut -d= -f2)
    rtx=$(awk '/^\[lcore.0.tcp\]/{f=1} f&&/^retransmissions/{print $3; exit}' "$work/ub.log")
    [[ -n $g ]] || { echo "bench-rdma: $1 FAILED"; tail -n 5 "$work/ub.log" "$work/ua.log"; g=0; }
    printf '{"test": "usertcp", "wire": "memif", "bytes": %d, "gbps": %s, "retransmissions": %s, "line": "%s"}\n' \
        $(( 65536 * ITERS_BW )) "$g" "${rtx:-0}" "$line" > "$OUT/$1.json"
}
bw=(-s 65536 -n "$ITERS_BW" --report_gbits)
# The RDMA latency tests lock their memory (`--mlock`): without it the first pass over the
# memif rings page-faults, ~2,000 of 5,000 samples, and p99/p99.9 measure the faults
# (BENCHMARKS.md, "Bar (b)'s p99.9 on AMD EPYC"). Kernel TCP's tcp_lat has no such option.
lat=(-n "$ITERS_LAT" --crc on --mlock)
quiet() { # wait up to LOAD_WAIT s for the 1-min load average to fall below LOAD_MAX; log it
    local t=0
    while [[ -n ${LOAD_MAX:-} && $t -lt ${LOAD_WAIT:-300} ]] && \
        awk -v m="$LOAD_MAX" '{ exit !($1 >= m) }' /proc/loadavg; do sleep 5; t=$((t + 5)); done
    echo "$1 $(date +%T) waited ${t}s load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
}
for r in $(seq "$ROUNDS"); do
    echo "== round $r"
    quiet "round $r"
    if has bw "$SETS"; then
        if has memif "$WIRES"; then
            rdma "write_bw_64k_crc_on.r$r" memif write_bw "${bw[@]}" --crc on
            usertcp "usertcp_memif.r$r"
        fi
        ktcp "tcp_bw_64k.r$r" tcp_bw "${bw[@]}"
        has memif "$WIRES" && rdma "write_bw_64k_crc_off.r$r" memif write_bw "${bw[@]}" --crc off
        # The engine's dataplane thread moving the data, the application thread beside it
        # (the default, --pump on, is one thread per side doing both).
        has memif "$WIRES" && rdma "write_bw_64k_pump_off.r$r" memif write_bw "${bw[@]}" --crc on --pump off
        # shellcheck disable=SC2086 # XDP_PERF_ARGS: words
        has afxdp "$WIRES" && rdma "write_bw_64k_afxdp.r$r" afxdp write_bw "${bw[@]}" --crc on ${XDP_PERF_ARGS:-}
        has daemon "$WIRES" && rdma "write_bw_64k_daemon.r$r" daemon write_bw "${bw[@]}" --crc on
        iperf "iperf3.r$r"
        has afxdp "$WIRES" && iperf_nogso "iperf3_nogso.r$r"
        if has memif "$WIRES"; then
            rdma "read_bw_64k.r$r" memif read_bw "${bw[@]}" --crc on
            rdma "send_bw_64k.r$r" memif send_bw "${bw[@]}" --crc on
        fi
    fi
    if has lat "$SETS"; then
        for s in 2 4096; do
            rdma "write_lat_$s.r$r" memif write_lat -s $s "${lat[@]}"
            has daemon "$WIRES" && rdma "write_lat_${s}_daemon.r$r" daemon write_lat -s $s "${lat[@]}"
            ktcp "tcp_lat_$s.r$r" tcp_lat -s $s -n "$ITERS_LAT"
            rdma "send_lat_$s.r$r" memif send_lat -s $s "${lat[@]}"
            rdma "read_lat_$s.r$r" memif read_lat -s $s "${lat[@]}"
        done
    fi
done
if has sweep "$SETS"; then
    echo "== sweep"
    quiet sweep
    for t in write_bw read_bw send_bw; do
        rdma "${t}_sweep" memif $t -a -n "$SWEEP_ITERS" --report_gbits --crc on --plot "$OUT/${t}_sweep.png"
    done
    ktcp tcp_bw_sweep tcp_bw -a -n "$SWEEP_ITERS" --report_gbits --plot "$OUT/tcp_bw_sweep.png"
fi
quiet end
echo "== medians ($ROUNDS rounds) in $OUT"
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.txt"
import json, glob, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
names = sorted({os.path.basename(p).split('.r')[0] for p in glob.glob(f"{out}/*.r*.json")})
med = {}
for n in names:
    vals = {}
    for r in range(1, rounds + 1):
        p = f"{out}/{n}.r{r}.json"
        if not os.path.exists(p): continue
        try: j = json.load(open(p))
        except ValueError: continue
        if n.startswith("iperf3"):
            vals.setdefault("Gb/s", []).append(j["end"]["sum_received"]["bits_per_second"] / 1e9)
            continue
        if n.startswith("usertcp"):
            vals.setdefault("Gb/s", []).append(float(j["gbps"]))
            continue
        res = j["results"]
        for k in ("BW_average", "t_typical", "percentile_99.9"):
            if k in res: vals.setdefault(k, []).append(res[k])
    for k, v in vals.items():
        med[(n, k)] = statistics.median(v)
    print(f"{n:24s} " + "  ".join(f"{k} {statistics.median(v):.2f} {sorted(round(x,2) for x in v)}" for k, v in vals.items()))
def g(n):
    return med.get((n, "BW_average")) or med.get((n, "Gb/s"))
def ratio(label, a, b):
    x, y = g(a), g(b)
    if x and y: print(f"ratio {label:44s} {x:.2f} / {y:.2f} = {x / y:.2f}")
ratio("write_bw memif CRC on / usertcp memif", "write_bw_64k_crc_on", "usertcp_memif")
ratio("write_bw memif CRC on / kernel tcp_bw veth", "write_bw_64k_crc_on", "tcp_bw_64k")
ratio("write_bw memif CRC on / kernel iperf3 veth", "write_bw_64k_crc_on", "iperf3")
ratio("usertcp memif / kernel iperf3 veth", "usertcp_memif", "iperf3")
ratio("write_bw daemon / embedded (memif, CRC on)", "write_bw_64k_daemon", "write_bw_64k_crc_on")
ratio("write_bw memif CRC on / CRC off", "write_bw_64k_crc_on", "write_bw_64k_crc_off")
ratio("write_bw memif --pump on / off", "write_bw_64k_crc_on", "write_bw_64k_pump_off")
ratio("bar (c): write_bw af_xdp veth / iperf3 veth", "write_bw_64k_afxdp", "iperf3")
ratio("write_bw af_xdp veth / iperf3 veth TSO+GSO off", "write_bw_64k_afxdp", "iperf3_nogso")
PY
