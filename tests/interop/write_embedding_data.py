#!/usr/bin/env python3
"""Writes random word ids for models/embedding.dtf with TensorFlow, as a
TFRecord file (ids, context: int64_list of 20 below 200000; y: the class) for
dtf-run --predict, and the same arrays as an .npz for onnxruntime.

usage: write_embedding_data.py OUT.tfrecord OUT.npz"""
import sys

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(11)
n = 1000
ids = rng.integers(0, 200000, size=(n, 20), dtype=np.int64)
context = rng.integers(0, 200000, size=(n, 20), dtype=np.int64)
y = rng.integers(0, 10, size=n, dtype=np.int64)
with tf.io.TFRecordWriter(sys.argv[1]) as w:
    for i in range(n):
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[i])),
            "context": tf.train.Feature(int64_list=tf.train.Int64List(value=context[i])),
            "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[y[i]])),
        })).SerializeToString())
np.savez(sys.argv[2], ids=ids, context=context)
