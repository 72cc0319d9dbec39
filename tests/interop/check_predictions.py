#!/usr/bin/env python3
"""Checks dtf-run --predict's output for the TFRecord test shards against the
labels: one row of 10 logits per example, in file order, mostly right, and as
often right as the evaluation at the end of training said (the same
checkpoint on the same examples).

usage: check_predictions.py PREDICTIONS.npy LABELS.npy MIN_ACCURACY EVAL_ACCURACY"""
import sys

import numpy as np

pred, labels, floor = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
if pred.shape != (len(labels), 10):
    sys.exit("tfrecord test: FAIL: predictions of shape %s, want (%d, 10)" % (pred.shape, len(labels)))
acc = float((pred.argmax(1) == labels).mean())
print("tfrecord test: --predict accuracy %.4f on %d TensorFlow-written examples" % (acc, len(labels)))
if not acc > floor:
    sys.exit("tfrecord test: FAIL: accuracy %.4f, want > %s" % (acc, floor))
if abs(acc - float(sys.argv[4])) > 1e-4:
    sys.exit("tfrecord test: FAIL: --predict's accuracy %.4f, the evaluation's %s" % (acc, sys.argv[4]))
