"""The CTR model of models/ctr.dtf in TensorFlow's own classic ps/worker
training, for bench/embedding.sh: tf.compat.v1 between-graph replication
(a ClusterSpec, one tf.distribute.Server per task, replica_device_setter
placing the variables round robin on the ps tasks), the 2,000,000 x 32 table
partitioned into 4 (fixed_size_partitioner) so embedding_lookup gathers on
the ps that holds each shard and AdagradOptimizer(0.05) applies the
IndexedSlices gradient there; async; every task a process on 127.0.0.1.

  python tf_ctr_cluster.py --ps 2 --workers 2 [--warmup 20 --steps 200]

prints one JSON line: the sum of the workers' examples/s over their timed
steps, the bytes sent over the loopback per global step in worker 0's timed window
(task_watch.py), and every task's peak RSS.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ctr_common  # noqa: E402
import task_watch  # noqa: E402
import tf_ctr  # noqa: E402
from tf_ps_worker import free_ports, initialize_or_wait, reap, stop_all  # noqa: E402


def run_task(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec(json.loads(a.cluster))
    config = v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                            inter_op_parallelism_threads=a.threads)
    server = tf.distribute.Server(cluster, job_name=a.job, task_index=a.task,
                                  config=config)
    if a.job == "ps":
        print(json.dumps({"ready": "ps", "task": a.task}), flush=True)
        server.join()
        return
    rng = np.random.default_rng(1 + a.task)
    ids_all = rng.integers(0, a.rows, (ctr_common.EXAMPLES, 26), dtype=np.int64)
    y_all = rng.integers(0, 2, (ctr_common.EXAMPLES,), dtype=np.int32)
    device = v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{a.task}", cluster=cluster)
    with v1.device(device):
        ids, y, loss, train = tf_ctr.build(tf, a.rows)
        init = v1.global_variables_initializer()
        uninit = v1.report_uninitialized_variables() if a.task else None
    sess_config = v1.ConfigProto(
        intra_op_parallelism_threads=a.threads, inter_op_parallelism_threads=a.threads,
        device_filters=["/job:ps", f"/job:worker/task:{a.task}"])
    with v1.Session(server.target, config=sess_config) as sess:
        initialize_or_wait(sess, a.task, init, uninit, 300)

        def step(i):
            lo, hi = ctr_common.window(i, a.batch)
            return float(sess.run([train, loss], {ids: ids_all[lo:hi], y: y_all[lo:hi]})[1])

        for i in range(a.warmup):
            step(i)
        t0, lo0 = time.time(), task_watch.lo_bytes()
        losses = [step(a.warmup + i) for i in range(a.steps)]
        t1, lo1 = time.time(), task_watch.lo_bytes()
    print(json.dumps({"task": a.task, "t0": t0, "t1": t1, "lo": lo1 - lo0,
                      "examples_per_sec": a.steps * a.batch / (t1 - t0),
                      "loss_last": sum(losses[-20:]) / len(losses[-20:]),
                      "tensorflow": tf.__version__}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per worker")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1, help="threads per task")
    ap.add_argument("--rows", type=int, default=2000000)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--cluster")
    ap.add_argument("--job", choices=["ps", "worker"])
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--private-net", action="store_true",
                    help="runs under unshare -n: bring lo up and count its bytes")
    a = ap.parse_args()
    if a.job:
        return run_task(a)
    private = task_watch.own_loopback(a.private_net)  # before any port is chosen
    ports = free_ports(a.ps + a.workers)
    spec = {"ps": [f"127.0.0.1:{p}" for p in ports[:a.ps]],
            "worker": [f"127.0.0.1:{p}" for p in ports[a.ps:]]}
    common = [sys.executable, os.path.abspath(__file__), "--cluster", json.dumps(spec),
              "--warmup", str(a.warmup), "--steps", str(a.steps), "--batch", str(a.batch),
              "--threads", str(a.threads), "--rows", str(a.rows)]
    watch = task_watch.TaskWatch()
    procs, rss, results = [], {}, []
    try:
        for job, n in (("ps", a.ps), ("worker", a.workers)):
            for t in range(n):
                p = subprocess.Popen(common + ["--job", job, "--task", str(t)],
                                     stdout=subprocess.PIPE, text=True)
                procs.append((job, t, p))
                watch.watch(f"{job}.{t}", p.pid)
        deadline = time.time() + a.timeout
        for job, t, p in procs:
            if job != "worker":
                continue
            r = reap(p, deadline)
            if r is None:
                raise SystemExit(f"tf_ctr_cluster: worker {t} still running after {a.timeout} s")
            out = p.stdout.read()
            if r[0] != 0:
                raise SystemExit(f"tf_ctr_cluster: worker {t} exited with {r[0]}\n{out}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        # Worker 0's timed window: the bytes every task sent in it, over
        # the global steps all workers made in it.
        w0 = next(r for r in results if r["task"] == 0)
        rate = sum(r["examples_per_sec"] for r in results)
        global_steps = rate / a.batch * (w0["t1"] - w0["t0"])
        moved = w0["lo"]
    finally:
        stop_all(procs, rss)
    peaks = {f"{job}.{t}": round(watch.peak_mb(f"{job}.{t}")) for job, t, _ in procs}
    print(json.dumps({
        "framework": "TensorFlow " + results[0]["tensorflow"],
        "examples_per_sec": rate,
        "bytes_per_step": moved / max(global_steps, 1) if private else None,
        "loss_last": [round(r["loss_last"], 4) for r in results],
        "peak_rss_mb": peaks, "peak_rss_mb_total": sum(peaks.values()),
    }))


if __name__ == "__main__":
    main()
