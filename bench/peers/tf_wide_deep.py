"""models/wide_deep.dtf in TensorFlow / Keras 3, for bench/wide_deep.sh.
tf.estimator (DNNLinearCombinedClassifier) is gone in TensorFlow 2.16+, so
this is what replaces it: Keras layers and a custom train step (one
tf.function) that applies keras.optimizers.Ftrl(0.2) to the wide table and
keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.1) to the deep
variables. The ids are made in the step (tf.raw_ops.Bucketize, crosses of
pairs), as dtf makes them. Keras' optimizers update the embeddings densely
(its Ftrl re-derives every row; with a zero-initialized table and no
l2_shrinkage that gives what the sparse update gives) and its Adagrad adds
epsilon 1e-7 under the square root.

Prints one JSON line (wide_deep_common.run_timed).
"""
import os

import wide_deep_common as common

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def main():
    a = common.parse_args()

    import tensorflow as tf
    import keras

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    keras.utils.set_random_seed(1)
    x_all, y_all = common.data(a)
    y_all = y_all.astype("int32")

    wide = keras.layers.Embedding(common.VOCAB, 2, embeddings_initializer="zeros")
    deep_emb = keras.layers.Embedding(
        80, 8, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.05))
    hidden1 = keras.layers.Dense(64, activation="relu")
    hidden2 = keras.layers.Dense(32, activation="relu")
    deep_out = keras.layers.Dense(2)
    cat_offsets = tf.constant(common.CATEGORICAL_OFFSETS, tf.int32)
    cross_offsets = tf.constant(common.CROSS_OFFSETS, tf.int32)

    def forward(x):
        b = tf.raw_ops.Bucketize(input=x, boundaries=common.BOUNDARIES)
        categorical = b + cat_offsets
        crossed = b[:, 0::2] * 10 + b[:, 1::2] + cross_offsets
        ids = tf.concat([categorical, crossed], axis=1)
        h = tf.concat([tf.reshape(deep_emb(categorical), [-1, 64]), x], axis=1)
        return tf.reduce_sum(wide(ids), axis=1) + deep_out(hidden2(hidden1(h)))

    forward(tf.constant(x_all[:1]))  # builds the layers
    wide_vars = wide.trainable_variables
    deep_vars = [v for l in (deep_emb, hidden1, hidden2, deep_out) for v in l.trainable_variables]
    ftrl = keras.optimizers.Ftrl(learning_rate=0.2)
    adagrad = keras.optimizers.Adagrad(learning_rate=0.05, initial_accumulator_value=0.1)
    ftrl.build(wide_vars)
    adagrad.build(deep_vars)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = forward(x)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, wide_vars + deep_vars)
        ftrl.apply_gradients(zip(grads[:len(wide_vars)], wide_vars))
        adagrad.apply_gradients(zip(grads[len(wide_vars):], deep_vars))
        correct = tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32)
        return loss, tf.reduce_mean(correct)

    def step(i):
        lo, hi = i * a.batch, (i + 1) * a.batch
        loss, acc = train_step(tf.constant(x_all[lo:hi]), tf.constant(y_all[lo:hi]))
        return float(loss), float(acc)

    common.run_timed(step, a, "TensorFlow " + tf.__version__ + ", Keras " + keras.__version__)


if __name__ == "__main__":
    main()
