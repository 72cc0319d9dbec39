"""Reading a launcher's log in the e2e scripts (each task's lines prefixed
"TASK |"): what a task said, and the checks the elastic ps tests share (the
global step never goes back, the chief's final accuracy in the band of
unchanged runs)."""
import re


def said(log, task):
    """The lines `task` printed, without their prefix."""
    return [l.split("|", 1)[1].strip() for l in log if re.match(task + r" *\|", l)]


def steps_went_back(log, workers=("worker.0", "worker.1")):
    """A problem for each worker whose step lines did not only go up."""
    bad = []
    for w in workers:
        seen = [int(m.group(1)) for l in said(log, w) for m in [re.match(r"step (\d+)/", l)] if m]
        back = [(a, b) for a, b in zip(seen, seen[1:]) if b < a]
        if back or not seen:
            bad.append(f"{w}'s global step went back: {back[:3]} (of {len(seen)} step lines)")
    return bad


def accuracy_below(log, low):
    """The chief's final line, and a problem when its accuracy is below
    `low` (the band of unchanged runs starts there) or it has none."""
    final = [l for l in said(log, "worker.0") if l.startswith("final:")]
    acc = re.search(r"accuracy=([0-9.]+)", final[-1]) if final else None
    if not acc or float(acc.group(1)) < low:
        return final, [f"the chief's final accuracy is not in the band of an unchanged run (>= {low}): {final}"]
    return final, []
