"""What bench/peers/torch_wide_deep.py and tf_wide_deep.py share with
models/wide_deep.dtf: the options, the data (as dtf's synthetic source makes
it: 8 features uniform in [-1, 1), the label the argmax of a fixed projection
uniform in [-1, 1); the peers draw their own, from numpy), the ids (bucketized
features and crosses of pairs, 480 in one space), and the timed loop with
its JSON line: examples/s over the timed steps, and the loss and accuracy of
the last 100 steps' batches, each batch one the model had not seen."""
import argparse
import json
import resource
import time

import numpy as np

FEATURES, CLASSES = 8, 2
BOUNDARIES = [-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8]
VOCAB = 80 + 4 * 100  # the wide table: 8 x 10 buckets, then 4 crosses of 100
CATEGORICAL_OFFSETS = np.arange(FEATURES, dtype=np.int64) * 10
CROSS_OFFSETS = 80 + np.arange(4, dtype=np.int64) * 100


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--steps", type=int, default=1900)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    return ap.parse_args()


def data(a, seed=1):
    """(x, y) for every step, each batch drawn once: no batch repeats."""
    rng = np.random.default_rng(seed)
    n = (a.warmup + a.steps) * a.batch
    x = rng.uniform(-1, 1, (n, FEATURES)).astype(np.float32)
    w = rng.uniform(-1, 1, (CLASSES, FEATURES))
    y = np.argmax(x.astype(np.float64) @ w.T, axis=1).astype(np.int64)
    return x, y


def run_timed(step, a, framework):
    """a.warmup untimed steps, then a.steps timed ones; step(i) returns (loss,
    accuracy) of batch i. Prints one JSON line."""
    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    results = [step(a.warmup + i) for i in range(a.steps)]
    dt = time.perf_counter() - t0
    last = results[-100:]
    print(json.dumps({
        "framework": framework,
        "examples_per_sec": a.steps * a.batch / dt,
        "loss_last100": sum(r[0] for r in last) / len(last),
        "accuracy_last100": sum(r[1] for r in last) / len(last),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))
