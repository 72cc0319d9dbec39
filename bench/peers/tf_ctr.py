"""The CTR model of models/ctr.dtf in TensorFlow (tf.compat.v1, one
process), for bench/embedding.sh: a 2,000,000 x 32 table partitioned into 4
(fixed_size_partitioner), embedding_lookup of 26 ids per example side by
side, dense 64 relu, dense 2, AdagradOptimizer(0.05), batch 256, random ids
and labels drawn once. The gradient of the lookup is IndexedSlices, so the
update is sparse, as in dtf.

Prints one JSON line: examples_per_sec over the timed steps only.
"""
import argparse
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=2000000)
    a = ap.parse_args()

    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()

    rng = np.random.default_rng(1)
    examples = 100000
    ids_all = rng.integers(0, a.rows, (examples, 26), dtype=np.int64)
    y_all = rng.integers(0, 2, (examples,), dtype=np.int32)

    ids = tf1.placeholder(tf.int64, [None, 26])
    y = tf1.placeholder(tf.int32, [None])
    table = tf1.get_variable(
        "table", [a.rows, 32], initializer=tf1.random_normal_initializer(stddev=0.05),
        partitioner=tf1.fixed_size_partitioner(4))
    feats = tf1.reshape(tf1.nn.embedding_lookup(table, ids), [-1, 26 * 32])
    h = tf1.layers.dense(feats, 64, activation=tf.nn.relu)
    logits = tf1.layers.dense(h, 2)
    loss = tf1.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf1.train.AdagradOptimizer(0.05).minimize(loss)
    config = tf1.ConfigProto(intra_op_parallelism_threads=a.threads,
                             inter_op_parallelism_threads=a.threads)
    with tf1.Session(config=config) as sess:
        sess.run(tf1.global_variables_initializer())

        def step(i):
            lo = (i * a.batch) % (examples - a.batch)
            _, l = sess.run([train, loss], {ids: ids_all[lo:lo + a.batch], y: y_all[lo:lo + a.batch]})
            return float(l)

        for i in range(a.warmup):
            step(i)
        t0 = time.perf_counter()
        losses = [step(a.warmup + i) for i in range(a.steps)]
        dt = time.perf_counter() - t0
    print(json.dumps({
        "framework": "TensorFlow " + tf.__version__,
        "examples_per_sec": a.steps * a.batch / dt,
        "loss_last": sum(losses[-20:]) / len(losses[-20:]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))


if __name__ == "__main__":
    main()
