#!/bin/bash
# usage: spin-gaps.sh SECONDS OUTDIR [THRESHOLD_CYCLES]  (root, under flock /tmp/iwarp-e2e.lock): scripts/spin-gaps.c
# (one thread pinned per CPU 0/1 spinning on rdtsc, gaps above the threshold, default 2596 cycles = 1 us
# at 2.6 GHz) under an ftrace of both CPUs on the x86-tsc clock; then scripts/spin-gaps.py OUTDIR classes
# each gap by the kernel events in it (issue #8, bar (b): what the guest takes from a spinning thread).
set -eu
out=$2; mkdir -p "$out"; TR=/sys/kernel/tracing
cc -O2 -pthread -o /tmp/spin-gaps "$(dirname "$0")/spin-gaps.c"
echo 0 > $TR/tracing_on; echo x86-tsc > $TR/trace_clock; echo 65536 > $TR/buffer_size_kb; echo > $TR/set_event
for e in irq_vectors:local_timer_entry irq_vectors:local_timer_exit irq_vectors:reschedule_entry irq_vectors:call_function_entry irq_vectors:call_function_single_entry irq_vectors:irq_work_entry irq:irq_handler_entry irq:softirq_entry irq:softirq_exit timer:hrtimer_expire_entry sched:sched_switch sched:sched_wakeup exceptions:page_fault_user exceptions:page_fault_kernel; do echo $e >> $TR/set_event; done
echo > $TR/trace; echo 1 > $TR/tracing_on
/tmp/spin-gaps $1 ${3:-2596} > "$out/gaps.txt"
echo 0 > $TR/tracing_on; cat $TR/trace > "$out/trace.txt"; echo > $TR/set_event; echo > $TR/trace; echo local > $TR/trace_clock; echo 1408 > $TR/buffer_size_kb
python3 "$(dirname "$0")/spin-gaps.py" "$out"
