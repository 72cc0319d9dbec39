#!/usr/bin/env python3
"""Writes Fashion-MNIST examples as TFRecord files of tf.train.Example with
TensorFlow itself, for tfrecord.sh:
  train-0000K-of-00004.tfrecord  4 plain shards, features x (float_list, 784
                                 pixels / 255) and y (int64_list, the class)
  test-0000K-of-00002.tfrecord.gz  2 gzip shards, the same under the names
                                 image and label (the model maps them)
  unlabeled.tfrecord             the first 100 test images, no labels
  corrupt.tfrecord               10 records, one byte of record 3's data
                                 flipped; corrupt.offset holds its offset
  badlabel.tfrecord              10 records, record 3 (from 0) labelled 10,
                                 outside the model's 10 classes;
                                 badlabel.offset holds its offset

usage: write_tfrecords.py FASHION_MNIST_DIR OUT_DIR"""
import gzip
import os
import struct
import sys

import numpy as np
import tensorflow as tf

src, out = sys.argv[1], sys.argv[2]


def idx(name):
    with gzip.open(os.path.join(src, name)) as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def example(pixels, label, xname, yname):
    return tf.train.Example(features=tf.train.Features(feature={
        xname: tf.train.Feature(float_list=tf.train.FloatList(
            value=(pixels.reshape(-1) / 255.0).astype(np.float32))),
        yname: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    })).SerializeToString()


def write(path, images, labels, xname, yname, options=None):
    with tf.io.TFRecordWriter(path, options) as w:
        for p, l in zip(images, labels):
            w.write(example(p, l, xname, yname))


os.makedirs(out, exist_ok=True)
train_x, train_y = idx("train-images-idx3-ubyte.gz")[:4000], idx("train-labels-idx1-ubyte.gz")[:4000]
test_x, test_y = idx("t10k-images-idx3-ubyte.gz")[:2000], idx("t10k-labels-idx1-ubyte.gz")[:2000]
for k in range(4):
    write(os.path.join(out, "train-%05d-of-00004.tfrecord" % k),
          train_x[k::4], train_y[k::4], "x", "y")
for k in range(2):
    write(os.path.join(out, "test-%05d-of-00002.tfrecord.gz" % k),
          test_x[k * 1000:(k + 1) * 1000], test_y[k * 1000:(k + 1) * 1000],
          "image", "label", tf.io.TFRecordOptions(compression_type="GZIP"))
np.save(os.path.join(out, "test-labels.npy"), test_y.astype(np.int64))
# Images without labels, as data to predict arrives.
with tf.io.TFRecordWriter(os.path.join(out, "unlabeled.tfrecord")) as w:
    for p in test_x[:100]:
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(float_list=tf.train.FloatList(
                value=(p.reshape(-1) / 255.0).astype(np.float32)))})).SerializeToString())

corrupt = os.path.join(out, "corrupt.tfrecord")
write(corrupt, train_x[:10], train_y[:10], "x", "y")
data = bytearray(open(corrupt, "rb").read())
offset = 0
for _ in range(3):  # skip records 0..2: 8-byte length, 4-byte CRC, data, 4-byte CRC
    (length,) = struct.unpack("<Q", data[offset:offset + 8])
    offset += 12 + length + 4
data[offset + 12 + 100] ^= 0x5A
open(corrupt, "wb").write(bytes(data))
open(os.path.join(out, "corrupt.offset"), "w").write(str(offset))

badlabel = os.path.join(out, "badlabel.tfrecord")
labels = train_y[:10].astype(np.int64)
labels[3] = 10
write(badlabel, train_x[:10], labels, "x", "y")
data = open(badlabel, "rb").read()
offset = 0
for _ in range(3):
    (length,) = struct.unpack("<Q", data[offset:offset + 8])
    offset += 12 + length + 4
open(os.path.join(out, "badlabel.offset"), "w").write(str(offset))
print("wrote 4 train shards, 2 gzip test shards and corrupt.tfrecord (record 3 at offset %d) to %s"
      % (offset, out))
