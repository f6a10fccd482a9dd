#!/usr/bin/env bash
# Bar (d) of issue #8 (BENCHMARKS.md §4, "(d), deterministic"): instructions of the receive
# path's placer against memcpy + CRC32c over the same bytes, counted by callgrind (valgrind's
# CPU has no AVX-512, so the CRC runs as on CPUs without it). For each FPDU size, both paths
# of bench/src/bin/placer-cost.rs under `valgrind --tool=callgrind --toggle-collect`, then
# each one's Ir, Ir per payload byte and the ratio placer / baseline (the bar: <= 1.5).
#   scripts/placer-cost.sh [FPDU_BYTES...]        (default: 1440 8940)
# Environment: BIN (directory holding placer-cost; default target/release, built if missing).
# Deterministic: no lock needed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind > /dev/null || { echo "placer-cost: valgrind not found"; exit 1; }
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release}
[[ -x $BIN/placer-cost ]] || cargo build --release -p bench --bin placer-cost
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1440 8940)
work=$(mktemp -d /tmp/placer-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Ir of one run: callgrind's summary line; payload bytes: the bin's last output field.
run() {
    local mode=$1 size=$2 out fn=baseline
    [[ $mode == baseline ]] || fn=placer_path
    out=$(valgrind --tool=callgrind --callgrind-out-file="$work/cg.$mode.$size" \
        --toggle-collect="placer_cost::$fn" "$BIN/placer-cost" "$mode" "$size" 2> "$work/err")
    local ir
    ir=$(sed -n 's/^summary: *//p' "$work/cg.$mode.$size")
    echo "$ir $(grep -o '[0-9]\+' <<< "$out" | head -1)"
}
printf '%-6s %14s %14s %10s %10s %7s\n' FPDU placer_Ir baseline_Ir placer/B base/B ratio
for s in "${sizes[@]}"; do
    read -r pi pb <<< "$(run placer "$s")"
    read -r bi _ <<< "$(run baseline "$s")"
    awk -v s="$s" -v pi="$pi" -v bi="$bi" -v b="$pb" 'BEGIN {
        printf "%-6s %14d %14d %10.3f %10.3f %6.2fx\n", s, pi, bi, pi / b, bi / b, pi / bi }'
done
