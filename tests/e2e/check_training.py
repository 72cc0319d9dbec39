#!/usr/bin/env python3
"""Checks a dtf-run log of training: the loss fell by FALL (20%) from the
first progress line to the last one or to the last evaluation, and the
final line ran the expected steps and evaluated above an accuracy floor.
With --task NAME, a cluster's log: only that task's lines
("worker.0 | step ..."), and its final line's steps are its own share, not
checked.

usage: check_training.py LOG STEPS MIN_ACCURACY [LABEL] [--task NAME] [--fall F]"""
import re
import sys

args = sys.argv[1:]
task, fall = None, 0.2
for flag in ("--task", "--fall"):
    if flag in args:
        i = args.index(flag)
        value = args[i + 1]
        del args[i:i + 2]
        if flag == "--task":
            task = value
        else:
            fall = float(value)
path, steps, floor = args[0], int(args[1]), float(args[2])
label = args[3] + " " if len(args) > 3 else ""
log = open(path).read().splitlines()
if task:
    log = [l.split("|", 1)[1].strip() for l in log
           if l.split("|", 1)[0].strip() == task and "|" in l]
losses = [float(m.group(1)) for line in log if line.startswith("step ")
          for m in [re.search(r"loss ([0-9.eE+-]+)", line)] if m]
evals = [float(m.group(1)) for line in log if line.startswith("eval ")
         for m in [re.search(r"loss ([0-9.eE+-]+)", line)] if m]
final = [l for l in log if l.startswith("final:")]
failures = []
if len(losses) < 2:
    failures.append("fewer than two progress lines with a loss")
elif not min(losses[-1], evals[-1] if evals else losses[-1]) < (1 - fall) * losses[0]:
    # By the last progress line, or by the last evaluation: a progress line
    # is one batch's loss, which in async mode a stale step can lift.
    failures.append("the loss did not fall by %d%%: %s, eval %s" % (round(fall * 100), losses, evals))
if not final:
    failures.append("no final: line")
else:
    fields = dict(kv.split("=", 1) for kv in final[-1][len("final:"):].split())
    acc = float(fields.get("accuracy", "nan"))
    if not acc > floor:
        failures.append("test accuracy %s after %d steps (chance 0.1): want > %s"
                        % (acc, steps, floor))
    # A cluster's task reports its own steps; the job's count is the
    # caller's to check (the launcher's "the job finished").
    if not task and int(fields.get("steps", 0)) != steps:
        failures.append("ran %s steps, not %d" % (fields.get("steps"), steps))
for f in failures:
    print("e2e: FAIL: " + f)
print("e2e: %sloss %s -> %s; %s" % (label, losses[0] if losses else "?",
                                    losses[-1] if losses else "?",
                                    final[-1] if final else "no final line"))
sys.exit(1 if failures else 0)
