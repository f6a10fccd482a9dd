#!/usr/bin/env bash
# TCP goodput benchmark (issue #3). In one run, on the same veth between two network namespaces:
#   baseline: Linux <-> Linux iperf3 (single stream, both directions)
#   Linux -> iwarpd (discard service, af_packet) and iwarpd -> Linux (sender service)
#   iwarpd -> iwarpd over memif (sender -> discard)
#   loss: nftables on a bridge between the two ends drops LOSSES % of TCP frames, both ways
# Prints one line per run plus medians over ROUNDS rounds. iwarpd runs on core 1, Linux on core 0.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${ROUNDS:-3}
MIB=${MIB:-256}
LOSSES=${LOSSES:-"0 1 5"}
LOSS_MIB=${LOSS_MIB:-32}
[[ $(id -u) -eq 0 ]] || { echo "bench-tcp: run as root"; exit 1; }
PEER=control/tests/tools/tcp_peer.py
work=$(mktemp -d /tmp/iwarp-bench-tcp.XXXXXX)
K=iwbk$$ B=iwbb$$ D=iwbd$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    for ns in "$K" "$B" "$D"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
# kernel (K) -- veth -- bridge (B, where loss is injected) -- veth -- iwarpd or iperf3 server (D).
# Dropping in K's own output hook would only make Linux requeue (a local transmit failure).
for ns in "$K" "$B" "$D"; do ip netns add "$ns"; done
ip link add vbk type veth peer name bk; ip link add vbd type veth peer name bd
ip link set vbk netns "$K"; ip link set vbd netns "$D"; ip link set bk netns "$B"; ip link set bd netns "$B"
ip -n "$B" link add br0 type bridge
for i in bk bd; do ip -n "$B" link set "$i" master br0; ip -n "$B" link set "$i" up; done
ip -n "$B" link set br0 up
ip -n "$K" addr add 10.79.0.1/24 dev vbk; ip -n "$K" link set vbk up; ip -n "$K" link set lo up
ip -n "$D" link set vbd up; ip -n "$D" link set lo up
ip netns exec "$K" ethtool -K vbk tx off >/dev/null
results=$work/results.txt; : > "$results"

loss() { # pct: drop TCP frames at random on the bridge, both directions
    ip netns exec "$B" nft delete table bridge iwloss 2>/dev/null || true
    (( $1 == 0 )) && return
    ip netns exec "$B" nft -f - <<EOT
table bridge iwloss {
  chain lossy { type filter hook forward priority 0; meta l4proto tcp numgen random mod 100 < $1 drop; }
}
EOT
}

iperf() { # pct mib
    ip -n "$D" addr add 10.79.0.2/24 dev vbd
    ip netns exec "$D" taskset -c 1 iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
    sleep 0.5
    local out
    out=$(ip netns exec "$K" taskset -c 0 iperf3 -c 10.79.0.2 -p 5201 -n "${2}M" -J)
    python3 - "$1" "$2" <<PY | tee -a "$results"
import json, sys
j = json.loads('''$out''')
e = j["end"]
print(f"tcp case=linux->linux(iperf3) loss={sys.argv[1]} mib={sys.argv[2]} gbps={e['sum_received']['bits_per_second']/1e9:.3f} retransmits={e['sum_sent'].get('retransmits', 0)}")
PY
    wait
    ip -n "$D" addr del 10.79.0.2/24 dev vbd
}

# The kernel namespace's TCP RetransSegs counter (for Linux-side senders).
kretrans() {
    ip netns exec "$K" awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RetransSegs") c = i; h = 1 } else print $c }' /proc/net/snmp
}

iwarpd_conf() { # name diag
    cat > "$work/$1.toml" <<EOT
[eal]
file_prefix = "iwb-$1-$$"
[port]
device = "net_af_packet0,iface=vbd,framecnt=8192"
ip = "10.79.0.2/24"
[dataplane]
cores = [1]
[control]
socket = "$work/$1.ctl.sock"
[log]
level = "warn"
[diag]
run_seconds = 600
$2
EOT
}

linux_to_iwarpd() { # pct mib
    iwarpd_conf rx "discard_port = 9
discard_sha256 = false"
    ip netns exec "$D" "$BIN/iwarpd" --config "$work/rx.toml" > "$work/rx.log" 2>&1 &
    local p=$!; pids+=($p); sleep 2
    local k0 k1 g
    k0=$(kretrans)
    g=$(ip netns exec "$K" taskset -c 0 python3 "$PEER" discard 10.79.0.2 9 $(( $2 << 20 )) | grep -o 'gbps=[0-9.]*' | cut -d= -f2)
    k1=$(kretrans)
    kill -INT "$p"; wait "$p" || true; pids=()
    echo "tcp case=linux->iwarpd loss=$1 mib=$2 gbps=${g:-0} retransmits=$((k1 - k0))(linux)" | tee -a "$results"
}

iwarpd_to_linux() { # pct mib
    iwarpd_conf tx "send_to = \"10.79.0.1:5001\"
send_bytes = $(( $2 << 20 ))
exit_after_send = true"
    ip netns exec "$K" taskset -c 0 python3 "$PEER" server 5001 > "$work/srv.log" 2>&1 &
    local s=$!; sleep 0.5
    ip netns exec "$D" "$BIN/iwarpd" --config "$work/tx.toml" > "$work/tx.log" 2>&1 || true
    wait "$s" || true
    local g rtx
    g=$(grep -o 'gbps=[0-9.]*' "$work/srv.log" | cut -d= -f2)
    rtx=$(awk '/^\[lcore.0.tcp\]/{f=1} f&&/^retransmissions/{print $3; exit}' "$work/tx.log")
    echo "tcp case=iwarpd->linux loss=$1 mib=$2 gbps=${g:-0} iwarpd_retransmits=${rtx:-0}" | tee -a "$results"
}

iwarpd_to_iwarpd_memif() { # mib
    local sock=$work/m.sock
    cat > "$work/ma.toml" <<EOT
[eal]
file_prefix = "iwb-ma-$$"
[port]
device = "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no"
ip = "10.77.0.1/24"
[dataplane]
cores = [0]
[control]
socket = "$work/ma.ctl.sock"
[log]
level = "warn"
[diag]
run_seconds = 600
discard_port = 9
discard_sha256 = false
EOT
    sed -e "s/iwb-ma/iwb-mb/; s/ma.ctl.sock/mb.ctl.sock/; s/role=server/role=client/; s#10.77.0.1/24#10.77.0.2/24#; s/cores = \[0\]/cores = [1]/" \
        -e 's/^discard_port = 9$/send_to = "10.77.0.1:9"/; s/^discard_sha256 = false$/exit_after_send = true/' "$work/ma.toml" > "$work/mb.toml"
    printf 'send_bytes = %d\nsend_sha256 = false\n' $(( $1 << 20 )) >> "$work/mb.toml"
    "$BIN/iwarpd" --config "$work/ma.toml" > "$work/ma.log" 2>&1 &
    local p=$!; pids+=($p); sleep 1.5
    "$BIN/iwarpd" --config "$work/mb.toml" > "$work/mb.log" 2>&1 || true
    kill -INT "$p"; wait "$p" || true; pids=()
    local g rtx
    g=$(grep -o 'gbps=[0-9.]*' "$work/mb.log" | head -1 | cut -d= -f2)
    rtx=$(awk '/^\[lcore.0.tcp\]/{f=1} f&&/^retransmissions/{print $3; exit}' "$work/mb.log")
    echo "tcp case=iwarpd->iwarpd(memif) loss=0 mib=$1 gbps=${g:-0} iwarpd_retransmits=${rtx:-0}" | tee -a "$results"
}

for r in $(seq "$ROUNDS"); do
    for pct in $LOSSES; do
        mib=$MIB; (( pct >= 5 )) && mib=$LOSS_MIB
        loss "$pct"
        iperf "$pct" "$mib"
        linux_to_iwarpd "$pct" "$mib"
        iwarpd_to_linux "$pct" "$mib"
    done
    loss 0
    iwarpd_to_iwarpd_memif "$MIB"
done

python3 - "$results" <<'PY'
import sys, statistics
rows = [dict(kv.split('=', 1) for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.strip()]
print("\nmedians over rounds (Gb/s; retransmissions)")
keys = sorted({(r['case'], int(r['loss'])) for r in rows}, key=lambda k: (k[1], k[0]))
for case, loss in keys:
    rs = [r for r in rows if r['case'] == case and int(r['loss']) == loss]
    g = statistics.median(float(r['gbps']) for r in rs)
    rt = [int(str(r.get('retransmits', r.get('iwarpd_retransmits', 0))).split('(')[0] or 0) for r in rs]
    print(f"{case:28} loss={loss}% mib={rs[0]['mib']:>4}  gbps={g:7.3f}  retransmits(median)={statistics.median(rt):.0f}")
PY
