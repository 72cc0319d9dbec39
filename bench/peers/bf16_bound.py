"""The bf16 GEMM bound bench/mixed_precision.sh quotes: PyTorch's bf16 matmul
(oneDNN underneath, AVX512-BF16/AMX where the CPU has them) on square
matrices, best of R runs after a warm-up, in GFLOP/s, with PyTorch's f32
matmul of the same size beside it. Prints one JSON line.

  usage: bf16_bound.py [--n N] [--reps R] [--threads T]
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    out = {"framework": "PyTorch " + torch.__version__, "n": a.n,
           "threads": a.threads}
    for name, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        x = torch.randn(a.n, a.n).to(dtype)
        y = torch.randn(a.n, a.n).to(dtype)
        torch.mm(x, y)
        best = float("inf")
        for _ in range(a.reps):
            t0 = time.perf_counter()
            torch.mm(x, y)
            best = min(best, time.perf_counter() - t0)
        out[name + "_gflops"] = 2.0 * a.n ** 3 / best / 1e9
    print(json.dumps(out))


if __name__ == "__main__":
    main()
