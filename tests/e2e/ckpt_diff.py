#!/usr/bin/env python3
"""The largest difference between the floating-point tensors of two
checkpoint data files (docs/checkpoint-format.md, "Data file"), for tests
that compare runs: prints `max_abs REL_TO_SCALE tensors N` and exits 1 when
the files hold different names, dtypes or shapes.
usage: ckpt_diff.py A.data B.data

read(PATH) is also imported by other tests: {(name, first_row): (dtype,
dims, rows, values)}."""
import struct
import sys

DTYPES = {0: ("f", 4), 1: ("e", 2), 3: ("i", 4), 4: ("q", 8), 5: ("?", 1), 6: ("d", 8)}


def read(path):
    data = open(path, "rb").read()
    if data[:8] != b"DTFCKPTD":
        sys.exit(f"{path}: not a dtf checkpoint data file")
    count = struct.unpack_from("<I", data, 20)[0]
    at, tensors = 36, {}
    for _ in range(count):
        (m,) = struct.unpack_from("<I", data, at)
        meta = data[at + 4:at + 4 + m]
        at += 4 + m + 4
        (n,) = struct.unpack_from("<I", meta, 0)
        name = meta[4:4 + n].decode()
        dtype, rank = struct.unpack_from("<BI", meta, 4 + n)
        dims = struct.unpack_from(f"<{rank}q", meta, 9 + n)
        first, rows, size = struct.unpack_from("<qqQ", meta, 9 + n + 8 * rank)
        code, width = DTYPES.get(dtype, ("B", 1))
        values = struct.unpack_from(f"<{size // width}{code}", data, at)
        at += size + 4
        tensors[(name, first)] = (dtype, dims, rows, values)
    return tensors


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    if a.keys() != b.keys():
        sys.exit(f"different tensors: {sorted(set(a) ^ set(b))[:5]}")
    worst = scale = 0.0
    for key in a:
        (da, sa, ra, va), (db, sb, rb, vb) = a[key], b[key]
        if (da, sa, ra) != (db, sb, rb):
            sys.exit(f"{key[0]}: dtype or shape differ")
        if da not in (0, 1, 6):
            if va != vb:
                sys.exit(f"{key[0]}: integer values differ")
            continue
        for x, y in zip(va, vb):
            worst = max(worst, abs(x - y))
            scale = max(scale, abs(y))
    print(f"max_abs {worst:.3g} rel_to_scale {worst / max(scale, 1e-30):.3g} tensors {len(a)}")


if __name__ == "__main__":
    main()
