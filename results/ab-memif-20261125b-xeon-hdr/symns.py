# symns.py SIDE VAR:TAG,TAG ... : per-symbol ns per segment: share of the process samples x the sender's wall time per segment (its TCP busy time / segments; the dataplane thread spins, so its samples cover that time) for the sender; x busy ns per segment for the receiver. Mean over each variant's runs.
# that side's busy ns per segment in the same run), mean over each variant's runs.
import subprocess, sys, re, collections
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
def prof(f):
    out = subprocess.run(["perf","report","-i",f,"--no-children","--sort","dso,sym","--stdio","-q"],capture_output=True,text=True).stdout
    d=collections.Counter()
    for l in out.splitlines():
        m=re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)",l)
        if m:
            sym=m.group(3).strip()
            if m.group(2).startswith("librte_net_memif"): sym="[memif]"
            elif sym.startswith("0x"): sym=f"[{m.group(2)}]"
            d[sym]+=float(m.group(1))
    return d
side = sys.argv[1]  # cli (sender) or srv
st = "b" if side == "cli" else "a"
vars_ = []
for a in sys.argv[2:]:
    v, tags = a.split(":"); tags = tags.split(",")
    acc = collections.Counter(); tot = 0
    for t in tags:
        b = load(f"out/{t}.b.stats"); s = load(f"out/{t}.{st}.stats")
        ns = (b["lcore.0.tcp.busy_ns"] if side == "cli" else s["lcore.0.busy_ns"]) / b["lcore.0.tcp.segs_out"]
        tot += ns
        for k, x in prof(f"out/{t}.{side}.perf").items(): acc[k] += x * ns / 100
    vars_.append((v, {k: x/len(tags) for k, x in acc.items()}, tot/len(tags)))
keys = sorted(set().union(*[d for _, d, _ in vars_]), key=lambda k: -vars_[0][1].get(k, 0))
print(f"{'symbol':70s} " + " ".join(f"{v:>8s}" for v, _, _ in vars_))
print(f"{'busy ns/seg':70s} " + " ".join(f"{t:8.1f}" for _, _, t in vars_))
for k in keys[:int(__import__('os').environ.get('TOP', 30))]:
    print(f"{k[:70]:70s} " + " ".join(f"{d.get(k,0):8.1f}" for _, d, _ in vars_))
