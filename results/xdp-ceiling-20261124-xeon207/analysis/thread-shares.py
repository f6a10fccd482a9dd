import sys, collections
# perf script -F tid,time,ip,sym: per thread, within a time window [t0, t1] (optional), samples
# split by top-level category
path = sys.argv[1]; tids = sys.argv[2].split(','); t0 = float(sys.argv[3]) if len(sys.argv) > 3 else 0; t1 = float(sys.argv[4]) if len(sys.argv) > 4 else 1e18
samples = []
cur = None
for l in open(path):
    if not l.strip():
        if cur: samples.append(cur)
        cur = None; continue
    if not l.startswith('\t'):
        p = l.split(); cur = (p[0], float(p[1].rstrip(':')), [])
    else:
        p = l.split(None, 1)
        cur[2].append(p[1].strip() if len(p) > 1 else '?')
if cur: samples.append(cur)
times = [s[1] for s in samples if s[0] in tids]
print("tids", tids, "window", min(times), max(times))
for tid in tids:
    ss = [s for s in samples if s[0] == tid and t0 <= s[1] <= t1]
    n = len(ss)
    if not n: continue
    cat = collections.Counter(); selfc = collections.Counter()
    for _, _, st in ss:
        chain = st
        leaf = chain[0] if chain else '?'
        selfc[leaf] += 1
        names = set(chain)
        if 'xsk_sendmsg' in names:
            c = 'sendto (xsk TX kick)'
            if 'veth_poll' in names: c += ': receiving veth NAPI (XDP, copies into the peer UMEM)'
            else: c += ': skb build, veth_xmit'
        elif any('recvfrom' in x or 'recvmsg' in x for x in names): c = 'recvfrom'
        elif any('sched_yield' in x for x in names): c = 'sched_yield'
        elif any(x.startswith('asm_') or 'irq' in x for x in names) and chain and chain[0].startswith(('irq', 'asm_', '__irq', '__sysvec', 'sysvec')): c = 'interrupts'
        elif any('do_syscall_64' in x for x in names): c = 'other syscalls'
        elif 'bench::perf::stats::bw' in names: c = 'bench::perf::stats::bw (after the transfer)'
        else: c = 'user space (ours, DPDK PMD)'
        cat[c] += 1
    print(f"== tid {tid}: {n} samples")
    for c, k in cat.most_common(): print(f"   {k / n:6.1%}  {c}")
    print("   top self:")
    for c, k in selfc.most_common(25): print(f"     {k / n:6.1%}  {c}")
