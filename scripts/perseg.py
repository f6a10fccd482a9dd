#!/usr/bin/env python3
"""Per-segment cost of each side of scripts/prof-memif.sh runs (BENCHMARKS.md §4).

  perseg.py summary OUT TAG...                 each run: Gb/s-relevant counts from the stats
                                               files, busy ns per TCP segment of both sides
  perseg.py symbols cli|srv OUT NAME:TAG,TAG... [NAME:TAG,...]
                                               per-symbol ns per segment, mean over each
                                               variant's runs (needs PERF=1 runs)

Per-symbol cost is the symbol's share of the process's perf samples times the side's time per
segment: for the sender (cli, the client of write_bw) its wall time while TCP had data queued or in
flight (`tcp.busy_ns`) per segment sent; for the receiver (srv) its dataplane busy time per
segment. The dataplane thread spins, so its samples cover that time. memif's PMD symbols are
summed as `[memif]`; unnamed addresses by their DSO. TOP (environment, 30) rows are printed.
"""

import collections
import os
import re
import subprocess
import sys


def stats(path):
    """A stats file's `section.key = integer` pairs."""
    d, sec = {}, ""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                sec = line.strip("[]")
            elif " = " in line:
                k, v = line.split(" = ", 1)
                try:
                    d[f"{sec}.{k}"] = int(v)
                except ValueError:
                    pass
    return d


def load(out, tag):
    return stats(f"{out}/{tag}.a.stats"), stats(f"{out}/{tag}.b.stats")


def summary(out, tags):
    for tag in tags:
        a, b = load(out, tag)
        segs = b["lcore.0.tcp.segs_out"]
        secs = b["lcore.0.tcp.busy_ns"] / 1e9
        acks = max(b["lcore.0.tcp.acks_in"], 1)
        print(
            f"{tag}: segs {segs} tcp-busy {secs:.2f}s"
            f" | sender busy {b['lcore.0.busy_ns'] / 1e9 / secs:.0%}"
            f" ns/seg {b['lcore.0.busy_ns'] / segs:.0f}"
            f" tx/burst {b['lcore.0.tx_packets'] / max(b['lcore.0.tx_bursts'], 1):.1f}"
            f" tx_short {b['lcore.0.tx_short']} segs/ack {segs / acks:.0f}"
            f" cwnd-lim {b.get('lcore.0.tcp.cwnd_limited_ns', 0) / 1e6:.0f}ms"
            f" | receiver busy {a['lcore.0.busy_ns'] / 1e9 / secs:.0%}"
            f" ns/seg {a['lcore.0.busy_ns'] / segs:.0f}"
            f" rx/poll {a['lcore.0.rx_packets'] / max(a['lcore.0.rx_bursts'], 1):.1f}"
        )


def profile(path):
    """Share (%) of the samples per symbol."""
    rep = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "--sort", "dso,sym", "--stdio", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    d = collections.Counter()
    for line in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        sym = m.group(3).strip()
        if m.group(2).startswith("librte_net_memif"):
            sym = "[memif]"
        elif sym.startswith("0x"):
            sym = f"[{m.group(2)}]"
        d[sym] += float(m.group(1))
    return d


def symbols(side, out, variants):
    rows = []
    for arg in variants:
        name, tags = arg.split(":", 1)
        tags = tags.split(",")
        acc, total = collections.Counter(), 0.0
        for tag in tags:
            a, b = load(out, tag)
            busy = b["lcore.0.tcp.busy_ns"] if side == "cli" else a["lcore.0.busy_ns"]
            ns = busy / b["lcore.0.tcp.segs_out"]
            total += ns
            for k, share in profile(f"{out}/{tag}.{side}.perf").items():
                acc[k] += share * ns / 100
        rows.append((name, {k: x / len(tags) for k, x in acc.items()}, total / len(tags)))
    # Largest in any variant first: a symbol one variant renamed or added is not buried.
    keys = sorted(
        set().union(*[d for _, d, _ in rows]), key=lambda k: -max(d.get(k, 0) for _, d, _ in rows)
    )
    print(f"{'symbol':70s} " + " ".join(f"{n:>9s}" for n, _, _ in rows))
    print(f"{'ns per segment':70s} " + " ".join(f"{t:9.1f}" for _, _, t in rows))
    for k in keys[: int(os.environ.get("TOP", "30"))]:
        print(f"{k[:70]:70s} " + " ".join(f"{d.get(k, 0):9.1f}" for _, d, _ in rows))


def main(argv):
    if len(argv) >= 3 and argv[0] == "summary":
        summary(argv[1], argv[2:])
    elif len(argv) >= 4 and argv[0] == "symbols" and argv[1] in ("cli", "srv"):
        symbols(argv[1], argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
