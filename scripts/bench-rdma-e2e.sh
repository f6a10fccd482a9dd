#!/usr/bin/env bash
# RDMA end to end between two hosts on a memif wire (BENCHMARKS.md §4): RDMA Write throughput
# (verbs/examples/write_bw.rs) and Write ping-pong latency (write_pingpong.rs), with the engine
# in two iwarpd daemons (daemon mode) or inside the two example processes (embedded mode), CRC
# off and on; ROUNDS runs of each, the median printed. Root (DPDK). Run under the team's lock:
#   flock /tmp/iwarp-e2e.lock scripts/bench-rdma-e2e.sh
# Env: ROUNDS (3), BW_SIZE (65536), BW_ITERS (20000), LAT_SIZE (64), LAT_ITERS (20000),
# MODES ("daemon embedded"), CRCS ("off on"), IDLE ("yield": dataplane.idle and the examples'
# --idle; on 2 CPUs the 2 dataplane threads and the 2 applications share the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}/release
ROUNDS=${ROUNDS:-3}
BW_SIZE=${BW_SIZE:-65536}
BW_ITERS=${BW_ITERS:-20000}
LAT_SIZE=${LAT_SIZE:-64}
LAT_ITERS=${LAT_ITERS:-20000}
MODES=${MODES:-daemon embedded}
CRCS=${CRCS:-off on}
IDLE=${IDLE:-yield}

cargo build --release -q -p control -p verbs --bin iwarpd --example write_bw --example write_pingpong

W=$(mktemp -d /tmp/iwarp-bench-rdma.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT

conf() { # side role ip core
    cat >"$W/$1.toml" <<EOF
[eal]
hugepages = "off"
memory_mb = 768
file_prefix = "iwb-$1-$$"
[port]
device = "net_memif0,role=$2,id=0,socket=$W/memif.sock,socket-abstract=no"
ip = "$3/24"
[dataplane]
cores = [$4]
mbufs = 16384
idle = "$IDLE"
[control]
socket = "$W/$1.sock"
[mpa]
# Both ends are our stack: no wait for Linux siw's responder race (README, mpa.first_fpdu_delay_ms).
first_fpdu_delay_ms = 0
[log]
level = "warn"
EOF
}
conf a server 10.77.0.1 0
conf b client 10.77.0.2 1

start_daemon() { # side
    "$T/iwarpd" --config "$W/$1.toml" >"$W/$1.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 300); do [[ -S $W/$1.sock ]] && return 0; sleep 0.1; done
    echo "iwarpd $1 did not start:" >&2; cat "$W/$1.log" >&2; exit 1
}
stop_daemons() {
    for p in "${PIDS[@]}"; do kill -TERM "$p"; done
    for p in "${PIDS[@]}"; do wait "$p" || true; done
    PIDS=()
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run_pair mode example crc port server-args client-args -> the client's result line
run_pair() {
    local mode=$1 ex=$2 crc=$3 port=$4 sargs=$5 cargs=$6 sa sb
    if [[ $mode == daemon ]]; then sa="unix:$W/a.sock" sb="unix:$W/b.sock"
    else sa="embedded:$W/a.toml" sb="embedded:$W/b.toml"; fi
    # shellcheck disable=SC2086
    "$T/examples/$ex" -s -d "$sa" -p "$port" --crc "$crc" --idle "$IDLE" $sargs >"$W/server.log" 2>&1 &
    local sp=$!
    for _ in $(seq 300); do grep -q "listening on port" "$W/server.log" && break; sleep 0.1; done
    local try out
    for try in 1 2 3; do
        # shellcheck disable=SC2086
        out=$(timeout 300 "$T/examples/$ex" -c 10.77.0.1 -d "$sb" -p "$port" --crc "$crc" --idle "$IDLE" $cargs 2>"$W/client.err" \
            | grep -E "^(write_bw|write_lat) ") && break
        # A fresh embedded engine can miss the peer's ARP answer while its memif link comes
        # up (ConnectFailed reason 1, unreachable): said on stderr, tried again.
        grep -q "ConnectFailed { reason: 1 }" "$W/client.err" || { cat "$W/client.err" "$W/server.log" >&2; kill "$sp"; exit 1; }
        echo "  ($mode $ex: connect attempt $try unreachable, retrying)" >&2
    done
    [[ -n $out ]] || { echo "no result" >&2; exit 1; }
    echo "$out"
    wait "$sp"
}

echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus; ROUNDS=$ROUNDS IDLE=$IDLE"
port=19000
declare -A BW LAT
# Rounds outermost, every mode and CRC setting once per round: on a shared machine the load
# drifts, and alternating spreads it over all four configurations alike.
for r in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        [[ $mode == daemon ]] && { start_daemon a; start_daemon b; }
        for crc in $CRCS; do
            port=$((port + 1))
            l=$(run_pair "$mode" write_bw "$crc" "$port" "-S $BW_SIZE" "-S $BW_SIZE -n $BW_ITERS")
            echo "$mode crc=$crc round $r: $l"
            BW[$mode.$crc]+=" $(sed -n 's/.*gbps=\([0-9.]*\).*/\1/p' <<<"$l")"
            port=$((port + 1))
            l=$(run_pair "$mode" write_pingpong "$crc" "$port" "-S $LAT_SIZE -n $LAT_ITERS" "-S $LAT_SIZE -n $LAT_ITERS")
            echo "$mode crc=$crc round $r: $l"
            LAT[$mode.$crc]+=" $(sed -n 's/.*median_us=\([0-9.]*\).*/\1/p' <<<"$l")"
        done
        [[ $mode == daemon ]] && stop_daemons
    done
done
for mode in $MODES; do
    for crc in $CRCS; do
        echo "RESULT mode=$mode crc=$crc write_bw_gbps_median=$(tr ' ' '\n' <<<"${BW[$mode.$crc]}" | grep . | median) [${BW[$mode.$crc]# }] write_lat_median_us_median=$(tr ' ' '\n' <<<"${LAT[$mode.$crc]}" | grep . | median) [${LAT[$mode.$crc]# }]"
    done
done
