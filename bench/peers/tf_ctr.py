"""The CTR model of models/ctr.dtf in TensorFlow (tf.compat.v1, one
process), for bench/embedding.sh: a 2,000,000 x 32 table partitioned into 4
(fixed_size_partitioner), embedding_lookup of 26 ids per example side by
side, dense 64 relu, dense 2, AdagradOptimizer(0.05), batch 256, random ids
and labels drawn once. The gradient of the lookup is IndexedSlices, so the
update is sparse, as in dtf.

Prints one JSON line: examples_per_sec over the timed steps only.
"""
import os

import ctr_common

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build(tf, rows):
    """The model and its Adagrad update in the default graph (under any
    device scope): (ids, y, loss, train op)."""
    tf1 = tf.compat.v1
    ids = tf1.placeholder(tf.int64, [None, 26])
    y = tf1.placeholder(tf.int32, [None])
    table = tf1.get_variable(
        "table", [rows, 32], initializer=tf1.random_normal_initializer(stddev=0.05),
        partitioner=tf1.fixed_size_partitioner(4))
    feats = tf1.reshape(tf1.nn.embedding_lookup(table, ids), [-1, 26 * 32])
    # tf.compat.v1.layers is gone with Keras 3: the dense layers by hand.
    glorot = tf1.glorot_uniform_initializer()
    w1 = tf1.get_variable("hidden/kernel", [26 * 32, 64], initializer=glorot)
    b1 = tf1.get_variable("hidden/bias", [64], initializer=tf1.zeros_initializer())
    w2 = tf1.get_variable("click/kernel", [64, 2], initializer=glorot)
    b2 = tf1.get_variable("click/bias", [2], initializer=tf1.zeros_initializer())
    h = tf1.nn.relu(tf1.matmul(feats, w1) + b1)
    logits = tf1.matmul(h, w2) + b2
    loss = tf1.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return ids, y, loss, tf1.train.AdagradOptimizer(0.05).minimize(loss)


def main():
    a = ctr_common.parse_args()

    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()

    rng = np.random.default_rng(1)
    ids_all = rng.integers(0, a.rows, (ctr_common.EXAMPLES, 26), dtype=np.int64)
    y_all = rng.integers(0, 2, (ctr_common.EXAMPLES,), dtype=np.int32)

    ids, y, loss, train = build(tf, a.rows)
    config = tf1.ConfigProto(intra_op_parallelism_threads=a.threads,
                             inter_op_parallelism_threads=a.threads)
    with tf1.Session(config=config) as sess:
        sess.run(tf1.global_variables_initializer())

        def step(i):
            lo, hi = ctr_common.window(i, a.batch)
            _, l = sess.run([train, loss], {ids: ids_all[lo:hi], y: y_all[lo:hi]})
            return float(l)

        ctr_common.run_timed(step, a, "TensorFlow " + tf.__version__)


if __name__ == "__main__":
    main()
