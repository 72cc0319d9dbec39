"""dtf's own ps/worker run of a plan for bench/embedding.sh, measured like
tf_ctr_cluster.py: `dtf-run PLAN --cluster` on 127.0.0.1 (the launcher starts
and supervises the tasks), the workers' examples/s over the steps after the
warm-up, the bytes sent over the loopback per global step in that window and
every task's peak RSS (task_watch.py), and the ps tasks' own count of tensor
bytes per update.

  python dtf_cluster.py --dtf-run BIN --plan PLAN [--ps 2 --workers 2]
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task_watch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtf-run", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--ps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=20, help="global steps before timing")
    ap.add_argument("--steps", type=int, default=200, help="timed steps per worker")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--insecure", action="store_true",
                    help="plaintext between the tasks (as TensorFlow's), not mutual TLS")
    ap.add_argument("--private-net", action="store_true",
                    help="runs under unshare -n: bring lo up and count its bytes")
    a = ap.parse_args()
    private = task_watch.own_loopback(a.private_net)  # before any port is chosen
    socks, addr = [], []
    for _ in range(a.ps + a.workers):
        s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
        addr.append(f"127.0.0.1:{s.getsockname()[1]}")
    for s in socks:
        s.close()
    cluster = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"ps": addr[:a.ps], "worker": addr[a.ps:]}, cluster)
    cluster.close()
    total = a.warmup + a.steps * a.workers
    cmd = [a.dtf_run, a.plan, "--cluster", cluster.name, "--steps", str(total),
           "--threads", str(a.threads), "--log-every", "10",
           # A ps draws its shards' initial rows before it answers (seconds
           # for a large table on a loaded machine).
           "--connect-timeout", "300"] + (["--insecure"] if a.insecure else [])
    watch = task_watch.TaskWatch()
    stamps = []  # (time, global step, loopback bytes) at the chief's progress lines
    lines = []
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        now = time.time()
        lines.append(line.rstrip("\n"))
        m = re.match(r"\[launcher\] (\S+) started \(pid (\d+)", line)
        if m:
            watch.watch(m.group(1), int(m.group(2)))
        m = re.match(r"worker\.0 *\| step (\d+)/", line)
        if m:
            stamps.append((now, int(m.group(1)), task_watch.lo_bytes()))
    code = p.wait()
    os.unlink(cluster.name)
    if code != 0:
        sys.exit("dtf_cluster: dtf-run failed:\n" + "\n".join(lines[-30:]))
    timed = [s for s in stamps if s[1] >= a.warmup]
    if len(timed) < 2:
        sys.exit("dtf_cluster: too few progress lines:\n" + "\n".join(lines[-30:]))
    (t0, s0, lo0), (t1, s1, lo1) = timed[0], timed[-1]
    rate = (s1 - s0) * a.batch / (t1 - t0)
    moved = lo1 - lo0
    payload, updates = 0, 0
    for l in lines:
        m = re.search(r"ps\.\d+ *\| (\d+) updates applied.*tensor bytes received (\d+), sent (\d+)", l)
        if m:
            updates = max(updates, int(m.group(1)))
            payload += int(m.group(2)) + int(m.group(3))
    loss = [float(m.group(1)) for l in lines for m in [re.search(r"final: steps=\d+ loss=([0-9.]+)", l)] if m]
    peaks = {k: round(watch.peak_mb(k)) for k in sorted(watch.samples)}
    print(json.dumps({
        "framework": "dtf" + (" (plaintext)" if a.insecure else " (mutual TLS)"),
        "examples_per_sec": rate,
        "bytes_per_step": moved / max(s1 - s0, 1) if private else None,
        "payload_bytes_per_update": payload / max(updates, 1),
        "loss_last": loss,
        "peak_rss_mb": peaks, "peak_rss_mb_total": sum(peaks.values()),
    }))


if __name__ == "__main__":
    main()
