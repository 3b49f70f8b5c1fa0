#!/usr/bin/env python3
"""NCCL's times through collbench against nccl-tests', size by size, from both programs' stdout tables.

Usage: side-by-side.py [--name NAME] [--low 0.95] [--high 1.05] --nccl-tests FILE... --collbench FILE...

Each FILE is one run's stdout of one collective: nccl-tests' (`all_reduce_perf ...`), or collbench's under
an nccl-tests name or as `collbench run` (its extra columns are named in the header, so the time columns
are found by name). With several files a side (runs taken in turn) a size's time is the median of its rows.
Prints size, nccl-tests' time, collbench's and the ratio collbench / nccl-tests for out-of-place and
in-place. Exit 0 when every ratio is within LOW..HIGH, 1 when one is not (the sizes named), 2 when the
tables cannot be compared (no table, sizes on one side only).
"""
import argparse
import statistics
import sys


def fail(why):
    """Exit 2: nothing to compare."""
    print(f"side-by-side: {why}", file=sys.stderr)
    sys.exit(2)


def number(text):
    """A time cell as a number; None for what is not one (N/A, nan)."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v else None


def read_table(path):
    """{size: ([out-of-place times], [in-place times])} from the table rows of one stdout file."""
    columns = None
    times = {}
    for line in open(path, errors="replace"):
        words = line.split()
        if line.startswith("#"):
            # The column header: `#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ...`.
            names = words[1:]
            if "size" in names and names.count("time") >= 2 and "busbw" in names:
                columns = names
            continue
        if columns is None or len(words) != len(columns) or not words[0].isdigit():
            continue  # lines around the table: stderr's notes, a banner
        first = columns.index("time")
        second = columns.index("time", first + 1)
        oop, ip = times.setdefault(int(words[columns.index("size")]), ([], []))
        for cell, into in ((words[first], oop), (words[second], ip)):
            if number(cell) is not None:
                into.append(number(cell))
    if not times:
        fail(f"{path}: no table rows under a `size ... time ... time` header")
    return times


def read_side(paths):
    """{size: (out-of-place median or None, in-place median or None)} over every file of one side."""
    merged = {}
    for path in paths:
        for size, (oop, ip) in read_table(path).items():
            m = merged.setdefault(size, ([], []))
            m[0].extend(oop)
            m[1].extend(ip)
    return {s: tuple(statistics.median(t) if t else None for t in pair) for s, pair in merged.items()}


def bytes_text(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="", help="what is compared, for the output (e.g. all_reduce)")
    ap.add_argument("--low", type=float, default=0.95)
    ap.add_argument("--high", type=float, default=1.05)
    ap.add_argument("--nccl-tests", nargs="+", required=True, metavar="FILE")
    ap.add_argument("--collbench", nargs="+", required=True, metavar="FILE")
    a = ap.parse_args()
    ref, ours = read_side(a.nccl_tests), read_side(a.collbench)
    name = f"{a.name}: " if a.name else ""
    for only, side in ((set(ref) - set(ours), "nccl-tests'"), (set(ours) - set(ref), "collbench's")):
        if only:
            fail(f"{name}sizes only in {side} table: {', '.join(bytes_text(s) for s in sorted(only))} "
                 "(were both run with the same -b -e -f?)")

    print(f"side-by-side: {name}time (us) of nccl-tests ({len(a.nccl_tests)} run(s), median) and of collbench "
          f"({len(a.collbench)}), ratio collbench / nccl-tests, {a.low:g}-{a.high:g} required")
    print(f"{'size':>12} {'oop nccl-tests':>15} {'collbench':>10} {'ratio':>7} "
          f"{'ip nccl-tests':>14} {'collbench':>10} {'ratio':>7}")
    outside = {"out-of-place": [], "in-place": []}
    for size in sorted(ref):
        cells = []
        for i, placement in enumerate(outside):
            r, o = ref[size][i], ours[size][i]
            ratio = o / r if r and o is not None else None
            mark = ""
            if ratio is not None and not a.low <= ratio <= a.high:
                outside[placement].append((size, ratio))
                mark = "!"
            cells += [f"{r:.2f}" if r is not None else "-", f"{o:.2f}" if o is not None else "-",
                      (f"{ratio:.2f}" if ratio is not None else "-") + mark]
        print(f"{size:>12} {cells[0]:>15} {cells[1]:>10} {cells[2]:>7} {cells[3]:>14} {cells[4]:>10} {cells[5]:>7}")

    bad = [(p, hits) for p, hits in outside.items() if hits]
    if not bad:
        print(f"side-by-side: {name}PASS: every ratio within {a.low:g}-{a.high:g}")
        return 0
    for placement, hits in bad:
        ratios = [r for _, r in hits]
        print(f"side-by-side: {name}FAIL: {placement} outside {a.low:g}-{a.high:g} at {len(hits)} size(s) "
              f"(ratios {min(ratios):.2f}-{max(ratios):.2f}): {', '.join(bytes_text(s) for s, _ in hits)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
