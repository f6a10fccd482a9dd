#!/usr/bin/env bash
# Wait up to 300 s until no rustc or qemu runs (others' builds and VMs); note it if still busy.
for _ in $(seq 300); do
  pgrep -x rustc >/dev/null || pgrep -f qemu-system >/dev/null || exit 0
  sleep 1
done
echo "quiet: still busy" >&2
