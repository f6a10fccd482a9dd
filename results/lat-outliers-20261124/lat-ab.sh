#!/bin/bash
# usage: ARGS="-s 2 -n 100000 --crc on" lat-ab.sh ROUNDS name=bindir[:extra args] ...  -- rotating write_lat runs over memif
# (configs as ab-memif.sh; STATS=1 adds bench-rdma.sh's stats file every 100 ms), each after waiting for a quiet machine
R=$1; shift
vars=("$@")
busy() { read -r _ u n s i w x y z _ < /proc/stat; t1=$((u+n+s+x+y+z)); a1=$((t1+i+w)); sleep 2; read -r _ u n s i w x y z _ < /proc/stat; t2=$((u+n+s+x+y+z)); a2=$((t2+i+w)); echo $(( 100*(t2-t1)/(a2-a1) )); }
quiet() { for _ in $(seq ${QUIET_TRIES:-10}); do b=$(busy); (( b < ${BUSY_MAX:-15} )) && { echo "[busy $b%]"; return; }; done; echo "[busy $b%]"; }
work=$(mktemp -d /tmp/lat-ab.XXXXXX)
conf() { cat <<EOT
[eal]
memory_mb = 512
file_prefix = "lab-$1-$$"
[port]
device = "net_memif0,role=$2,id=0,socket=$work/memif.sock,socket-abstract=no"
ip = "$3/24"
mtu = 1500
[dataplane]
cores = [$4]
idle = "${IDLE:-yield}"
[mpa]
first_fpdu_delay_ms = 0
[log]
level = "warn"
EOT
[[ -n ${STATS:-} ]] && printf '[stats]\nfile = "%s"\ninterval_ms = 100\n' "$work/$1.stats"
}
conf a server 10.77.0.1 0 > $work/a.toml; conf b client 10.77.0.2 1 > $work/b.toml
T=${T:-write_lat}
run() { # bin args
  local bin=$1; shift
  timeout -k 5 60 $bin/iwarp-perf $T -d $work/a.toml "$@" > $work/s.out 2>$work/s.err & sp=$!
  for _ in $(seq 300); do grep -q "Waiting for client" $work/s.out 2>/dev/null && break; sleep 0.1; done
  timeout -k 5 60 $bin/iwarp-perf $T -d $work/b.toml "$@" 10.77.0.1 > $work/c.out 2>$work/c.err || { echo FAIL; tail -3 $work/c.err; }
  wait $sp
  grep -E '^ *[0-9]+ +[0-9]+' $work/c.out | tail -1 | awk '{printf "p50 %s p99 %s p99.9 %s max %s", $5, $8, $9, $4}'
}
export -f run; export work T
n=${#vars[@]}
for r in $(seq $R); do
  for k in $(seq 0 $((n-1))); do
    v=${vars[$(( (k + r - 1) % n ))]}; name=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; extra=""; [[ $rest == *:* ]] && extra=${rest#*:}
    q=$(quiet); echo "r$r $name $q $(flock /tmp/iwarp-e2e.lock bash -c "run $bin $ARGS $extra")"
  done
done
rm -rf $work /var/run/dpdk/lab-*-$$
