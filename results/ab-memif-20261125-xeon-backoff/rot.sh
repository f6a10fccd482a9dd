#!/usr/bin/env bash
# rot.sh PREFIX ROUNDS name=BIN:backoff_ns ...   rotating order per round, one lock per round
cd /work/wt/backoff-tmp
P=$1 R=$2; shift 2
vs=("$@")
for r in $(seq $R); do
  n=${#vs[@]}; order=()
  for i in $(seq 0 $((n-1))); do order+=("${vs[$(( (i + r) % n ))]}"); done
  (( r % 2 == 0 )) && order=($(printf '%s\n' "${order[@]}" | tac))
  cmds=""
  for v in "${order[@]}"; do name=${v%%=*}; spec=${v#*=}; bin=${spec%%:*}; bo=${spec#*:}; IFS=: read -r bo rs rxb pz <<< "$bo"
    cmds+="./quiet.sh; IWARP_TX_PAUSE=$pz RSIZE=$rs IWARP_RX_BURSTS=$rxb IWARP_TX_BACKOFF_NS=$bo ./prof-memif.sh $P.$name.r$r /work/wt/backoff-tmp/$bin '${ARGS:--s 65536 -D 3 --report_gbits --crc on}'; "; done
  flock /tmp/iwarp-e2e.lock bash -c "$cmds"
  sleep 1
done
