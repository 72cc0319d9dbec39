#!/usr/bin/env python3
"""Writes the CSV files of tests/e2e/gpu_labels.dtf into DIR: 64 examples
of 3 classes, as good.csv (every label in 0..2), bad.csv (example 37's x4
flagged: the graph makes its label 7) and column.csv (example 37's label
column holds 7). For tests/e2e/gpu_labels.sh and the GPU bundle
(scripts/gpu-bundle.sh).

usage: gpu_labels_data.py DIR"""
import random
import sys

work = sys.argv[1]
rng = random.Random(3)
rows = []
for i in range(64):
    c = rng.randrange(3)
    rows.append(([rng.gauss(c, 0.5) for _ in range(4)], c))
for name, flag, column in (("good", None, None), ("bad", 37, None), ("column", None, 37)):
    with open("%s/%s.csv" % (work, name), "w") as f:
        f.write("x0,x1,x2,x3,x4,y\n")
        for i, (x, c) in enumerate(rows):
            f.write(",".join("%.4f" % v for v in x) + ",%d,%d\n"
                    % (1000 if i == flag else 0, 7 if i == column else c))
