#!/usr/bin/env bash
# Wait up to 20 s until no rustc, qemu or other iwarp-perf runs (others' builds and VMs).
for _ in $(seq 20); do
  pgrep -x rustc >/dev/null || pgrep -f qemu-system >/dev/null || pgrep -x iwarp-perf >/dev/null || exit 0
  sleep 1
done
echo "quiet: still busy: $(pgrep -xa rustc | head -1 | cut -c1-60) $(pgrep -fa qemu-system | head -1 | cut -c1-60)"
