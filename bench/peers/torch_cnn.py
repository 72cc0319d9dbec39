"""The seed CNN (models/mnist_cnn.dtf) trained with PyTorch on the CPU, for
bench/throughput.sh. Same layers, loss, optimizer (Adam 1e-4), batch and data
as dtf; the pixels preloaded as uint8 and scaled per batch (as dtf does),
a fresh shuffle each epoch.

With --precision mixed_bfloat16 (bench/mixed_precision.sh) the forward pass
and the loss run under torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's
own mixed precision (its autocast op lists put convolutions and linear layers
in bf16); the parameters and Adam stay f32.

Prints one JSON line: images_per_sec over the timed steps only (the warm-up
steps run first and are not counted), plus the loss and RSS after setup.
"""
import argparse
import json
import sys
import time

import fmnist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=fmnist.DEFAULT_DIR)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["float32", "mixed_bfloat16"],
                    default="float32")
    a = ap.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
            self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
            self.fc = nn.Linear(7 * 7 * 64, 500)
            self.pred = nn.Linear(500, 10)

        def forward(self, x):
            x = x.view(-1, 1, 28, 28)
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = F.relu(self.fc(torch.flatten(x, 1)))
            return self.pred(x)

    x_np, y_np = fmnist.load_train(a.data)
    x_all = torch.from_numpy(x_np)
    y_all = torch.from_numpy(y_np)
    model = CNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    mixed = a.precision == "mixed_bfloat16"

    def step(idx):
        xb = x_all[idx].float().mul_(1.0 / 255.0)
        yb = y_all[idx]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    it = (torch.from_numpy(i) for i in fmnist.batches(len(x_np), a.batch, a.seed))
    for _ in range(a.warmup):
        step(next(it))
    rss_setup = fmnist.rss_mb()
    losses = []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        losses.append(step(next(it)).item())
    dt = time.perf_counter() - t0
    print(json.dumps({
        "framework": "PyTorch " + torch.__version__,
        "threads": torch.get_num_threads(), "precision": a.precision,
        "images_per_sec": a.steps * a.batch / dt,
        "timed_steps": a.steps, "warmup_steps": a.warmup, "seconds": dt,
        "loss_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "rss_after_warmup_mb": rss_setup,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
