import sys, re, glob
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
for tag in sys.argv[1:]:
    a = load(f"out/{tag}.a.stats"); b = load(f"out/{tag}.b.stats")
    segs = b["lcore.0.tcp.segs_out"]
    secs = b["lcore.0.tcp.busy_ns"] / 1e9  # sender tcp busy: data queued or in flight
    print(f"{tag}: segs {segs} tcp-busy {secs:.2f}s  snd busy {b['lcore.0.busy_ns']/1e9/secs:.0%} idle-loops {b['lcore.0.idle_loops']/b['lcore.0.loops']:.0%} ns/seg snd {b['lcore.0.busy_ns']/segs:.0f} rcv {a['lcore.0.busy_ns']/segs:.0f}"
          f" | rcv busy {a['lcore.0.busy_ns']/1e9/secs:.0%} idle-loops {a['lcore.0.idle_loops']/a['lcore.0.loops']:.0%} rx/poll {a['lcore.0.rx_packets']/max(a['lcore.0.rx_bursts'],1):.1f}"
          f" acks {b['lcore.0.tcp.acks_in']} segs/ack {segs/max(b['lcore.0.tcp.acks_in'],1):.0f} tx/burst {b['lcore.0.tx_packets']/b['lcore.0.tx_bursts']:.1f} tx_short {b['lcore.0.tx_short']} cwnd-lim {b.get('lcore.0.tcp.cwnd_limited_ns',0)/1e6:.0f}ms app-lim {b.get('lcore.0.tcp.app_limited_ns',0)/1e6:.0f}ms sndbuf-lim {b.get('lcore.0.tcp.sndbuf_limited_ns',0)/1e6:.0f}ms rwnd {b.get('lcore.0.tcp.rwnd_limited_ns',0)/1e6:.0f}ms")
