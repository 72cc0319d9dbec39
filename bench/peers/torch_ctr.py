"""The CTR model of models/ctr.dtf in PyTorch, for bench/embedding.sh: a
sparse nn.Embedding of 2,000,000 x 32 (one table; PyTorch has no ps shards),
26 ids per example side by side, Linear 832 -> 64, ReLU, Linear 64 -> 2,
Adagrad (lr 0.05, initial accumulator 0.1 as TensorFlow's and dtf's), batch
256, random ids and labels drawn once (as dtf's synthetic source).

Prints one JSON line: examples_per_sec over the timed steps only.
"""
import argparse
import json
import resource
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=2000000)
    a = ap.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    emb = nn.Embedding(a.rows, 32, sparse=True)
    nn.init.normal_(emb.weight, std=0.05)
    hidden, out = nn.Linear(26 * 32, 64), nn.Linear(64, 2)
    dense_params = list(hidden.parameters()) + list(out.parameters())
    # Sparse gradients need their own optimizer instance; Adagrad takes both.
    opt = torch.optim.Adagrad(list(emb.parameters()) + dense_params, lr=0.05,
                              initial_accumulator_value=0.1)
    examples = 100000
    ids_all = torch.randint(0, a.rows, (examples, 26))
    y_all = torch.randint(0, 2, (examples,))

    def step(i):
        lo = (i * a.batch) % (examples - a.batch)
        ids, y = ids_all[lo:lo + a.batch], y_all[lo:lo + a.batch]
        opt.zero_grad(set_to_none=True)
        h = F.relu(hidden(emb(ids).flatten(1)))
        loss = F.cross_entropy(out(h), y)
        loss.backward()
        opt.step()
        return float(loss)

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    losses = [step(a.warmup + i) for i in range(a.steps)]
    dt = time.perf_counter() - t0
    print(json.dumps({
        "framework": "PyTorch " + torch.__version__,
        "examples_per_sec": a.steps * a.batch / dt,
        "loss_last": sum(losses[-20:]) / len(losses[-20:]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))


if __name__ == "__main__":
    main()
