import subprocess, sys, re
def prof(f):
    out = subprocess.run(["perf","report","-i",f,"--no-children","--sort","dso,sym","--stdio","-q"],capture_output=True,text=True).stdout
    d={}
    for l in out.splitlines():
        m=re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)",l)
        if m:
            sym=m.group(3).strip()
            if m.group(2).startswith("librte_net_memif"): sym="[memif]"
            if sym.startswith("0x") : sym=f"[{m.group(2)}]"
            d[sym]=d.get(sym,0)+float(m.group(1))
    return d
on, off, nson, nsoff = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
a, b = prof(on), prof(off)
rows=[]
for k in set(a)|set(b):
    x, y = a.get(k,0)*nson/100, b.get(k,0)*nsoff/100
    rows.append((x-y,k,a.get(k,0),b.get(k,0),x,y))
rows.sort(key=lambda r:-abs(r[0]))
print(f"total ns/seg on {nson} off {nsoff} diff {nson-nsoff:.0f}")
for r in rows[:int(sys.argv[5]) if len(sys.argv)>5 else 25]:
    print(f"{r[0]:+6.1f} ns  on {r[2]:5.2f}% ({r[4]:5.1f} ns)  off {r[3]:5.2f}% ({r[5]:5.1f} ns)  {r[1][:90]}")
