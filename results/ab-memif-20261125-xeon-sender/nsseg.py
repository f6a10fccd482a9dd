import sys, re, statistics, collections
def load(p):
    d, sec = {}, ""
    for l in open(p):
        l = l.strip()
        if l.startswith("["): sec = l.strip("[]"); continue
        if " = " in l:
            k, v = l.split(" = ")
            try: d[sec + "." + k] = int(v)
            except ValueError: pass
    return d
rows = collections.defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        m = re.match(r"((\w+)\.(\w+)\.r(\d+)) c2c\[.*?\]\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)", l)
        if not m: continue
        tag, var, bw = m.group(1), m.group(3), float(m.group(5))
        try: b = load(f"out/{tag}.b.stats"); a = load(f"out/{tag}.a.stats")
        except OSError: continue
        segs = b["lcore.0.tcp.segs_out"]
        rows[var].append((bw, b["lcore.0.busy_ns"]/segs, a["lcore.0.busy_ns"]/segs, b["lcore.0.tx_short"]/b["lcore.0.tx_bursts"]))
for v, x in rows.items():
    med = lambda i: statistics.median(r[i] for r in x)
    print(f"{v:6s} n={len(x):2d} Gb/s {med(0):6.2f}  sender ns/seg {med(1):4.0f} [{min(r[1] for r in x):.0f}-{max(r[1] for r in x):.0f}]  receiver ns/seg {med(2):4.0f} [{min(r[2] for r in x):.0f}-{max(r[2] for r in x):.0f}]  short bursts {med(3):.0%}")
