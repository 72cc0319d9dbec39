"""What bench/peers/torch_ctr.py and tf_ctr.py share: their options, the
number of examples, and the timed loop with its JSON line."""
import argparse
import json
import resource
import time

EXAMPLES = 100000  # random examples, drawn once, cycled through


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=2000000)
    return ap.parse_args()


def window(i, batch):
    """The examples of step i: [lo, lo + batch)."""
    lo = (i * batch) % (EXAMPLES - batch)
    return lo, lo + batch


def run_timed(step, a, framework):
    """Runs a.warmup untimed steps, then a.steps timed ones (step(i) returns
    the loss), and prints the result as one JSON line."""
    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    losses = [step(a.warmup + i) for i in range(a.steps)]
    dt = time.perf_counter() - t0
    print(json.dumps({
        "framework": framework,
        "examples_per_sec": a.steps * a.batch / dt,
        "loss_last": sum(losses[-20:]) / len(losses[-20:]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))
