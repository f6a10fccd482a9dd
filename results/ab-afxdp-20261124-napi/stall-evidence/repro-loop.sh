#!/usr/bin/env bash
# Repro of the af_xdp stall with threaded NAPI (helper xdp-stall). Run under flock.
# RUNS (5), BIN (/tmp/xdps-bin), NAPI (threaded|""), STALL_AFTER (12 s), OUT (/tmp/xdps/out)
set -uo pipefail
RUNS=${RUNS:-5} BIN=${BIN:-/tmp/xdps-bin} NAPI=${NAPI-threaded} STALL_AFTER=${STALL_AFTER:-12}
OUT=${OUT:-/tmp/xdps/out}; mkdir -p "$OUT"
ITERS=${ITERS:-5000}
. /work/wt/xdp-stall/scripts/lib/memif.sh
work=$(mktemp -d /tmp/xdps-work.XXXXXX)
NA=xsa$$ NB=xsb$$ VA=xs-a$$ VB=xs-b$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$NA" 2>/dev/null || true; ip netns del "$NB" 2>/dev/null || true
    rm -rf "$work" /var/run/dpdk/xs-*-$$
}
trap cleanup EXIT
conf() { engine_conf prefix="xs-$1-$$" device="net_af_xdp0,iface=$2,start_queue=0,queue_count=1${XDP_ARGS:-}" ip="$3" core="$4" idle=yield port="${XPORT:-}" extra="[stats]
file = \"$work/$1.stats\"
interval_ms = 100
${EXTRA:-}"; }
conf xa "$VA" 10.78.0.1 0 > "$work/xa.toml"; conf xb "$VB" 10.78.0.2 1 > "$work/xb.toml"
ip netns add "$NA"; ip netns add "$NB"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NA"; ip link set "$VB" netns "$NB"
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip -n "$NA" link set "$VA" up mtu 1500; ip -n "$NB" link set "$VB" up mtu 1500
if [[ $NAPI == threaded ]]; then
    ip netns exec "$NA" ethtool -K "$VA" gro on
    ip netns exec "$NA" sh -c "echo 1 > /sys/class/net/$VA/threaded"
    ip netns exec "$NA" ethtool -K "$VA" gro off
fi
snap() { # dir tag
    local d=$1 t=$2
    for s in xa xb; do cp "$work/$s.stats" "$d/$s.stats.$t" 2>/dev/null; done
    { ip -n "$NA" -s -s link show "$VA"; ip netns exec "$NA" ethtool -S "$VA" | grep -vE ': 0$'; } > "$d/$VA.$t" 2>&1
    { ip -n "$NB" -s -s link show "$VB"; ip netns exec "$NB" ethtool -S "$VB" | grep -vE ': 0$'; } > "$d/$VB.$t" 2>&1
    { ip netns exec "$NA" ss --xdp -a -e -m -p; echo; ip netns exec "$NB" ss --xdp -a -e -m -p; } > "$d/ss.$t" 2>&1
}
for r in $(seq "$RUNS"); do
    d="$OUT/run$r"; mkdir -p "$d"; rm -f "$work"/*.stats
    ip netns exec "$NA" timeout -k 5 60 "$BIN/iwarp-perf" write_bw -d "$work/xa.toml" -s 65536 -n "$ITERS" --report_gbits --crc on ${PARGS:-} > "$d/s.out" 2> "$d/s.err" & sp=$!
    pids+=($sp)
    for _ in $(seq 300); do grep -q "Waiting for client" "$d/s.out" 2>/dev/null && break; sleep 0.1; done
    [[ $NAPI == threaded ]] && for p in $(pgrep "^napi/${VA:0:10}"); do taskset -pc 0 "$p" >> "$d/napi.txt"; [[ -z ${NAPI_RT:-} ]] || chrt -f -p 1 "$p"; done
    ip -n "$NA" -d link show "$VA" > "$d/link-mode.txt"
    np=$(pgrep "^napi/${VA:0:10}" | head -1)
    ( while [[ -e /proc/$np/schedstat ]]; do echo "$(cut -d' ' -f1 /proc/uptime) $(awk '{print $3}' /proc/$np/stat) $(cat /proc/$np/schedstat 2>/dev/null)"; sleep 0.1; done > "$d/napi-schedstat.txt" ) & pids+=($!)
    snap "$d" 0
    pp=""
    if [[ -n ${TRACE:-} ]]; then timeout -k 2 40 perf record -q -a -e 'xdp:xdp_redirect_err,xdp:xdp_exception' -o "$d/redir.data" -- sleep 30 >/dev/null 2>&1 & pp=$!; sleep 0.5; fi
    ip netns exec "$NB" timeout -k 5 60 "$BIN/iwarp-perf" write_bw -d "$work/xb.toml" -s 65536 -n "$ITERS" --report_gbits --crc on ${PARGS:-} 10.78.0.1 > "$d/c.out" 2> "$d/c.err" & cp=$!
    pids+=($cp)
    t=0; while kill -0 "$cp" 2>/dev/null && (( t < STALL_AFTER * 10 )); do sleep 0.1; t=$((t + 1)); done
    if kill -0 "$cp" 2>/dev/null; then
        echo "run $r: STALLED" | tee "$d/verdict"
        snap "$d" s1
        cpid=$(pgrep -f "xb.toml" | while read -r p; do [[ $(cat /proc/$p/comm) == iwarp-perf ]] && echo $p; done | head -1)
        echo "client pid $cpid" > "$d/trace.txt"
        I=/sys/kernel/tracing/instances/xdps$$; mkdir -p $I
        for p in $(pgrep "^napi/${VA:0:10}"); do { echo "== napi $p"; cat /proc/$p/sched; } >> "$d/sched.txt"; done
        for p in $(pgrep -f "xa.toml"); do for t in /proc/$p/task/*; do { echo "== $t $(cat $t/comm)"; grep -E "sum_exec|nr_switches|nr_voluntary|wait_sum|policy|prio|vruntime|deadline|slice" $t/sched; cat $t/status | grep Cpus_allowed_list; } >> "$d/sched.txt"; done; done
        echo 1 > $I/tracing_cpumask; echo 1 > $I/events/sched/sched_switch/enable; echo 1 > $I/events/sched/sched_wakeup/enable
        echo 1 > $I/events/napi/napi_poll/enable; echo 1 > $I/events/xdp/enable
        echo function > $I/current_tracer; echo 1 > $I/tracing_on
        sleep 2
        echo 0 > $I/tracing_on; cat $I/trace > "$d/ftrace.txt"; echo nop > $I/current_tracer
        echo 0 > $I/events/sched/sched_switch/enable; echo 0 > $I/events/sched/sched_wakeup/enable; for p in $(pgrep "^napi/${VA:0:10}"); do { echo "== napi after $p"; cat /proc/$p/sched; } >> "$d/sched.txt"; done
        echo 0 > $I/events/napi/napi_poll/enable; echo 0 > $I/events/xdp/enable; rmdir $I
        for t in /proc/$cpid/task/*; do echo "$(cat $t/comm) $(cat $t/wchan) $(awk '{print $3, $14, $15}' $t/stat)"; done >> "$d/trace.txt"; true
        snap "$d" s2
        for p in $(pgrep "^napi/${VA:0:10}"); do { cat /proc/$p/stat; cat /proc/$p/wchan; echo; } >> "$d/napi-state.txt"; done
        top -b -n1 -H | head -25 > "$d/top.txt"
        kill -TERM "$cp" "$sp" 2>/dev/null
    else
        grep -h "65536" "$d/c.out" | tail -1 | sed "s/^/run $r: ok /" | tee "$d/verdict"
    fi
    wait "$cp" 2>/dev/null; wait "$sp" 2>/dev/null; pids=()
    if [[ -n $pp ]]; then kill -INT "$pp"; wait "$pp"; perf script -i "$d/redir.data" 2>/dev/null | awk '{for(i=1;i<=NF;i++) if ($i ~ /^err=/) c[$i]++} END {for (k in c) print k, c[k]}' > "$d/redir.txt"; cat "$d/redir.txt"; fi
    { ip netns exec "$NA" ethtool -S "$VA"; } | grep -E "drops|xdp_packets|redirect" > "$d/va-drops.txt"; tr '\n' ' ' < "$d/va-drops.txt"; echo
    sleep 0.5
done
