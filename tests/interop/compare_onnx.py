#!/usr/bin/env python3
"""Runs an ONNX model that dtf-export wrote with onnxruntime and compares its
outputs with dtf-run --predict's on the same examples: the argmax must agree
on at least 99.9% of them and every logit within 1e-3 (absolute) + 1e-3
(relative).

usage: compare_onnx.py MODEL.onnx PREDICTIONS.npy (fashion-mnist-test | NPZ)"""
import gzip
import sys

import numpy as np
import onnxruntime as ort

model, pred_path, data = sys.argv[1], sys.argv[2], sys.argv[3]
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
inputs = session.get_inputs()
if data == "fashion-mnist-test":
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    feeds = {inputs[0].name: x.astype(np.float32) / np.float32(255)}
else:
    arrays = np.load(data)
    feeds = {i.name: arrays[i.name] for i in inputs}
for i in inputs:
    if i.shape[0] != "batch":
        sys.exit("FAIL: input %s has shape %s, want a free batch dimension first" % (i.name, i.shape))
got = session.run(None, feeds)[0]
want = np.load(pred_path)
if got.shape != want.shape:
    sys.exit("FAIL: onnxruntime gave %s, dtf-run --predict %s" % (got.shape, want.shape))
agree = float((got.argmax(1) == want.argmax(1)).mean())
diff = float(np.abs(got - want).max())
close = bool(np.allclose(got, want, atol=1e-3, rtol=1e-3))
print("%s: %d examples, output %s, argmax agrees on %.4f, largest difference %.3g"
      % (model, len(want), session.get_outputs()[0].name, agree, diff))
if agree < 0.999 or not close:
    sys.exit("FAIL: onnxruntime and dtf-run --predict disagree")
