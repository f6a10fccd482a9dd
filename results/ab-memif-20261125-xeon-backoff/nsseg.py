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
verbose = "-v" in sys.argv
for f in [a for a in sys.argv[1:] if a != "-v"]:
    for l in open(f):
        m = re.match(r"((\w+)\.(\w+)\.r(\d+)) c2c\[c2c RTT ([\d.]+) ns.*?\]\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)", l)
        if not m: continue
        tag, var, c2c, bw = m.group(1), m.group(3), float(m.group(5)), float(m.group(6))
        try: b = load(f"out/{tag}.b.stats"); a = load(f"out/{tag}.a.stats")
        except OSError: continue
        segs = b["lcore.0.tcp.segs_out"]
        r = (bw, b["lcore.0.busy_ns"]/segs, a["lcore.0.busy_ns"]/segs, b["lcore.0.tx_packets"]/b["lcore.0.tx_bursts"],
             b.get("lcore.0.tx_empty",0)/b["lcore.0.tx_bursts"], b.get("lcore.0.tx_held",0)/b["lcore.0.loops"], segs/max(b["lcore.0.tcp.acks_in"],1),
             b.get("lcore.0.tcp.sndbuf_limited_ns",0)/1e6, c2c, a["lcore.0.busy_ns"]/1e9/ (b["lcore.0.tcp.busy_ns"]/1e9), b.get("lcore.0.tx_backlog_sum",0)/b["lcore.0.tx_bursts"])
        rows[var].append(r)
        if verbose:
            print(f"{tag:16s} c2c {c2c:5.0f} {bw:6.2f} Gb/s snd {r[1]:4.0f} rcv {r[2]:4.0f} ns/seg rcv-busy {r[9]:.0%} tx/burst {r[3]:5.1f} empty {r[4]:.0%} held/loop {r[5]:.0%} segs/ack {r[6]:4.0f} sndbuf-lim {r[7]:5.0f}ms backlog {r[10]:5.0f}")
for v, x in rows.items():
    med = lambda i: statistics.median(r[i] for r in x)
    print(f"{v:6s} n={len(x):2d} Gb/s {med(0):6.2f} [{min(r[0] for r in x):.2f}-{max(r[0] for r in x):.2f}] snd ns/seg {med(1):4.0f} rcv ns/seg {med(2):4.0f} tx/burst {med(3):5.1f} empty {med(4):.0%} held {med(5):.0%} segs/ack {med(6):.0f} backlog {med(10):.0f} fast(>=22) {sum(r[0]>=22 for r in x)}/{len(x)}")
