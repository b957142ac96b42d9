#!/usr/bin/python3
"""The table of an A/B run (bench/run.sh --against): for each figure
measured on both trees, the median of its rounds on this tree and on the
other one, their ratio, and each tree's round-to-round spread ((max - min)
/ median).  A figure is "worse" when this tree is behind by more than 5% or
by more than the larger of the two spreads, whichever is larger: the
acceptance rule of issue 36.

usage: bench/ab.py RESULTS/raw.tsv
"""
import csv
import statistics
import sys

AGAINST = "-against"


def main(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            try:
                v = float(r["value"])
            except ValueError:
                continue
            if v != v:  # nan: the measurement failed; its log says why
                continue
            # the group tells the sections apart: same-host (bw, lat) and
            # two-host per MTU (2h-9000, 2h-1500)
            rows.setdefault((r["group"], r["metric"], int(r["size"]), r["system"], r["unit"]),
                            []).append(v)
    out = []
    worse = 0
    for (group, metric, size, system, unit), here in sorted(rows.items()):
        if system.endswith(AGAINST):
            continue
        there = rows.get((group, metric, size, system + AGAINST, unit))
        if not there:
            continue
        mh, mt = statistics.median(here), statistics.median(there)
        sh = (max(here) - min(here)) / mh if mh else 0.0
        st = (max(there) - min(there)) / mt if mt else 0.0
        higher_better = unit != "usec"
        ratio = mh / mt if mt else float("nan")
        behind = (1 - ratio) if higher_better else (ratio - 1)
        bad = behind > max(0.05, sh, st)
        worse += bad
        out.append((group, f"{metric} ({system})", size, f"{mh:.4g} {unit}", f"{mt:.4g} {unit}", f"{ratio:.3f}",
                    f"{sh:.1%} / {st:.1%}", f"{len(here)}/{len(there)}", "worse" if bad else ""))
    print("| group | figure | size (B) | this tree | against | ratio | spread (this / against) | rounds | |")
    print("|---|---|---|---|---|---|---|---|---|")
    for o in out:
        print("| " + " | ".join(str(x) for x in o) + " |")
    print(f"\n{len(out)} figures, {worse} worse than the rule allows")
    return 1 if worse else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
