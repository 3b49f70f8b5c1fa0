#!/usr/bin/env python3
"""The device check's summary lines for `collbench run --memory cuda` over a staged path, from its -J file.

Usage:
  summarize-staged.py run FILE        memory kind, rows, collectives, the largest staging share of a call,
                                      wrong points; exit 1 unless memory cuda, 7 collectives, nothing wrong
  summarize-staged.py pieces FILE N   per row, out-of-place: time, staging copies, time waited for them;
                                      exit 1 on a wrong point

The staging figures are collbench's statistics of each placement: in results JSON version 3 under
results[i].collbench.out_of_place (and .in_place), in version 2 inside the placement itself. A staged row
without them exits 2 naming it, rather than read as 0 us (as it did when version 3 moved them).
"""
import json
import sys

PLACEMENTS = ("out_of_place", "in_place")


def fail(why):
    """Exit 2: the input is not what this reads."""
    print(f"summarize-staged: {why}", file=sys.stderr)
    sys.exit(2)


def num(v):
    """A figure as a number; nccl-tests' JSON writes a NaN as a string."""
    return v if isinstance(v, (int, float)) else 0.0


def stats(row, placement):
    """collbench's statistics of one placement of one row (version 3, else version 2)."""
    return row.get("collbench", {}).get(placement) or row[placement]


def staging(path, row, placement, key):
    """The staging figure `key` of one placement; exits 2 naming the row where it is missing."""
    v = stats(row, placement).get(key)
    if v is None:
        fail(f"{path}: {row['collective']} {row['size']} B {placement} has no {key}: not a staged "
             "--memory cuda run, or a results layout this script does not know")
    return num(v)


def wrong_points(rows, *keys):
    return [tuple(r[k] for k in keys) for r in rows for p in PLACEMENTS if r[p]["nwrong"] != 0]


def run(path):
    d = json.load(open(path))
    m = d["collbench"]["memory"]
    rows = d["results"]
    wrong = wrong_points(rows, "collective", "type", "size")
    colls = sorted({r["collective"] for r in rows})
    share = max((staging(path, r, p, "staging_us") / max(num(r[p]["time"]), 1e-9)
                 for r in rows for p in PLACEMENTS), default=0)
    print(f"summary: {path}: memory {m['kind']}, {len(rows)} rows, collectives {','.join(colls)}, "
          f"largest staging share of a call {100 * share:.0f}%, wrong points {len(wrong)}"
          + (f": {wrong[:5]}" if wrong else ""))
    return 1 if wrong or m["kind"] != "cuda" or len(colls) != 7 else 0


def pieces(path, n):
    d = json.load(open(path))
    rows = d["results"]
    for r in rows:
        p = "out_of_place"
        print(f"summary: pieces {n}: {r['collective']} {r['size']} B: time {num(r[p]['time']):.0f} us, "
              f"copies {staging(path, r, p, 'staging_us'):.0f} us, "
              f"waited for copies {staging(path, r, p, 'staging_wait_us'):.0f} us, #wrong {num(r[p]['nwrong']):g}")
    return 1 if wrong_points(rows, "collective", "size") else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "run":
        sys.exit(run(args[1]))
    if len(args) == 3 and args[0] == "pieces":
        sys.exit(pieces(args[1], args[2]))
    fail("usage:" + __doc__.split("Usage:")[1].split("\n\n")[0])
