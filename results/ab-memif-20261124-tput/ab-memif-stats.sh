#!/bin/bash
# usage: ab-memif.sh TEST "ARGS_A" "ARGS_B" [ROUNDS]  -- alternating memif runs (embedded), prints client tables' last line
set -uo pipefail
BIN=${BIN:-/work/main-target/release}
T=$1; A=$2; B=$3; R=${4:-3}
work=$(mktemp -d /tmp/ab-memif.XXXXXX)
conf() { cat <<EOT
[eal]
memory_mb = 512
file_prefix = "ab-$1-$$"
[port]
device = "net_memif0,role=$2,id=0,socket=$work/memif.sock,socket-abstract=no"
ip = "$3/24"
mtu = 1500
[dataplane]
cores = [$4]
idle = "${IDLE:-yield}"
[mpa]
first_fpdu_delay_ms = 0
[stats]
file = "$work/$1.stats"
interval_ms = 100
[log]
level = "warn"
${EXTRA:-}
EOT
}
conf a server 10.77.0.1 0 > $work/a.toml; conf b client 10.77.0.2 1 > $work/b.toml
run() { # tag args
  tag=$1; shift; rm -f $work/a.stats $work/b.stats
  local ps="" pc=""
  if [[ $1 == PIN ]]; then shift; ps="env IWARP_PERF_PIN=1"; pc="env IWARP_PERF_PIN=1"; fi
  local B=$BIN/iwarp-perf
  if [[ $1 == BIN=* ]]; then B=${1#BIN=}; shift; fi
  local xpin=""
  if [[ $1 == XPIN ]]; then shift; xpin=1; fi
  timeout -k 5 60 $ps $B $T -d $work/a.toml "$@" > $work/s.out 2>$work/s.err & sp=$!
  for _ in $(seq 300); do grep -q "Waiting for client" $work/s.out 2>/dev/null && break; sleep 0.1; done
  timeout -k 5 60 $pc $B $T -d $work/b.toml "$@" 10.77.0.1 > $work/c.out 2>$work/c.err & cp=$!
  if [[ -n $xpin ]]; then
    for _ in $(seq 200); do
      cpid=$(pgrep -P $cp | head -1)
      [[ -n $cpid ]] && grep -qx dp0 /proc/$cpid/task/*/comm 2>/dev/null && break
      sleep 0.01
    done
    taskset -p -c 0 $cpid >/dev/null 2>&1 || echo "xpin failed"
  fi
  if [[ -n ${CPUSAMPLE:-} ]]; then
    for _ in $(seq 200); do cpid=$(pgrep -P $cp | head -1); [[ -n $cpid ]] && break; sleep 0.01; done
    : > $work/cpu.txt
    while kill -0 $cpid 2>/dev/null; do awk '{print $39}' /proc/$cpid/stat 2>/dev/null >> $work/cpu.txt; sleep 0.02; done
  fi
  wait $cp || { echo FAIL; tail -3 $work/c.err; }
  [[ -n ${CPUSAMPLE:-} ]] && echo -n "app-cpu0=$(grep -cx 0 $work/cpu.txt) app-cpu1=$(grep -cx 1 $work/cpu.txt) "
  wait $sp
  grep -E '^ *[0-9]+ +[0-9]+' $work/c.out | tail -1
  if [[ -n ${STATS:-} ]]; then cp $work/a.stats $STATS.$tag.a.stats 2>/dev/null; cp $work/b.stats $STATS.$tag.b.stats 2>/dev/null; fi
}
for r in $(seq $R); do
  if (( r % 2 )); then echo "A r$r: $(run A$r $A)"; echo "B r$r: $(run B$r $B)"; else echo "B r$r: $(run B$r $B)"; echo "A r$r: $(run A$r $A)"; fi
done
rm -rf $work /var/run/dpdk/ab-*-$$
