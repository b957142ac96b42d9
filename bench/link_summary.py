#!/usr/bin/python3
"""Summary of bench/link.sh runs: link_summary.py RAW.tsv [RAW.tsv ...]

Every figure as min / median / max over all rounds of all files given, and
the ratios between modes taken within each round (same round, same MTU:
the machine's placement moves between rounds, so a ratio of two figures
measured seconds apart is steadier than either figure)."""
import statistics as st
import sys

rows = {}  # (kind, mtu, mode) -> [(run, kv, probe, others)]
for path in sys.argv[1:]:
    for line in open(path):
        rnd, mtu, kind, mode, probe, others, rest = line.rstrip("\n").split("\t", 6)
        kv = dict(x.split("=", 1) for x in rest.split() if "=" in x)
        rows.setdefault((kind, mtu, mode), []).append(((path, rnd, mtu), kv, probe, others))


def fmt(x):
    return ("%.3f" % x).rstrip("0").rstrip(".") if x == x else "nan"


def mmm(vals):
    v = sorted(vals)
    if not v:
        return "-"
    return "%s / %s / %s" % (fmt(v[0]), fmt(st.median(v)), fmt(v[-1]))


def placement(rs):
    fast = sum(1 for _, _, p, _ in rs if p != "nan" and float(p) < 100)
    others = st.median(int(o) for _, _, _, o in rs)
    return "fast placement %d/%d, others %g" % (fast, len(rs), others)


def by_run(kind, mtu, mode, key):
    return {run: float(kv[key]) for run, kv, _, _ in rows.get((kind, mtu, mode), []) if key in kv}


def ratio(kind, mtu, num, den, key):
    a, b = by_run(kind, mtu, num, key), by_run(kind, mtu, den, key)
    return [a[r] / b[r] for r in a if r in b and b[r] > 0]


mtus = sorted({m for _, m, _ in rows}, key=int, reverse=True)
n_rounds = len({run[:2] for rs in rows.values() for run, _, _, _ in rs})
print("%d rounds, each at MTU %s; min / median / max over them; 'fast placement' = rounds"
      % (n_rounds, " and ".join(mtus)))
print("whose spin_probe one-way was < 100 ns; 'others' = median runnable tasks besides ours")

sysrows = [x for (kind, _, _), rs in rows.items() if kind == "sys" for x in rs]
if sysrows:
    print("\nsystem call, ns (min of batches of 1000): getppid %s; empty non-blocking recv %s"
          % (mmm(float(kv["getppid_ns"]) for _, kv, _, _ in sysrows),
             mmm(float(kv["recv_eagain_ns"]) for _, kv, _, _ in sysrows)))

print("\nbandwidth, one direction, receiver's goodput (GB/s; data = less 16 B per packet)")
for mtu in mtus:
    for mode in ("gso", "gso-nogro", "plain"):
        rs = [x for x in rows.get(("bw", mtu, mode), []) if "data_GBps" in x[1]]
        if not rs:
            continue
        print("  mtu %-5s %-10s data %-22s loss%% %-22s sender offered %-22s seg %s  (%s)" % (
            mtu, mode, mmm(float(kv["data_GBps"]) for _, kv, _, _ in rs),
            mmm(float(kv["loss_pct"]) for _, kv, _, _ in rs),
            mmm(float(kv["sent_udp_GBps"]) for _, kv, _, _ in rs if "sent_udp_GBps" in kv),
            rs[0][1].get("seg", "?"), placement(rs)))
    for num, den in (("gso", "plain"), ("gso", "gso-nogro"), ("gso-nogro", "plain")):
        r = ratio("bw", mtu, num, den, "data_GBps")
        if r:
            print("  mtu %-5s %s / %s per round: %s" % (mtu, num, den, mmm(r)))

print("\none-way latency, 64 B ping-pong, half the round trip (microseconds)")
for mtu in mtus:
    for mode in ("busy", "block", "thread-spin", "thread-event"):
        rs = [x for x in rows.get(("lat", mtu, mode), []) if "p50_ns" in x[1]]
        if not rs:
            continue
        print("  mtu %-5s %-12s p50 %-22s p99 %-24s min %-20s lost %d  (%s)" % (
            mtu, mode, mmm(float(kv["p50_ns"]) / 1e3 for _, kv, _, _ in rs),
            mmm(float(kv["p99_ns"]) / 1e3 for _, kv, _, _ in rs),
            mmm(float(kv["min_ns"]) / 1e3 for _, kv, _, _ in rs),
            sum(int(kv["lost"]) for _, kv, _, _ in rs), placement(rs)))
    for num in ("block", "thread-spin", "thread-event"):
        r = ratio("lat", mtu, num, "busy", "p50_ns")
        if r:
            print("  mtu %-5s p50 %s / busy per round: %s" % (mtu, num, mmm(r)))
