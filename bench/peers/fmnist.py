"""Fashion-MNIST IDX loading shared by the peer benchmarks (numpy only).

Reads the gzipped (or plain) IDX files that dtf's idx() data source reads.
Like dtf's pipeline, the peers keep the pixels as uint8 in memory and scale
each batch to float32 in [0, 1] when they feed it (to_float), so that the
peak-memory comparison is about the frameworks, not about a 188 MB float copy
of the data set.
"""
import gzip
import os
import struct

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def _open(path):
    if os.path.exists(path):
        return open(path, "rb")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rb")
    raise FileNotFoundError(f"{path}[.gz]: no such IDX file")


def _read_idx(path):
    with _open(path) as f:
        data = bytearray(f.read())  # writable, for torch.from_numpy
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_train(directory=DEFAULT_DIR, split="train"):
    """Returns (pixels uint8 [N, 784], labels int64 [N])."""
    prefix = "train" if split == "train" else "t10k"
    images = _read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte"))
    labels = _read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"))
    return images.reshape(len(images), -1), labels.astype(np.int64)


def to_float(pixels):
    """A batch of uint8 pixels as float32 in [0, 1], as dtf feeds them."""
    x = pixels.astype(np.float32)
    x *= np.float32(1.0 / 255.0)
    return x


def batches(n, batch, seed):
    """Yields index arrays of `batch` examples: a fresh shuffle every epoch,
    epochs repeated, the last partial batch of an epoch dropped."""
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        for i in range(0, n - batch + 1, batch):
            yield perm[i:i + batch]


def rss_mb():
    """This process's resident set size now, in MB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")
