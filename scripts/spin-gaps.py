#!/usr/bin/env python3
"""usage: spin-gaps.py DIR -- scripts/spin-gaps.sh's gaps (a spinning thread per CPU) against the
kernel trace: per CPU and class (`tick`: the scheduler tick's hrtimer in the gap; `irq:...`: other
interrupts; `switch`; `fault`; `none`: no guest kernel event at all, i.e. the host), count, rate,
duration; the period of the invisible gaps and their phase after the tick; whether they hit both
CPUs at once; the skew of the two CPUs' ticks. The TSC rate is this machine's (2.596 GHz)."""
import re,sys,bisect
from collections import Counter,defaultdict
d=sys.argv[1]; hz=2596117878
LINE=re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+): (\w+): ?(.*)$")
ev=defaultdict(list)
for l in open(d+'/trace.txt'):
    m=LINE.match(l)
    if m: ev[int(m.group(3))].append((int(m.group(4)),m.group(5),m.group(6),m.group(1)))
gaps=[tuple(map(int,l.split())) for l in open(d+'/gaps.txt')]
t0=min(g[1] for g in gaps); t1=max(g[2] for g in gaps); secs=(t1-t0)/hz
by=defaultdict(list); comms=Counter()
for cpu,s,e in gaps:
    es=[x for x in ev[cpu] if s<=x[0]<=e]
    names={x[1] for x in es}; k='none'
    for x in es:
        if x[1]=='hrtimer_expire_entry' and ('tick_nohz' in x[2] or 'tick_sched' in x[2]): k='tick'; break
    else:
        if names & {'irq_handler_entry','call_function_entry','call_function_single_entry','reschedule_entry','irq_work_entry','local_timer_entry'}: k='irq:'+','.join(sorted(n for n in names if n.endswith('entry')))
        elif 'sched_switch' in names: k='switch'; comms.update(x[2].split('next_comm=')[1].split()[0] for x in es if x[1]=='sched_switch')
        elif names & {'page_fault_user','page_fault_kernel'}: k='fault'
    by[(cpu,k)].append((e-s)/hz*1e6)
print(f"{secs:.2f} s, gaps > threshold: {len(gaps)}")
for k in sorted(by):
    v=sorted(by[k]); print(k, len(v), f"{len(v)/secs:.0f}/s", 'median %.2f'%v[len(v)//2], 'p90 %.2f'%v[int(len(v)*.9)], 'max %.1f'%v[-1], '>6us:',sum(x>6 for x in v), '>10us:', sum(x>10 for x in v))
print(comms.most_common(5))
# periodicity of invisible gaps > 10 us, per CPU
for cpu in (0,1):
    ts=[]
    for c,s,e in gaps:
        if c!=cpu or (e-s)/hz*1e6<=10: continue
        if any(s<=x[0]<=e for x in ev[cpu]): continue
        ts.append(s)
    iv=[ (b-a)/hz*1e3 for a,b in zip(ts,ts[1:])]
    iv.sort()
    if iv: print('cpu',cpu,'invisible >10us:',len(ts),'interval ms median %.3f p10 %.3f p90 %.3f'%(iv[len(iv)//2],iv[len(iv)//10],iv[int(len(iv)*.9)]))
    # phase relative to this CPU's ticks
    ticks=[x[0] for x in ev[cpu] if x[1]=='hrtimer_expire_entry' and 'tick' in x[2]]
    ph=[]
    for t in ts:
        i=bisect.bisect_right(ticks,t)-1
        if i>=0: ph.append(round((t-ticks[i])/hz*1e3,1))
    print(' ms after the last tick:',Counter(ph).most_common(8))
for cpu in (0,1):
    v=sorted((e-s)/hz*1e6 for c,s,e in gaps if c==cpu and (e-s)/hz*1e6>6 and not any(s<=x[0]<=e for x in ev[cpu]))
    print('cpu',cpu,'invisible >6us durations: n',len(v),'median %.2f p10 %.2f p90 %.2f'%(v[len(v)//2],v[len(v)//10],v[int(len(v)*.9)]))
# simultaneity of invisible gaps across CPUs
inv={c:[(s,e) for cc,s,e in gaps if cc==c and (e-s)/hz*1e6>6 and not any(s<=x[0]<=e for x in ev[c])] for c in (0,1)}
st1=[s for s,e in inv[1]]; both=0
for s,e in inv[0]:
    i=bisect.bisect_left(st1,s-int(50e-6*hz))
    if i<len(st1) and abs(st1[i]-s)<50e-6*hz: both+=1
print('CPU0 invisible gaps with a CPU1 one within 50 us:',both,'of',len(inv[0]))
t0s=[x[0] for x in ev[0] if x[1]=='hrtimer_expire_entry' and 'tick' in x[2]]; t1s=[x[0] for x in ev[1] if x[1]=='hrtimer_expire_entry' and 'tick' in x[2]]
d=[min(abs(a-b) for b in t1s[max(0,i-2):i+3])/hz*1e6 for i,a in enumerate(t0s[:200])]
d.sort(); print('tick skew CPU0 vs CPU1 us: median %.2f max %.2f'%(d[len(d)//2],d[-1]))
