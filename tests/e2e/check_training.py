#!/usr/bin/env python3
"""Checks a dtf-run log of single-machine training: the loss of its progress
lines fell by 20%, the final line ran the expected steps and evaluated above
an accuracy floor.

usage: check_training.py LOG STEPS MIN_ACCURACY [LABEL]"""
import re
import sys

path, steps, floor = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
label = sys.argv[4] + " " if len(sys.argv) > 4 else ""
log = open(path).read().splitlines()
losses = [float(m.group(1)) for line in log if line.startswith("step ")
          for m in [re.search(r"loss ([0-9.eE+-]+)", line)] if m]
final = [l for l in log if l.startswith("final:")]
failures = []
if len(losses) < 2:
    failures.append("fewer than two progress lines with a loss")
elif not losses[-1] < 0.8 * losses[0]:
    failures.append("the loss did not fall by 20%%: %s" % losses)
if not final:
    failures.append("no final: line")
else:
    fields = dict(kv.split("=", 1) for kv in final[-1][len("final:"):].split())
    acc = float(fields.get("accuracy", "nan"))
    if not acc > floor:
        failures.append("test accuracy %s after %d steps (chance 0.1): want > %s"
                        % (acc, steps, floor))
    if int(fields.get("steps", 0)) != steps:
        failures.append("ran %s steps, not %d" % (fields.get("steps"), steps))
for f in failures:
    print("e2e: FAIL: " + f)
print("e2e: %sloss %s -> %s; %s" % (label, losses[0] if losses else "?",
                                    losses[-1] if losses else "?",
                                    final[-1] if final else "no final line"))
sys.exit(1 if failures else 0)
