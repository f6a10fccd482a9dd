#!/usr/bin/env bash
# The main job: two iwarpd instances on a DPDK memif wire (shared memory between two
# processes). B resolves A with ARP and pings it; then the poll-loop benchmark runs against
# iwarpd in echo mode and against dpdk-testpmd (macswap) on the same wire.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
[[ $(id -u) -eq 0 ]] || { echo "demo: run as root (DPDK needs it)"; exit 1; }
work=$(mktemp -d /tmp/iwarp-demo.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

sock=$work/memif.sock
conf() { # side role ip core diag
    cat <<EOT
[eal]
memory_mb = 256
file_prefix = "iwarp-demo-$1"
[port]
device = "net_memif0,role=$2,id=0,socket=$sock,socket-abstract=no"
ip = "$3/24"
[dataplane]
cores = [$4]
[stats]
file = "$work/$1.stats"
[control]
socket = "$work/$1.ctl.sock"
$5
EOT
}
conf a server 10.77.0.1 0 "[diag]
run_seconds = 300
discard_port = 9" > "$work/a.toml"
conf b client 10.77.0.2 1 "[diag]
ping = \"10.77.0.1\"
ping_count = 20
ping_interval_ms = 50
exit_after_ping = true
run_seconds = 60" > "$work/b.toml"

echo "== iwarpd A (memif server, 10.77.0.1) and B (memif client, 10.77.0.2); B pings A"
"$BIN/iwarpd" --config "$work/a.toml" > "$work/a.log" 2>&1 & pids+=($!)
sleep 1
if "$BIN/iwarpd" --config "$work/b.toml" > "$work/b.log" 2>&1; then ok=1; else ok=0; fi
grep -E "^iwarpd: port" "$work/b.log" || true
sed -n '/\[lcore.0.ping\]/,/^$/p' "$work/b.log"
kill -TERM "${pids[0]}"; wait "${pids[0]}" || true; pids=()
echo "A answered: $(grep -E '^icmp_echo_reply_tx' "$work/a.log" || echo none)"
if ((ok == 0)); then echo "demo: ping between the two instances FAILED"; cat "$work/b.log"; exit 1; fi
echo "== ping OK"

echo
echo "== TCP: B sends ${MIB:=256} MiB (+ its SHA-256) to A's discard service over memif"
"$BIN/iwarpd" --config "$work/a.toml" > "$work/a.log" 2>&1 & pids+=($!)
sleep 1
conf b client 10.77.0.2 1 "[diag]
send_to = \"10.77.0.1:9\"
send_bytes = $((MIB << 20))
exit_after_send = true
run_seconds = 120" > "$work/b2.toml"
if ! "$BIN/iwarpd" --config "$work/b2.toml" > "$work/b2.log" 2>&1; then
    echo "demo: TCP transfer FAILED"; cat "$work/b2.log"; exit 1
fi
kill -TERM "${pids[0]}"; wait "${pids[0]}" || true; pids=()
sent=$(grep -o 'sha256=[0-9a-f]*' <(grep '^iwarpd: sender' "$work/b2.log"))
got=$(grep -o 'body_sha256=[0-9a-f]*' <(grep '^iwarpd: discard' "$work/a.log") | sed 's/^body_//')
trailer_ok=$(grep -o 'trailer_ok=[a-z]*' <(grep '^iwarpd: discard' "$work/a.log"))
grep '^iwarpd: sender' "$work/b2.log"
grep '^iwarpd: discard' "$work/a.log"
if [[ -z $sent || $sent != "$got" || $trailer_ok != trailer_ok=true ]]; then echo "demo: SHA-256 mismatch"; exit 1; fi
echo "== TCP transfer OK: A's SHA-256 of the received bytes equals the digest B computed and sent"

echo
echo "== poll-loop benchmark (memif): iwarpd echo mode vs dpdk-testpmd macswap"
ROUNDS=${ROUNDS:-1} SECS=${SECS:-3} scripts/bench-l2.sh
