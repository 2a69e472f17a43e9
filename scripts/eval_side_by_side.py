#!/usr/bin/env python3
"""Prints the headline metrics of two evaluation runs side by side.

Usage: eval_side_by_side.py NAME_A A.json [A2.json ...] -- NAME_B B.json [B2.json ...]

Each JSON file maps a metric's name to its value (written by `eval_classifiers.py --summary` and
`eval_pii.py --summary`; values that are not numbers are left out); the files of one side are merged. The difference column is B - A
in points (hundredths).
"""
import json
import sys


def side(args):
    name, files = args[0], args[1:]
    merged = {}
    for path in files:
        with open(path) as f:
            merged.update({k: v for k, v in json.load(f).items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return name, merged


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    (a, ma), (b, mb) = side(argv[:cut]), side(argv[cut + 1:])
    print(f"| metric | {a} | {b} | {b} - {a}, points |")
    print("|---|---|---|---|")
    for key in list(ma) + [k for k in mb if k not in ma]:
        va, vb = ma.get(key), mb.get(key)
        diff = f"{100 * (vb - va):+.1f}" if va is not None and vb is not None else "-"
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        print(f"| {key} | {fmt(va)} | {fmt(vb)} | {diff} |")


if __name__ == "__main__":
    main()
