#!/usr/bin/python3
"""Turns one bench run (results/<timestamp>/) into report.md and PNG plots.

    /usr/bin/python3 bench/report.py results/<timestamp>

Reads raw.tsv (one line per measurement, written by bench/run.sh),
resources.txt, qp_scale.txt and env.txt.  Every figure is the median over
the rounds with the spread (min-max); every ratio is computed per round,
from the two runs of that round (measured back to back), and then
summarised the same way.  Needs Debian's python3-matplotlib (run it with
/usr/bin/python3).
"""
import collections
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "."


def num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


# ------------------------------------------------------------------ load
Row = collections.namedtuple("Row", "round group metric system size value unit probe extra seq")
rows = []
with open(os.path.join(OUT, "raw.tsv")) as f:
    next(f)
    for seq, line in enumerate(f):
        p = line.rstrip("\n").split("\t")
        if len(p) < 9:
            continue
        extra = {}
        for kv in p[8].split(";"):
            if "=" in kv:
                k, v = kv.split("=", 1)
                extra[k] = v
        rows.append(Row(int(p[0]), p[1], p[2], p[3], int(p[4]), num(p[5]), p[6], num(p[7]), extra, seq))

by = collections.defaultdict(dict)  # (group, metric, size) -> round -> Row
for r in rows:
    by[(r.group, r.metric, r.size)][r.round] = r


def series(group, metric, size, field="value"):
    """round -> value"""
    d = by.get((group, metric, size), {})
    out = {}
    for rnd, r in d.items():
        if field == "value":
            v = r.value
        elif field == "probe":
            v = r.probe
        else:
            v = num(r.extra.get(field))
        if not math.isnan(v):
            out[rnd] = v
    return out


def summ(vals):
    vals = [v for v in vals if not math.isnan(v)]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals), len(vals)


def busy(group, *metrics_size):
    """' (k/n contended)' if k of the n runs of these rows saw other runnable tasks"""
    k = n = 0
    for metric, size in metrics_size:
        for r in by.get((group, metric, size), {}).values():
            n += 1
            if num(r.extra.get("others", 0)) > 0:
                k += 1
    return f" ({k}/{n} runs contended)" if k else ""


def ratio_series(a, b):
    return {k: a[k] / b[k] for k in a if k in b and b[k] > 0}


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.{digits}f}"


def cell(s, unit="", scale=1.0):
    if not s:
        return "n/a"
    m, lo, hi, _ = s
    u = f" {unit}" if unit else ""
    return f"{fmt(m * scale)}{u} ({fmt(lo * scale)}–{fmt(hi * scale)})"


def rcell(s):
    if not s:
        return "n/a"
    m, lo, hi, _ = s
    return f"**{m:.2f}×** ({lo:.2f}–{hi:.2f})"


def sizestr(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


sizes = sorted({r.size for r in rows if r.group == "bw"})
rounds = sorted({r.round for r in rows if r.group in ("bw", "lat")})

# ------------------------------------------------------------- the table
PEER_OF = {
    "ib_write_bw": ("ucx_put_bw", "UCX put_bw"),
    "ib_read_bw": ("ucx_get", "UCX get (bcopy)"),
    "ib_send_bw": ("fi_pingpong", "libfabric shm pingpong"),
}
# further peers, each a row of its own where it has figures
MORE_PEERS = {
    "ib_send_bw": [("ucx_am_bw", "UCX am_bw")],
}
LAT_PEER = {
    "ib_write_lat": ("ucx_put_lat", "UCX put_lat"),
    "ib_send_lat": ("ucx_am_lat", "UCX am_lat"),
    "ib_read_lat": ("ucx_get_lat", "UCX get (bcopy) 8 B"),
    "ib_atomic_lat": ("ucx_fadd_lat", "UCX fadd"),
}

table = []
table.append("| measurement | size | softrdma | peer | peer value | limit | softrdma/peer | softrdma/limit | probe ns: softrdma run · peer run |")
table.append("|---|---|---|---|---|---|---|---|---|")

ratios = {}  # for targets: name -> ratio series

for op in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
    for s, (peer, pname), first in [(s, p, i == 0) for s in sizes
                                    for i, p in enumerate([PEER_OF[op]] + MORE_PEERS.get(op, []))]:
        sr = series("bw", op, s)
        pe = series("bw", peer, s)
        mc = series("bw", "memcpy", s)
        ma = series("bw", "memcpy_alt", s)
        if (not sr and not pe) or (not first and not pe):
            continue
        rp = ratio_series(sr, pe)
        rm = ratio_series(sr, mc)
        if first:
            ratios[(op, s, "peer")] = rp
            ratios[(op, s, "memcpy")] = rm
        ps = summ(series("bw", op, s, "probe").values())
        pp = summ(series("bw", peer, s, "probe").values())
        table.append(
            f"| {op} | {sizestr(s)} | {cell(summ(sr.values()), 'GB/s')} | {pname} | "
            f"{cell(summ(pe.values()), 'GB/s')} | memcpy {cell(summ(mc.values()), 'GB/s')}"
            f"{'; sr_copy ' + cell(summ(ma.values()), 'GB/s') if ma else ''} | "
            f"{rcell(summ(rp.values()))} | {rcell(summ(rm.values()))} | "
            f"{fmt(ps[0] if ps else None)} · {fmt(pp[0] if pp else None)}{busy('bw', (op, s), (peer, s))} |"
        )
    # for write, also the other peer (libfabric) as a separate line would
    # clutter; libfabric's figures are in the plot.

# message rate
s8 = 8 if 8 in sizes else None
if s8:
    sr = {k: v * 1e6 for k, v in series("bw", "ib_write_bw", 8, "msgrate_mpps").items()}
    pe = series("bw", "ucx_put_bw", 8, "msgrate")
    rp = ratio_series(sr, pe)
    ratios[("msgrate", 8, "peer")] = rp
    ps = summ(series("bw", "ib_write_bw", 8, "probe").values())
    pp = summ(series("bw", "ucx_put_bw", 8, "probe").values())
    table.append(
        f"| ib_write_bw message rate | 8 B | {cell(summ(sr.values()), 'M msg/s', 1e-6)} | UCX put_bw msg rate | "
        f"{cell(summ(pe.values()), 'M msg/s', 1e-6)} | – | {rcell(summ(rp.values()))} | – | "
        f"{fmt(ps[0] if ps else None)} · {fmt(pp[0] if pp else None)}{busy('bw', ('ib_write_bw', 8), ('ucx_put_bw', 8))} |"
    )

# latency; the limit of a one-way notification is the busy-poll probe
for op, (peer, pname) in LAT_PEER.items():
    sr = series("lat", op, 8)
    pe = series("lat", peer, 8)
    if not sr and not pe:
        continue
    rp = ratio_series(sr, pe)
    ratios[(op, 8, "peer")] = rp
    probe_sr = series("lat", op, 8, "probe")
    pp = summ(series("lat", peer, 8, "probe").values())
    ps = summ(probe_sr.values())
    if op in ("ib_write_lat", "ib_send_lat"):
        lim = {k: v / 1000.0 for k, v in probe_sr.items()}  # ns -> usec
        rl = ratio_series(sr, lim)
        limcell = f"busy-poll one-way {cell(summ(lim.values()), 'µs')}"
        rlcell = rcell(summ(rl.values()))
    else:
        limcell, rlcell = "–", "–"
    table.append(
        f"| {op} | 8 B | {cell(summ(sr.values()), 'µs')} | {pname} | {cell(summ(pe.values()), 'µs')} | "
        f"{limcell} | {rcell(summ(rp.values()))} | {rlcell} | "
        f"{fmt(ps[0] if ps else None)} · {fmt(pp[0] if pp else None)}{busy('lat', (op, 8), (peer, 8))} |"
    )
fi8 = series("bw", "fi_pingpong", 8, "oneway_usec") if s8 else {}
if fi8:
    srs = series("lat", "ib_send_lat", 8)
    rp = ratio_series(srs, fi8)
    pp = summ(series("bw", "fi_pingpong", 8, "probe").values())
    table.append(
        f"| ib_send_lat | 8 B | (as above) | libfabric shm pingpong one-way | {cell(summ(fi8.values()), 'µs')} | – | "
        f"{rcell(summ(rp.values()))} | – | – · {fmt(pp[0] if pp else None)} |"
    )

# UCX over softrdma (uct rc_verbs on soft0) next to UCX's own shared memory
ucx_table = []
if any(r.metric in ("ucxsr_put_bw", "ucxsr_put_lat") for r in rows):
    ucx_table.append("| measurement | size | UCX rc_verbs on softrdma | UCX posix shared memory | softrdma/posix | "
                     "probe ns: softrdma run · posix run |")
    ucx_table.append("|---|---|---|---|---|---|")
    for s in sizes:
        sr = series("bw", "ucxsr_put_bw", s)
        pe = series("bw", "ucx_put_bw", s)
        if not sr:
            continue
        lay = {r.extra.get("layout") for r in by.get(("bw", "ucxsr_put_bw", s), {}).values()} - {None}
        ps = summ(series("bw", "ucxsr_put_bw", s, "probe").values())
        pp = summ(series("bw", "ucx_put_bw", s, "probe").values())
        ucx_table.append(
            f"| put_bw ({'/'.join(sorted(lay)) or '?'}) | {sizestr(s)} | {cell(summ(sr.values()), 'GB/s')} | "
            f"{cell(summ(pe.values()), 'GB/s')} | {rcell(summ(ratio_series(sr, pe).values()))} | "
            f"{fmt(ps[0] if ps else None)} · {fmt(pp[0] if pp else None)}{busy('bw', ('ucxsr_put_bw', s), ('ucx_put_bw', s))} |")
    sr = series("lat", "ucxsr_put_lat", 8)
    pe = series("lat", "ucx_put_lat", 8)
    if sr:
        ps = summ(series("lat", "ucxsr_put_lat", 8, "probe").values())
        pp = summ(series("lat", "ucx_put_lat", 8, "probe").values())
        ucx_table.append(
            f"| put_lat (one way) | 8 B | {cell(summ(sr.values()), 'µs')} | {cell(summ(pe.values()), 'µs')} | "
            f"{rcell(summ(ratio_series(sr, pe).values()))} | "
            f"{fmt(ps[0] if ps else None)} · {fmt(pp[0] if pp else None)}{busy('lat', ('ucxsr_put_lat', 8), ('ucx_put_lat', 8))} |")

# --------------------------------------------------------------- targets
TARGETS = [
    ("ib_write_bw 64 KiB ≥ 0.9× memcpy 64 KiB", ("ib_write_bw", 65536, "memcpy"), ">=", 0.9),
    ("ib_write_bw 1 MiB ≥ 0.9× memcpy 1 MiB", ("ib_write_bw", 1048576, "memcpy"), ">=", 0.9),
    ("ib_write_bw 64 KiB ≥ 1.0× UCX posix put_bw", ("ib_write_bw", 65536, "peer"), ">=", 1.0),
    ("ib_write_bw 1 MiB ≥ 1.0× UCX posix put_bw", ("ib_write_bw", 1048576, "peer"), ">=", 1.0),
    ("ib_write_lat 8 B ≤ 1.5× UCX posix put_lat", ("ib_write_lat", 8, "peer"), "<=", 1.5),
    ("ib_send_lat 8 B ≤ 1.5× UCX posix am_lat", ("ib_send_lat", 8, "peer"), "<=", 1.5),
    ("ib_write_bw -s 8 message rate ≥ 0.5× UCX put_bw 8 B (msg/s)", ("msgrate", 8, "peer"), ">=", 0.5),
    ("ib_read_bw 1 MiB ≥ 0.8× memcpy 1 MiB", ("ib_read_bw", 1048576, "memcpy"), ">=", 0.8),
]
target_lines = ["| target | measured ratio (median, min–max over rounds) | result | by how much | rounds passing |",
                "|---|---|---|---|---|"]
target_summary = []
for name, key, op, thr in TARGETS:
    rs = ratios.get(key, {})
    s = summ(rs.values())
    if not s:
        target_lines.append(f"| {name} | not measured in this run | – | – | – |")
        continue
    m = s[0]
    ok = m >= thr if op == ">=" else m <= thr
    npass = sum(1 for v in rs.values() if (v >= thr if op == ">=" else v <= thr))
    if op == ">=":
        how = (f"{(m / thr - 1) * 100:.1f}% above the bar" if ok else
               f"{(1 - m / thr) * 100:.1f}% short: needs {thr / m:.2f}× more")
    else:
        how = (f"{(1 - m / thr) * 100:.1f}% under the bar" if ok else
               f"{(m / thr - 1) * 100:.1f}% over: needs to be {m / thr:.2f}× faster")
    res = "**PASS**" if ok else "**MISS**"
    target_lines.append(f"| {name} | {m:.2f}× ({s[1]:.2f}–{s[2]:.2f}) | {res} | {how} | {npass}/{s[3]} |")
    target_summary.append((name, ok, m))

# same-placement check for the latency pairs
place_lines = []
for op, (peer, pname) in (("ib_write_lat", LAT_PEER["ib_write_lat"]), ("ib_send_lat", LAT_PEER["ib_send_lat"])):
    a = series("lat", op, 8, "probe")
    b = series("lat", peer, 8, "probe")
    same = [k for k in a if k in b and max(a[k], b[k]) / max(min(a[k], b[k]), 1e-9) <= 1.5]
    place_lines.append(f"{op} vs {pname}: the two runs' probes agree within 1.5× in {len(same)}/{len(a)} rounds.")

# ------------------------------------------------------------ resources
res_lines = []
try:
    with open(os.path.join(OUT, "resources.txt")) as f:
        res = [ln.split() for ln in f if ln.strip()]
except OSError:
    res = []
if res:
    res_lines.append("| objects | count | arena reserved (\"KiB in objects\") per object | arena pages resident per object | process RSS per object | daemon RSS per object | create time per object |")
    res_lines.append("|---|---|---|---|---|---|---|")
    names = {"qp": "RC QP (128 send + 128 recv WRs, 1 SGE)", "mr-same": "MR, all over one 4 KiB page",
             "mr-own": "MR, each over its own 4 KiB page"}
    for p in res:
        if len(p) < 7:
            continue
        kind, n = p[0], int(p[1])
        ak, ar, pk, dk, secs = (float(x) for x in p[2:7])

        def b(kib):
            return f"{kib * 1024 / n:,.0f} B"

        res_lines.append(f"| {names.get(kind, kind)} | {n} | {b(ak)} | {b(ar)} | {b(pk)} | {b(dk)} | {secs / n * 1e6:.1f} µs |")

qp_lines = []
try:
    with open(os.path.join(OUT, "qp_scale.txt")) as f:
        qs = [[float(x) for x in ln.split()] for ln in f if len(ln.split()) >= 5]
except OSError:
    qs = []
if qs:
    n = int(qs[0][0])
    tot = summ([q[3] for q in qs])
    cr = summ([q[1] for q in qs])
    co = summ([q[2] for q in qs])
    de = summ([q[4] for q in qs])
    qp_lines.append(
        f"Creating and connecting {n:,} RC QP pairs ({2 * n:,} QPs, RESET→INIT→RTR→RTS each, one process): "
        f"**{tot[0] * 1000:.0f} ms** (min {tot[1] * 1000:.0f}, max {tot[2] * 1000:.0f}; {len(qs)} runs), "
        f"of which create {cr[0] * 1000:.0f} ms and the {6 * n:,} modify_qp calls {co[0] * 1000:.0f} ms; "
        f"{tot[0] / n * 1e6:.0f} µs per pair. Destroying them: {de[0] * 1000:.0f} ms.")

# ---------------------------------------------------------- pin check
pin_lines = []
pc = [r for r in rows if r.group == "pincheck"]
if pc:
    pin_lines.append("| | unpinned | pinned (server CPU 1, client CPU 0) |")
    pin_lines.append("|---|---|---|")
    for base, label in (("ib_write_lat", "softrdma ib_write_lat 8 B"), ("ucx_put_lat", "UCX put_lat 8 B")):
        c = []
        for pin in (0, 1):
            vals = [r.value for r in pc if r.metric == f"pin{pin}_{base}"]
            probes = [r.probe for r in pc if r.metric == f"pin{pin}_{base}"]
            s = summ(vals)
            ps = summ(probes)
            c.append(f"{cell(s, 'µs')}, probe {fmt(ps[0]) if ps else 'n/a'} ns")
        pin_lines.append(f"| {label} | {c[0]} | {c[1]} |")

# ---------------------------------------------------------------- plots
pngs = []


def band(ax, metric, label, style, field="value", scale=1.0, group="bw"):
    xs, med, lo, hi = [], [], [], []
    for s in sizes:
        v = summ(series(group, metric, s, field).values())
        if v:
            xs.append(s)
            med.append(v[0] * scale)
            lo.append(v[1] * scale)
            hi.append(v[2] * scale)
    if xs:
        line, = ax.plot(xs, med, style, label=label)
        ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())


if sizes:
    fig, ax = plt.subplots(figsize=(9, 5.5))
    band(ax, "memcpy", "memcpy (1 thread, limit)", "k--")
    band(ax, "memcpy_alt", "sr_copy: memcpy in alternating piece order (1 thread)", "k:")
    band(ax, "ib_write_bw", "softrdma ib_write_bw", "o-")
    band(ax, "ib_read_bw", "softrdma ib_read_bw", "s-")
    band(ax, "ib_send_bw", "softrdma ib_send_bw", "^-")
    band(ax, "ucx_put_bw", "UCX uct posix put_bw", "o:")
    band(ax, "ucx_get", "UCX uct posix get (bcopy)", "s:")
    band(ax, "ucx_am_bw", "UCX uct posix am_bw (short to 64 B, then bcopy)", "^:")
    band(ax, "fi_pingpong", "libfabric shm fi_pingpong (ping-pong)", "v:")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (10^9 bytes/s)")
    ax.set_title("Bandwidth against message size (median over rounds, band = min–max)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "bandwidth.png"), dpi=110)
    plt.close(fig)
    pngs.append(("bandwidth.png", "bandwidth against message size"))

    fig, ax = plt.subplots(figsize=(9, 5))
    for op, style in (("ib_write_bw", "o-"), ("ib_read_bw", "s-"), ("ib_send_bw", "^-")):
        xs, med, lo, hi = [], [], [], []
        for s in sizes:
            v = summ(ratio_series(series("bw", op, s), series("bw", "memcpy", s)).values())
            if v:
                xs.append(s), med.append(v[0]), lo.append(v[1]), hi.append(v[2])
        if xs:
            line, = ax.plot(xs, med, style, label=f"{op} / memcpy")
            ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
    xs, med = [], []
    for s in sizes:
        v = summ(ratio_series(series("bw", "ib_write_bw", s), series("bw", "ucx_put_bw", s)).values())
        if v:
            xs.append(s), med.append(v[0])
    if xs:
        ax.plot(xs, med, "o:", label="ib_write_bw / UCX put_bw")
    ax.axhline(0.9, color="r", lw=0.8, ls="--", label="0.9 (write target vs memcpy)")
    ax.axhline(0.8, color="m", lw=0.8, ls="--", label="0.8 (read target vs memcpy)")
    ax.axhline(1.0, color="g", lw=0.8, ls="--", label="1.0 (write target vs UCX)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("ratio (per round, median; band = min–max)")
    ax.set_title("softrdma relative to the copy limit and to UCX")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "ratios.png"), dpi=110)
    plt.close(fig)
    pngs.append(("ratios.png", "ratios against size"))

lat_items = [
    ("ib_write_lat", "lat", "softrdma\nwrite_lat", "C0"),
    ("ucx_put_lat", "lat", "UCX\nput_lat", "C1"),
    ("ib_send_lat", "lat", "softrdma\nsend_lat", "C0"),
    ("ucx_am_lat", "lat", "UCX\nam_lat", "C1"),
    ("fi8", "bw", "libfabric\npingpong", "C2"),
    ("ib_read_lat", "lat", "softrdma\nread_lat", "C0"),
    ("ucx_get_lat", "lat", "UCX\nget 8 B", "C1"),
    ("ib_atomic_lat", "lat", "softrdma\natomic_lat", "C0"),
    ("ucx_fadd_lat", "lat", "UCX\nfadd", "C1"),
    ("probe", "lat", "busy-poll\nprobe", "0.5"),
]
lx, lm, le_lo, le_hi, lc, ll = [], [], [], [], [], []
for metric, group, label, color in lat_items:
    if metric == "fi8":
        v = summ(series("bw", "fi_pingpong", 8, "oneway_usec").values())
    elif metric == "probe":
        v = summ([r.probe / 1000.0 for r in rows if r.group == "lat" and not math.isnan(r.probe)])
    else:
        v = summ(series(group, metric, 8).values())
    if v:
        lx.append(len(lx))
        lm.append(v[0])
        le_lo.append(v[0] - v[1])
        le_hi.append(v[2] - v[0])
        lc.append(color)
        ll.append(label)
if lx:
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.bar(lx, lm, color=lc, yerr=[le_lo, le_hi], capsize=4)
    # a probe that found both processes on one CPU takes milliseconds: keep
    # the scale of the latencies and say so instead of squashing them
    top = 1.25 * max([m + h for m, h, lab in zip(lm, le_hi, ll) if "probe" not in lab] or [max(lm)])
    ax.set_ylim(0, top)
    for x, m, h in zip(lx, lm, le_hi):
        if m + h > top:
            ax.text(x, top * 0.97, f"{m * 1000:.0f} ns\n(max {m + h:,.0f} µs,\noff scale)", ha="center",
                    va="top", fontsize=7)
        else:
            ax.text(x, m + h, f"{m * 1000:.0f} ns", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(lx)
    ax.set_xticklabels(ll, fontsize=8)
    ax.set_ylabel("µs (median; bars = min–max over rounds)")
    ax.set_title("8-byte latency: write/send/pingpong one-way (half round trip); read/atomic/get/fadd per operation")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "latency.png"), dpi=110)
    plt.close(fig)
    pngs.append(("latency.png", "8-byte latency"))

probe_rows = [r for r in rows if not math.isnan(r.probe)]
if probe_rows:
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for sysname, color in (("limit", "0.4"), ("softrdma", "C0"), ("ucx", "C1"), ("libfabric", "C2"),
                           ("link", "0.7"), ("ucx-tcp", "C4"), ("libfabric-tcp", "C5")):
        pts = [(r.seq, r.probe) for r in probe_rows if r.system == sysname]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, color=color, label=f"before a {sysname} run")
    ax.set_yscale("log")
    ax.set_xlabel("measurement # (in run order)")
    ax.set_ylabel("probe one-way ns")
    ax.set_title("Placement probe before every measurement")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "probe.png"), dpi=110)
    plt.close(fig)
    pngs.append(("probe.png", "placement probe over the run"))

# ------------------------------------------------------------- two hosts
# bench/twohost.sh's rows: group 2h-<MTU>; systems softrdma, link, ucx-tcp,
# libfabric-tcp.  A run that failed has value nan and status=FAIL.
th_mtus = sorted({int(r.group[3:]) for r in rows if r.group.startswith("2h-")}, reverse=True)


def th_rows(mtu, metric, size=None):
    return {r.round: r for r in rows if r.group == f"2h-{mtu}" and r.metric == metric
            and (size is None or r.size == size)}


def th_series(mtu, metric, size=None, field="value"):
    out = {}
    for rnd, r in th_rows(mtu, metric, size).items():
        v = r.value if field == "value" else r.probe if field == "probe" else num(r.extra.get(field))
        if not math.isnan(v):
            out[rnd] = v
    return out


def th_cell(mtu, metric, size=None, unit="GB/s", field="value", scale=1.0):
    rs = th_rows(mtu, metric, size)
    if not rs:
        return "–"
    st = [r.extra.get("status", "ok") for r in rs.values()]
    if all(s == "n/a" for s in st):
        return "n/a (no fault injection in this build)"
    c = cell(summ(th_series(mtu, metric, size, field).values()), unit, scale)
    nf = sum(1 for s in st if s == "FAIL")
    return c + (f" **FAIL {nf}/{len(st)}**" if nf else "")


def th_ratio(mtu, a, b, field_a="value", field_b="value", scale_b=1.0):
    """per-round ratio a/b; a, b = (metric, size or None)"""
    x = th_series(mtu, a[0], a[1], field_a)
    y = {k: v * scale_b for k, v in th_series(mtu, b[0], b[1], field_b).items()}
    return ratio_series(x, y)


def th_busy(mtu, metric, size=None):
    """' (k/n contended)' if k of the n runs of this row saw other runnable tasks"""
    rs = th_rows(mtu, metric, size).values()
    k = sum(1 for r in rs if num(r.extra.get("others", 0)) > 0)
    return f" ({k}/{len(rs)} contended)" if k else ""


LINK_BW = ("udp_gso_gro", None)
LINK_LAT = ("udp_busy_lat", None)
th_table = []
th_targets = []
th_target_lines = []
if th_mtus:
    th_table.append("| MTU | measurement | size | softrdma | link's own limit | softrdma/limit | UCX over TCP | softrdma/UCX "
                    "| libfabric tcp fi_pingpong | softrdma/libfabric | retransmits (median) | probe ns (median; softrdma runs) |")
    # ratios are softrdma / other for bandwidth and latency alike: above 1 is
    # better for bandwidth, below 1 is better for latency
    th_table.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mtu in th_mtus:
        for op, s in (("ib_write_bw", 1048576), ("ib_read_bw", 1048576), ("ib_send_bw", 1048576),
                      ("ib_write_bw", 65536), ("ib_read_bw", 65536), ("ib_send_bw", 65536)):
            if not th_rows(mtu, op, s):
                continue
            ucx = op == "ib_write_bw"          # UCX put_bw: the one-sided write's peer
            fi = op != "ib_read_bw"            # a ping-pong of messages: one transfer's rate
            rtx = summ(th_series(mtu, op, s, "retransmits").values())
            pr = summ(th_series(mtu, op, s, "probe").values())
            th_table.append(
                f"| {mtu} | {op} | {sizestr(s)} | {th_cell(mtu, op, s)} | UDP GSO+GRO {th_cell(mtu, *LINK_BW)} | "
                f"{rcell(summ(th_ratio(mtu, (op, s), LINK_BW).values()))} | "
                f"{('put_bw ' + th_cell(mtu, 'ucx_tcp_put_bw', s)) if ucx else '–'} | "
                f"{rcell(summ(th_ratio(mtu, (op, s), ('ucx_tcp_put_bw', s)).values())) if ucx else '–'} | "
                f"{th_cell(mtu, 'fi_tcp_pingpong', s) if fi else '–'} | "
                f"{rcell(summ(th_ratio(mtu, (op, s), ('fi_tcp_pingpong', s)).values())) if fi else '–'} | "
                f"{f'{rtx[0]:.0f}' if rtx else 'n/a'} | {fmt(pr[0]) if pr else 'n/a'}{th_busy(mtu, op, s)} |")
        if th_rows(mtu, "ib_write_bw", 8):
            pr = summ(th_series(mtu, "ib_write_bw", 8, "probe").values())
            th_table.append(f"| {mtu} | ib_write_bw message rate | 8 B | "
                            f"{th_cell(mtu, 'ib_write_bw', 8, 'M msg/s', 'msgrate_mpps')} | – | – | – | – | – | – | – | "
                            f"{fmt(pr[0]) if pr else 'n/a'}{th_busy(mtu, 'ib_write_bw', 8)} |")
        for op in ("ib_write_lat", "ib_send_lat"):
            if not th_rows(mtu, op, 8):
                continue
            ucx = op == "ib_write_lat"
            pr = summ(th_series(mtu, op, 8, "probe").values())
            th_table.append(
                f"| {mtu} | {op} (one way) | 8 B | {th_cell(mtu, op, 8, 'µs')} | "
                f"UDP busy-poll one way (64 B) {th_cell(mtu, *LINK_LAT, 'µs')} | "
                f"{rcell(summ(th_ratio(mtu, (op, 8), LINK_LAT).values()))} | "
                f"{('put_lat ' + th_cell(mtu, 'ucx_tcp_put_lat', 8, 'µs')) if ucx else '–'} | "
                f"{rcell(summ(th_ratio(mtu, (op, 8), ('ucx_tcp_put_lat', 8)).values())) if ucx else '–'} | "
                f"one way {th_cell(mtu, 'fi_tcp_pingpong', 8, 'µs', 'oneway_usec')} | "
                f"{rcell(summ(th_ratio(mtu, (op, 8), ('fi_tcp_pingpong', 8), field_b='oneway_usec').values()))} | "
                f"– | {fmt(pr[0]) if pr else 'n/a'}{th_busy(mtu, op, 8)} |")
        if th_rows(mtu, "ib_write_bw_loss1"):
            rtx = summ(th_series(mtu, "ib_write_bw_loss1", None, "retransmits").values())
            pr = summ(th_series(mtu, "ib_write_bw_loss1", None, "probe").values())
            th_table.append(
                f"| {mtu} | ib_write_bw, 1% injected drop | 1 MiB | {th_cell(mtu, 'ib_write_bw_loss1')} | "
                f"lossless run before it {th_cell(mtu, 'ib_write_bw_ref')} | "
                f"{rcell(summ(th_ratio(mtu, ('ib_write_bw_loss1', None), ('ib_write_bw_ref', None)).values()))} | "
                f"– | – | – | – | {f'{rtx[0]:.0f}' if rtx else 'n/a'} | {fmt(pr[0]) if pr else 'n/a'}{th_busy(mtu, 'ib_write_bw_loss1')} |")

    th_ucx_table = []
    for mtu in th_mtus:
        for name, metric_sr, metric_tcp, s, unit in (
                ("ucp_put_bw", "ucxsr_ucp_put_bw", "ucx_tcp_put_bw", 1048576, "GB/s"),
                ("ucp_put_bw", "ucxsr_ucp_put_bw", "ucx_tcp_put_bw", 65536, "GB/s"),
                ("ucp_put_lat (one way)", "ucxsr_ucp_put_lat", "ucx_tcp_put_lat", 8, "µs")):
            if not th_rows(mtu, metric_sr, s):
                continue
            pr = summ(th_series(mtu, metric_sr, s, "probe").values())
            th_ucx_table.append(
                f"| {mtu} | {name} | {sizestr(s)} | {th_cell(mtu, metric_sr, s, unit)} | {th_cell(mtu, metric_tcp, s, unit)} | "
                f"{rcell(summ(th_ratio(mtu, (metric_sr, s), (metric_tcp, s)).values()))} | "
                f"{fmt(pr[0]) if pr else 'n/a'}{th_busy(mtu, metric_sr, s)} |")
    if th_ucx_table:
        th_ucx_table[:0] = ["| MTU | UCP test | size | UCX rc_verbs on softrdma | UCX over TCP | softrdma/TCP | probe ns |",
                            "|---|---|---|---|---|---|---|"]

    TH_TARGETS = [
        ("ib_write_bw 1 MiB ≥ 0.6× UDP GSO+GRO", ("ib_write_bw", 1048576), LINK_BW, ">=", 0.6),
        ("ib_read_bw 1 MiB ≥ 0.5× UDP GSO+GRO", ("ib_read_bw", 1048576), LINK_BW, ">=", 0.5),
        ("ib_write_lat 8 B ≤ 2× UDP busy-poll one way", ("ib_write_lat", 8), LINK_LAT, "<=", 2.0),
        ("ib_write_bw 1 MiB ≥ 1.0× UCX over TCP put_bw 1 MiB", ("ib_write_bw", 1048576), ("ucx_tcp_put_bw", 1048576), ">=", 1.0),
        ("ib_write_lat 8 B at least as low as UCX over TCP put_lat (≤ 1.0×)", ("ib_write_lat", 8), ("ucx_tcp_put_lat", 8), "<=", 1.0),
        ("ib_write_bw 1 MiB at 1% drop ≥ 0.5× lossless", ("ib_write_bw_loss1", None), ("ib_write_bw_ref", None), ">=", 0.5),
    ]
    # the latency floors of the engine's placements (link_probe's thread
    # modes): what ib_write_lat could reach with each design on this machine
    th_floor_table = []
    for mtu in th_mtus:
        if not th_rows(mtu, "ib_write_lat", 8) or not th_rows(mtu, "udp_tspin_lat"):
            continue
        th_floor_table.append(
            f"| {mtu} | {th_cell(mtu, 'ib_write_lat', 8, 'µs')} | {th_cell(mtu, *LINK_LAT, 'µs')} | "
            f"{th_cell(mtu, 'udp_tspin_lat', None, 'µs')} | {th_cell(mtu, 'udp_tevent_lat', None, 'µs')} | "
            f"{rcell(summ(th_ratio(mtu, ('udp_tspin_lat', None), LINK_LAT).values()))} | "
            f"{rcell(summ(th_ratio(mtu, ('ib_write_lat', 8), ('udp_tevent_lat', None)).values()))} | "
            f"{rcell(summ(th_ratio(mtu, ('ib_write_lat', 8), ('udp_tspin_lat', None)).values()))} |")
    if th_floor_table:
        th_floor_table[:0] = [
            "| MTU | ib_write_lat 8 B | UDP busy-poll | thread-spin (floor of placement b) | thread-event (floor of "
            "placement a) | thread-spin / busy-poll | ib_write_lat / thread-event | ib_write_lat / thread-spin |",
            "|---|---|---|---|---|---|---|---|"]

    th_target_lines = ["| MTU | target | measured ratio (median, min–max over rounds) | result | by how much | rounds passing |",
                       "|---|---|---|---|---|---|"]
    for mtu in th_mtus:
        for name, a, b, op, thr in TH_TARGETS:
            if a[0] == "ib_write_bw_loss1":
                if mtu != 9000:
                    continue
                st = [r.extra.get("status") for r in th_rows(mtu, a[0]).values()]
                if st and all(s == "n/a" for s in st):
                    th_target_lines.append(f"| {mtu} | {name} | n/a (no fault injection in this build) | – | – | – |")
                    th_targets.append((mtu, name, None, None))
                    continue
            rs = th_ratio(mtu, a, b)
            s = summ(rs.values())
            if not s:
                fails = sum(1 for r in list(th_rows(mtu, *a).values()) + list(th_rows(mtu, *b).values())
                            if r.extra.get("status") == "FAIL")
                what = f"no figure: {fails} run(s) FAILed" if fails else "not measured in this run"
                th_target_lines.append(f"| {mtu} | {name} | {what} | {'**FAIL**' if fails else '–'} | – | – |")
                th_targets.append((mtu, name, False if fails else None, None))
                continue
            m = s[0]
            ok = m >= thr if op == ">=" else m <= thr
            npass = sum(1 for v in rs.values() if (v >= thr if op == ">=" else v <= thr))
            if op == ">=":
                how = (f"{(m / thr - 1) * 100:.1f}% above the bar" if ok else
                       f"{(1 - m / thr) * 100:.1f}% short: needs {thr / m:.2f}× more")
            else:
                how = (f"{(1 - m / thr) * 100:.1f}% under the bar" if ok else
                       f"{(m / thr - 1) * 100:.1f}% over: needs to be {m / thr:.2f}× faster")
            th_target_lines.append(f"| {mtu} | {name} | {m:.2f}× ({s[1]:.2f}–{s[2]:.2f}) | "
                                   f"{'**PASS**' if ok else '**MISS**'} | {how} | {npass}/{s[3]} |")
            th_targets.append((mtu, name, ok, m))

    # bandwidth at 1 MiB and 64 KiB per MTU, medians, as bars
    fig, axs = plt.subplots(1, len(th_mtus), figsize=(5.5 * len(th_mtus), 4.5), squeeze=False)
    for ax, mtu in zip(axs[0], th_mtus):
        items = [("UDP GSO+GRO\n(link)", "udp_gso_gro", None, "0.5"),
                 ("ib_write_bw\n1 MiB", "ib_write_bw", 1048576, "C0"), ("ib_read_bw\n1 MiB", "ib_read_bw", 1048576, "C0"),
                 ("ib_send_bw\n1 MiB", "ib_send_bw", 1048576, "C0"), ("UCX tcp\nput_bw 1 MiB", "ucx_tcp_put_bw", 1048576, "C1"),
                 ("libfabric tcp\npingpong 1 MiB", "fi_tcp_pingpong", 1048576, "C2"),
                 ("ib_write_bw\n64 KiB", "ib_write_bw", 65536, "C0"), ("UCX tcp\nput_bw 64 KiB", "ucx_tcp_put_bw", 65536, "C1")]
        xs, ms, lo, hi, cs, ls = [], [], [], [], [], []
        for lab, met, sz, col in items:
            v = summ(th_series(mtu, met, sz).values())
            if v:
                xs.append(len(xs)), ms.append(v[0]), lo.append(v[0] - v[1]), hi.append(v[2] - v[0])
                cs.append(col), ls.append(lab)
        if xs:
            ax.bar(xs, ms, color=cs, yerr=[lo, hi], capsize=3)
            ax.set_xticks(xs)
            ax.set_xticklabels([x.replace("\n", " ") for x in ls], fontsize=7, rotation=35, ha="right")
        ax.set_title(f"two hosts, veth MTU {mtu}")
        ax.set_ylabel("GB/s (median; bars = min–max)")
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "twohost.png"), dpi=110)
    plt.close(fig)
    pngs.append(("twohost.png", "two hosts: bandwidth"))

# ---------------------------------------------------------------- report
try:
    env = open(os.path.join(OUT, "env.txt")).read().rstrip()
except OSError:
    env = ""
allprobe = summ([r.probe for r in probe_rows])
meas = [r for r in rows if r.group in ("bw", "lat")]
contended = [r for r in meas if num(r.extra.get("others", 0)) > 0]

md = []
md.append("# softrdma side by side: limits, peers, targets\n")
md.append("Produced by `make bench` (bench/run.sh). Same host (the two-host section is at the end), "
          "two processes per test (server and client), "
          "127.0.0.1 for the out-of-band exchange; softrdma runs Debian's unmodified perftest under "
          "`build-release/bin/softrdma run --` with a private softrdmad.\n")
md.append("```\n" + env + "\n```\n")
md.append(f"Rounds: {len(rounds)}. Every figure below is the **median over the rounds (min–max)**. "
          "Each round runs every measurement once, in pairs back to back (softrdma then its peer, "
          "the order flipping every round: A B, B A, ...). **Ratios are taken per round** from the two "
          "runs of that round and then summarised: on this VM only such interleaved ratios mean anything.\n")
if allprobe:
    md.append(f"Placement probe (bench/spin_probe: one-way latency of a busy-polled flag between two processes, "
              f"median of batches), run right before every measurement: median {allprobe[0]:.0f} ns, "
              f"min {allprobe[1]:.0f}, max {allprobe[2]:.0f} over {allprobe[3]} probes. "
              "The table gives, per row, the median probe before the softrdma runs · before the peer runs.\n")
md.append(f"Contention: before {len(contended)} of the {len(meas)} measurements another task was runnable "
          "(`procs_running` in /proc/stat, less the reader itself); the two vCPUs are shared with whatever else runs "
          "on the machine, and such rows are marked \"contended\" below. Busy-polling servers and clients lose most "
          "when a third task takes one of the two CPUs.\n")
md.append("## Targets (deliverable 2)\n")
md.extend(target_lines)
md.append("")
md.extend(f"- {x}" for x in place_lines)
md.append("\n## Side by side\n")
md.extend(table)
md.append("""
Peers: ib_write_bw ↔ UCX uct `put_bw` over posix shared memory (`-d memory -x posix`, default data layout);
ib_read_bw ↔ UCX `get` (bcopy); ib_send_bw ↔ UCX `am_bw` up to 8 KiB (streaming active messages: short up to 64 B,
bcopy above; uct posix has no larger active message, and its receiver consumes into its own segments, with no receive
posted per message as a verbs receiver must) and ↔ libfabric shm `fi_pingpong` at every size (a ping-pong: each
message waits for the reply, so its bandwidth is latency-bound and lower than a streaming test); latencies ↔ UCX `put_lat`, `am_lat` (ping-pong tests), `get` and `fadd` (per-operation time of a
one-sided test). The *limit* for bandwidth is single-thread memcpy of the same size (bench/memcpy_bw: glibc memcpy,
a SIZE source copied to a SIZE destination repeatedly, so both stay in the cache level such a transfer would see);
the targets use it as the issue defines them; the limit for a one-way notification is the busy-poll probe of that same
run. Where softrdma's copy differs from memcpy (above half the L1d) the limit cell also gives `sr_copy`
(memcpy_bw -a): the same loop through softrdma's own copy routine (src/core/copy.c), which copies in pieces (4 KiB up
to 4x the L1d, 64 KiB from 3/8 of the L2) and, when it copies the same buffers again, walks them in the other order (the last piece always last),
so that a repeated copy starts on the lines still in the L1 or L2. Where softrdma is above 1.0× memcpy, that is why:
it does not beat the memory system, it stops thrashing the cache when the same
buffers are moved again, as every perftest and UCX bandwidth loop does. Fresh buffers gain nothing from it.
""")
if ucx_table:
    md.append("## UCX over softrdma next to UCX's own shared memory\n")
    md.extend(ucx_table)
    md.append("""
Both are `ucx_perftest` UCT tests between two processes of this host: over softrdma, `-x rc_verbs -d soft0:1` under
`softrdma run` (put short up to 64 B, bcopy up to 8 KiB, zcopy above); UCX's own, `-x posix -d memory` (default
layout). What a UCX user gives up, or gains, by going through verbs on softrdma instead of UCX's shared memory.
Ratios: above 1× is better for bandwidth, below 1× is better for latency.
""")
md.append("## Units and what each tool measures\n")
md.append("""- Everything is converted to **GB/s = 10^9 bytes/s** and **µs**.
- perftest `--report_gbits`: `BW average[Gb/sec]` is bytes·8/10^9 per second (perftest divides bytes by 125,000,000),
  so GB/s = Gb/s ÷ 8. `MsgRate[Mpps]` is 10^6 messages/s. perftest times with the TSC and converts with `cpu MHz` from
  /proc/cpuinfo (recorded above; the TSC runs at that rate on this VM).
- perftest latency: `ib_write_lat` and `ib_send_lat` report **half the round trip** (ping-pong, `rtt_factor` 2 in
  perftest's `print_report_lat`); `ib_read_lat` and `ib_atomic_lat` report the **whole operation** (post to
  completion, `rtt_factor` 1). We use `t_typical` (the median), run with `-C` (TSC cycles, ~0.5 ns resolution
  instead of the 10 ns of the µs print) and divided by the same `cpu MHz` perftest uses.
- UCX `ucx_perftest`: bandwidth is printed in MB/s with **MB = 2^20 bytes** (perftest.c divides by 1024·1024), so
  GB/s = MB/s × 1,048,576 / 10^9; `put_lat` and `am_lat` are ping-pong tests and report **half the round trip**
  (libperf's `ucx_perf_calc_result` divides by 2 for ping-pong tests); `get` and `fadd` are one-sided
  stream tests: the time per operation. We use the `50.0%ile` column (the median) for latency and the
  `overall` columns for bandwidth and message rate.
- libfabric `fi_pingpong`: `MB/sec` is bytes per µs = **10^6 bytes/s**, counting both directions of the ping-pong;
  `usec/xfer` is elapsed / (iterations × 2) = **one way**.
- So write_lat ↔ put_lat and send_lat ↔ am_lat compare half round trips with half round trips; read_lat ↔ get
  and atomic_lat ↔ fadd compare a whole operation with a whole operation.
""")
if th_mtus:
    try:
        thenv = open(os.path.join(OUT, "twohost.txt")).read().rstrip()
    except OSError:
        thenv = ""
    th_rounds = sorted({r.round for r in rows if r.group.startswith("2h-")})
    md.append("## Two hosts (RoCEv2 over a veth between two network namespaces)\n")
    md.append("bench/twohost.sh: host a and host b are network namespaces joined by a veth pair "
              "(tests/lib_netns.sh), each with its own softrdmad; Debian's unmodified perftest runs its server "
              "in a and its client in b, so every work request crosses the RoCEv2 engine and the kernel's UDP. "
              "Side by side, on the same veth in the same rounds: the link's own limits (bench/link_probe: UDP "
              "with GSO+GRO, b to a, unpaced, the receiver's goodput counted as RoCE payload; a 64 B UDP "
              "ping-pong with both sides busy-polling, one way), UCX over TCP (`ucx_perftest`, `UCX_TLS=tcp`: "
              "`ucp_put_bw`, `ucp_put_lat`) and libfabric's tcp provider (`fi_pingpong -p tcp -e msg`: a "
              "ping-pong, so its GB/s is the rate of one transfer with nothing else in flight; Debian ships no "
              "fabtests, so there is no libfabric RMA bandwidth test to run). "
              f"Rounds: {len(th_rounds)}; per round both MTUs (order flipping), and within each MTU every "
              "measurement once, the order flipping every round. Ratios are per round, then median (min–max). "
              "A run that failed or timed out counts as FAIL and has no figure.\n")
    if thenv:
        md.append("```\n" + thenv + "\n```\n")
    md.append("### Targets (issue #10)\n")
    md.extend(th_target_lines)
    md.append("")
    md.append("### Side by side\n")
    md.extend(th_table)
    md.append("""
UDP GSO+GRO sends 4112-byte segments at MTU 9000 (a 4096-byte RoCE payload plus BTH and ICRC) and 1040-byte ones at
1500 (1024 + 16), 64 KB per send, without pacing: the loss it sees is in raw.tsv (`loss_pct`). perftest latency is
half the round trip (`t_typical`, run with `-C` and divided by cpu MHz); UCX `put_lat` is half the round trip
(50%ile column); fi_pingpong's `usec/xfer` is one way (its average: it prints no median). Retransmits are the
two daemons' `retransmits` counters, after less before the run. Every ratio is softrdma / the other: above 1× is
better for bandwidth, below 1× is better for latency. The 1% drop row uses its own lossless run (clean daemons,
right before the daemons are restarted with `SOFTRDMA_FAULT=seed=1,drop=0.01`) as the reference.
""")
    if th_floor_table:
        md.append("### Latency floors of the engine's placements\n")
        md.extend(th_floor_table)
        md.append("""
The same 64 B UDP ping-pong as the busy-poll row (bench/link_probe, one way, p50), but each side receives through a
second thread: thread-event (the receiving thread wakes the main thread through an eventfd it sleeps on: two thread
hand-offs per direction, which is what the daemon's engine costs today: application to engine, engine to engine)
and thread-spin (the main thread sends by itself and spins on memory that the receiving thread writes: one hand-off
per direction, the least any design can cost an `ib_write_lat`, which spins on memory and never calls into the
library while it waits, so some thread other than the application's must execute the peer's WRITE). On a 2-vCPU
machine with both perftest processes spinning, every hand-off has to preempt one of them. docs/architecture.md,
"Where the engine runs", has the discussion.
""")
    if th_ucx_table:
        md.append("### UCX over softrdma next to UCX over TCP\n")
        md.extend(th_ucx_table)
        md.append("""
The same `ucx_perftest` UCP tests, server in host a and client in host b: over softrdma with
`UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=soft0:1` under `softrdma run` (UCX picks the veth's GID by itself), and
UCX's own `UCX_TLS=tcp` over the veth. UCP on both sides, since UCX's TCP transport has no UCT put.
""")

md.append("## Resources\n")
if res_lines:
    md.extend(res_lines)
    md.append("""
"arena reserved" is the daemon's `softrdma status` line "KiB in objects" (heap chunks handed out in the
shared arena; QP chunks are power-of-two sized); "arena pages resident" is what the arena memfd really holds
(its st_blocks via /proc/DAEMON/fd), i.e. the pages touched so far: a QP's rings are touched as they are used,
so a busy QP costs up to its reserved size. MRs live in a fixed key table in the arena, not in the heap, so
their "KiB in objects" is 0; their cost is the daemon's bookkeeping and the touched key-table pages. Process
RSS deltas count what softrdma's library adds in the process (the registered page itself moves from anonymous
memory to a shared-memory backing at the same RSS).
""")
else:
    md.append("resource_cost did not produce results.\n")
md.extend(qp_lines)
md.append("")
if pin_lines:
    md.append("## Does pinning matter?\n")
    md.append("Nothing is pinned in the measurements above (the ucx_perftest `-c` option is CPU affinity, so it is "
              "left out for UCX too: every program is treated alike). Three interleaved rounds, unpinned against "
              "pinned:\n")
    md.extend(pin_lines)
    md.append("")
# ------------------------------------------------- connection set-up
cm_rows = []
try:
    with open(os.path.join(OUT, "cm_setup.txt")) as f:
        cm_rows = [ln.split() for ln in f if len(ln.split()) == 5]
except OSError:
    pass
if cm_rows:
    md.append("## Connection set-up (issue #11)\n")
    md.append("bench/cm_setup.sh: Debian's `cmtime -c 1000` (1,000 rdma_cm connections, each step started for all of "
              "them at once and timed until the last is done) against the kernel's TCP doing 1,000 non-blocking "
              "connects and then 1,000 shutdowns on the same path (bench/tcp_setup.c: connect = until every "
              "socket is connected, disconnect = until every peer's FIN is back), on one host (127.0.0.1) and "
              "across the veth between two namespaces, interleaved rounds, medians (min–max); across namespaces "
              "twice: as the scheduler places both hosts' processes on both vCPUs, and with one CPU per host "
              "(each host's daemon and program pinned to a CPU of its own, TCP's two ends alike), as two "
              "machines are placed. A full rdma_cm "
              "connect is resolve address + resolve route + connect (REQ/REP/RTU); creating the QPs is shown "
              "apart (TCP has nothing like it).\n")
    md.append("| path | cmtime resolve addr | resolve route | create QP | connect | full connect | disconnect "
              "| TCP connect | TCP disconnect | full connect / TCP connect (target ≤ 5×) | 1,000 connects (target < 0.5 s) |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def cmv(path, tool, step):
        return {int(r[0]): float(r[4]) for r in cm_rows if r[1] == path and r[2] == tool and r[3] == step}

    def fmt(vals):
        t = summ(list(vals))
        return f"{t[0]:.0f} ms ({t[1]:.0f}–{t[2]:.0f})" if t else "–"

    labels = {"onehost": "one host", "twohost": "two hosts",
              "twohost_cpu": "two hosts, one CPU each"}
    for path in ("onehost", "twohost", "twohost_cpu"):
        addr, route, qp = cmv(path, "cmtime", "addr"), cmv(path, "cmtime", "route"), cmv(path, "cmtime", "qp")
        conn, disc = cmv(path, "cmtime", "connect"), cmv(path, "cmtime", "disconnect")
        tconn, tdisc = cmv(path, "tcp", "connect"), cmv(path, "tcp", "disconnect")
        if not conn:
            continue
        full = {r: addr[r] + route[r] + conn[r] for r in conn if r in addr and r in route}
        ratio = [full[r] / tconn[r] for r in full if r in tconn and tconn[r] > 0]
        rt = summ(ratio)
        md.append(f"| {labels[path]} | {fmt(addr.values())} | "
                  f"{fmt(route.values())} | {fmt(qp.values())} | {fmt(conn.values())} | {fmt(full.values())} | "
                  f"{fmt(disc.values())} | {fmt(tconn.values())} | {fmt(tdisc.values())} | "
                  f"{f'{rt[0]:.1f}× ({rt[1]:.1f}–{rt[2]:.1f})' if rt else '–'} | "
                  f"{'met' if summ(list(conn.values()))[0] < 500 else 'missed'} (connect step) |")
    md.append("")
md.append("## Plots\n")
for fn, what in pngs:
    md.append(f"![{what}]({fn})\n")
md.append("## Files\n")
md.append("raw.tsv (every measurement with its probe), progress.log, env.txt, resources.txt, qp_scale.txt, "
          "logs/ (each server's and client's output, perftest's JSON).\n")

with open(os.path.join(OUT, "report.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(target_lines))
if th_mtus:
    print("\ntwo hosts: targets")
    print("\n".join(th_target_lines))
    print("\ntwo hosts: side by side")
    print("\n".join(th_table))
