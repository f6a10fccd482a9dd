#!/usr/bin/env bash
# scripts/interop.sh (`make interop`): live interoperability with Linux soft-iWARP (siw).
#
# Builds (cached) and boots the siw guest of scripts/siw-peer/ (qemu, Debian 12, siw from
# linux-source-6.1, rdma-core 44 and perftest 4.5), joins it to our stack and runs the matrix
# of issue 9 with data checked wherever the tool can, then tears everything down and writes
# the table (date, timings) into INTEROP.md.
#
# The link, all inside one network namespace this script creates (NS, default iwiop):
#
#   guest eth0 == tap-iwiop --+
#                             br-iwiop -- vbr-iwiop == veth-iwiop  <- iwarpd (net_af_packet)
#
# guest 10.99.0.11/24, iwarpd 10.99.0.2/24. Our tools talk to iwarpd through its control
# socket. The guest is driven through qemu-guest-agent (no networking needed).
#
# env: INTEROP_CELLS=name,...  run a subset (names: scripts/interop.sh --list)
#      INTEROP_OUT=DIR         logs (default /tmp/iwarp-interop)
#      INTEROP_WRITE=0|1       write the table into INTEROP.md (default: 1 for the full
#                              matrix, 0 for a subset)
#      INTEROP_KEEP=1          leave the guest and the namespace up at the end (debugging)
#      INTEROP_PROFILE=debug   use debug binaries (what `cargo test` already built; make test)
#      INTEROP_IDLE=spin       iwarpd's dataplane.idle (default yield: the guest shares our 2 CPUs)
# The parts that use our DPDK stack run under flock /tmp/iwarp-e2e.lock; building and
# booting the guest do not.
set -uo pipefail
{ # the whole script is one compound command: bash parses it before running, so editing
  # the file during a run does not change the run

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIWP=$ROOT/scripts/siw-peer
export SIWPEER_WORK=${SIWPEER_WORK:-/var/tmp/siw-peer}
NS=${INTEROP_NS:-iwiop}
BR=br-$NS TAP=tap-$NS VO=veth-$NS VB=vbr-$NS PEER=$NS
GIP=10.99.0.11 OIP=10.99.0.2
OUT=${INTEROP_OUT:-/tmp/iwarp-interop}
PROFILE=${INTEROP_PROFILE:-release}
case $PROFILE in release|debug) ;; *) echo "INTEROP_PROFILE=$PROFILE: allowed release, debug" >&2; exit 2 ;; esac
IDLE=${INTEROP_IDLE:-yield}
case $IDLE in spin|yield) ;; *) echo "INTEROP_IDLE=$IDLE: allowed spin, yield" >&2; exit 2 ;; esac
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE
SOCK=$OUT/iwarpd.sock
export IWARP_DEVICE=unix:$SOCK

# ------------------------------------------------------------------------------ the matrix
# name | what | function. The order is the run order (guest variant switches are grouped).
CELLS=(
  "rping-siw-c|siw \`rping -c -v -C 100 -V\` -> \`iwarp-rping -s\`, CRC off|c_rping_siw_client off"
  "rping-siw-c-crc|same, CRC on (our Reply sets C)|c_rping_siw_client on"
  "rping-we-c|\`iwarp-rping -c -v -C 100 -V\` -> siw \`rping -s\`, CRC off|c_rping_we_client off"
  "rping-we-c-crc|same, CRC on (we set C)|c_rping_we_client on"
  "write_bw-siw-c|siw \`ib_write_bw -R\` -> \`iwarp-perf write_bw -R\`, CRC off|c_perf_siw_client write_bw off"
  "write_bw-siw-c-crc|same, CRC on|c_perf_siw_client write_bw on"
  "write_bw-we-c|\`iwarp-perf write_bw -R\` -> siw \`ib_write_bw -R\`, CRC off|c_perf_we_client write_bw off"
  "write_bw-we-c-crc|same, CRC on|c_perf_we_client write_bw on"
  "rdma_cs-siw-c|siw \`rdma_client\` -> \`iwarp-rdma-server\`, CRC off|c_rdmacs_siw_client off"
  "rdma_cs-siw-c-crc|same, CRC on|c_rdmacs_siw_client on"
  "rdma_cs-we-c|\`iwarp-rdma-client\` -> siw \`rdma_server\`, CRC off|c_rdmacs_we_client off"
  "rdma_cs-we-c-crc|same, CRC on|c_rdmacs_we_client on"
  "read_bw-siw-c|siw \`ib_read_bw -R\` -> \`iwarp-perf read_bw -R\`, CRC off|c_perf_siw_client read_bw off"
  "read_bw-siw-c-crc|same, CRC on|c_perf_siw_client read_bw on"
  "read_bw-we-c|\`iwarp-perf read_bw -R\` -> siw \`ib_read_bw -R\`, CRC off|c_perf_we_client read_bw off"
  "read_bw-we-c-crc|same, CRC on|c_perf_we_client read_bw on"
  "send_bw-siw-c|siw \`ib_send_bw -R\` -> \`iwarp-perf send_bw -R\`, CRC off|c_perf_siw_client send_bw off"
  "send_bw-siw-c-crc|same, CRC on|c_perf_siw_client send_bw on"
  "send_bw-we-c|\`iwarp-perf send_bw -R\` -> siw \`ib_send_bw -R\`, CRC off|c_perf_we_client send_bw off"
  "send_bw-we-c-crc|same, CRC on|c_perf_we_client send_bw on"
  "write_lat-siw-c|siw \`ib_write_lat -R\` -> \`iwarp-perf write_lat -R\`, CRC off|c_perf_siw_client write_lat off"
  "write_lat-siw-c-crc|same, CRC on|c_perf_siw_client write_lat on"
  "write_lat-we-c|\`iwarp-perf write_lat -R\` -> siw \`ib_write_lat -R\`, CRC off|c_perf_we_client write_lat off"
  "write_lat-we-c-crc|same, CRC on|c_perf_we_client write_lat on"
  "read_lat-siw-c|siw \`ib_read_lat -R\` -> \`iwarp-perf read_lat -R\`, CRC off|c_perf_siw_client read_lat off"
  "read_lat-siw-c-crc|same, CRC on|c_perf_siw_client read_lat on"
  "read_lat-we-c|\`iwarp-perf read_lat -R\` -> siw \`ib_read_lat -R\`, CRC off|c_perf_we_client read_lat off"
  "read_lat-we-c-crc|same, CRC on|c_perf_we_client read_lat on"
  "send_lat-siw-c|siw \`ib_send_lat -R\` -> \`iwarp-perf send_lat -R\`, CRC off|c_perf_siw_client send_lat off"
  "send_lat-siw-c-crc|same, CRC on|c_perf_siw_client send_lat on"
  "send_lat-we-c|\`iwarp-perf send_lat -R\` -> siw \`ib_send_lat -R\`, CRC off|c_perf_we_client send_lat off"
  "send_lat-we-c-crc|same, CRC on|c_perf_we_client send_lat on"
  "p2p-we-write|we initiate with a zero-length Write RTR (RFC 6581) -> stock siw \`rping -s\`|c_p2p_we write"
  "p2p-we-read|we initiate with a zero-length Read RTR, CRC on -> stock siw \`rping -s\`|c_p2p_we read"
  "markers-reject|we ask for markers -> siw \`rping -s\`: clean MPA reject, no hang|c_markers"
  "term-write-oob|our RDMA Write crossing the end of siw's rping buffer -> siw's TERMINATE, decoded by our QP|c_term_oob"
  "fault-badcrc|our first Send with a bad MPA CRC (test-only fault switch), CRC on -> siw's TERMINATE, connection closed|c_fault badcrc"
  "fault-truncate|our first Send cut in half, nothing more (fault switch) -> record siw's reaction|c_fault truncate"
  "crc-variant-siw-c|siw \`-V crc\` build: \`rping -c\` (C=1 required) -> \`iwarp-rping -s\`|c_variant_crc"
  "p2p-siw-c|siw \`-V p2p\` build: \`rping -c\` with RTR -> \`iwarp-rping -s\`|c_p2p_siw_client"
)

usage() { sed -n '2,24p' "$0"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  --list) for c in "${CELLS[@]}"; do IFS='|' read -r n d _ <<< "$c"; printf '%-20s %s\n' "$n" "$d"; done; exit 0 ;;
  "") ;;
  *) echo "unknown argument '$1' (allowed: --help, --list)" >&2; exit 2 ;;
esac

if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED make interop: needs root (qemu tap, network namespace, DPDK)"; exit 0
fi

declare -A KNOWN=()
for c in "${CELLS[@]}"; do KNOWN[${c%%|*}]=1; done
SELECTED=()
if [ -n "${INTEROP_CELLS:-}" ]; then
  IFS=',' read -r -a want <<< "$INTEROP_CELLS"
  for w in "${want[@]}"; do
    [ -n "${KNOWN[$w]:-}" ] || { echo "INTEROP_CELLS: unknown cell '$w' (see scripts/interop.sh --list)" >&2; exit 2; }
  done
  for c in "${CELLS[@]}"; do
    for w in "${want[@]}"; do [ "${c%%|*}" = "$w" ] && SELECTED+=("$c"); done
  done
  WRITE=${INTEROP_WRITE:-0}
else
  SELECTED=("${CELLS[@]}")
  WRITE=${INTEROP_WRITE:-1}
fi

# One run at a time per namespace name: the guest, the namespace and the default $OUT have
# fixed names, and a second run would stop the first's guest as a leftover (two worktrees'
# `make test` at once).
exec 7> "/tmp/iwarp-interop-$NS.lock"
if ! flock -n 7; then
  echo "[interop $(date +%T)] waiting for another run (/tmp/iwarp-interop-$NS.lock)"
  flock 7
fi
rm -rf "$OUT"; mkdir -p "$OUT/cells"
log() { echo "[interop $(date +%T)] $*"; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
T_ALL=$(now)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')

# ------------------------------------------------------------------------------ teardown
IWPID= BOOTPID=
HOSTPIDS=()
teardown() {
  set +e
  for p in "${HOSTPIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${CAPPID:-}" ] && kill "$CAPPID" 2>/dev/null
  if [ -n "$IWPID" ] && kill -0 "$IWPID" 2>/dev/null; then
    kill -INT "$IWPID"
    for _ in $(seq 1 100); do kill -0 "$IWPID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$IWPID" 2>/dev/null && kill -9 "$IWPID"
  fi
  [ -n "$BOOTPID" ] && wait "$BOOTPID" 2>/dev/null
  if [ "${INTEROP_KEEP:-0}" = 1 ]; then log "INTEROP_KEEP=1: guest $PEER and netns $NS left up"; return; fi
  if [ -d "$SIWPEER_WORK/run/$PEER" ]; then
    ip netns exec "$NS" "$SIWP/stop-peer.sh" "$PEER" 2>&1 | sed 's/^/  /'
  fi
  ip netns del "$NS" 2>/dev/null
  local left
  left=$(pgrep -f "qemu-system-x86_64 -name $PEER " || true)
  [ -z "$left" ] || log "WARNING: qemu of $PEER still running: $left"
  ip netns list | grep -qw "$NS" && log "WARNING: netns $NS still there"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------------------ build + boot
log "building our tools (cargo, $PROFILE)"
T0=$(now)
cargo_profile=(--release); [ "$PROFILE" = debug ] && cargo_profile=()
( cd "$ROOT" && cargo build "${cargo_profile[@]}" -j2 -p control -p iwarp-tools -p bench --bins ) > "$OUT/cargo.log" 2>&1 \
  || { tail -30 "$OUT/cargo.log"; log "FAILED: cargo build"; exit 1; }
T_CARGO=$(secs "$T0")
for b in iwarpd iwarp-rping iwarp-perf iwarp-rdma-client iwarp-rdma-server; do
  [ -x "$BIN/$b" ] || { log "FAILED: $BIN/$b missing"; exit 1; }
done

log "building the guest image (cached; ~3.5 min cold)"
T0=$(now)
"$SIWP/build-image.sh" > "$OUT/build-image.log" 2>&1 || { tail -30 "$OUT/build-image.log"; log "FAILED: build-image.sh"; exit 1; }
T_IMAGE=$(secs "$T0")

# Leftovers of an interrupted run (our names only).
if [ -d "$SIWPEER_WORK/run/$PEER" ]; then ip netns exec "$NS" "$SIWP/stop-peer.sh" "$PEER" >/dev/null 2>&1 || "$SIWP/stop-peer.sh" "$PEER" >/dev/null 2>&1; fi
ip netns del "$NS" 2>/dev/null

log "network: netns $NS, bridge $BR, veth $VO (ours) / $VB, tap $TAP (guest)"
ip netns add "$NS" || exit 1
nsx() { ip netns exec "$NS" "$@"; }
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
nsx ip link set lo up
nsx ip link add "$BR" type bridge stp_state 0 forward_delay 0
nsx ip link add "$VO" type veth peer name "$VB"
nsx ip link set "$VB" master "$BR"
for i in "$BR" "$VO" "$VB"; do nsx ip link set "$i" up; done

log "booting the guest (TCG: ~25-40 s)"
T0=$(now)
nsx "$SIWP/start-peer.sh" -b "$BR" "$PEER" "$TAP" "$GIP/24" > "$OUT/boot.log" 2>&1 &
BOOTPID=$!
wait "$BOOTPID"; rc=$?; BOOTPID=
T_BOOT=$(secs "$T0")
cat "$OUT/boot.log"
[ "$rc" = 0 ] || { log "FAILED: guest boot"; exit 1; }

g() { "$SIWP/peer-exec.py" "$PEER" "$@"; }
# Wire-sized frames with filled-in checksums: af_packet hands our stack what the guest's
# virtio-net sends as is, and a CHECKSUM_PARTIAL segment would carry no valid checksum.
g 'ethtool -K eth0 tx off sg off tso off gso off' > /dev/null 2>&1 || log "WARNING: ethtool in the guest failed"
GVARIANT=default
guest_variant() {  # load a siw build in the guest (module swap, no reboot)
  [ "$GVARIANT" = "$1" ] && return 0
  local load="modprobe siw"
  [ "$1" = default ] || load="insmod /usr/local/lib/siw-variants/siw-$1.ko"
  g -t 60 "rdma link delete siw0 2>/dev/null; rmmod siw && $load && rdma link add siw0 type siw netdev eth0 && rdma link show" || return 1
  GVARIANT=$1
}

# ------------------------------------------------------------------------------ our stack
exec 8> /tmp/iwarp-e2e.lock
log "waiting for /tmp/iwarp-e2e.lock"
flock 8
log "lock taken"
cat > "$OUT/iwarpd.toml" <<EOF
# iwarpd for make interop: net_af_packet on $VO in netns $NS
[eal]
file_prefix = "iwarpd-$NS"
[port]
device = "net_af_packet0,iface=$VO,framecnt=8192"
ip = "$OIP/24"
mtu = 1500
[dataplane]
cores = [1]
# The daemon's clients (our tools, which yield below 4 CPUs) and the guest's qemu share these
# 2 CPUs with this thread: spinning, it would hold a client that lands on its core off for a
# whole scheduler slice per round trip (the latency cells' typical 2.0 and 4.0 ms).
idle = "$IDLE"
[control]
socket = "$SOCK"
allow_faults = true   # test only: the fault cells break one FPDU on purpose
[stats]
file = "$OUT/iwarpd.stats"
EOF
start_iwarpd() {
  rm -f "$SOCK"
  ip netns exec "$NS" "$BIN/iwarpd" --config "$OUT/iwarpd.toml" >> "$OUT/iwarpd.log" 2>&1 &
  IWPID=$!
  for _ in $(seq 1 300); do
    [ -S "$SOCK" ] && return 0
    kill -0 "$IWPID" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$OUT/iwarpd.log"; log "FAILED: iwarpd did not come up"; return 1
}
start_iwarpd || exit 1
if ! g -t 30 "ping -c 3 -W 2 $OIP" > "$OUT/ping.log" 2>&1; then
  cat "$OUT/ping.log"; log "FAILED: the guest cannot ping iwarpd at $OIP"; exit 1
fi

# ------------------------------------------------------------------------------ helpers
# Our tools run with a timeout; their output goes to the cell's log.
bg_ours() {  # bg_ours FILE cmd...: start in the background (output in FILE.tmp), pid in BGPID
  local f=$1; shift
  timeout 300 "$@" > "$f.tmp" 2>&1 &
  BGPID=$!; HOSTPIDS+=("$BGPID")
}
gwait_listen() {  # until a guest server listens on PORT (siw uses a kernel TCP socket)
  local port=$1
  for _ in $(seq 1 60); do
    g -t 10 "ss -ltn 'sport = :$port' | grep -q LISTEN" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "guest server never listened on port $port"; return 1
}
ours_listening() {  # until our server printed its listening line
  local f=$1
  for _ in $(seq 1 100); do
    grep -qi 'listening\|waiting' "$f" 2>/dev/null && return 0
    sleep 0.1
  done
  return 0
}
note() { echo "$*" > "$CELLNOTE"; }
# What the capture must show (checked by tshark after the cell): "crc on|off", "rtr-from
# ours|siw write|read", "reject", "terminate-from siw".
expect() { echo "$*" >> "$OUT/cells/$CELL.expect"; }
count_pings() { grep -c '^ping data: rdma-ping-' "$1" || true; }
crcflag() { [ "$1" = on ] && echo "--crc on" || echo "--crc off"; }
check_crc_line() {  # our tool's negotiated-parameters line must show CRC as asked
  local f=$1 want=$2
  grep -q "negotiated:.*crc $want" "$f" || { echo "CHECK FAILED: no 'negotiated: ... crc $want' in our output"; return 1; }
}
guest_clean() { g -t 20 'pkill -x rping; pkill -x rdma_server; pkill -x rdma_client; pkill -f "^ib_"; true' > /dev/null 2>&1; }

# ------------------------------------------------------------------------------ cells
c_rping_siw_client() {
  local crc=$1 f=$OUT/cells/$CELL.ours
  expect crc "$crc"
  bg_ours "$f" "$BIN/iwarp-rping" -s -a "$OIP" -v -V --debug $(crcflag "$crc")
  ours_listening "$f.tmp"
  g -t 120 "rping -c -a $OIP -v -C 100 -V" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest rping (rc $grc)"; cat "$f.guest"; echo "--- iwarp-rping -s (rc $orc)"; cat "$f"
  local n; n=$(count_pings "$f.guest")
  note "guest validated $n/100 pings; our server read $(grep -c '^server ping data:' "$f") buffers"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && [ "$n" = 100 ] && check_crc_line "$f" "$crc"
}

c_rping_we_client() {
  local crc=$1 f=$OUT/cells/$CELL.ours gp
  expect crc "$crc"
  gp=$(g --start "rping -s -a $GIP -v -V") || return 1
  gwait_listen 7174 || return 1
  timeout 180 "$BIN/iwarp-rping" -c -a "$GIP" -v -C 100 -V --debug $(crcflag "$crc") > "$f" 2>&1; local orc=$?
  g --wait "$gp" -t 60 > "$f.guest" 2>&1; local grc=$?
  echo "--- iwarp-rping -c (rc $orc)"; cat "$f"; echo "--- guest rping -s (rc $grc)"; cat "$f.guest"
  local n; n=$(count_pings "$f")
  note "we validated $n/100 pings; siw's server printed $(grep -c 'server ping data' "$f.guest") buffers"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && [ "$n" = 100 ] && check_crc_line "$f" "$crc"
}

# Sizes that keep the whole data phase inside the capture where possible (64 KiB = 46 FPDUs).
perf_iters() { case $1 in write_bw) echo 500 ;; read_bw) echo 200 ;; send_bw) echo 50 ;; *) echo 200 ;; esac; }
perf_tool() { echo "ib_$1"; }

c_perf_siw_client() {
  local t=$1 crc=$2 f=$OUT/cells/$CELL.ours n; n=$(perf_iters "$t")
  expect crc "$crc"
  bg_ours "$f" "$BIN/iwarp-perf" "$t" -R -n "$n" --crc "$crc"
  sleep 1
  g -t 240 "$(perf_tool "$t") -R -d siw0 -n $n $OIP" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest $(perf_tool "$t") (rc $grc)"; cat "$f.guest"; echo "--- iwarp-perf $t server (rc $orc)"; cat "$f"
  note "$(perf_summary "$f.guest" "$t")"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && perf_rows_ok "$f.guest" "$t"
}

c_perf_we_client() {
  local t=$1 crc=$2 f=$OUT/cells/$CELL.ours n gp; n=$(perf_iters "$t")
  expect crc "$crc"
  gp=$(g --start "$(perf_tool "$t") -R -d siw0 -n $n") || return 1
  gwait_listen 18515 || return 1
  timeout 240 "$BIN/iwarp-perf" "$t" -R -n "$n" --crc "$crc" "$GIP" > "$f" 2>&1; local orc=$?
  g --wait "$gp" -t 60 > "$f.guest" 2>&1; local grc=$?
  echo "--- iwarp-perf $t client (rc $orc)"; cat "$f"; echo "--- guest $(perf_tool "$t") server (rc $grc)"; cat "$f.guest"
  note "$(perf_summary "$f" "$t")"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && perf_rows_ok "$f" "$t"
}
# A perftest result row: "bytes iterations ..." with the iterations we asked for.
perf_rows_ok() {
  local n; n=$(perf_iters "$2")
  awk -v n="$n" '$1 ~ /^[0-9]+$/ && $2 == n { ok = 1 } END { exit !ok }' "$1" \
    || { echo "CHECK FAILED: no result row with $n iterations in $1"; return 1; }
}
perf_summary() {
  awk '$1 ~ /^[0-9]+$/ && NF >= 4 { row = $0 } END { gsub(/ +/, " ", row); print "row: " row }' "$1"
}

c_rdmacs_siw_client() {
  local crc=$1 f=$OUT/cells/$CELL.ours
  expect crc "$crc"
  bg_ours "$f" "$BIN/iwarp-rdma-server" -p 7471 --crc "$crc" --debug
  ours_listening "$f.tmp"
  g -t 60 "rdma_client -s $OIP -p 7471" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest rdma_client (rc $grc)"; cat "$f.guest"; echo "--- iwarp-rdma-server (rc $orc)"; cat "$f"
  note "guest: $(grep 'end' "$f.guest" | tr '\n' ' '); ours: $(grep 'end' "$f" | tr '\n' ' ')"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && grep -q 'rdma_client: end 0' "$f.guest" \
    && grep -q 'rdma_server: end 0' "$f" && check_crc_line "$f" "$crc"
}

c_rdmacs_we_client() {
  local crc=$1 f=$OUT/cells/$CELL.ours gp
  expect crc "$crc"
  gp=$(g --start "rdma_server -p 7471") || return 1
  gwait_listen 7471 || return 1
  timeout 60 "$BIN/iwarp-rdma-client" -s "$GIP" -p 7471 --crc "$crc" --debug > "$f" 2>&1; local orc=$?
  g --wait "$gp" -t 30 > "$f.guest" 2>&1; local grc=$?
  echo "--- iwarp-rdma-client (rc $orc)"; cat "$f"; echo "--- guest rdma_server (rc $grc)"; cat "$f.guest"
  note "ours: $(grep 'end' "$f" | tr '\n' ' '); guest: $(grep 'end' "$f.guest" | tr '\n' ' ')"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && grep -q 'rdma_server: end 0' "$f.guest" \
    && grep -q 'rdma_client: end 0' "$f" && check_crc_line "$f" "$crc"
}

c_p2p_we() {
  local rtr=$1 f=$OUT/cells/$CELL.ours gp crc=off
  [ "$rtr" = read ] && crc=on
  expect crc "$crc"; expect rtr-from ours "$rtr"
  gp=$(g --start "rping -s -a $GIP -v -V") || return 1
  gwait_listen 7174 || return 1
  timeout 120 "$BIN/iwarp-rping" -c -a "$GIP" -v -C 20 -V --debug --crc "$crc" --rtr "$rtr" > "$f" 2>&1; local orc=$?
  g --wait "$gp" -t 60 > "$f.guest" 2>&1; local grc=$?
  echo "--- iwarp-rping -c --rtr $rtr (rc $orc)"; cat "$f"; echo "--- guest rping -s (rc $grc)"; cat "$f.guest"
  local n; n=$(count_pings "$f")
  note "RTR $rtr, CRC $crc: we validated $n/20 pings"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && [ "$n" = 20 ] && check_crc_line "$f" "$crc" \
  
}

c_markers() {
  local f=$OUT/cells/$CELL.ours gp t0
  expect reject
  gp=$(g --start "rping -s -a $GIP -v -V") || return 1
  gwait_listen 7174 || return 1
  t0=$(now)
  timeout 60 "$BIN/iwarp-rping" -c -a "$GIP" -C 1 -V --markers --timeout 20 > "$f" 2>&1; local orc=$?
  local took; took=$(secs "$t0")
  guest_clean   # siw's rping -s keeps waiting after rejecting
  g --wait "$gp" -t 10 > "$f.guest" 2>&1; local grc=$?
  echo "--- iwarp-rping -c --markers (rc $orc, ${took}s)"; cat "$f"; echo "--- guest rping -s (rc $grc)"; cat "$f.guest"
  note "our client: rc $orc after ${took}s: $(head -c 120 "$f" | tr '\n' ' ')"
  [ "$orc" = 1 ] && grep -q 'REJECTED' "$f" \
    && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)" "$took"
}

c_term_oob() {
  # siw's rping client advertises a 64-byte sink buffer; our server's Write crosses its end
  # by 8 bytes (test-only --fault-write-past-end): siw answers with a TERMINATE (README §10:
  # 11010300, DDP / tagged / base or bounds) and closes; our QP must report those codes.
  local f=$OUT/cells/$CELL.ours
  expect terminate-from siw
  bg_ours "$f" "$BIN/iwarp-rping" -s -a "$OIP" -v -V --debug --fault-write-past-end
  ours_listening "$f.tmp"
  g -t 60 "rping -c -a $OIP -v -C 1 -V" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest rping -c (rc $grc)"; cat "$f.guest"; echo "--- iwarp-rping -s --fault-write-past-end (rc $orc)"; cat "$f"
  note "ours: $(grep -i -m1 'terminate' "$f" | head -c 160); guest rc $grc"
  [ "$orc" != 0 ] && grep -q 'TERMINATE received: layer 1 etype 1 ecode 0x01' "$f"
}

c_fault() {
  # rping's first Send from our client goes out broken (iwarpd's test-only fault switch).
  local fault=$1 f=$OUT/cells/$CELL.ours gp t0
  if [ "$fault" = badcrc ]; then expect crc on 1; expect terminate-from siw
  else expect crc on 0 nodata; expect no-terminate; fi
  gp=$(g --start "rping -s -a $GIP -v -V") || return 1
  gwait_listen 7174 || return 1
  t0=$(now)
  timeout 60 "$BIN/iwarp-rping" -c -a "$GIP" -v -C 5 -V --debug --crc on --fault "$fault" --timeout 10 > "$f" 2>&1; local orc=$?
  local took; took=$(secs "$t0")
  guest_clean
  g --wait "$gp" -t 10 > "$f.guest" 2>&1; local grc=$?
  g -t 10 'ss -tn state all "sport = :7174"' > "$f.ss" 2>&1
  echo "--- iwarp-rping -c --fault $fault (rc $orc, ${took}s)"; cat "$f"; echo "--- guest rping -s (rc $grc)"; cat "$f.guest"
  echo "--- guest sockets on 7174 after the cell"; cat "$f.ss"
  if [ "$fault" = badcrc ]; then
    note "ours after ${took}s: $(grep -m1 'TERMINATE' "$f" | head -c 140)"
    [ "$orc" != 0 ] && grep -q 'TERMINATE received: layer 2' "$f"
  else
    note "siw: no TERMINATE, no close (it has no receive timer); our client gave up after ${took}s (rc $orc): $(tail -1 "$f" | head -c 120)"
    [ "$orc" != 0 ]
  fi
}

c_variant_crc() {
  local f=$OUT/cells/$CELL.ours
  expect crc on
  guest_variant crc || return 1
  bg_ours "$f" "$BIN/iwarp-rping" -s -a "$OIP" -v -V --debug --crc off
  ours_listening "$f.tmp"
  g -t 120 "rping -c -a $OIP -v -C 20 -V" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest rping (siw-crc, rc $grc)"; cat "$f.guest"; echo "--- iwarp-rping -s (rc $orc)"; cat "$f"
  local n; n=$(count_pings "$f.guest")
  note "siw -V crc asked for C; guest validated $n/20 pings"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && [ "$n" = 20 ] && check_crc_line "$f" on
}

c_p2p_siw_client() {
  local f=$OUT/cells/$CELL.ours
  expect rtr-from siw write
  guest_variant p2p || return 1
  bg_ours "$f" "$BIN/iwarp-rping" -s -a "$OIP" -v -V --debug
  ours_listening "$f.tmp"
  g -t 120 "rping -c -a $OIP -v -C 20 -V" > "$f.guest" 2>&1; local grc=$?
  wait "$BGPID"; local orc=$?; mv "$f.tmp" "$f"
  echo "--- guest rping (siw-p2p, rc $grc)"; cat "$f.guest"; echo "--- iwarp-rping -s (rc $orc)"; cat "$f"
  local n; n=$(count_pings "$f.guest")
  note "guest validated $n/20 pings; $(grep -o 'negotiated:.*' "$f" | head -1)"
  [ "$grc" = 0 ] && [ "$orc" = 0 ] && [ "$n" = 20 ]
}

# ------------------------------------------------------------------------------ wire checks
# Each cell is captured on the bridge port of our veth (the first 4000 frames: both MPA
# exchanges and the first FPDUs) and decoded by tshark, which we did not write.
cap_start() {
  ip netns exec "$NS" tcpdump -i "$VB" -s 0 -c 4000 --immediate-mode -U -w "$1" > "$1.err" 2>&1 &
  CAPPID=$!
  for _ in $(seq 1 50); do grep -q listening "$1.err" 2>/dev/null && return; sleep 0.1; done
}
cap_stop() { kill -INT "$CAPPID" 2>/dev/null; wait "$CAPPID" 2>/dev/null; }
ts() { tshark -r "$PCAP" --disable-protocol rpcordma "$@" 2>/dev/null; }
wire_check() {  # prints a short verdict; fails when an expectation does not hold
  local e=$OUT/cells/$CELL.expect what a b first hit
  [ -s "$e" ] || { echo "no wire expectation"; return 0; }
  while read -r what a b c; do
    case $what in
      crc)
        local want=1; [ "$a" = on ] || want=0
        local flags; flags=$(ts -Y 'iwarp_mpa.rep && iwarp_mpa.rej_flag == 0' -T fields -e iwarp_mpa.crc_flag | sort -u | tr '\n' ' ')
        # Only frames whose FPDU tshark parsed in place (a lost capture segment makes it
        # read garbage lengths and "Bad" CRCs behind it). b = Bad CRCs expected (fault cells),
        # c = "nodata" when no whole FPDU need be seen.
        local v good bad; v=$(ts -Y 'iwarp_mpa.crc_check && iwarp_mpa.ulpdulength <= 1460' -O iwarp_mpa -V | grep 'CRC check:')
        good=$(grep -c 'Good CRC32' <<< "$v"); bad=$(grep -vc 'Good CRC32' <<< "$v")
        [ -z "$v" ] && bad=0
        case $flags in
          "") echo "wire: no accepted MPA Reply captured"; return 1 ;;
          "$want "|"$([ $want = 1 ] && echo True || echo False) ") ;;
          *) echo "wire: MPA Reply C flag(s) '$flags', expected CRC $a"; return 1 ;;
        esac
        if [ "$a" = on ] && { { [ "$good" = 0 ] && [ "${c:-}" != nodata ]; } || [ "$bad" != "${b:-0}" ]; }; then
          echo "wire: CRC on but tshark saw $good Good and $bad Bad CRC32s (expected ${b:-0} Bad)"; return 1
        fi
        [ "${b:-0}" != 0 ] && echo -n "wire: $bad Bad CRC32 (ours, on purpose); "
        echo -n "wire: Reply C=$want"; [ "$a" = on ] && echo -n ", $good FPDUs with a Good CRC32 (tshark)"; echo -n "; " ;;
      rtr-from)
        local src=$OIP; [ "$a" = siw ] && src=$GIP
        first=$(ts -Y "ip.src == $src && iwarp_ddp_rdmap" -T fields -e frame.number | head -1)
        if [ "$b" = write ]; then
          hit=$(ts -Y "ip.src == $src && iwarp_rdma.opcode == 0 && iwarp_mpa.ulpdulength == 14" -T fields -e frame.number | head -1)
        else
          hit=$(ts -Y "ip.src == $src && iwarp_rdma.opcode == 1 && iwarp_rdma.rdmardsz == 0" -T fields -e frame.number | head -1)
        fi
        [ -n "$first" ] && [ "$first" = "$hit" ] || { echo "wire: $a's first FPDU (frame $first) is not a zero-length $b RTR (match: '$hit')"; return 1; }
        echo -n "wire: $a's first FPDU is a zero-length $b (frame $first); " ;;
      reject)
        hit=$(ts -Y 'iwarp_mpa.rep && iwarp_mpa.rej_flag == 1' | wc -l)
        [ "$hit" -ge 1 ] || { echo "wire: no MPA Reply with R=1"; return 1; }
        echo -n "wire: siw's Reply has R=1; " ;;
      no-terminate)
        hit=$(ts -Y "ip.src == $GIP && iwarp_rdma.opcode == 7" | wc -l)
        [ "$hit" = 0 ] || { echo "wire: siw sent a TERMINATE"; return 1; }
        echo -n "wire: no TERMINATE from siw; " ;;
      terminate-from)
        hit=$(ts -Y "ip.src == $GIP && iwarp_rdma.opcode == 7" -T fields -e iwarp_rdma.term_ctrl | head -1)
        [ -n "$hit" ] || { echo "wire: no TERMINATE from siw"; return 1; }
        echo -n "wire: siw's TERMINATE ctrl $hit; " ;;
    esac
  done < "$e"
  echo
}

# ------------------------------------------------------------------------------ run
RESULTS=$OUT/results.tsv
: > "$RESULTS"
T_CELLS=$(now)
for c in "${SELECTED[@]}"; do
  IFS='|' read -r CELL DESC FN <<< "$c"
  CELLNOTE=$OUT/cells/$CELL.note; : > "$CELLNOTE"
  kill -0 "$IWPID" 2>/dev/null || { log "iwarpd died; restarting it"; start_iwarpd || break; }
  log "cell $CELL"
  PCAP=$OUT/cells/$CELL.pcap
  cap_start "$PCAP"
  t0=$(now)
  # shellcheck disable=SC2086
  ( set +e; $FN ) > "$OUT/cells/$CELL.log" 2>&1; rc=$?
  dt=$(secs "$t0")
  cap_stop
  wire=$(wire_check); wrc=$?
  echo "$wire" >> "$OUT/cells/$CELL.log"
  echo "$wire $(cat "$CELLNOTE")" > "$CELLNOTE"
  res=PASS; [ "$rc" = 0 ] && [ "$wrc" = 0 ] || res=FAIL
  printf '%s\t%s\t%s\t%s\t%s\n' "$CELL" "$DESC" "$res" "$dt" "$(tr '\n|\t' '   ' < "$CELLNOTE" | cut -c1-300)" >> "$RESULTS"
  log "  $res in ${dt}s: $(cat "$CELLNOTE")"
  [ "$res" = PASS ] || tail -5 "$OUT/cells/$CELL.log" | sed 's/^/    /'
  guest_clean
  for p in "${HOSTPIDS[@]}"; do kill "$p" 2>/dev/null; done; HOSTPIDS=()
done
T_CELLS=$(secs "$T_CELLS")
guest_variant default > /dev/null 2>&1

# ------------------------------------------------------------------------------ report
pass=$(awk -F'\t' '$3 == "PASS"' "$RESULTS" | wc -l)
total=$(wc -l < "$RESULTS")
TABLE=$OUT/table.md
{
  echo "Run of \`make interop\` on $DATE ($(uname -n), $(nproc) cores, shared with other work;"
  echo "guest under qemu TCG: accel $(cat "$SIWPEER_WORK/run/$PEER/accel" 2>/dev/null || echo '?')): **$pass of $total cells passed**."
  echo "Timings: cargo build ${T_CARGO}s, guest image ${T_IMAGE}s (cached when 0.x), guest boot ${T_BOOT}s, cells ${T_CELLS}s, total $(secs "$T_ALL")s."
  echo
  echo "| cell | what | result | time (s) | checked |"
  echo "|---|---|---|---|---|"
  awk -F'\t' '{ printf "| `%s` | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$RESULTS"
} > "$TABLE"
cat "$TABLE"
if [ "$WRITE" = 1 ]; then
  python3 - "$ROOT/INTEROP.md" "$TABLE" <<'EOF'
import sys
path, table = sys.argv[1], open(sys.argv[2]).read()
doc = open(path).read()
b, e = "<!-- interop-table:begin -->", "<!-- interop-table:end -->"
if b in doc and e in doc:
    doc = doc[: doc.index(b) + len(b)] + "\n" + table + doc[doc.index(e):]
else:
    doc += f"\n{b}\n{table}{e}\n"
open(path, "w").write(doc)
EOF
  log "table written to INTEROP.md"
fi
[ "$pass" = "$total" ]
exit
}
