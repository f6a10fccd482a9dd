#!/usr/bin/env bash
# TCP goodput benchmark (issues #3, #10). In one run, on the same path between two network
# namespaces, for each congestion control in CCS (like for like: Linux and iwarpd use the same):
#   baseline: Linux -> Linux iperf3 (single stream, `iperf3 -C <cc>`)
#   Linux -> iwarpd (Python client with TCP_CONGESTION <cc>, to the discard service)
#   iwarpd -> Linux (sender service with tcp.cc = <cc>, to a Python server)
#   iwarpd -> iwarpd over memif (sender -> discard, no loss) once per round
#   loss: nftables on a bridge between the two ends drops LOSSES % of TCP frames, both ways
# Every run prints one line `tcp case=<path> cc=<cc> loss=<pct> mib=<n> gbps=<x> ...`, then
# medians over ROUNDS rounds and the ratios to the Linux baseline. Cases alternate within each
# round. iwarpd runs on core 1, Linux on core 0.
#
# Environment:
#   CCS="cubic bbr"   congestion controls      LOSSES="0 1 5"   loss percentages
#   ROUNDS=3          rounds                   MIB=256          MiB per run (LOSS_MIB at >= 5 %)
#   LOSS_MIB=32       MiB per run at >= 5 %    BIN=target/release
#   VARIANTS="label=/path/to/iwarpd[,tcp.key=value...] ..."  A/B: run our two cases once per
#       variant (default "ours=$BIN/iwarpd"), e.g. an older build or a [tcp] key changed:
#       VARIANTS="new=target/release/iwarpd old=/tmp/iwarpd-old,tcp.rto_min_ms=200"
#   MEMIF=1           also run the memif case  PATHS="iperf rx tx" which paths to run
#   PMD=af_packet     iwarpd's port on the veth: af_packet or af_xdp
#   CAPTURE=dir       tcpdump (headers) on the kernel side of every run into dir/<case>.pcap
#   LOGDIR=dir        keep iwarpd's logs (stats at exit) there (RUST_LOG=tcp::conn::timer=trace: RTO events)
#   PROFILE=dir       while Linux sends (iperf and rx cases): perf record -a -g (both CPUs,
#                     dir/<case>.perf), the Linux sender's `ss -tin` every 20 ms (dir/<case>.ss)
#                     and the receiving veth's counters before/after (dir/<case>.link)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
ROUNDS=${ROUNDS:-3}
MIB=${MIB:-256}
LOSSES=${LOSSES:-"0 1 5"}
LOSS_MIB=${LOSS_MIB:-32}
CCS=${CCS:-"cubic bbr"}
VARIANTS=${VARIANTS:-"ours=$BIN/iwarpd"}
MEMIF=${MEMIF:-1}
PATHS=${PATHS:-"iperf rx tx"}
[[ $(id -u) -eq 0 ]] || { echo "bench-tcp: run as root"; exit 1; }
PEER=${PEER:-control/tests/tools/tcp_peer.py}
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
# Every case talks to 10.79.0.2: without this, Linux seeds each connection with the ssthresh
# and RTT the previous one (another case, another loss rate) left in its TCP metrics cache.
ip netns exec "$K" sysctl -qw net.ipv4.tcp_no_metrics_save=1
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

# Nanoseconds the dataplane thread (dp0) of iwarpd <pid> has spent runnable but waiting for a
# CPU (schedstat's run_delay): how long the busy-polling receiver was descheduled.
dp_wait() {
    local t
    for t in /proc/"$1"/task/*; do
        [[ $(cat "$t/comm" 2>/dev/null) == dp0 ]] && { awk '{print $2}' "$t/schedstat"; return; }
    done
    echo 0
}

prof_pid="" ss_pid="" prof_tag=""
prof_start() { # tag: profile both CPUs and sample the Linux sender while a case runs (PROFILE)
    [[ -n ${PROFILE:-} ]] || return 0
    prof_tag=$1; mkdir -p "$PROFILE"; ip -s -s -n "$D" link show vbd > "$PROFILE/$1.link"
    timeout 120 perf record -q -a -g -o "$PROFILE/$1.perf" > /dev/null 2>&1 & prof_pid=$!
    ( for _ in $(seq 3000); do date +%s.%N; ip netns exec "$K" ss -tin dst 10.79.0.2; sleep 0.02; done ) \
        > "$PROFILE/$1.ss" 2>&1 & ss_pid=$!
    sleep 0.5
}
prof_stop() {
    [[ -n $prof_pid ]] || return 0
    kill "$ss_pid"; wait "$ss_pid" || true; kill -INT "$prof_pid"; wait "$prof_pid" || true
    ip -s -s -n "$D" link show vbd >> "$PROFILE/$prof_tag.link"; prof_pid=""
}

iperf() { # cc pct mib
    ip -n "$D" addr add 10.79.0.2/24 dev vbd
    ip netns exec "$D" taskset -c 1 iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
    local srv=$!
    sleep 0.5
    local out
    kdump > "$work/k0"
    prof_start "iperf-$1-$2-$(date +%s)"
    out=$(ip netns exec "$K" taskset -c 0 iperf3 -c 10.79.0.2 -p 5201 -C "$1" -n "${3}M" -J)
    prof_stop
    kdump > "$work/k1"
    python3 - "$1" "$2" "$3" "$(kdelta "$work/k0" "$work/k1")" <<PY | tee -a "$results"
import json, sys
j = json.loads('''$out''')
e = j["end"]
print(f"tcp case=linux->linux(iperf3) cc={sys.argv[1]} loss={sys.argv[2]} mib={sys.argv[3]} gbps={e['sum_received']['bits_per_second']/1e9:.3f} retransmits={e['sum_sent'].get('retransmits', 0)}{sys.argv[4]}")
PY
    wait "$srv"
    ip -n "$D" addr del 10.79.0.2/24 dev vbd
}

# The kernel namespace's TCP RetransSegs counter (for Linux-side senders).
kretrans() {
    ip netns exec "$K" awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RetransSegs") c = i; h = 1 } else print $c }' /proc/net/snmp
}

# The kernel namespace's TCP counters (/proc/net/snmp Tcp and /proc/net/netstat TcpExt) as
# name=value lines, and the deltas of KSTATS between two such dumps (the Linux sender's
# recovery evidence: timeouts, probes, spurious-retransmission undo, D-SACKs received...).
KSTATS=${KSTATS:-"TCPTimeouts TCPLossProbes TCPLossProbeRecovery TCPSpuriousRTOs TCPDSACKRecv TCPSACKReorder TCPLostRetransmit TCPFastRetrans TCPSlowStartRetrans TCPDSACKUndo TCPLossUndo TCPSackRecoveryFail TCPSACKReneging TCPBacklogDrop"}
kdump() {
    ip netns exec "$K" awk '/^(Tcp|TcpExt):/ { if (!(($1) in h)) { h[$1] = 1; for (i = 2; i <= NF; i++) n[$1, i] = $i } else { for (i = 2; i <= NF; i++) print n[$1, i] "=" $i; delete h[$1] } }' /proc/net/snmp /proc/net/netstat
}
# The Linux receiver's view of our sender: duplicates it received (D-SACKs it sent for old and
# out-of-order duplicates = our spurious retransmissions) and its delayed/quick ACK counts.
KRXSTATS=${KRXSTATS:-"TCPDSACKOldSent TCPDSACKOfoSent DelayedACKs TCPOFOQueue"}
kdelta() { # before-file after-file [names]: " k_<name>=<delta>" for each name (KSTATS)
    local k a b out=""
    for k in ${3:-$KSTATS}; do
        a=$(grep -m1 "^$k=" "$1" | cut -d= -f2); b=$(grep -m1 "^$k=" "$2" | cut -d= -f2)
        out+=" k_$k=$(( ${b:-0} - ${a:-0} ))"
    done
    echo "$out"
}

# Variant fields: label, binary, extra [tcp] lines.
vlabel() { echo "${1%%=*}"; }
vbin() { local r=${1#*=}; echo "${r%%,*}"; }
vtcp() { local r=${1#*=}; [[ $r == *,* ]] || return 0; r=${r#*,}; tr ',' '\n' <<< "$r" | sed -e 's/^tcp\.//'; }
vtag() { [[ $(wc -w <<< "$VARIANTS") -gt 1 ]] && echo " variant=$(vlabel "$1")" || true; }

# iwarpd's port on the veth: PMD=af_packet (default) or af_xdp (generic XDP in copy mode, about
# 1.6x af_packet's frame rate on a veth here: DPDK.md).
pmd_device() {
    case ${PMD:-af_packet} in
        af_packet) echo "net_af_packet0,iface=vbd,framecnt=8192" ;;
        af_xdp) echo "net_af_xdp0,iface=vbd,start_queue=0,queue_count=1" ;;
        *) echo "bench-tcp: PMD must be af_packet or af_xdp, not '$PMD'" >&2; exit 2 ;;
    esac
}
pmd_device > /dev/null || exit 2

iwarpd_conf() { # name cc variant diag
    cat > "$work/$1.toml" <<EOT
[eal]
file_prefix = "iwb-$1-$$"
[port]
device = "$(pmd_device)"
ip = "10.79.0.2/24"
[dataplane]
cores = [1]
[control]
socket = "$work/$1.ctl.sock"
[log]
level = "warn"
[tcp]
cc = "$2"
$(vtcp "$3")
[diag]
run_seconds = 900
$4
EOT
}

linux_to_iwarpd() { # cc pct mib variant
    iwarpd_conf rx "$1" "$4" "discard_port = 9
discard_sha256 = false"
    ip netns exec "$D" "$(vbin "$4")" --config "$work/rx.toml" > "$work/rx.log" 2>&1 &
    local p=$!; pids+=($p); sleep 2
    local k0 k1 g
    k0=$(kretrans); kdump > "$work/k0"
    local o cs
    local tag="rx-$1-$2-$(vlabel "$4")-$(date +%s)" s0 s1
    s0=$(dp_wait "$p")
    prof_start "$tag"
    o=$(ip netns exec "$K" taskset -c 0 env CC="$1" python3 "$PEER" discard 10.79.0.2 9 $(( $3 << 20 )))
    prof_stop "$tag"
    s1=$(dp_wait "$p")
    g=$(grep -o 'gbps=[0-9.]*' <<< "$o" | cut -d= -f2); cs=$(grep -o 'connect_secs=[0-9.]*' <<< "$o" | cut -d= -f2)
    k1=$(kretrans); kdump > "$work/k1"
    kill -INT "$p"; wait "$p" || true; pids=()
    [[ -z ${LOGDIR:-} ]] || { mkdir -p "$LOGDIR"; cp "$work/rx.log" "$LOGDIR/$tag.log"; }
    c() { awk -v k="$1" '/^\[lcore.0.tcp\]/{f=1} f&&$1==k{print $3; exit}' "$work/rx.log"; }
    l() { awk -v k="$1" '/^\[lcore.0\]/{f=1} f&&$1==k{print $3; exit}' "$work/rx.log"; }
    echo "tcp case=linux->iwarpd cc=$1 loss=$2 mib=$3 gbps=${g:-0} retransmits=$((k1 - k0))(linux) connect_secs=${cs:-?}$(kdelta "$work/k0" "$work/k1") iwarpd_segs_out=$(c segs_out) iwarpd_segs_in=$(c segs_in) sack_compressed=$(c sack_compressed) ooo_held=$(c ooo_held) ooo_dropped=$(c ooo_dropped) timers_deferred=$(l timers_deferred) dp_runq_ms=$(( (s1 - s0) / 1000000 ))$(vtag "$4")" | tee -a "$results"
}

iwarpd_to_linux() { # cc pct mib variant
    iwarpd_conf tx "$1" "$4" "send_to = \"10.79.0.1:5001\"
send_bytes = $(( $3 << 20 ))
exit_after_send = true"
    ip netns exec "$K" taskset -c 0 env CC="$1" python3 "$PEER" server 5001 > "$work/srv.log" 2>&1 &
    local s=$!; sleep 0.5
    kdump > "$work/k0"
    ip netns exec "$D" "$(vbin "$4")" --config "$work/tx.toml" > "$work/tx.log" 2>&1 || true
    wait "$s" || true
    kdump > "$work/k1"
    [[ -z ${LOGDIR:-} ]] || { mkdir -p "$LOGDIR"; cp "$work/tx.log" "$LOGDIR/tx-$1-$2-$(vlabel "$4")-$(date +%s).log"; }
    local g c
    g=$(grep -o 'gbps=[0-9.]*' "$work/srv.log" | cut -d= -f2)
    c() { awk -v k="$1" '/^\[lcore.0.tcp\]/{f=1} f&&$1==k{print $3; exit}' "$work/tx.log"; }
    echo "tcp case=iwarpd->linux cc=$1 loss=$2 mib=$3 gbps=${g:-0} iwarpd_retransmits=$(c retransmissions) rtos=$(c rtos) tlp=$(c tlp_probes) spurious=$(c spurious_rtos) undos=$(c rto_undos)$(kdelta "$work/k0" "$work/k1" "$KRXSTATS")$(vtag "$4")" | tee -a "$results"
    [[ -n $g ]] || { echo "bench-tcp: iwarpd -> Linux failed:"; tail -n 20 "$work/tx.log" "$work/srv.log"; }
}

iwarpd_to_iwarpd_memif() { # cc mib
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
[tcp]
cc = "$1"
[diag]
run_seconds = 600
discard_port = 9
discard_sha256 = false
EOT
    sed -e "s/iwb-ma/iwb-mb/; s/ma.ctl.sock/mb.ctl.sock/; s/role=server/role=client/; s#10.77.0.1/24#10.77.0.2/24#; s/cores = \[0\]/cores = [1]/" \
        -e 's/^discard_port = 9$/send_to = "10.77.0.1:9"/; s/^discard_sha256 = false$/exit_after_send = true/' "$work/ma.toml" > "$work/mb.toml"
    printf 'send_bytes = %d\nsend_sha256 = false\n' $(( $2 << 20 )) >> "$work/mb.toml"
    "$BIN/iwarpd" --config "$work/ma.toml" > "$work/ma.log" 2>&1 &
    local p=$!; pids+=($p); sleep 1.5
    "$BIN/iwarpd" --config "$work/mb.toml" > "$work/mb.log" 2>&1 || true
    kill -INT "$p"; wait "$p" || true; pids=()
    local g rtx
    g=$(grep -o 'gbps=[0-9.]*' "$work/mb.log" | head -1 | cut -d= -f2)
    rtx=$(awk '/^\[lcore.0.tcp\]/{f=1} f&&/^retransmissions/{print $3; exit}' "$work/mb.log")
    echo "tcp case=iwarpd->iwarpd(memif) cc=$1 loss=0 mib=$2 gbps=${g:-0} iwarpd_retransmits=${rtx:-0}" | tee -a "$results"
}

has() { [[ " $PATHS " == *" $1 "* ]]; }

cap_start() { # name: capture headers on the kernel's veth while a case runs
    [[ -n ${CAPTURE:-} ]] || return 0
    mkdir -p "$CAPTURE"
    ip netns exec "$K" tcpdump -i vbk -s 128 -w "$CAPTURE/$1.pcap" tcp > /dev/null 2>&1 &
    cap_pid=$!; sleep 0.5
}
cap_stop() { [[ -n ${CAPTURE:-} ]] || return 0; sleep 0.2; kill -INT "$cap_pid"; wait "$cap_pid" || true; }

for r in $(seq "$ROUNDS"); do
    for cc in $CCS; do
        for pct in $LOSSES; do
            mib=$MIB; (( pct >= 5 )) && mib=$LOSS_MIB
            loss "$pct"
            if has iperf; then cap_start "iperf-$cc-$pct-$r"; iperf "$cc" "$pct" "$mib"; cap_stop; fi
            for v in $VARIANTS; do
                if has rx; then cap_start "rx-$cc-$pct-$(vlabel "$v")-$r"; linux_to_iwarpd "$cc" "$pct" "$mib" "$v"; cap_stop; fi
                if has tx; then cap_start "tx-$cc-$pct-$(vlabel "$v")-$r"; iwarpd_to_linux "$cc" "$pct" "$mib" "$v"; cap_stop; fi
            done
        done
        loss 0
        if [[ $MEMIF == 1 ]]; then iwarpd_to_iwarpd_memif "$cc" "$MIB"; fi
    done
done

python3 - "$results" <<'PY'
import sys, statistics
rows = [dict(kv.split('=', 1) for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.startswith('tcp ')]
print("\nmedians over rounds [min-max] (Gb/s), ratio to linux->linux with the same cc and loss")
key = lambda r: (r['cc'], int(r['loss']), r['case'], r.get('variant', ''))
med = lambda rs: statistics.median(float(r['gbps']) for r in rs)
base = {(r['cc'], int(r['loss'])): med([x for x in rows if key(x) == key(r)])
        for r in rows if r['case'].startswith('linux->linux')}
for k in sorted({key(r) for r in rows}, key=lambda k: (k[0], k[1], not k[2].startswith('linux->linux'), k[2], k[3])):
    rs = [r for r in rows if key(r) == k]
    g = [float(r['gbps']) for r in rs]
    m = statistics.median(g)
    rt = [int(str(r.get('retransmits', r.get('iwarpd_retransmits', 0)) or 0).split('(')[0] or 0) for r in rs]
    b = base.get((k[0], k[1]))
    ratio = f"{m / b:5.2f}x" if b else "   - "
    name = k[2] + (f" [{k[3]}]" if k[3] else "")
    print(f"cc={k[0]:6} loss={k[1]}% {name:34} mib={rs[0]['mib']:>4} gbps={m:7.3f} [{min(g):.3f}-{max(g):.3f}] {ratio} retransmits(median)={statistics.median(rt):.0f} n={len(rs)}")
PY
