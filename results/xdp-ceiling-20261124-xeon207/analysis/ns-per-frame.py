# Leaf symbols in ns per frame: the testpmd generator's CPU (perf script -F cpu,tid,time,ip,sym of
# profile-ceiling/softirq-1514.r1, at /tmp/ceil.script) against our sender's thread during the transfer
# (perf script -F tid,time,ip,sym of profile-ab/plain.r1, at /tmp/plain.script); frame counts from the runs.
import collections
def load(path, keep):
    out = collections.Counter(); n = 0; cur = None; chain = []
    def flush():
        nonlocal n
        if cur and keep(cur, chain):
            n += 1; out[chain[0] if chain else '?'] += 1
    for l in open(path):
        if not l.strip():
            flush(); cur = None; chain = []; continue
        if not l.startswith('\t'): cur = l.split(); chain = []
        else:
            p = l.split(None, 1); chain.append(p[1].strip() if len(p) > 1 else '?')
    flush()
    return out, n
# ceiling: CPU 1 samples (header: tid [cpu] time:)
c, cn = load('/tmp/ceil.script', lambda h, ch: h[1] == '[001]')
o, on = load('/tmp/plain.script', lambda h, ch: h[0] == '18837' and 'bench::perf::stats::bw' not in ch)
cf = 3.751e6 * 4.0 / 4.06; of = 40000 * 65536 / 1428
us = 250.0  # us per sample at 4000 Hz
print(f"ceiling CPU1: {cn} samples = {cn*us/cf*1e3:.0f} ns/frame;  ours sender: {on} samples = {on*us/of*1e3:.0f} ns/frame")
keys = set(list(c)[:0]) | set(k for k, _ in c.most_common(30)) | set(k for k, _ in o.most_common(30))
rows = sorted(keys, key=lambda k: -(o[k]*us/of - c[k]*us/cf))
print(f"{'symbol':60s} {'ceiling ns/frame':>16s} {'ours ns/frame':>14s}")
for k in rows: print(f"{k[:60]:60s} {c[k]*us/cf*1e3:16.0f} {o[k]*us/of*1e3:14.0f}")
