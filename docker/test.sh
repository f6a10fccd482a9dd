#!/usr/bin/env bash
# `make docker-test`: the two-host deployment of docker/compose.yaml, end to end.
#   1. a Docker engine (docker/engine.sh: installs docker.io, docker-compose, debootstrap; starts
#      dockerd if none runs) -- without one (not root, no dockerd) the test says SKIPPED and passes
#   2. the cached base image (docker/base.sh) and the iwarp image (docker/build.sh)
#   3. profile tcp (af_packet on a container network): ARP + 20 pings and 64 MiB over our TCP
#      from hostb to hosta with SHA-256 checked; a capture on the bridge shows no RST, no ICMP
#      error and no second ARP reply (the containers' kernels do not answer for iwarpd's
#      addresses); the RDMA tools between the hosts from the client containers (iwarp-rping
#      -C 100 -v, iwarp-perf write_bw; SKIPPED loudly if the image lacks one); hostb killed with SIGKILL mid-transfer
#      leaves hosta healthy and serving; `docker stop` is clean, in time, with the counters
#   4. profile memif (a memif wire on a shared volume): 20 pings and 64 MiB with SHA-256
#   5. teardown: no container, network or volume of the project left, the image removed (the
#      base image and BuildKit's cache stay, for the next run)
# Prints "docker-test: N passed, N failed" last; exit status 1 if a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."

DOCKER=${DOCKER:-/usr/bin/docker}
PROJECT=iwarpdt$$
export IWARP_IMAGE=iwarp-docker-test:$$
COMPOSE=(docker-compose -f docker/compose.yaml -p "$PROJECT" --profile tcp --profile memif)
A=10.78.0.11
work=$(mktemp -d /tmp/iwarp-docker-test.XXXXXX)
passed=0 failed=0 skipped=0 capture_pid=
T0=$SECONDS

say() { echo "docker-test: $*"; }
pass() { say "PASS $*"; passed=$((passed + 1)); }
fail() { say "FAIL $*"; failed=$((failed + 1)); }
skip() { echo; say "*** SKIPPED $* ***"; echo; skipped=$((skipped + 1)); }
check() { # description command...
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
dc() { "${COMPOSE[@]}" "$@" 2>&1 | grep -vE '^(Creating|Starting|Stopping|Removing|Recreating)( |$)|done$|is up-to-date$' || true; }
cid() { "${COMPOSE[@]}" ps -q "$1" 2>/dev/null; }
logs() { "$DOCKER" logs "$(cid "$1")" 2>&1; }
has_log() { grep -qE "$2" <<<"$(logs "$1")"; } # (no `logs | grep -q`: SIGPIPE under pipefail)
health() { "$DOCKER" inspect -f '{{.State.Health.Status}}' "$(cid "$1")" 2>/dev/null; }
wait_for() { # seconds description command...
    local secs=$1 until=$((SECONDS + $1)) what=$2
    shift 2
    until "$@"; do
        ((SECONDS < until)) || { say "timed out after $secs s waiting for $what"; return 1; }
        sleep 1
    done
}
healthy() { [[ $(health "$1") == healthy ]]; }

cleanup() {
    [[ -n $capture_pid ]] && kill "$capture_pid" 2>/dev/null && wait "$capture_pid" 2>/dev/null
    if [[ -n ${engine_ready:-} ]]; then
        "${COMPOSE[@]}" down -v --remove-orphans -t 20 >/dev/null 2>&1
        "$DOCKER" rmi -f "$IWARP_IMAGE" >/dev/null 2>&1
    fi
    rm -rf "$work"
    docker/engine.sh down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 1. engine
docker/engine.sh up
case $? in
0) engine_ready=1 ;;
3)
    skip "docker-test: no Docker engine can be started here (reason above); CI runs as root and has one"
    say "0 passed, 0 failed, 1 skipped"
    exit 0
    ;;
*) exit 1 ;;
esac

# ---- 2. images
t=$SECONDS
docker/base.sh || { fail "base image"; exit 1; }
IWARP_IMAGE=$IWARP_IMAGE docker/build.sh || { fail "image build"; exit 1; }
say "images ready in $((SECONDS - t)) s"

# The checks of one transfer: hostb's ping and sender against hosta's discard service.
ping_done() { has_log "$1" 'ping done'; }
ping_ok() {
    local l
    l=$(logs "$1" | grep 'ping done' | tail -1)
    say "  $1: ${l#*INFO }"
    [[ $l =~ sent=20\ received=20 ]]
}
sent_line() { logs "$1" | grep '^iwarpd: sender' | tail -1; }
discards() { logs "$1" | grep '^iwarpd: discard'; }
transfer_done() { # sender receiver [discard lines before] -- the sender is done, a new discard line
    [[ -n $(sent_line "$1") && $(discards "$2" | wc -l) -gt ${3:-0} ]]
}
check_transfer() { # sender receiver [discard lines before]
    local s r sha new
    s=$(sent_line "$1")
    sha=$(grep -o 'sha256=[0-9a-f]*' <<<"$s" | cut -d= -f2)
    new=$(discards "$2" | tail -n +$((${3:-0} + 1)))
    r=$(grep -m1 "body_sha256=${sha:-none} " <<<"$new" || head -1 <<<"$new")
    say "  $1: $s"
    say "  $2: $r"
    [[ $s == *ok=true*bytes=67108864* && -n $sha && $r == *"body_sha256=$sha"* && $r == *trailer_ok=true* && $r == *bytes=67108896* ]]
}
run_pair() { # a b together|apart: bring up a (and the clients), wait healthy; b pings a and sends
    # to a, at once (memif: back-pressure, no loss) or one after the other (af_packet drops
    # frames when the transfer overflows a receive ring: TCP recovers, a ping reply does not)
    local a=$1 b=$2 t=$SECONDS
    dc up -d "$a" client-a client-b
    wait_for 90 "$a healthy" healthy "$a" || { logs "$a" | tail -30; return 1; }
    [[ -n ${before_b:-} ]] && $before_b
    if [[ $3 == apart ]]; then
        HOSTB_SEND_TO= dc up -d "$b"
        wait_for 60 "$b's ping" ping_done "$b"
        check "$b pings $a: 20 of 20 replies" ping_ok "$b"
        HOSTB_PING= dc up -d --no-deps --force-recreate "$b"
    else
        dc up -d "$b"
    fi
    wait_for 120 "the transfer from $b to $a" transfer_done "$b" "$a" || { logs "$b" | tail -30; }
    [[ $3 == apart ]] || { wait_for 30 "$b's ping" ping_done "$b"; check "$b pings $a: 20 of 20 replies" ping_ok "$b"; }
    check "64 MiB $b -> $a over our TCP, SHA-256 equal on both ends" check_transfer "$b" "$a"
    say "  ($a and $b up, pinged and transferred in $((SECONDS - t)) s)"
}
save_logs() { # keep every container's log for a failed run
    local s d=target/docker-test-logs
    mkdir -p "$d"
    for s in "$@"; do [[ -n $(cid "$s") ]] && logs "$s" >"$d/$s.log"; done
}

# ---- 3. profile tcp
say "== profile tcp: hosta ($A) and hostb on a container network, DPDK af_packet on eth0"
t_tcp=$SECONDS
start_capture() {
    local net br
    net=$("$DOCKER" network inspect -f '{{.Id}}' "${PROJECT}_wire" 2>/dev/null) || return 0
    br=br-${net:0:12}
    if command -v tcpdump >/dev/null; then
        tcpdump -i "$br" -nn -U -s 128 -w "$work/wire.pcap" 2>"$work/tcpdump.log" &
        capture_pid=$!
        wait_for 10 "tcpdump" grep -q listening "$work/tcpdump.log"
    fi
}
before_b=start_capture
run_pair hosta hostb apart
before_b=

kernel_quiet() {
    local rst icmp req rep ip n replies=0
    kill "$capture_pid"
    wait "$capture_pid" 2>/dev/null
    capture_pid=
    n=$(tcpdump -r "$work/wire.pcap" -nn 2>/dev/null | wc -l)
    rst=$(tcpdump -r "$work/wire.pcap" -nn 'tcp[tcpflags] & tcp-rst != 0' 2>/dev/null | wc -l)
    icmp=$(tcpdump -r "$work/wire.pcap" -nn 'icmp and icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply' 2>/dev/null | wc -l)
    say "  capture: $n frames, $rst TCP RST, $icmp ICMP errors or redirects"
    ((n > 1000 && rst == 0 && icmp == 0)) || return 1
    for ip in $A 10.78.0.12; do
        req=$(tcpdump -r "$work/wire.pcap" -nn "arp[6:2] == 1 and arp dst host $ip" 2>/dev/null | wc -l)
        rep=$(tcpdump -r "$work/wire.pcap" -nn "arp[6:2] == 2 and arp src host $ip" 2>/dev/null | wc -l)
        say "  ARP for $ip: $req requests, $rep replies"
        ((rep <= req)) || return 1
        replies=$((replies + rep))
    done
    ((replies >= 1))
}
if [[ -n $capture_pid ]]; then
    check "the containers' kernels stay silent for iwarpd's addresses (no RST, no ICMP error, one ARP reply per request)" kernel_quiet
else
    skip "capture on the bridge: tcpdump is not installed (make deps installs it)"
fi

takeover_ok() {
    local st addr
    st=$("$DOCKER" exec "$(cid hosta)" cat /proc/1/status)
    addr=$("$DOCKER" exec "$(cid hosta)" ip -4 -o addr show dev eth0)
    say "  hosta: iwarpd $(grep -E '^(Uid|CapEff)' <<<"$st" | tr -s '\t\n' '  '); eth0 IPv4 in the kernel: '${addr}'"
    grep -qE '^Uid:\s+10001\s' <<<"$st" && grep -qE '^CapEff:\s+0000000000003000$' <<<"$st" && [[ -z $addr ]]
}
check "hosta: iwarpd runs as uid 10001 with NET_RAW+NET_ADMIN only; eth0 has no kernel address" takeover_ok

# RDMA between the hosts, through each host's daemon and its client container.
has_tool() { "$DOCKER" exec "$(cid client-a)" sh -c "command -v $1" >/dev/null 2>&1; }
socket_shared() { "$DOCKER" exec "$(cid client-a)" test -S /run/iwarpd/iwarpd.sock; }
check "client-a sees hosta's control socket on the shared volume (/run/iwarpd/iwarpd.sock)" socket_shared
rdma_steps() {
    local dev=unix:/run/iwarpd/iwarpd.sock out rc steps=()
    has_tool iwarp-rping && steps+=(rping) ||
        skip "iwarp-rping -C 100 -v between the hosts: the image has no iwarp-rping (not built by the workspace)"
    has_tool iwarp-perf && steps+=(perf) ||
        skip "iwarp-perf write_bw between the hosts: the image has no iwarp-perf (not built by the workspace)"
    ((${#steps[@]})) || return 0
    if [[ " ${steps[*]} " == *" rping "* ]]; then
        "$DOCKER" exec -d "$(cid client-a)" iwarp-rping -s -C 100 -v -d "$dev"
        sleep 1
        out=$(timeout 120 "$DOCKER" exec "$(cid client-b)" iwarp-rping -c -a "$A" -C 100 -v -V -d "$dev" 2>&1)
        rc=$?
        tail -2 <<<"$out" | sed 's/^/docker-test:   /'
        check "iwarp-rping -c -C 100 -v -V from client-b to hosta: 100 pings, each buffer validated" \
            test "$rc" -eq 0 -a "$(grep -c '^ping data: rdma-ping-' <<<"$out")" -eq 100
    fi
    if [[ " ${steps[*]} " == *" perf "* ]]; then
        "$DOCKER" exec -d "$(cid client-a)" iwarp-perf write_bw -d "$dev" -s 65536 -n 2000 --report_gbits
        sleep 1
        out=$(timeout 180 "$DOCKER" exec "$(cid client-b)" iwarp-perf write_bw -d "$dev" -s 65536 -n 2000 --report_gbits "$A" 2>&1)
        rc=$?
        grep -E '^ *#bytes|^ *65536 ' <<<"$out" | sed 's/^/docker-test:   /'
        check "iwarp-perf write_bw from client-b to hosta (64 KiB x 2000)" \
            test "$rc" -eq 0 -a -n "$(grep -E '^ *65536 +2000 ' <<<"$out")"
    fi
}
rdma_steps

# SIGKILL mid-transfer: hostb restarts sending 16 GiB, dies after >= 32 MiB reached hosta.
rx_bytes() { # hosta's dataplane received bytes, from its stats file
    local b
    b=$("$DOCKER" exec "$(cid hosta)" awk '/^\[lcore\.0\]/ { s = 1 } s && $1 == "rx_bytes" { print $3; exit }' /run/iwarpd/stats 2>/dev/null)
    echo "${b:-0}"
}
kill_mid_transfer() {
    local base now
    base=$(rx_bytes)
    HOSTB_SEND_BYTES=$((16 << 30)) dc up -d --no-deps --force-recreate hostb
    now=$base
    wait_for 60 "hostb's transfer under way" eval '(( $(rx_bytes) >= base + (32 << 20) ))' || return 1
    "$DOCKER" kill -s KILL "$(cid hostb)" >/dev/null
    now=$(rx_bytes)
    say "  hostb killed (SIGKILL) after $(((now - base) >> 20)) MiB of 16 GiB reached hosta; exit code $("$DOCKER" inspect -f '{{.State.ExitCode}}' "$(cid hostb)")"
    sleep 7 # two health intervals
    local h1 h2
    h1=$("$DOCKER" exec "$(cid hosta)" iwarp-health) || { say "  $h1"; return 1; }
    sleep 2
    h2=$("$DOCKER" exec "$(cid hosta)" iwarp-health) || { say "  $h2"; return 1; }
    say "  hosta: $(health hosta); $h2"
    healthy hosta
}
check "hostb killed with SIGKILL mid-transfer: hosta stays healthy" kill_mid_transfer
serve_again() {
    local n
    n=$(discards hosta | wc -l)
    HOSTB_PING= dc up -d --no-deps --force-recreate hostb
    wait_for 120 "the new hostb's transfer" transfer_done hostb hosta "$n" || return 1
    check_transfer hostb hosta "$n"
}
check "after the kill, hosta serves a new hostb: 64 MiB with SHA-256 equal" serve_again

clean_stop() { # service...
    local s t=$SECONDS ok=0 code
    dc stop -t 20 "$@"
    say "  docker stop of $* took $((SECONDS - t)) s (grace period 20 s)"
    ((SECONDS - t < 20)) || ok=1
    for s in "$@"; do
        code=$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$(cid "$s")")
        has_log "$s" '^# iwarpd counters after' || { say "  $s printed no final counters"; ok=1; }
        has_log "$s" '^\[port\.net_' || ok=1
        ((code == 0)) || { say "  $s exited with $code"; ok=1; }
    done
    say "  $1's final counters: $(logs "$1" | sed -n '/^\[lcore.0.tcp\]/,/^$/p' | grep -E 'bytes_in|segs_in|retrans' | tr '\n' ' ')"
    return $ok
}
check "docker stop: hostb and hosta exit 0 within the grace period, final counters printed" clean_stop hostb hosta
((failed == 0)) || save_logs hosta hostb
dc down -v -t 20
say "== profile tcp done in $((SECONDS - t_tcp)) s"

# ---- 4. profile memif
say "== profile memif: memif-a and memif-b joined by memif on a shared volume, no network"
t_memif=$SECONDS
run_pair memif-a memif-b together
check "docker stop: memif-b and memif-a exit 0 within the grace period, final counters printed" clean_stop memif-b memif-a
((failed == 0)) || save_logs memif-a memif-b
dc down -v -t 20
say "== profile memif done in $((SECONDS - t_memif)) s"

# ---- 5. teardown
"$DOCKER" rmi -f "$IWARP_IMAGE" >/dev/null 2>&1
nothing_left() {
    local c n v i
    c=$("$DOCKER" ps -aq --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
    n=$("$DOCKER" network ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
    v=$("$DOCKER" volume ls -q --filter "label=com.docker.compose.project=$PROJECT" | wc -l)
    i=$("$DOCKER" image ls -q "${IWARP_IMAGE%%:*}" | wc -l)
    say "  left: $c containers, $n networks, $v volumes, $i test images; images now: $("$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}' | tr '\n' ' ')"
    ((c + n + v + i == 0))
}
check "teardown: no container, network, volume or image of the test left (base image cached)" nothing_left

say "total $((SECONDS - T0)) s"
((failed == 0)) || say "container logs of the failed run: target/docker-test-logs/"
say "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
