import sys, collections
path = sys.argv[1]; tids = sys.argv[2].split(',')
b = collections.defaultdict(collections.Counter); cur=None; chain=[]
def flush():
    if cur: b[int(cur[1]*4)/4][cur[0] + (':send' if 'xsk_sendmsg' in chain else '')] += 1
for l in open(path):
    if not l.strip(): flush(); cur=None; chain=[]; continue
    if not l.startswith('\t'): p=l.split(); cur=(p[0], float(p[1].rstrip(':'))); chain=[]
    else:
        p=l.split(None,1); chain.append(p[1].strip() if len(p)>1 else '?')
flush()
for t in sorted(b): print(f"{t:.2f}", " ".join(f"{k}={v}" for k,v in sorted(b[t].items()) if k.split(':')[0] in tids))
