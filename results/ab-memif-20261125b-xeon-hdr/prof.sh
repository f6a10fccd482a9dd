#!/usr/bin/env bash
# ab-memif.sh with stats files per side and optional perf record per process.
# usage: prof-memif.sh TAG BIN "ARGS"   env: PERF=1 (record), PERF_DELAY (s after client start, 1), PERF_DUR (s, 1.5)
set -uo pipefail
OUT=${OUT:-$PWD/out}
cd "${REPO:-/work/wt/lead}"
. scripts/lib/memif.sh
TAG=$1 BIN=$(realpath "$2") ARGS=$3
mkdir -p "$OUT"
work=$(mktemp -d /tmp/iwarp-prof.XXXXXX)
sp=""
cleanup() { [[ -z $sp ]] || kill "$sp" 2>/dev/null || true; rm -rf "$work" /var/run/dpdk/prm-*-$$; }
trap cleanup EXIT
for s in a b; do memif_conf $s "prm-$s-$$" "$work" extra="[stats]
file = \"$work/$s.stats\"
interval_ms = 100" > "$work/$s.toml"; done
gcc -O2 -pthread scripts/guest/c2c.c -o "$work/c2c" 2> /dev/null || true
c2c=$("$work/c2c" 2>/dev/null | tr '\n' ' ')
timeout -k 5 60 "$BIN/iwarp-perf" write_bw -d "$work/a.toml" $ARGS > "$work/s.out" 2> "$work/s.err" &
sp=$!
for _ in $(seq 300); do grep -q "Waiting for client" "$work/s.out" 2> /dev/null && break; sleep 0.1; done
timeout -k 5 60 "$BIN/iwarp-perf" write_bw -d "$work/b.toml" $ARGS 10.77.0.1 > "$work/c.out" 2> "$work/c.err" &
cp=$!
if [[ -n ${PERF:-} ]]; then
  sleep "${PERF_DELAY:-1.2}"
  spp=$(pgrep -P "$sp" | head -1); cpp=$(pgrep -P "$cp" | head -1)
  perf record -q -e cpu-clock -F ${PERF_F:-4999} ${PERF_G:-} -p "$spp" -o "$OUT/$TAG.srv.perf" -- sleep "${PERF_DUR:-1.5}" 2>/dev/null &
  p1=$!
  perf record -q -e cpu-clock -F ${PERF_F:-4999} ${PERF_G:-} -p "$cpp" -o "$OUT/$TAG.cli.perf" -- sleep "${PERF_DUR:-1.5}" 2>/dev/null &
  p2=$!
  wait $p1 $p2
fi
wait $cp || { echo "client FAILED"; tail -3 "$work/c.err"; }
wait "$sp"; sp=""
row=$(grep -E '^ *[0-9]+ +[0-9]+ ' "$work/c.out" | tail -n 1)
cp "$work/a.stats" "$OUT/$TAG.a.stats" 2>/dev/null; cp "$work/b.stats" "$OUT/$TAG.b.stats" 2>/dev/null
echo "$TAG c2c[$c2c] $row"
