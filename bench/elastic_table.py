#!/usr/bin/env python3
"""The table of bench/elastic.sh from its timestamped logs.

usage: elastic_table.py WORK PHASE LEASE RUNS MODE...

WORK holds, per MODE and run of RUNS (scale,kill,ps), MODE.RUN.log (lines
"TIME TASK | ..." and "TIME [launcher] ...") and MODE.RUN.events ("TIME
up|down|kill|psup|psdown|end"). The job's global step is the highest step any
worker printed so far; a change's pause is the longest time it did not move
from the change to the end of its phase."""
import re
import statistics
import sys

STEP = re.compile(r"^([0-9.]+) (\S+)\s*\|\s*step (\d+)/")


def read(path):
    lines = []
    for line in open(path, errors="replace"):
        t, _, rest = line.rstrip("\n").partition(" ")
        try:
            lines.append((float(t), rest))
        except ValueError:
            pass
    return lines


def events(path):
    return [(float(t), what) for t, what in (l.split() for l in open(path))]


def moves(path):
    """(time, global step) each time the highest printed step grows."""
    out, top = [], -1
    for line in open(path, errors="replace"):
        m = STEP.match(line)
        if m and int(m.group(3)) > top:
            top = int(m.group(3))
            out.append((float(m.group(1)), top))
    return out


def rate(mv, a, b):
    w = [(t, s) for t, s in mv if a <= t <= b]
    if len(w) < 2 or w[-1][0] <= w[0][0]:
        return float("nan")
    return (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])


def median_gap(mv, a, b):
    w = [t for t, _ in mv if a <= t <= b]
    gaps = [y - x for x, y in zip(w, w[1:])]
    return statistics.median(gaps) if gaps else float("nan")


def pause(mv, a, b):
    """The longest stall from the last move before `a` through `b`."""
    before = [t for t, _ in mv if t <= a]
    w = ([before[-1]] if before else []) + [t for t, _ in mv if a < t <= b]
    gaps = [y - x for x, y in zip(w, w[1:])]
    # Still stalled at the end of the phase: the stall so far.
    if w:
        gaps.append(b - w[-1])
    return max(gaps) if gaps else float("nan")


def first_after(lines, t0, pred):
    for t, text in lines:
        if t > t0 and pred(text):
            return t - t0
    return float("nan")


def f(x, digits=2):
    return "n/a" if x != x else f"{x:.{digits}f}"


def main():
    work, phase, lease, runs, modes = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split(","), sys.argv[5:]
    rows = []
    for mode in modes:
        for run in runs:
            base = f"{work}/{mode}.{run}"
            lines, ev, mv = read(base + ".log"), events(base + ".events"), moves(base + ".log")
            for i, (te, what) in enumerate(ev):
                if what == "end":
                    continue
                tn = ev[i + 1][0]
                tp = ev[i - 1][0] if i else te - phase
                if what == "up":
                    change = "scale-up 2 -> 3 workers"
                    took = first_after(lines, te, lambda s: re.match(r"worker\.2\s*\|\s*step \d+/", s) is not None)
                    said = "joined"
                elif what in ("psup", "psdown"):
                    change = "re-shard " + ("1 -> 2 ps" if what == "psup" else "2 -> 1 ps")
                    took = first_after(lines, te, lambda s: s.startswith("[launcher] ps scaled"))
                    said = "re-sharded"
                elif what == "down":
                    change = "scale-down 3 -> 2 workers"
                    # ps.0 stops counting it (the launcher says so once it exited).
                    took = first_after(lines, te, lambda s: re.match(r"ps\.0\s*\|\s*worker\.2 left", s) is not None)
                    said = "left"
                else:
                    change = f"kill -9 of worker.1 (lease timeout {lease:g} s)"
                    took = first_after(lines, te, lambda s: "went silent" in s)
                    said = "absorbed"
                rows.append([mode, change, f"{said} {f(took)}", f(pause(mv, te, tn)),
                             f(median_gap(mv, max(tp, te - phase) + 1, te), 3),
                             f(rate(mv, max(tp, te - phase) + 1, te), 1),
                             f(rate(mv, te + 1, tn), 1)])
    head = ["mode", "change", "event after (s)", "pause (s)", "median step interval before (s)",
            "global steps/s before", "after"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(out))


if __name__ == "__main__":
    main()
