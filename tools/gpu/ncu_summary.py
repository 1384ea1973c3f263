#!/usr/bin/env python3
"""Sums an ncu `--csv --page raw` export by kernel: time, launches, DRAM bytes, the rate they were
moved at, and the time against the bytes' floor at a copy rate (TB/s). Used by ncu_breakdown.sh;
tests/tools/ncu_summary_test.py checks it on a small export.

    ncu_summary.py EXPORT.csv "what was profiled" [COPY_TBS] [--by-grid]

--by-grid: launches of one kernel with different grids apart (e.g. the LM head against the other
linears of the same instance), where the export has ncu's "Grid Size" column.
"""
import collections
import csv
import sys

# ncu scales units per column (auto): to nanoseconds and bytes.
# Older releases spell them out (nsecond, Kbyte), newer ones abbreviate (ns, KB).
SCALE = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
NOISE = ("void ", "(anonymous namespace)::", "<unnamed>::", "unnamed>::", "deepinfer::cuda::", "tc::")


def short_name(name):
    for noise in NOISE:
        name = name.replace(noise, "")
    return name.split("(")[0]  # the parameter list; template arguments stay (they name the instance)


def summarize(path, what, copy_tbs, by_grid=False):
    rows = [r for r in csv.reader(open(path)) if len(r) > 3]
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[head]
    names = cols.index("Kernel Name")
    grid = cols.index("Grid Size") if by_grid and "Grid Size" in cols else None
    metric = {m: cols.index(m) for m in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
              if m in cols}
    units = rows[head + 1]  # the row after the header names each column's unit
    scale = {}
    for m, i in metric.items():
        if units[i] not in SCALE:
            raise SystemExit(f"unknown unit {units[i]!r} of {m}")
        scale[m] = SCALE[units[i]]
    time_ns, dram, launches = collections.Counter(), collections.Counter(), collections.Counter()
    skipped = 0
    for r in rows[head + 2:]:
        try:
            values = {m: float(r[i].replace(",", "")) * scale[m] for m, i in metric.items()}
        except ValueError:  # a kernel ncu could not measure ("n/a"): counted, not summed
            skipped += 1
            continue
        name = short_name(r[names]) + (f" grid {r[grid]}" if grid is not None else "")
        time_ns[name] += values["gpu__time_duration.sum"]
        dram[name] += values.get("dram__bytes_read.sum", 0.0) + values.get("dram__bytes_write.sum", 0.0)
        launches[name] += 1
    total = sum(time_ns.values())
    out = [f"{what}: {total / 1e6:.2f} ms of kernels, {sum(launches.values())} launches, "
           f"{sum(dram.values()) / 1e9:.3f} GB of DRAM traffic (floor at {copy_tbs} TB/s: "
           f"{sum(dram.values()) / (copy_tbs * 1e12) * 1e3:.2f} ms)"
           + (f"; {skipped} launches without values left out" if skipped else ""), "",
           "| kernel | share | ms | launches | DRAM MB | TB/s | x floor |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, ns in time_ns.most_common(30):
        rate = dram[name] / ns / 1e3 if ns > 0 else 0.0  # bytes / ns = GB/s
        floor_ns = dram[name] / (copy_tbs * 1e3)
        ratio = f"{ns / floor_ns:.1f}" if floor_ns > 0 else "-"
        out.append(f"| `{name}` | {100 * ns / total:.1f}% | {ns / 1e6:.3f} | {launches[name]} | "
                   f"{dram[name] / 1e6:.1f} | {rate:.2f} | {ratio} |")
    return "\n".join(out)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--by-grid"]
    print(summarize(args[0], args[1], float(args[2]) if len(args) > 2 else 4.25, "--by-grid" in sys.argv))
