#!/usr/bin/env python3
"""Seeds for the reader fuzzer (ReaderFuzzer.cpp): one file per reader, its
first byte the reader's number, the rest a real file of that kind.
usage: reader_seeds.py OUT_DIR PLAN... -- CKPT_INDEX CKPT_DATA"""
import gzip
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from tfrecord_framing import record  # noqa: E402

out = sys.argv[1]
args = sys.argv[2:]
sep = args.index("--")
plans, (index, data) = args[:sep], args[sep + 1:]


def example(image, label):
    # tf.train.Example{features{feature{"image": float_list}, {"label": int64_list}}}
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def field(num, payload):
        return varint(num << 3 | 2) + varint(len(payload)) + payload

    floats = field(1, struct.pack(f"<{len(image)}f", *image))  # FloatList.value packed
    ints = field(1, varint(label))                             # Int64List.value packed
    feat_image = field(2, floats)                              # Feature.float_list
    feat_label = field(3, ints)                                # Feature.int64_list
    entry = lambda k, v: field(1, field(1, k.encode()) + field(2, v))
    features = entry("image", feat_image) + entry("label", feat_label)
    return field(1, features)


def write(name, selector, payload):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([selector]) + payload)


os.makedirs(out, exist_ok=True)
for i, p in enumerate(plans):
    write(f"plan{i}", 0, open(p, "rb").read())
write("index", 1, open(index, "rb").read())
write("data", 2, open(data, "rb").read())
records = b"".join(record(example([0.5, 1.0, 0.0, 0.25], k % 10)) for k in range(3))
write("tfrecord", 3, records)
write("tfrecord-gz", 4, gzip.compress(records, mtime=0))
images = struct.pack(">IIII", 0x803, 2, 2, 2) + bytes(range(8))
labels = struct.pack(">II", 0x801, 2) + bytes([3, 7])
# IDX: the first byte says where the images end (in 256ths of the rest).
for name, (img, lab) in {"idx": (images, labels),
                         "idx-gz": (gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0))}.items():
    both = img + lab
    cuts = [b for b in range(256) if b * len(both) // 256 == len(img)]
    if cuts:
        write(name, 5, bytes([cuts[0]]) + both)
write("csv", 6, b"a,b,label\n0.5,1,3\n2,-1,0\n")
write("cluster", 7, json.dumps({"ps": ["localhost:2222"], "worker": ["w0.example.com:2222", "[::1]:2223"]}).encode())
write("tf-config", 7, json.dumps({"cluster": {"chief": ["10.0.0.1:1"], "worker": ["h-1:2"]},
                                  "task": {"type": "worker", "index": 0}}).encode())
