"""TensorFlow's own classic distributed training of the seed CNN, for
bench/distributed.sh: between-graph replication with tf.compat.v1 (a
tf.train.ClusterSpec, one tf.distribute.Server per task,
replica_device_setter placing the variables round robin on the ps tasks,
asynchronous Adam updates, feed_dict input, as in TensorFlow's
mnist_replica.py), every task a separate process on 127.0.0.1.

  python tf_ps_worker.py --ps 2 --workers 2 [--warmup 50 --steps 300]

launches the ps and worker tasks on free loopback ports, waits for the
workers, stops the ps tasks, and prints one JSON line: the sum of the
workers' images/s over their timed steps (each worker's warm-up left out),
the rate over the span in which all workers' timed steps ran, and the peak
RSS of every task. Run with --job/--task (and --cluster) it is one task.

The model is models/mnist_cnn.dtf written with raw ops (Keras 3 has no
graph mode): conv 5x5x32 + relu, max pool 2, conv 5x5x64 + relu, max pool 2,
dense 500 + relu, dense 10, sparse softmax cross-entropy, Adam 1e-4,
batch 50 per worker and step.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fmnist  # noqa: E402


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def build_model(tf, x, y):
    v1 = tf.compat.v1
    glorot = v1.glorot_uniform_initializer()
    zeros = v1.zeros_initializer()

    def var(scope, name, shape, init):
        with v1.variable_scope(scope, reuse=v1.AUTO_REUSE):
            return v1.get_variable(name, shape, tf.float32, init)

    # Created in the order dtf lists them, so round robin places them alike.
    k1 = var("conv1", "kernel", [5, 5, 1, 32], glorot)
    b1 = var("conv1", "bias", [32], zeros)
    k2 = var("conv2", "kernel", [5, 5, 32, 64], glorot)
    b2 = var("conv2", "bias", [64], zeros)
    k3 = var("fully_connected", "kernel", [3136, 500], glorot)
    b3 = var("fully_connected", "bias", [500], zeros)
    k4 = var("pred", "kernel", [500, 10], glorot)
    b4 = var("pred", "bias", [10], zeros)

    images = tf.reshape(x, [-1, 28, 28, 1])
    c1 = tf.nn.relu(tf.nn.conv2d(images, k1, 1, "SAME") + b1)
    p1 = tf.nn.max_pool2d(c1, 2, 2, "VALID")
    c2 = tf.nn.relu(tf.nn.conv2d(p1, k2, 1, "SAME") + b2)
    p2 = tf.nn.max_pool2d(c2, 2, 2, "VALID")
    fc = tf.nn.relu(tf.matmul(tf.reshape(p2, [-1, 3136]), k3) + b3)
    logits = tf.matmul(fc, k4) + b4
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def initialize_or_wait(sess, task, init, uninit, seconds):
    """Worker 0 (the chief) initializes the variables on the ps tasks; the
    others wait until it has (at most `seconds`)."""
    if task == 0:
        sess.run(init)
        return
    deadline = time.time() + seconds
    while len(sess.run(uninit)) > 0:
        if time.time() > deadline:
            sys.exit(f"worker {task}: variables still uninitialized after {seconds} s")
        time.sleep(0.2)


def run_task(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()

    cluster = tf.train.ClusterSpec(json.loads(a.cluster))
    if a.job == "ps":
        config = v1.ConfigProto(intra_op_parallelism_threads=a.ps_threads,
                                inter_op_parallelism_threads=a.ps_threads)
        server = tf.distribute.Server(cluster, job_name="ps",
                                      task_index=a.task, config=config)
        print(json.dumps({"ready": "ps", "task": a.task}), flush=True)
        server.join()  # until the launcher stops it
        return

    config = v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                            inter_op_parallelism_threads=a.inter_threads)
    server = tf.distribute.Server(cluster, job_name="worker",
                                  task_index=a.task, config=config)
    x_all, y_all = fmnist.load_train(a.data)
    y_all = y_all.astype("int32")

    device = v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{a.task}", cluster=cluster)
    with v1.device(device):
        x = v1.placeholder(tf.float32, [None, 784], name="x")
        y = v1.placeholder(tf.int32, [None], name="y")
        loss = build_model(tf, x, y)
        train_op = v1.train.AdamOptimizer(1e-4).minimize(loss)
        init = v1.global_variables_initializer()
        # Only the workers that wait run it (TF complains about unused ones).
        uninit = v1.report_uninitialized_variables() if a.task else None

    # Worker 0 is the chief: it initializes the variables on the ps tasks;
    # the others wait until it has.
    sess_config = v1.ConfigProto(
        intra_op_parallelism_threads=a.threads,
        inter_op_parallelism_threads=a.inter_threads,
        device_filters=["/job:ps", f"/job:worker/task:{a.task}"])
    with v1.Session(server.target, config=sess_config) as sess:
        initialize_or_wait(sess, a.task, init, uninit, 120)
        it = fmnist.batches(len(x_all), a.batch, a.seed + a.task)

        def step():
            idx = next(it)
            return sess.run([train_op, loss], {x: fmnist.to_float(x_all[idx]),
                                               y: y_all[idx]})[1]

        for _ in range(a.warmup):
            step()
        losses = []
        t0 = time.time()
        for _ in range(a.steps):
            losses.append(float(step()))
        t1 = time.time()
    print(json.dumps({
        "task": a.task, "t0": t0, "t1": t1,
        "images_per_sec": a.steps * a.batch / (t1 - t0),
        "loss_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "tensorflow": tf.__version__,
    }), flush=True)


CPU_SECONDS = {}  # pid -> user + system seconds, from wait4


def reap(p, block_until):
    """Waits for child p (until block_until, a time.time()) with wait4, so
    that its peak RSS is known; returns (exit code, max RSS in KB) or None."""
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            CPU_SECONDS[p.pid] = ru.ru_utime + ru.ru_stime
            return p.returncode, ru.ru_maxrss
        if time.time() > block_until:
            return None
        time.sleep(0.05)


def stop_all(procs, rss):
    """Stops the tasks of procs [(job, task, Popen)] still running (SIGTERM,
    then SIGKILL after 10 s) and records each one's peak RSS in MB in rss
    under "job:task"."""
    for job, t, p in procs:
        if p.returncode is None:
            os.kill(p.pid, signal.SIGTERM)
    for job, t, p in procs:
        if p.returncode is None:
            r = reap(p, time.time() + 10)
            if r is None:
                os.kill(p.pid, signal.SIGKILL)
                r = reap(p, time.time() + 10)
            if r is not None:
                rss[f"{job}:{t}"] = r[1] / 1024.0


def launch(a):
    if a.spec:
        # Given addresses (hosts in network namespaces: bench/hosts.sh).
        spec = json.loads(a.spec)
        if len(spec.get("ps", [])) != a.ps or len(spec.get("worker", [])) != a.workers:
            raise SystemExit("tf_ps_worker: --spec does not have --ps ps and --workers workers")
    else:
        ports = free_ports(a.ps + a.workers)
        spec = {"ps": [f"127.0.0.1:{p}" for p in ports[:a.ps]],
                "worker": [f"127.0.0.1:{p}" for p in ports[a.ps:]]}
    netns = a.netns.split(",") if a.netns else []
    if netns and len(netns) != a.ps + a.workers:
        raise SystemExit("tf_ps_worker: --netns needs one namespace per task (ps first)")
    common = [sys.executable, os.path.abspath(__file__),
              "--cluster", json.dumps(spec), "--data", a.data,
              "--warmup", str(a.warmup), "--steps", str(a.steps),
              "--batch", str(a.batch), "--threads", str(a.threads),
              "--inter-threads", str(a.inter_threads),
              "--ps-threads", str(a.ps_threads), "--seed", str(a.seed)]
    procs = []  # (job, task, Popen)
    rss = {}    # "job:task" -> peak RSS in MB
    results = []
    try:
        for job, n in (("ps", a.ps), ("worker", a.workers)):
            for t in range(n):
                cmd = common + ["--job", job, "--task", str(t)]
                if netns:
                    cmd = ["ip", "netns", "exec", netns[len(procs)]] + cmd
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
                procs.append((job, t, p))
        deadline = time.time() + a.timeout
        for job, t, p in procs:
            if job != "worker":
                continue
            r = reap(p, deadline)
            if r is None:
                raise SystemExit(f"tf_ps_worker: worker {t} still running after {a.timeout} s")
            rss[f"worker:{t}"] = r[1] / 1024.0
            out = p.stdout.read()
            if r[0] != 0:
                raise SystemExit(f"tf_ps_worker: worker {t} exited with {r[0]}\n{out}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        # The ps tasks serve until stopped (server.join()); so do workers
        # left over after an error.
        stop_all(procs, rss)
    cpu = {f"{job}:{t}": round(CPU_SECONDS.get(p.pid, 0.0), 1) for job, t, p in procs}
    return spec, results, rss, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps", type=int, default=1, help="ps tasks to launch")
    ap.add_argument("--workers", type=int, default=2, help="worker tasks to launch")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300, help="timed steps per worker")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads per worker")
    ap.add_argument("--inter-threads", type=int, default=1,
                    help="inter-op threads per worker")
    ap.add_argument("--ps-threads", type=int, default=1,
                    help="intra- and inter-op threads per ps task")
    ap.add_argument("--data", default=fmnist.DEFAULT_DIR)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds to wait for the workers")
    ap.add_argument("--spec", help="the cluster spec as JSON instead of free "
                    "loopback ports (with --netns: each task's host)")
    ap.add_argument("--netns", help="comma-separated network namespaces, one "
                    "per task (ps first, then workers), each task run in its own")
    ap.add_argument("--cluster", help="(task mode) the cluster spec as JSON")
    ap.add_argument("--job", choices=["ps", "worker"])
    ap.add_argument("--task", type=int, default=0)
    a = ap.parse_args()
    if a.job:
        if not a.cluster:
            ap.error("--job needs --cluster")
        return run_task(a)
    if a.ps < 1 or a.workers < 1:
        ap.error("--ps and --workers need at least 1 each")
    spec, results, rss, cpu = launch(a)
    span = max(r["t1"] for r in results) - min(r["t0"] for r in results)
    print(json.dumps({
        "framework": "TensorFlow " + results[0]["tensorflow"],
        "ps": a.ps, "workers": a.workers,
        "images_per_sec_sum": sum(r["images_per_sec"] for r in results),
        "images_per_sec_span": a.workers * a.steps * a.batch / span,
        "per_worker": [round(r["images_per_sec"], 1) for r in results],
        "loss_last_50": [round(r["loss_last_50"], 4) for r in results],
        "peak_rss_mb": {k: round(v) for k, v in sorted(rss.items())},
        "peak_rss_mb_total": round(sum(rss.values())),
        "cpu_seconds": cpu,
        "threads": {"worker_intra": a.threads, "worker_inter": a.inter_threads,
                    "ps": a.ps_threads},
        "cluster": spec,
    }))


if __name__ == "__main__":
    main()
