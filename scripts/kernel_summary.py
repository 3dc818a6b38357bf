#!/usr/bin/env python3
"""scripts/kernel_summary.py NCU.csv — where a run's GPU time goes, by kernel.

Reads Nsight Compute's CSV (ncu --csv --metrics gpu__time_duration.sum --log-file F)
and prints each kernel name's launches, total time and share, largest first, then a
'# top:' line that scripts/gpu_check.sh puts in its table. The kernel names are
shortened to the function's name (templates and arguments dropped).
"""
import csv
import re
import sys
from collections import defaultdict

UNIT = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
        "second": 1.0, "s": 1.0}


def short(name):
    name = re.sub(r"\(.*$", "", name)          # arguments
    while "<" in name:                           # templates, innermost first
        new = re.sub(r"<[^<>]*>", "", name)
        if new == name:
            break
        name = new
    name = name.split()[-1] if name.split() else name  # the return type ("void")
    return name.split("::")[-1][:64]


def main(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]   # ncu's own messages start with ==
    rows = csv.DictReader(lines)
    time = defaultdict(float)
    count = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", "")) * UNIT.get(r["Metric Unit"], 1e-9)
        k = short(r["Kernel Name"])
        time[k] += v
        count[k] += 1
    total = sum(time.values())
    if total == 0:
        print("# top: no kernel timed")
        return 1
    print(f"# {sum(count.values())} launches, {total * 1e3:.1f} ms of GPU time")
    print(f"# {'share':>6} {'ms':>9} {'launches':>8}  kernel")
    for k in sorted(time, key=time.get, reverse=True):
        print(f"  {100 * time[k] / total:5.1f}% {time[k] * 1e3:9.2f} {count[k]:8d}  {k}")
    top = sorted(time, key=time.get, reverse=True)[:3]
    print("# top: " + ", ".join(f"{k} {100 * time[k] / total:.1f}%" for k in top)
          + f" of {total * 1e3:.0f} ms GPU time in {sum(count.values())} launches")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
