#!/usr/bin/env bash
# Alternating A/B runs of one iwarp-perf test between two embedded engines over a memif wire
# (MTU 1500, cores 0 and 1, first_fpdu_delay_ms = 0, as bench-rdma.sh): variant A and B differ
# by build (BIN_A, BIN_B) and/or by arguments (ARGS_A, ARGS_B). Prints each run's table row,
# after the wire's state (`c2c`, the cache-line round trip between the cores; ~50-130 ns fast,
# ~370-440 ns slow: compare only within a state), and the median of each variant's BW average
# (bandwidth tests) or t_typical (latency tests). Run as root, under
# `flock /tmp/iwarp-e2e.lock` when others share the machine.
#   scripts/ab-memif.sh TEST "ARGS_A" "ARGS_B"      e.g. write_bw "-s 65536 -n 20000 --report_gbits --pump off" "-s 65536 -n 20000 --report_gbits"
# Environment: BIN_A, BIN_B (directories holding iwarp-perf; default target/release), ROUNDS
#   (3; the order alternates each round), RUN_TIMEOUT (60 s per run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/memif.sh
[[ $# -eq 3 ]] || { sed -n 2,9p "$0"; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "ab-memif: run as root"; exit 1; }
T=$1 ARGS_A=$2 ARGS_B=$3
BIN_A=$(realpath "${BIN_A:-target/release}") BIN_B=$(realpath "${BIN_B:-target/release}")
ROUNDS=${ROUNDS:-3} RUN_TIMEOUT=${RUN_TIMEOUT:-60}
for b in "$BIN_A" "$BIN_B"; do [[ -x $b/iwarp-perf ]] || { echo "ab-memif: no $b/iwarp-perf"; exit 1; }; done
work=$(mktemp -d /tmp/iwarp-ab-memif.XXXXXX)
sp=""
cleanup() {
    [[ -z $sp ]] || kill "$sp" 2>/dev/null || true
    rm -rf "$work" /var/run/dpdk/abm-*-$$
}
trap cleanup EXIT
for s in a b; do memif_conf $s "abm-$s-$$" "$work" > "$work/$s.toml"; done
# The wire's state (BENCHMARKS.md §4: fast or slow by where the host runs the two vCPUs): the
# cache-line round trip between the two cores, before each run, when a C compiler is there.
c2c() { [[ -x $work/c2c ]] && "$work/c2c" | sed 's/^/  /' || true; }
gcc -O2 -pthread scripts/guest/c2c.c -o "$work/c2c" 2> /dev/null || true
run() { # variant bin args: one run, its table row on stdout (appended to $work/<variant>)
    local v=$1 bin=$2 row
    c2c
    # shellcheck disable=SC2086 # args: words
    timeout -k 5 "$RUN_TIMEOUT" "$bin/iwarp-perf" "$T" -d "$work/a.toml" $3 > "$work/s.out" 2> "$work/s.err" &
    sp=$!
    for _ in $(seq 300); do grep -q "Waiting for client" "$work/s.out" 2> /dev/null && break; sleep 0.1; done
    # shellcheck disable=SC2086
    if ! timeout -k 5 "$RUN_TIMEOUT" "$bin/iwarp-perf" "$T" -d "$work/b.toml" $3 10.77.0.1 > "$work/c.out" 2> "$work/c.err"; then
        echo "$v FAILED: $(tail -n 2 "$work/c.err" | tr '\n' ' ')"
    fi
    wait "$sp" || true
    sp=""
    row=$(grep -E '^ *[0-9]+ +[0-9]+ ' "$work/c.out" | tail -n 1 || true)
    echo "$v: $row"
    [[ -z $row ]] || echo "$row" >> "$work/$v"
}
for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then
        run A "$BIN_A" "$ARGS_A"; run B "$BIN_B" "$ARGS_B"
    else
        run B "$BIN_B" "$ARGS_B"; run A "$BIN_A" "$ARGS_A"
    fi
done
for v in A B; do
    [[ -s $work/$v ]] || continue
    # The BW average (bandwidth tests) or t_typical (latency tests) column.
    col=4; [[ $T == *_lat ]] && col=5
    sort -g -k"$col" "$work/$v" | awk -v c="$col" -v v="$v" '{x[NR]=$c} END {printf "%s median %s over %d runs\n", v, x[int((NR+1)/2)], NR}'
done
