#!/usr/bin/env bash
# Poll-loop micro-benchmark over memif: l2bench (core 0) drives a device under test (core 1)
# that echoes every frame: iwarpd in echo mode, then dpdk-testpmd in macswap mode, alternating,
# ROUNDS times, at 64 B and 1500 B. Prints every run and the medians and ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
PINGS=${PINGS:-50000}
SIZES=${SIZES:-"64 1500"}
[[ $(id -u) -eq 0 ]] || { echo "bench-l2: run as root"; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "bench-l2: dpdk-testpmd missing (apt-get install dpdk)"; exit 1; }
work=$(mktemp -d /tmp/iwarp-bench.XXXXXX)
dut=""
cleanup() { [[ -n $dut ]] && { kill -INT "$dut" 2>/dev/null; wait "$dut" 2>/dev/null || true; }; rm -rf "$work"; }
trap cleanup EXIT
results=$work/results.txt
: > "$results"

start_dut() { # kind
    local sock=$work/$1.sock
    rm -f "$sock"
    if [[ $1 == iwarpd ]]; then
        cat > "$work/echo.toml" <<EOT
[eal]
file_prefix = "iwarp-bench"
[port]
device = "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no"
ip = "10.77.0.1/24"
[dataplane]
cores = [1]
mode = "echo"
[control]
socket = "$work/ctl.sock"
[log]
level = "warn"
EOT
        "$BIN/iwarpd" --config "$work/echo.toml" > "$work/dut.log" 2>&1 &
    else
        dpdk-testpmd -l 0,1 --main-lcore 0 --no-pci --in-memory --no-telemetry \
            --vdev="net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" -- \
            --forward-mode=macswap --auto-start --stats-period 1000 --nb-cores=1 > "$work/dut.log" 2>&1 &
    fi
    dut=$!
    sleep 1.5
}
stop_dut() { kill -INT "$dut"; wait "$dut" 2>/dev/null || true; dut=""; }

for round in $(seq "$ROUNDS"); do
    for kind in iwarpd testpmd; do
        start_dut "$kind"
        for size in $SIZES; do
            taskset -c 0 "$BIN/l2bench" --vdev "net_memif0,role=client,id=0,socket=$work/$kind.sock,socket-abstract=no" \
                --core 0 --size "$size" --secs "$SECS" --pings "$PINGS" --label "$kind" 2>/dev/null \
                | grep '^l2bench' | tee -a "$results"
        done
        stop_dut
    done
done

python3 - "$results" <<'PY'
import sys, statistics, re
rows = [dict(kv.split('=') for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.strip()]
def med(kind, size, phase, key):
    v = [float(r[key]) for r in rows if r['label'] == kind and r['size'] == size and r['phase'] == phase]
    return statistics.median(v) if v else float('nan')
print("\nmedians over rounds")
print(f"{'size':>6} {'iwarpd Mfps':>12} {'testpmd Mfps':>13} {'ratio':>6} {'iwarpd p50/p99 us':>18} {'testpmd p50/p99 us':>19}")
for size in sorted({r['size'] for r in rows}, key=int):
    a, b = med('iwarpd', size, 'throughput', 'mfps'), med('testpmd', size, 'throughput', 'mfps')
    print(f"{size:>6} {a:12.3f} {b:13.3f} {a/b:6.2f} "
          f"{med('iwarpd', size, 'latency', 'p50_us'):8.2f}/{med('iwarpd', size, 'latency', 'p99_us'):<8.2f} "
          f"{med('testpmd', size, 'latency', 'p50_us'):8.2f}/{med('testpmd', size, 'latency', 'p99_us'):<8.2f}")
PY
