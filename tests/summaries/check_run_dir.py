"""Checks a dtf-run --model-dir directory with TensorBoard's own event reader.

usage: check_run_dir.py RUN_DIR STDOUT

The run is tests/summaries/synthetic.dtf (or the same plan built in code): 60
steps, summaries every 20 steps of loss and accuracy, eval every 30 steps, a
learning rate of 0.5 halved every 20 steps (staircase).
"""
import glob
import math
import os
import re
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from tfrecord_framing import masked_crc  # noqa: E402

run_dir, stdout_path = sys.argv[1], sys.argv[2]
failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
    return cond


def check_framing(path):
    """TFRecord framing with masked CRC-32C, checked independently of TensorBoard
    (whose reader without TensorFlow may not check every CRC)."""
    data = open(path, "rb").read()
    at = records = 0
    while at < len(data):
        if not check(len(data) - at >= 12, "%s: truncated header at %d" % (path, at)):
            return
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        check(length_crc == masked_crc(data[at:at + 8]),
              "%s: bad length CRC at %d" % (path, at))
        body = data[at + 12:at + 12 + length]
        if not check(len(body) == length and at + 16 + length <= len(data),
                     "%s: truncated record at %d" % (path, at)):
            return
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        check(data_crc == masked_crc(body), "%s: bad data CRC at %d" % (path, at))
        at += 16 + length
        records += 1
    check(records >= 2, "%s: %d records, want the version and scalars" % (path, records))


def load(subdir):
    path = os.path.join(run_dir, subdir)
    files = glob.glob(os.path.join(path, "events.out.tfevents.*"))
    check(len(files) == 1, "%s: want one event file, found %s" % (path, files))
    for f in files:
        check_framing(f)
    acc = event_accumulator.EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    return acc


stdout = open(stdout_path).read().splitlines()
# Progress lines: "step 20/60  loss 1.0123  accuracy 0.5000  321 img/s  ETA 0s".
printed = {}
for line in stdout:
    m = re.match(r"step (\d+)/\d+  loss (\S+)  accuracy (\S+)", line)
    if m:
        printed[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
evals = {}
for line in stdout:
    m = re.match(r"eval  step (\d+)  loss (\S+)  accuracy (\S+)", line)
    if m:
        evals[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
check(sorted(printed) == [20, 40, 60], "progress lines at %s, want 20, 40, 60" % sorted(printed))
check(sorted(evals) == [30, 60], "eval lines at %s, want 30, 60" % sorted(evals))

train = load("train")
tags = train.Tags()["scalars"]
for tag in ["loss", "accuracy", "learning_rate", "examples_per_sec", "global_step/sec"]:
    if not check(tag in tags, "train: no scalar %r (tags: %s)" % (tag, tags)):
        continue
    events = train.Scalars(tag)
    steps = [e.step for e in events]
    check(steps == [20, 40, 60], "train/%s at steps %s, want [20, 40, 60]" % (tag, steps))
    for e in events:
        check(math.isfinite(e.value), "train/%s at %d is %s" % (tag, e.step, e.value))
        if tag in ("examples_per_sec", "global_step/sec"):
            check(e.value > 0, "train/%s at %d is %s" % (tag, e.step, e.value))
        if tag in ("loss", "accuracy") and e.step in printed:
            want = printed[e.step][0 if tag == "loss" else 1]
            check(abs(e.value - want) <= 1e-4 + 1e-4 * abs(want),
                  "train/%s at %d is %s, the progress line says %s" % (tag, e.step, e.value, want))
if "learning_rate" in tags:
    rates = [round(e.value, 6) for e in train.Scalars("learning_rate")]
    check(rates == [0.5, 0.25, 0.125], "learning_rate %s, want [0.5, 0.25, 0.125]" % rates)
if "loss" in tags:
    losses = [e.value for e in train.Scalars("loss")]
    check(losses[-1] < losses[0], "the loss did not fall: %s" % losses)

ev = load("eval")
etags = ev.Tags()["scalars"]
for tag in ["loss", "accuracy"]:
    if not check(tag in etags, "eval: no scalar %r (tags: %s)" % (tag, etags)):
        continue
    events = ev.Scalars(tag)
    check([e.step for e in events] == [30, 60],
          "eval/%s at steps %s, want [30, 60]" % (tag, [e.step for e in events]))
    for e in events:
        if e.step in evals:
            want = evals[e.step][0 if tag == "loss" else 1]
            check(abs(e.value - want) <= 1e-4 + 1e-4 * abs(want),
                  "eval/%s at %d is %s, the eval line says %s" % (tag, e.step, e.value, want))

log_path = os.path.join(run_dir, "train.log")
if check(os.path.isfile(log_path), "no training log at %s" % log_path):
    log = open(log_path).read()
    check("\r" not in log and "\x1b" not in log, "the log holds terminal control codes")
    log_lines = log.splitlines()
    # Everything dtf-run printed to stdout is in the log, in order.
    check(log_lines == stdout, "the log differs from stdout:\n%s\n--- stdout:\n%s"
          % (log, "\n".join(stdout)))
    check(log_lines and log_lines[-1].startswith("final: steps=60 "),
          "the log does not end with the final line: %s" % log_lines[-1:])

for f in failures:
    print("summaries test: FAIL: " + f)
if not failures:
    print("summaries test: TensorBoard reads train/ (%s) and eval/ (%s) at the right steps; "
          "train.log holds the %d lines of the run" % (", ".join(sorted(tags)), ", ".join(sorted(etags)),
                                                      len(stdout)))
sys.exit(1 if failures else 0)
