#!/usr/bin/env python3
"""usage: lat-outliers.py DIR   -- what happened in the kernel during each slow latency sample.

DIR is scripts/lat-outliers.sh's output: client.outliers / server.outliers (iwarp-perf
--outliers: samples above the threshold with their TSC bounds) and trace.txt (ftrace on the
x86-tsc clock). Each client outlier is put in one class, by the first of these found in its
window on either CPU: `park` (a park timeout of a dataplane thread expired: hrtimer_wakeup),
`tick` (the scheduler tick: tick_nohz_handler / tick_sched_timer), `other-irq` (another
interrupt or IPI), `switch` (a context switch to another task), `fault` (a page fault), `none`
(no kernel event on either CPU). Also: how many of the run's ticks and park wake-ups fell in
an outlier window, and the timer interrupt's duration (entry to exit).
"""
import bisect
import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+): (\w+): ?(.*)$")
TICK = ("tick_nohz_handler", "tick_sched_timer")


def read_outliers(path):
    head, rows = {}, []
    for line in open(path):
        if line.startswith("#"):
            f = line.split()[1:]
            head = {f[i]: float(f[i + 1]) for i in range(0, len(f) - 1, 2)}
        elif line.strip():
            rows.append(tuple(int(x) for x in line.split()))
    return head, rows


def read_trace(path, lo, hi):
    ev = []
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        ts = int(m.group(4))
        if lo <= ts <= hi:
            ev.append((ts, int(m.group(3)), m.group(1), m.group(5), m.group(6)))
    ev.sort()
    return ev


def kind(e):
    name, args = e[3], e[4]
    if name == "hrtimer_expire_entry":
        f = re.search(r"function=(\S+)", args).group(1)
        return "park" if f == "hrtimer_wakeup" else "tick" if f in TICK else "other-irq"
    if name in ("irq_handler_entry", "reschedule_entry", "call_function_entry",
                "call_function_single_entry", "irq_work_entry"):
        return "other-irq"
    if name == "sched_switch" and "next_comm=dp" not in args and "prev_comm=dp" not in args:
        return "switch"
    if name.startswith("page_fault"):
        return "fault"
    return None


ORDER = ["park", "tick", "other-irq", "switch", "fault"]


def main(d):
    head, out = read_outliers(f"{d}/client.outliers")
    hz = head.get("tsc_hz", 1e9)
    first, last = int(head["tsc_first"]), int(head["tsc_last"])
    ev = read_trace(f"{d}/trace.txt", first, last)
    ts = [e[0] for e in ev]
    secs = (last - first) / hz
    print(f"run: {int(head['samples'])} samples in {secs:.3f} s, {len(out)} above "
          f"{head['threshold_ns'] / 1000:g} us")
    by = defaultdict(list)
    for _, s, e, ns in out:
        kinds = {kind(x) for x in ev[bisect.bisect_left(ts, s):bisect.bisect_right(ts, e)]}
        k = next((k for k in ORDER if k in kinds), "none")
        if k == "park" and "tick" in kinds:
            k = "tick+park"
        by[k].append(ns)
    for k in ["tick+park"] + ORDER + ["none"]:
        v = sorted(by.get(k, []))
        if v:
            print(f"  {k:9} {len(v):5}  median {v[len(v) // 2] / 1000:6.2f} us  "
                  f"max {v[-1] / 1000:7.2f} us")
    starts = [o[1] for o in out]

    def in_outlier(t):
        i = bisect.bisect_right(starts, t) - 1
        return i >= 0 and out[i][1] <= t <= out[i][2]

    for k in ("tick", "park"):
        hits = [e for e in ev if e[3] == "hrtimer_expire_entry" and kind(e) == k]
        per_cpu = Counter(e[1] for e in hits)
        inside = sum(in_outlier(e[0]) for e in hits)
        print(f"{k} expiries: {len(hits)} ({dict(sorted(per_cpu.items()))} per CPU, "
              f"{len(hits) / secs:.0f}/s), {inside} inside an outlier")
    # Park wake-ups served by a tick's interrupt: same interrupt as a tick expiry.
    irq_of, cur = {}, {}
    for e in ev:
        if e[3] == "local_timer_entry":
            cur[e[1]] = e[0]
        elif e[3] == "hrtimer_expire_entry":
            irq_of.setdefault((e[1], cur.get(e[1])), set()).add(kind(e))
    parks = [v for v in irq_of.values() if "park" in v]
    print(f"park wake-ups in a tick's interrupt: {sum('tick' in v for v in parks)} of {len(parks)}")
    dur, cur = [], {}
    for e in ev:
        if e[3] == "local_timer_entry":
            cur[e[1]] = e[0]
        elif e[3] == "local_timer_exit" and e[1] in cur:
            dur.append((e[0] - cur.pop(e[1])) / hz * 1e6)
    if dur:
        dur.sort()
        print(f"timer interrupt entry->exit (traced): {len(dur)}, median {dur[len(dur) // 2]:.2f} us, "
              f"p90 {dur[int(len(dur) * 0.9)]:.2f} us")
    faults = Counter(e[2] for e in ev if e[3] == "page_fault_user")
    print(f"user page faults in the run: {dict(faults)}")


if __name__ == "__main__":
    main(sys.argv[1])
