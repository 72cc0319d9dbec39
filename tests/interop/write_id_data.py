#!/usr/bin/env python3
"""Writes random integer ids for a model whose inputs are id lists (the
embedding models of models/) with TensorFlow, as a TFRecord file of int64_list
features for dtf-run --predict, and the same arrays as an .npz for onnxruntime;
BOUND `float` writes float_list features in [-1, 1) instead (wide_deep's x).
No labels: the logits do not need them.

usage: write_id_data.py OUT.tfrecord OUT.npz NAME:COUNT:BOUND...
  e.g. ids:20:200000 context:20:200000 (1000 examples, ids below BOUND)"""
import sys

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(11)
n = 1000
arrays = {}
for spec in sys.argv[3:]:
    name, count, bound = spec.split(":")
    if bound == "float":
        arrays[name] = rng.uniform(-1, 1, size=(n, int(count))).astype(np.float32)
    else:
        arrays[name] = rng.integers(0, int(bound), size=(n, int(count)), dtype=np.int64)


def feature(values):
    if values.dtype == np.float32:
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


with tf.io.TFRecordWriter(sys.argv[1]) as w:
    for i in range(n):
        w.write(tf.train.Example(features=tf.train.Features(feature={
            name: feature(a[i]) for name, a in arrays.items()})).SerializeToString())
np.savez(sys.argv[2], **arrays)
