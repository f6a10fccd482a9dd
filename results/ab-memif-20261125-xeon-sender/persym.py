# persym.py TAG... : the sender's ns per segment (wall time per segment x share) of chosen symbols, per run
import sys, re
sys.argv, tags = sys.argv[:1], sys.argv[1:]
exec(open("symns.py").read().split("side = sys.argv[1]")[0])
syms = ["read_fused", "copy_run_fpdu", "TxLog::find", "shim_pktmbuf_alloc", "shim_pktmbuf_alloc_bulk", "shim_pktmbuf_append", "shim_pktmbuf_trim", "Netstack::emit", "copy_crc", "ones_complement", "[memif]"]
print(f"{'run':14s} {'wall/seg':>8s} " + " ".join(f"{s[-12:]:>12s}" for s in syms) + f" {'fpdu-arith':>10s} {'mbuf':>6s}")
for t in tags:
    b = load(f"out/{t}.b.stats"); ns = b["lcore.0.tcp.busy_ns"] / b["lcore.0.tcp.segs_out"]
    p = prof(f"out/{t}.cli.perf")
    def get(s):
        return sum(v for k, v in p.items() if (k == s if s in ("shim_pktmbuf_alloc", "[memif]") else s in k)) * ns / 100
    vals = [get(s) for s in syms]
    print(f"{t:14s} {ns:8.0f} " + " ".join(f"{v:12.1f}" for v in vals) + f" {sum(vals[:3]):10.1f} {sum(vals[3:7]):6.1f}")
