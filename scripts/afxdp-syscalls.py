#!/usr/bin/env python3
"""Per-run mechanics of bar (c) from an `ab-afxdp.sh` directory run with PROFILE=1 and
PROFILE_EVENTS=syscalls:sys_enter_sendto,syscalls:sys_enter_sched_yield,
syscalls:sys_enter_recvfrom,syscalls:sys_enter_poll,context-switches: for each variant and
round, write_bw Gb/s, the sender's retransmissions, the receiver's ACK frames, frames (both
directions) per TX kick (`sendto`), sched_yield / recvfrom / context switches per frame (perf
stat -a: the whole machine), TX bursts held (`tx_held`) and the two loops' iterations.
Usage: scripts/afxdp-syscalls.py DIR"""
import glob, json, re, sys, os, statistics
out = sys.argv[1]
rows = {}
for d in sorted(glob.glob(f"{out}/*.r*")):
    if not os.path.isdir(d): continue
    name = os.path.basename(d)
    v = name.rsplit(".r", 1)[0]
    try: bw = json.load(open(f"{d}/write_bw_64k_afxdp.r1.json"))["results"]["BW_average"]
    except Exception: continue
    st = {}
    for p in glob.glob(f"{d}/*.perf.stat"):
        for l in open(p):
            m = re.match(r"\s*([\d,]+)\s+(\S+)", l)
            if m: st[m.group(2).split(":")[-1]] = int(m.group(1).replace(",", ""))
    def stat(side, key):
        for p in glob.glob(f"{d}/*.{side}.stats"):
            for l in open(p):
                if l.startswith(key + " ="): return int(l.split("=")[1])
        return 0
    frames = stat("xb", "tx_packets") + stat("xa", "tx_packets")
    r = dict(bw=bw, frames=frames, rtx=stat("xb", "retransmissions"), acks=stat("xa", "tx_packets"),
             held=stat("xb", "tx_held") + stat("xa", "tx_held"),
             loops_s=stat("xb", "loops"), loops_r=stat("xa", "loops"), **st)
    rows.setdefault(v, []).append(r)
for v, rs in rows.items():
    print(f"== {v}")
    for r in rs:
        f = r["frames"] or 1
        print(f"  bw {r['bw']:.2f} rtx {r['rtx']:5d} acks {r['acks']:6d} frames/sendto {f / max(r.get('sys_enter_sendto', 1), 1):5.1f} "
              f"yield/frame {r.get('sys_enter_sched_yield', 0) / f:5.2f} recvfrom/frame {r.get('sys_enter_recvfrom', 0) / f:5.2f} "
              f"cs/frame {r.get('context-switches', 0) / f:5.2f} held {r['held']} loops s/r {r['loops_s']}/{r['loops_r']}")
    for k in ("bw",):
        print(f"  median {k} {statistics.median(x[k] for x in rs):.2f}")
