#!/usr/bin/env python3
"""Damaged and odd inputs, as a broken disk or a new user makes them.

Each case runs dtf-run with a timeout on one damaged file: plan.bin (bytes
flipped, cut, appended to), a checkpoint (index, data, the `checkpoint`
pointer), TFRecord, IDX and CSV data, cluster.json and TF_CONFIG. A case
fails when dtf-run
  - crashes (killed by a signal, or a sanitizer report),
  - hangs (past the timeout),
  - accepts an input it must refuse (exit 0, or for a cluster file, starting
    the task), or
  - refuses without naming the file (its base name, or TF_CONFIG).
A damage that leaves a valid input (a pixel byte, a label byte that is still
a class) may be accepted; a valid cluster file must be.

usage: damage_trial.py BIN_DIR WORK_DIR [--scale K] [--seed S]
  --scale K  random cases per kind, times K (1: about 400 cases in all)
Prints one line per failing case and a summary; exits 1 when any failed.
"""
import argparse
import collections
import ipaddress
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from tfrecord_framing import record  # noqa: E402

TIMEOUT = 20

MODEL = """model small {
  input x: f32[B, %(features)d]
  input y: i32[B]
  graph {
    h = dense(x, units = 16, activation = relu) as hidden
    logits = dense(h, units = %(classes)d) as out
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = adam(learning_rate = 1e-2)
    batch = 4
    steps = %(steps)d
    seed = 1
    data = %(data)s
  }
}
"""


class Trial:
    def __init__(self, bin_dir, work, rng):
        self.bin, self.work, self.rng = bin_dir, work, rng
        self.results = collections.Counter()
        self.failures = []

    def path(self, name):
        return os.path.join(self.work, name)

    def compile(self, name, features, classes, data, steps=4):
        src = self.path(name + ".dtf")
        with open(src, "w") as f:
            f.write(MODEL % dict(features=features, classes=classes,
                                 data=data, steps=steps))
        plan = self.path(name + ".plan")
        subprocess.run([os.path.join(self.bin, "dtfc"), src, "-o", plan],
                       check=True, capture_output=True)
        return plan

    def run(self, kind, what, args, named, must_refuse, env=None,
            started=None, must_accept=False):
        """Runs dtf-run ARGS; `named` must appear in a refusal. `started`
        (a regex) marks output that says the input was taken. A pristine
        input `must_accept`: the trial's own files must be valid, or every
        damage of them would be refused for the wrong reason."""
        full_env = dict(os.environ, **(env or {}))
        try:
            p = subprocess.run([os.path.join(self.bin, "dtf-run")] + args,
                               capture_output=True, text=True, errors="replace",
                               timeout=TIMEOUT, env=full_env)
        except subprocess.TimeoutExpired:
            return self.fail(kind, what, "hang: no exit within %d s" % TIMEOUT)
        out = p.stdout + p.stderr
        if p.returncode < 0 or p.returncode >= 128:
            return self.fail(kind, what, "crash: exit %d: %s" % (p.returncode, tail(out)))
        if re.search(r"Sanitizer|runtime error:|corrupted size|corrupted double|"
                     r"double free|free\(\): invalid|malloc\(\):", out):
            return self.fail(kind, what, "sanitizer or heap report: " + tail(out))
        took = p.returncode == 0 or (started and re.search(started, out))
        if took:
            if must_refuse:
                return self.fail(kind, what, "accepted silently (exit %d): %s"
                                 % (p.returncode, tail(out)))
            self.results["accepted (valid)"] += 1
            return
        if must_accept:
            return self.fail(kind, what, "a valid input was refused (exit %d): %s"
                             % (p.returncode, tail(out)))
        if named not in out:
            return self.fail(kind, what, "refusal does not name %s: %s"
                             % (named, tail(out)))
        self.results["refused, naming the file"] += 1

    def fail(self, kind, what, why):
        self.results["FAILED"] += 1
        self.failures.append("%s: %s: %s" % (kind, what, why))


def tail(text, lines=2):
    return " | ".join(text.strip().splitlines()[-lines:])[:400]


def flip(data, offset, rng):
    b = bytearray(data)
    b[offset] ^= rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 0xFF])
    return bytes(b)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def byte_damages(data, count, rng):
    """(description, damaged bytes): flips anywhere, cuts, appended bytes."""
    out = []
    for _ in range(count):
        o = rng.randrange(len(data))
        out.append(("byte %d flipped" % o, flip(data, o, rng)))
    for _ in range(max(2, count // 4)):
        n = rng.randrange(len(data))
        out.append(("cut to %d bytes" % n, data[:n]))
    out.append(("one byte appended", data + b"\0"))
    out.append(("4 KiB of random bytes appended", data + rng.randbytes(4096)))
    out.append(("empty", b""))
    out.append(("random bytes of the same size", rng.randbytes(len(data))))
    return out


def plan_cases(t, count):
    plan = t.compile("plan", 8, 3, "synthetic(examples = 64)")
    pristine = open(plan, "rb").read()
    t.run("plan.bin", "pristine", [plan, "--quiet"], "plan.plan", False,
          must_accept=True)
    for what, data in byte_damages(pristine, count, t.rng):
        damaged = t.path("damaged.plan")
        write(damaged, data)
        t.run("plan.bin", what, [damaged, "--quiet"], "damaged.plan", True)


def checkpoint_cases(t, count):
    plan = t.compile("ckpt", 8, 3, "synthetic(examples = 64)", steps=4)
    good = t.path("ckpt-good")
    shutil.rmtree(good, ignore_errors=True)
    subprocess.run([os.path.join(t.bin, "dtf-run"), plan, "--quiet",
                    "--model-dir", good], check=True, capture_output=True)
    names = sorted(n for n in os.listdir(good) if n.startswith("ckpt-") or n == "checkpoint")
    d = t.path("ckpt-damaged")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(good, d)
    t.run("checkpoint", "pristine", [plan, "--quiet", "--model-dir", d, "--steps", "6"],
          "ckpt-", False, must_accept=True)
    for name in names:
        pristine = open(os.path.join(good, name), "rb").read()
        damages = byte_damages(pristine, count // len(names) + 1, t.rng)
        for what, data in damages:
            d = t.path("ckpt-damaged")
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(good, d)
            write(os.path.join(d, name), data)
            # The `checkpoint` pointer file may name a step whose files are
            # there: a changed byte of it can leave it valid.
            must = name != "checkpoint"
            t.run("checkpoint " + name, what,
                  [plan, "--quiet", "--model-dir", d, "--steps", "6"],
                  name if must else "checkpoint", must)
        d = t.path("ckpt-damaged")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(good, d)
        os.remove(os.path.join(d, name))
        if name != "checkpoint":
            t.run("checkpoint " + name, "file removed",
                  [plan, "--quiet", "--model-dir", d, "--steps", "6"], name, True)


# --- TFRecord ---------------------------------------------------------------

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(x, y):
    floats = field(2, field(1, struct.pack("<%df" % len(x), *x)))
    ints = field(3, field(1, varint(y)))
    entries = field(1, field(1, b"x") + field(2, floats)) + \
        field(1, field(1, b"y") + field(2, ints))
    return field(1, entries)


def tfrecord(records):
    return b"".join(record(r) for r in records)


def tfrecord_cases(t, count):
    rng = t.rng
    records = [example([rng.gauss(0, 1) for _ in range(8)], rng.randrange(3))
               for _ in range(16)]
    pristine = tfrecord(records)
    path = t.path("data.tfrecord")
    plan = t.compile("tfrecord", 8, 3, 'tfrecord("%s")' % path)
    write(path, pristine)
    t.run("tfrecord", "pristine", [plan, "--quiet"], "data.tfrecord", False,
          must_accept=True)
    for what, data in byte_damages(pristine, count, rng):
        write(path, data)
        # Every byte of a record is under a CRC: any change must be refused.
        t.run("tfrecord", what, [plan, "--quiet"], "data.tfrecord", True)
    bad = [("a NaN feature", example([float("nan")] + [0.0] * 7, 1)),
           ("an infinite feature", example([float("inf")] + [0.0] * 7, 1)),
           ("a label of 3 for 3 classes", example([0.0] * 8, 3)),
           ("7 features for 8", field(1, field(1, field(1, b"x") + field(2, field(2, field(1, struct.pack("<7f", *[0.0] * 7))))) + field(1, field(1, b"y") + field(2, field(3, field(1, varint(1))))))),
           ("no label feature", field(1, field(1, field(1, b"x") + field(2, field(2, field(1, struct.pack("<8f", *[0.0] * 8))))))),
           ("a record that is no Example", b"\xff\xff\xff\xff")]
    for what, record in bad:
        write(path, tfrecord(records[:4] + [record] + records[4:]))
        t.run("tfrecord", what, [plan, "--quiet"], "data.tfrecord", True)


# --- IDX --------------------------------------------------------------------

def idx_cases(t, count):
    rng = t.rng
    d = t.path("idx")
    os.makedirs(d, exist_ok=True)
    images = struct.pack(">IIII", 0x803, 16, 2, 2) + rng.randbytes(64)
    labels = struct.pack(">II", 0x801, 16) + bytes(rng.randrange(10) for _ in range(16))
    plan = t.compile("idx", 4, 10, 'idx("%s", split = train)' % d)
    write(os.path.join(d, "train-images-idx3-ubyte"), images)
    write(os.path.join(d, "train-labels-idx1-ubyte"), labels)
    t.run("idx", "pristine", [plan, "--quiet"], "idx", False, must_accept=True)
    for name, pristine, header in (("train-images-idx3-ubyte", images, 16),
                                   ("train-labels-idx1-ubyte", labels, 8)):
        other = labels if name.startswith("train-images") else images
        other_name = ("train-labels-idx1-ubyte" if name.startswith("train-images")
                      else "train-images-idx3-ubyte")
        write(os.path.join(d, other_name), other)
        for what, data in byte_damages(pristine, count // 2, rng):
            write(os.path.join(d, name), data)
            offset = int(what.split()[1]) if what.startswith("byte ") else -1
            if offset >= header and name.startswith("train-images"):
                must = False  # a pixel: any byte is a pixel
            elif offset >= header:
                must = data[offset] >= 10  # a label byte: valid below 10
            else:
                must = True  # header, cut, appended, empty, random
            if what == "random bytes of the same size":
                must = True
            t.run("idx " + name, what, [plan, "--quiet"], name, must)
        write(os.path.join(d, name), pristine)


# --- CSV --------------------------------------------------------------------

def csv_cases(t):
    rng = t.rng
    rows = [[("%.3f" % rng.gauss(0, 1)) for _ in range(8)] + [str(rng.randrange(3))]
            for _ in range(16)]
    path = t.path("data.csv")
    plan = t.compile("csv", 8, 3, 'csv("%s", label = "y")' % path)
    header = ",".join(["x%d" % i for i in range(8)] + ["y"])

    def text(rs, head=header):
        return (head + "\n" if head is not None else "") + \
            "".join(",".join(r) + "\n" for r in rs)

    write(path, text(rows).encode())
    t.run("csv", "pristine", [plan, "--quiet"], "data.csv", False,
          must_accept=True)
    cases = [("a word for a number", 5, 2, "abc"), ("NaN", 5, 2, "nan"),
             ("an infinity", 5, 2, "inf"), ("an empty field", 5, 2, ""),
             ("1e999", 5, 2, "1e999"), ("a fractional label", 5, 8, "1.5"),
             ("a label of 3 for 3 classes", 5, 8, "3"),
             ("a negative label", 5, 8, "-1"), ("a label of 2^40", 5, 8, "1099511627776"),
             ("a NUL byte", 5, 2, "1\x002"), ("a quote left open", 5, 2, "\"1.0")]
    for what, row, col, value in cases:
        rs = [list(r) for r in rows]
        rs[row][col] = value
        write(path, text(rs).encode())
        t.run("csv", what, [plan, "--quiet"], "data.csv", True)
    rs = [list(r) for r in rows]
    rs[7].append("1.0")
    write(path, text(rs).encode())
    t.run("csv", "an extra column", [plan, "--quiet"], "data.csv", True)
    rs = [list(r) for r in rows]
    rs[7].pop(0)
    write(path, text(rs).encode())
    t.run("csv", "a missing column", [plan, "--quiet"], "data.csv", True)
    write(path, text(rows, head=None).encode())
    t.run("csv", "no header (label y named)", [plan, "--quiet"], "data.csv", True)
    write(path, b"")
    t.run("csv", "empty", [plan, "--quiet"], "data.csv", True)
    write(path, header.encode() + b"\n")
    t.run("csv", "a header only", [plan, "--quiet"], "data.csv", True)
    write(path, b"\xff\xfe" + text(rows).encode("utf-16-le"))
    t.run("csv", "UTF-16", [plan, "--quiet"], "data.csv", True)


# --- cluster.json and TF_CONFIG --------------------------------------------

LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def valid_address(a):
    if not isinstance(a, str):
        return False
    m = re.match(r"^(\[[^\]]+\]|[^:\[\]]+):(\d{1,5})$", a)
    if not m or not 1 <= int(m.group(2)) <= 65535:
        return False
    host = m.group(1)
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1].split("%")[0])
            return True
        except ValueError:
            return False
    try:
        ipaddress.IPv4Address(host)
        return True
    except ValueError:
        pass
    if re.fullmatch(r"[0-9.]+", host):
        return False
    return len(host) <= 253 and all(LABEL.match(l) for l in host.split("."))


def valid_cluster(text):
    try:
        spec = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return False
    if not isinstance(spec, dict) or set(spec) - {"ps", "worker", "chief", "evaluator"}:
        return False
    if not isinstance(spec.get("worker"), list) or not spec["worker"]:
        return False
    addresses = []
    for job, tasks in spec.items():
        if not isinstance(tasks, list) or not tasks:
            return False
        addresses += tasks
    return all(valid_address(a) for a in addresses) and \
        len(set(addresses)) == len(addresses)


def cluster_cases(t, count):
    plan = t.compile("cluster", 8, 3, "synthetic(examples = 64)")
    good = {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}
    text = json.dumps(good)
    path = t.path("cluster.json")
    args = [plan, "--quiet", "--cluster", path, "--job", "worker", "--task", "1",
            "--insecure", "--connect-timeout", "1"]
    # A task that parsed its cluster starts and waits for its peers.
    started = r"--insecure: plaintext|cannot reach ps\.0"
    targeted = [
        ("not JSON", "{ps: [1]}"), ("a list", "[]"), ("no workers", '{"ps": ["a:1"]}'),
        ("a port of 0", '{"worker": ["h:0"]}'), ("a port of 65536", '{"worker": ["h:65536"]}'),
        ("no port", '{"worker": ["host"]}'), ("a space in a host", '{"worker": ["a b:1"]}'),
        ("an underscore", '{"worker": ["a_b:1"]}'), ("a label of 64", '{"worker": ["%s:1"]}' % ("a" * 64)),
        ("a host of 300", '{"worker": ["%s:1"]}' % ".".join(["abc"] * 75)),
        ("a control byte", '{"worker": ["a\\u0001b:1"]}'), ("a NUL", '{"worker": ["a\\u0000:1"]}'),
        ("256.1.1.1", '{"worker": ["256.1.1.1:1"]}'), ("a number for a task", '{"worker": [1]}'),
        ("a huge number", '{"worker": ["h:1"], "ps": [1e999]}'),
        ("an unknown job", '{"worker": ["h:1"], "boss": ["h:2"]}'),
        ("a duplicate address", '{"worker": ["h:1", "h:1"]}'),
        ("deep nesting", "[" * 30000 + "]" * 30000), ("empty", ""),
        ("invalid UTF-8", '{"worker": ["\xff:1"]}'),
        ("IPv6 without brackets", '{"worker": ["::1:2"]}'),
        ("a bad IPv6 zone", '{"worker": ["[fe80::1%%a/b]:1"]}'),
    ]
    for what, body in targeted:
        write(path, body.encode("utf-8", "surrogateescape") if what != "invalid UTF-8"
              else b'{"worker": ["\xff:1"]}')
        t.run("cluster.json", what, args, "cluster.json", True, started=started)
    for what, data in byte_damages(text.encode(), count, t.rng):
        write(path, data)
        try:
            valid = valid_cluster(data.decode("utf-8"))
        except UnicodeDecodeError:
            valid = False
        if valid:
            continue  # a changed digit of a port: a valid cluster, not a case
        t.run("cluster.json", what, args, "cluster.json", True, started=started)
    # TF_CONFIG: the same bodies in the environment.
    env_args = [plan, "--quiet", "--insecure", "--connect-timeout", "1"]
    for what, body in targeted[:19]:
        tf_config = '{"cluster": %s, "task": {"type": "worker", "index": 1}}' % body
        t.run("TF_CONFIG", what, env_args, "TF_CONFIG", True,
              env={"TF_CONFIG": tf_config}, started=started)
    for what, tf_config in (("not JSON", "{"), ("no task", json.dumps({"cluster": good})),
                            ("a task index out of range", json.dumps({"cluster": good, "task": {"type": "worker", "index": 5}})),
                            ("a negative index", json.dumps({"cluster": good, "task": {"type": "worker", "index": -1}})),
                            ("an unknown task type", json.dumps({"cluster": good, "task": {"type": "boss", "index": 0}}))):
        t.run("TF_CONFIG", what, env_args, "TF_CONFIG", True,
              env={"TF_CONFIG": tf_config}, started=started)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("work")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=35)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    t = Trial(os.path.abspath(a.bin_dir), os.path.abspath(a.work), random.Random(a.seed))
    n = lambda k: max(1, int(k * a.scale))
    for name, run in (("plan.bin", lambda: plan_cases(t, n(80))),
                      ("checkpoints", lambda: checkpoint_cases(t, n(90))),
                      ("tfrecord", lambda: tfrecord_cases(t, n(50))),
                      ("idx", lambda: idx_cases(t, n(60))),
                      ("csv", lambda: csv_cases(t)),
                      ("cluster", lambda: cluster_cases(t, n(40)))):
        before = sum(t.results.values())
        run()
        print("damage: %-11s %4d cases" % (name, sum(t.results.values()) - before), flush=True)
    for line in t.failures:
        print("damage: FAIL: " + line)
    total = sum(t.results.values())
    print("damage: %d cases: %s" % (total, ", ".join(
        "%d %s" % (v, k) for k, v in sorted(t.results.items()))))
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
