import glob, json, statistics, sys, os, re
R = sys.argv[1]
def med(v): return statistics.median(v) if v else float('nan')
vals = {}
for d in sorted(glob.glob(f"{R}/ab.s*/*.r1")):
    sec = d.split('/')[-2]; name = os.path.basename(d).rsplit('.r', 1)[0]
    for test in ("write_bw_64k_afxdp", "iperf3", "iperf3_nogso"):
        p = f"{d}/{test}.r1.json"
        try: j = json.load(open(p))
        except (OSError, ValueError): continue
        v = j["end"]["sum_received"]["bits_per_second"]/1e9 if test.startswith("iperf3") else j["results"]["BW_average"]
        key = (name, test) if test.startswith("write") else ("all", test)
        vals.setdefault(key, []).append((sec, round(v, 2)))
for k, v in sorted(vals.items()):
    print(k, f"median {med([x[1] for x in v]):.2f}", v)
