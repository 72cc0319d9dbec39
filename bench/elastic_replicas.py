#!/usr/bin/env python3
"""The table of bench/elastic.sh --runs replicas: for each mode, a kill -9 of
ps.0 without replicas (every ps back to the last checkpoint) and with
--ps-replicas 2 (ps.0 from its replica), read from the timestamped logs
(WORK/MODE.rep-VARIANT.log) and the events (start, kill, end).

usage: elastic_replicas.py WORK MODE..."""
import re
import statistics
import sys

work, modes = sys.argv[1], sys.argv[2:]
STEP = re.compile(r"^([0-9.]+) (worker\.\d+) *\| step (\d+)/")
RESTORE = re.compile(r"^([0-9.]+) worker\.0 *\| (restored checkpoint|restored ps\.0 from its replica|no checkpoint yet)")


def one(mode, variant):
    events = {}
    for line in open(f"{work}/{mode}.rep-{variant}.events"):
        t, what = line.split()
        events[what] = float(t)
    steps, restore, stale = [], None, set()
    for line in open(f"{work}/{mode}.rep-{variant}.log"):
        m = STEP.match(line)
        # A worker's first step line after the kill is the step it had in
        # flight, counted before the restore: left out.
        if m and float(m.group(1)) > events["kill"] and m.group(2) not in stale:
            stale.add(m.group(2))
            continue
        if m:
            steps.append((float(m.group(1)), int(m.group(3))))
        m = RESTORE.match(line)
        if m and restore is None and float(m.group(1)) >= events["kill"]:
            restore = (float(m.group(1)), m.group(2))
    kill, start, end = events["kill"], events["start"], events["end"]
    before = [s for t, s in steps if start <= t < kill]
    reached = max([s for t, s in steps if t < kill] or [0])
    rate = (max(before) - min(before)) / (kill - start) if len(before) > 1 else 0
    if restore is None:
        return None
    after = [(t, s) for t, s in steps if t >= restore[0]]
    if not after:
        return None
    first_t, first_s = after[0]
    past = [t for t, s in after if s > reached]
    return {
        "how": "checkpoint" if restore[1] != "restored ps.0 from its replica" else "replica",
        "still": first_t - kill,
        "lost": max(reached - first_s + 1, 0),
        "back": (past[0] - kill) if past else None,
        "rate": rate,
    }


examples = {"async": 50, "sync": 100}
rows = ["| mode | ps.0 restored from | stood still | steps lost | back past the step | img/s before the kill | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |"]
for mode in modes:
    got = {v: one(mode, v) for v in ("none", "replicas")}
    base = got["none"]["rate"] if got["none"] else 0
    for v in ("none", "replicas"):
        r = got[v]
        if r is None:
            rows.append(f"| {mode} | (no restore seen: see the logs) | | | | | |")
            continue
        img = r["rate"] * examples.get(mode, 50)
        ratio = f"{r['rate'] / base:.2f}" if v == "replicas" and base else "1" if v == "none" else ""
        back = f"{r['back']:.2f} s" if r["back"] is not None else "not within the phase"
        rows.append(f"| {mode} | {'its replica on ps.1' if r['how'] == 'replica' else 'the last checkpoint (every ps)'}"
                    f" | {r['still']:.2f} s | {r['lost']} | {back} | {img:.0f} | {ratio} |")
print("\n".join(rows))
