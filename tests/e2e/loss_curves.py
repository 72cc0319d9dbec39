#!/usr/bin/env python3
"""Compares the loss curves of dtf-run logs step by step: every LOG logged
the same steps as REF, and at each its loss is within TOL (relative) of
REF's. With --fall F, each LOG's last loss is also below (1 - F) times its
first. Prints each LOG's largest difference; exits non-zero naming the
first step that is off.

usage: loss_curves.py REF TOL LOG [LOG...] [--fall F]"""
import re
import sys


def curve(path):
    """{step: loss} from the "step N/M ... loss L" lines of a dtf-run log."""
    points = {}
    for line in open(path):
        m = re.match(r"step (\d+)/\d+\s+loss\s+([-0-9.e+na]+)", line)
        if m:
            points[int(m.group(1))] = float(m.group(2))
    return points


def main(args):
    fall = None
    if "--fall" in args:
        i = args.index("--fall")
        fall = float(args[i + 1])
        del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__)
    ref_path, tol, paths = args[0], float(args[1]), args[2:]
    ref = curve(ref_path)
    if len(ref) < 2:
        sys.exit(f"e2e: {ref_path} logged {len(ref)} loss points, not a curve")
    for path in paths:
        run = curve(path)
        if run.keys() != ref.keys():
            sys.exit(f"e2e: {path} logged steps {sorted(run)}, {ref_path} {sorted(ref)}")
        worst = 0.0
        for step in sorted(ref):
            rel = abs(run[step] - ref[step]) / abs(ref[step])
            worst = max(worst, rel)
            if not rel <= tol:
                sys.exit(f"e2e: at step {step} {path}'s loss {run[step]} is {rel:.3g} "
                         f"from {ref_path}'s {ref[step]} (more than {tol})")
        first, last = run[min(run)], run[max(run)]
        if fall is not None and not last < (1 - fall) * first:
            sys.exit(f"e2e: {path}'s loss did not fall by {fall}: {first} -> {last}")
        print(f"e2e: {path}: {len(run)} points within {worst:.3g} of {ref_path} "
              f"(relative); loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
