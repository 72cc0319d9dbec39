"""TensorFlow's own model parallelism across tasks, for
bench/model_parallel.sh: the MLP of models/model_parallel.dtf cut in two the
classic tf.compat.v1 way. A tf.distribute.Server per task (ps 0, worker 0,
worker 1), every task a separate process on 127.0.0.1; one between-graph
client on worker 0 builds the graph with the variables on /job:ps/task:0,
layer 1 under tf.device("/job:worker/task:0") and the rest (dropout,
layer 2, output layer, loss) under tf.device("/job:worker/task:1"); worker 1
only serves (server.join()). TensorFlow's master on worker 0 partitions the
graph and inserts the _Send/_Recv pairs that carry the activations to
worker 1 and their gradient back over gRPC each step.

  python tf_model_parallel.py [--warmup 100 --steps 2000]

launches the three tasks on free loopback ports, waits for worker 0, stops
the others, and prints one JSON line: worker 0's images/s over its timed
steps (the warm-up left out) and the peak RSS of every task. Run with
--job/--task (and --cluster) it is one task.

As in the dtf model: 784-256-relu | dropout 0.2, 128-relu, 10, sparse softmax
cross-entropy; momentum 0.9, learning rate 0.05, gradients clipped by their
global norm 5; batch 100, feed_dict input. Gradients are colocated with
their ops (so the backward pass of the second stage runs on worker 1, as
dtf's does); clipping, the metrics and the update ops are created under
worker 0's scope (the updates themselves run on the ps, with the variables),
as dtf runs unplaced computations on stage 0.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fmnist  # noqa: E402
from tf_ps_worker import free_ports, reap, stop_all  # noqa: E402

STAGE0 = "/job:worker/task:0"
STAGE1 = "/job:worker/task:1"


def build_model(tf, x, y):
    v1 = tf.compat.v1
    glorot = v1.glorot_uniform_initializer()
    zeros = v1.zeros_initializer()

    def dense_vars(scope, fan_in, units):
        with v1.variable_scope(scope):
            return (v1.get_variable("kernel", [fan_in, units], tf.float32, glorot),
                    v1.get_variable("bias", [units], tf.float32, zeros))

    with tf.device("/job:ps/task:0"):
        k1, b1 = dense_vars("hidden1", 784, 256)
        k2, b2 = dense_vars("hidden2", 256, 128)
        k3, b3 = dense_vars("softmax_linear", 128, 10)
        global_step = v1.train.get_or_create_global_step()
    with tf.device(STAGE0):
        h1 = tf.nn.relu(tf.matmul(x, k1) + b1)
    with tf.device(STAGE1):
        d1 = tf.nn.dropout(h1, rate=0.2)
        h2 = tf.nn.relu(tf.matmul(d1, k2) + b2)
        logits = tf.matmul(h2, k3) + b3
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    with tf.device(STAGE0):
        accuracy = tf.reduce_mean(tf.cast(
            tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32))
        opt = v1.train.MomentumOptimizer(0.05, 0.9)
        grads_and_vars = opt.compute_gradients(loss, colocate_gradients_with_ops=True)
        grads, variables = zip(*grads_and_vars)
        clipped, _ = tf.clip_by_global_norm(grads, 5.0)
        train_op = opt.apply_gradients(zip(clipped, variables), global_step=global_step)
    return loss, accuracy, train_op


def run_task(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()

    cluster = tf.train.ClusterSpec(json.loads(a.cluster))
    config = v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                            inter_op_parallelism_threads=a.inter_threads)
    server = tf.distribute.Server(cluster, job_name=a.job, task_index=a.task,
                                  config=config)
    if a.job == "ps" or a.task != 0:
        # The ps holds the variables; worker 1 runs the partition of the
        # graph that worker 0's master hands it. Both until stopped.
        server.join()
        return

    x_all, y_all = fmnist.load_train(a.data)
    y_all = y_all.astype("int32")
    with tf.device(STAGE0):
        x = v1.placeholder(tf.float32, [None, 784], name="x")
        y = v1.placeholder(tf.int32, [None], name="y")
    loss, accuracy, train_op = build_model(tf, x, y)
    init = v1.global_variables_initializer()

    sess_config = v1.ConfigProto(
        intra_op_parallelism_threads=a.threads,
        inter_op_parallelism_threads=a.inter_threads,
        device_filters=["/job:ps", STAGE0, STAGE1])
    with v1.Session(server.target, config=sess_config) as sess:
        sess.run(init)
        it = fmnist.batches(len(x_all), a.batch, a.seed)

        def step():
            idx = next(it)
            return sess.run([train_op, loss, accuracy],
                            {x: fmnist.to_float(x_all[idx]), y: y_all[idx]})[1:]

        for _ in range(a.warmup):
            step()
        # One more untimed step, traced: which tasks ran a partition of the
        # step, and which tensors crossed between the two workers (a check
        # that the model really is split).
        meta = v1.RunMetadata()
        idx = next(it)
        sess.run(train_op, {x: fmnist.to_float(x_all[idx]), y: y_all[idx]},
                 options=v1.RunOptions(output_partition_graphs=True),
                 run_metadata=meta)
        partitions, crossing = [], 0
        for g in meta.partition_graphs:
            devs = {n.device for n in g.node if n.device}
            partitions.append(sorted({d.split("/device:")[0] for d in devs}))
            for n in g.node:
                if n.op == "_Send":
                    src = n.attr["send_device"].s.decode()
                    dst = n.attr["recv_device"].s.decode()
                    if "/job:worker" in src and "/job:worker" in dst and src != dst:
                        crossing += 1
        losses, accs = [], []
        t0 = time.time()
        for _ in range(a.steps):
            l, acc = step()
            losses.append(float(l))
            accs.append(float(acc))
        t1 = time.time()
    print(json.dumps({
        "t0": t0, "t1": t1,
        "images_per_sec": a.steps * a.batch / (t1 - t0),
        "loss_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "accuracy_last_50": sum(accs[-50:]) / len(accs[-50:]),
        "tensorflow": tf.__version__,
        "partitions": partitions,
        "worker_to_worker_sends": crossing,
    }), flush=True)


def launch(a):
    ports = free_ports(3)
    spec = {"ps": [f"127.0.0.1:{ports[0]}"],
            "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    common = [sys.executable, os.path.abspath(__file__),
              "--cluster", json.dumps(spec), "--data", a.data,
              "--warmup", str(a.warmup), "--steps", str(a.steps),
              "--batch", str(a.batch), "--threads", str(a.threads),
              "--inter-threads", str(a.inter_threads), "--seed", str(a.seed)]
    procs = []  # (job, task, Popen)
    rss = {}    # "job:task" -> peak RSS in MB
    try:
        # The servers first: worker 0's session waits for them anyway.
        for job, t in (("ps", 0), ("worker", 1), ("worker", 0)):
            p = subprocess.Popen(common + ["--job", job, "--task", str(t)],
                                 stdout=subprocess.PIPE, text=True)
            procs.append((job, t, p))
        p = procs[-1][2]
        r = reap(p, time.time() + a.timeout)
        if r is None:
            raise SystemExit(f"tf_model_parallel: worker 0 still running after {a.timeout} s")
        rss["worker:0"] = r[1] / 1024.0
        out = p.stdout.read()
        if r[0] != 0:
            raise SystemExit(f"tf_model_parallel: worker 0 exited with {r[0]}\n{out}")
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        # The ps and worker 1 serve until stopped (server.join()).
        stop_all(procs, rss)
    return spec, result, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000, help="timed steps")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads per task")
    ap.add_argument("--inter-threads", type=int, default=1,
                    help="inter-op threads per task")
    ap.add_argument("--data", default=fmnist.DEFAULT_DIR)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds to wait for worker 0")
    ap.add_argument("--cluster", help="(task mode) the cluster spec as JSON")
    ap.add_argument("--job", choices=["ps", "worker"])
    ap.add_argument("--task", type=int, default=0)
    a = ap.parse_args()
    if a.job:
        if not a.cluster:
            ap.error("--job needs --cluster")
        return run_task(a)
    if a.steps < 1:
        ap.error("--steps needs at least 1")
    spec, r, rss = launch(a)
    print(json.dumps({
        "framework": "TensorFlow " + r["tensorflow"],
        "images_per_sec": r["images_per_sec"],
        "loss_last_50": round(r["loss_last_50"], 4),
        "accuracy_last_50": round(r["accuracy_last_50"], 4),
        "peak_rss_mb": {k: round(v) for k, v in sorted(rss.items())},
        "peak_rss_mb_total": round(sum(rss.values())),
        "threads": {"intra": a.threads, "inter": a.inter_threads},
        "partitions": r["partitions"],
        "worker_to_worker_sends": r["worker_to_worker_sends"],
        "cluster": spec,
    }))


if __name__ == "__main__":
    main()
