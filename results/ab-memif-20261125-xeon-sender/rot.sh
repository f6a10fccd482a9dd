#!/usr/bin/env bash
# rot.sh PREFIX ROUNDS name=BIN:crc ...   rotating order per round, one lock per round; before
# each run, waits (up to 120 s) until no compiler or VM of another session runs.
cd /work/wt/sender-tmp
P=$1 R=$2; shift 2
vs=("$@")
for r in $(seq $R); do
  n=${#vs[@]}; order=()
  for i in $(seq 0 $((n-1))); do order+=("${vs[$(( (i + r) % n ))]}"); done
  (( r % 2 == 0 )) && order=($(printf '%s\n' "${order[@]}" | tac))
  cmds=""
  for v in "${order[@]}"; do name=${v%%=*}; spec=${v#*=}; bin=${spec%%:*}; crc=${spec#*:}
    cmds+="./quiet.sh; ./prof-memif.sh $P.$name.r$r $bin '-s 65536 -D 3 --report_gbits --crc $crc'; "; done
  flock /tmp/iwarp-e2e.lock bash -c "$cmds"
  sleep 2
done
