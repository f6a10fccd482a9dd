#!/bin/bash
# usage: lat-outliers.sh OUTDIR [iwarp-perf args...]   (root; under flock /tmp/iwarp-e2e.lock)
# One write_lat (default `write_lat -s 2 -n 100000`; TEST=send_lat etc.) between two embedded
# iwarp-perf over memif (server core 0, client core 1, as ab-memif.sh) with a kernel trace of
# both CPUs on the x86-tsc clock (ftrace: timer interrupts, IRQs, softirqs, hrtimers, context
# switches, wake-ups, page faults, syscalls), and both sides' --outliers (samples above
# OUTLIER_US, default 8 us half round trip) on the same clock. Then
# scripts/lat-outliers.py OUTDIR lays them side by side (issue #8, bar (b)'s p99.9).
# Environment: BIN (build dir, default target/release), IDLE (dataplane.idle, default yield),
#   EXTRA (more config lines), OUTLIER_US (8), EVENTS (override the ftrace event list),
#   NOTRACE=1 (outliers only, no kernel trace: what the trace itself costs).
set -uo pipefail
. "$(dirname "$0")/lib/memif.sh"
out=$1; shift
[[ $# -gt 0 ]] || set -- -s 2 -n 100000
T=${TEST:-write_lat}
BIN=${BIN:-target/release}
PERF=$(realpath "$BIN/iwarp-perf")
mkdir -p "$out"; out=$(realpath "$out"); rm -f "$out"/*.outliers
TR=/sys/kernel/tracing
EVENTS=${EVENTS:-"irq_vectors:local_timer_entry irq_vectors:local_timer_exit irq_vectors:reschedule_entry
irq_vectors:reschedule_exit irq_vectors:call_function_entry irq_vectors:call_function_exit
irq_vectors:call_function_single_entry irq_vectors:call_function_single_exit irq_vectors:irq_work_entry
irq_vectors:irq_work_exit irq:irq_handler_entry irq:irq_handler_exit irq:softirq_entry irq:softirq_exit
timer:hrtimer_expire_entry timer:hrtimer_expire_exit sched:sched_switch sched:sched_wakeup
exceptions:page_fault_user exceptions:page_fault_kernel raw_syscalls:sys_enter raw_syscalls:sys_exit"}
work=$(mktemp -d /tmp/lat-outliers.XXXXXX)
for s in a b; do
    memif_conf $s "lo-$s-$$" "$work" idle="${IDLE:-yield}" extra="${EXTRA:-}" > "$work/$s.toml"
done
trace_on() {
    echo 0 > $TR/tracing_on; echo nop > $TR/current_tracer; echo x86-tsc > $TR/trace_clock
    echo 65536 > $TR/buffer_size_kb; echo > $TR/set_event
    for e in $EVENTS; do echo "$e" >> $TR/set_event; done
    # Not the idle dataplane threads' sched_yield loops (millions before the test starts).
    for e in sys_enter sys_exit; do echo 'id != 24' > $TR/events/raw_syscalls/$e/filter; done
    echo > $TR/trace; echo 1 > $TR/tracing_on
}
trace_off() {
    echo 0 > $TR/tracing_on
    cat $TR/trace > "$out/trace.txt"
    echo > $TR/set_event; echo > $TR/trace
    for e in sys_enter sys_exit; do echo 0 > $TR/events/raw_syscalls/$e/filter; done
    echo local > $TR/trace_clock; echo 1408 > $TR/buffer_size_kb
}
common=(--outlier_us "${OUTLIER_US:-8}")
grep -E "^(cpu |intr|ctxt)" /proc/stat > "$out/stat.before"
timeout -k 5 90 "$PERF" "$T" -d "$work/a.toml" "${common[@]}" --outliers "$out/server.outliers" "$@" \
    > "$out/server.out" 2> "$out/server.err" & sp=$!
for _ in $(seq 300); do grep -q "Waiting for client" "$out/server.out" 2>/dev/null && break; sleep 0.1; done
[[ -n ${NOTRACE:-} ]] || trace_on
timeout -k 5 90 "$PERF" "$T" -d "$work/b.toml" "${common[@]}" --outliers "$out/client.outliers" "$@" 10.77.0.1 \
    > "$out/client.out" 2> "$out/client.err" || { echo FAIL; tail -3 "$out/client.err"; }
[[ -n ${NOTRACE:-} ]] || trace_off
wait $sp
grep -E "^(cpu |intr|ctxt)" /proc/stat > "$out/stat.after"
echo "$PERF $T $* (IDLE=${IDLE:-yield} EXTRA=${EXTRA:-})" > "$out/command.txt"
grep -E '^ *[0-9]+ +[0-9]+' "$out/client.out" | tail -1
rm -rf "$work" /var/run/dpdk/lo-*-$$
