#!/usr/bin/env bash
# The main job (README, issue #8): two iWARP stacks on a DPDK memif wire, perftest's write_bw
# and write_lat tables from `iwarp-perf`, and beside them the kernel-TCP baseline
# (`iwarp-perf tcp_bw`/`tcp_lat` between two network namespaces over a veth), with ratios.
#
# Below 4 CPUs both stacks run embedded in the iwarp-perf processes (`-d CONFIG.toml`: one
# dataplane thread per process, pinned, sharing its core with the application thread, both
# yielding when idle); with 4 or more, two iwarpd daemons own cores 0 and 1 (spinning) and the
# iwarp-perf clients run on cores 2 and 3 (`-d unix:SOCKET`). Environment: BIN (default
# target/release), ITERS_BW (5000), ITERS_LAT (10000), MODE (auto|embedded|daemon).
# The older demo (ARP, ping, TCP transfer, poll-loop benchmark) is scripts/demo-net.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/memif.sh
BIN=${BIN:-target/release}
ITERS_BW=${ITERS_BW:-5000}
ITERS_LAT=${ITERS_LAT:-10000}
[[ $(id -u) -eq 0 ]] || { echo "demo: run as root (DPDK and network namespaces need it)"; exit 1; }
for b in iwarp-perf iwarpd; do
    [[ -x $BIN/$b ]] || { echo "demo: $BIN/$b missing: run make build (cargo build --release)"; exit 1; }
done
cpus=$(nproc)
MODE=${MODE:-auto}
[[ $MODE == auto ]] && { ((cpus >= 4)) && MODE=daemon || MODE=embedded; }
work=$(mktemp -d /tmp/iwarp-demo.XXXXXX)
NA=iwdemo-a$$ NB=iwdemo-b$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$NA" 2>/dev/null || true
    ip netns del "$NB" 2>/dev/null || true
    rm -rf "$work"
    # A killed embedded engine cannot remove its EAL runtime directory: ours are named by $$.
    rm -rf "/var/run/dpdk/iwarp-demo-a-$$" "/var/run/dpdk/iwarp-demo-b-$$"
}
trap cleanup EXIT
PERF=$(realpath "$BIN/iwarp-perf")

idle=yield; [[ $MODE == daemon ]] && idle=spin
for s in a b; do
    memif_conf $s "iwarp-demo-$s-$$" "$work" idle=$idle mpa='crc = "on"' extra="[control]
socket = \"$work/$s.ctl.sock\"" > "$work/$s.toml"
done
if [[ $MODE == daemon ]]; then
    "$BIN/iwarpd" --config "$work/a.toml" > "$work/iwarpd-a.log" 2>&1 & pids+=($!)
    "$BIN/iwarpd" --config "$work/b.toml" > "$work/iwarpd-b.log" 2>&1 & pids+=($!)
    for s in a b; do
        for _ in $(seq 100); do [[ -S $work/$s.ctl.sock ]] && break; sleep 0.1; done
        [[ -S $work/$s.ctl.sock ]] || { echo "demo: iwarpd $s did not start"; cat "$work/iwarpd-$s.log"; exit 1; }
    done
    DEV_A="unix:$work/a.ctl.sock" DEV_B="unix:$work/b.ctl.sock" PIN_A="taskset -c 2" PIN_B="taskset -c 3"
else
    DEV_A=$work/a.toml DEV_B=$work/b.toml PIN_A="" PIN_B=""
fi

rdma() { # test args...: server (A) in the background, client (B) prints the table
    local t=$1; shift
    
    $PIN_A "$PERF" "$t" -d "$DEV_A" "$@" > "$work/$t.server.out" 2> "$work/$t.server.err" &
    local sp=$!
    pids+=($sp)
    # The client's memif end attaches to the server's socket: wait until the server is up.
    for _ in $(seq 300); do
        grep -q "Waiting for client" "$work/$t.server.out" 2>/dev/null && break
        kill -0 "$sp" 2>/dev/null || break
        sleep 0.1
    done
    if ! $PIN_B "$PERF" "$t" -d "$DEV_B" "$@" --out_json_file "$work/$t.json" 10.77.0.1 \
        > "$work/$t.client.out" 2> "$work/$t.client.err"; then
        echo "demo: iwarp-perf $t FAILED"; cat "$work/$t.client.out" "$work/$t.client.err" \
            "$work/$t.server.out" "$work/$t.server.err"; exit 1
    fi
    wait "$sp" || { echo "demo: iwarp-perf $t server FAILED"; cat "$work/$t.server.err"; exit 1; }
    unset 'pids[-1]'
    sed -n '/^ *RDMA_Write/,$p' "$work/$t.client.out"
}

# Kernel TCP baseline: two namespaces joined by a veth, MTU 1500, one core each.
ip netns add "$NA"; ip netns add "$NB"
ip link add iwd-a$$ type veth peer name iwd-b$$
ip link set iwd-a$$ netns "$NA"; ip link set iwd-b$$ netns "$NB"
ip -n "$NA" addr add 10.79.0.1/24 dev iwd-a$$; ip -n "$NB" addr add 10.79.0.2/24 dev iwd-b$$
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
ip -n "$NA" link set iwd-a$$ up mtu 1500; ip -n "$NB" link set iwd-b$$ up mtu 1500
tcp() { # test args...
    local t=$1; shift
    ip netns exec "$NA" taskset -c 0 "$PERF" "$t" > /dev/null 2>&1 &
    local sp=$!
    pids+=($sp)
    ip netns exec "$NB" taskset -c 1 "$PERF" "$t" "$@" --out_json_file "$work/$t.json" 10.79.0.1 \
        > "$work/$t.out" 2>&1 || { echo "demo: $t FAILED"; cat "$work/$t.out"; exit 1; }
    wait "$sp" || true
    unset 'pids[-1]'
    cat "$work/$t.out"
}

echo "== iWARP over our userspace TCP: two stacks on a memif wire ($MODE mode, $cpus CPUs; MTU 1500, MPA CRC on)"
echo "== iwarp-perf write_bw (RDMA Write, 64 KiB, $ITERS_BW iterations)"
rdma write_bw -s 65536 -n "$ITERS_BW" --report_gbits
echo
echo "== iwarp-perf write_lat (RDMA Write, 2 B, $ITERS_LAT iterations; half the round trip; --mlock: no page faults)"
rdma write_lat -s 2 -n "$ITERS_LAT" --mlock
echo
echo "== baseline: kernel TCP between two network namespaces over a veth (MTU 1500)"
echo "== iwarp-perf tcp_bw (64 KiB messages, echoed back)"
tcp tcp_bw -s 65536 -n "$ITERS_BW" --report_gbits
echo
echo "== iwarp-perf tcp_lat (2 B ping-pong; half the round trip)"
tcp tcp_lat -s 2 -n "$ITERS_LAT"
echo
j() { sed -n "s/.*\"$2\": *\([0-9.e+-]*\).*/\1/p" "$work/$1.json" | head -1; }
rbw=$(j write_bw BW_average) kbw=$(j tcp_bw BW_average)
rlat=$(j write_lat t_typical) klat=$(j tcp_lat t_typical)
r999=$(j write_lat percentile_99.9) k999=$(j tcp_lat percentile_99.9)
awk -v rb="$rbw" -v kb="$kbw" -v rl="$rlat" -v kl="$klat" -v r9="$r999" -v k9="$k999" 'BEGIN {
    printf "== summary (one run; BENCHMARKS.md has medians)\n"
    printf "   %-34s %12s %12s %8s\n", "", "iWARP", "kernel TCP", "ratio"
    printf "   %-34s %12.2f %12.2f %7.2fx\n", "bandwidth 64 KiB [Gb/s]", rb, kb, (kb > 0 ? rb / kb : 0)
    printf "   %-34s %12.2f %12.2f %7.2fx\n", "latency 2 B p50 [usec] (lower=better)", rl, kl, (rl > 0 ? kl / rl : 0)
    printf "   %-34s %12.2f %12.2f %7.2fx\n", "latency 2 B p99.9 [usec]", r9, k9, (r9 > 0 ? k9 / r9 : 0)
    printf "   (latency ratio = kernel / iWARP: above 1 means iWARP is faster)\n"
}'
