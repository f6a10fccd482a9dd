#!/usr/bin/env bash
# prof-rot.sh PREFIX ROUNDS name=BIN ...  perf-recorded runs (CRC on, -D 4), rotating order.
cd /work/wt/sender-tmp
P=$1 R=$2; shift 2
vs=("$@")
for r in $(seq $R); do
  n=${#vs[@]}; order=()
  for i in $(seq 0 $((n-1))); do order+=("${vs[$(( (i + r) % n ))]}"); done
  cmds=""
  for v in "${order[@]}"; do name=${v%%=*}; bin=${v#*=}
    cmds+="./quiet.sh; PERF=1 PERF_DELAY=1.2 PERF_DUR=1.5 ./prof-memif.sh $P.$name.r$r $bin '-s 65536 -D 4 --report_gbits --crc on'; "; done
  flock /tmp/iwarp-e2e.lock bash -c "$cmds"
  sleep 2
done
