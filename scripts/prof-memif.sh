#!/usr/bin/env bash
# One iwarp-perf bandwidth run between two embedded engines over a memif wire (the stacks of
# ab-memif.sh and bench-rdma.sh: MTU 1500, cores 0 and 1), keeping each side's stats file and,
# with PERF=1, a `perf record` of each process, for scripts/perseg.py (per-segment cost of each
# side, per symbol). Prints the run's tag, the wire's c2c round trip (fast or slow state,
# BENCHMARKS.md §4) and the client's table row. Run as root, under `flock /tmp/iwarp-e2e.lock`
# when others share the machine.
#   scripts/prof-memif.sh TAG "ARGS"     e.g. base.r1 "-s 65536 -D 4 --report_gbits --crc on"
# Files: OUT/TAG.a.stats (server: the receiver of write_bw), OUT/TAG.b.stats (client, the
# sender), OUT/TAG.srv.perf and OUT/TAG.cli.perf with PERF=1.
# Environment: BIN (directory holding iwarp-perf; default target/release), OUT (default ./out),
#   TEST (write_bw), PERF (1: record), PERF_DELAY (s after the client starts, 1.2), PERF_DUR
#   (s, 1.5), PERF_F (samples/s, 4999), PERF_G (more perf record options, e.g. --call-graph
#   dwarf), RUN_TIMEOUT (60 s).
set -euo pipefail
OUT=$(realpath -m "${OUT:-out}")
BIN=$(realpath "${BIN:-$(dirname "$0")/../target/release}")
cd "$(dirname "$0")/.."
. scripts/lib/memif.sh
[[ $# -eq 2 ]] || { sed -n 2,15p "$0"; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "prof-memif: run as root"; exit 1; }
[[ -x $BIN/iwarp-perf ]] || { echo "prof-memif: no $BIN/iwarp-perf"; exit 1; }
TAG=$1 ARGS=$2 TEST=${TEST:-write_bw} RUN_TIMEOUT=${RUN_TIMEOUT:-60}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/iwarp-prof-memif.XXXXXX)
sp="" cp=""
cleanup() {
    for p in $sp $cp; do kill "$p" 2> /dev/null || true; done
    rm -rf "$work" /var/run/dpdk/prm-*-$$
}
trap cleanup EXIT
for s in a b; do
    memif_conf $s "prm-$s-$$" "$work" extra="[stats]
file = \"$work/$s.stats\"
interval_ms = 100" > "$work/$s.toml"
done
gcc -O2 -pthread scripts/guest/c2c.c -o "$work/c2c" 2> /dev/null || true
c2c=$({ [[ -x $work/c2c ]] && "$work/c2c"; } 2> /dev/null | tr '\n' ' ' || true)
# shellcheck disable=SC2086 # ARGS: words
timeout -k 5 "$RUN_TIMEOUT" "$BIN/iwarp-perf" "$TEST" -d "$work/a.toml" $ARGS > "$work/s.out" 2> "$work/s.err" &
sp=$!
for _ in $(seq 300); do grep -q "Waiting for client" "$work/s.out" 2> /dev/null && break; sleep 0.1; done
# shellcheck disable=SC2086
timeout -k 5 "$RUN_TIMEOUT" "$BIN/iwarp-perf" "$TEST" -d "$work/b.toml" $ARGS 10.77.0.1 > "$work/c.out" 2> "$work/c.err" &
cp=$!
record() { # pid-of-timeout side
    local pid
    pid=$(pgrep -P "$1" | head -n 1)
    # shellcheck disable=SC2086 # PERF_G: words
    perf record -q -e cpu-clock -F "${PERF_F:-4999}" ${PERF_G:-} -p "$pid" -o "$OUT/$TAG.$2.perf" \
        -- sleep "${PERF_DUR:-1.5}" 2> /dev/null
}
if [[ ${PERF:-0} == 1 ]]; then
    sleep "${PERF_DELAY:-1.2}"
    record "$sp" srv &
    p1=$!
    record "$cp" cli &
    p2=$!
    wait "$p1" "$p2" || echo "prof-memif: perf record failed"
fi
wait "$cp" || { echo "$TAG: client FAILED"; tail -n 3 "$work/c.err"; }
cp=""
wait "$sp" || true
sp=""
row=$(grep -E '^ *[0-9]+ +[0-9]+ ' "$work/c.out" | tail -n 1 || true)
for s in a b; do cp "$work/$s.stats" "$OUT/$TAG.$s.stats" 2> /dev/null || true; done
echo "$TAG c2c[$c2c] $row"
