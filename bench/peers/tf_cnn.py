"""The seed CNN (models/mnist_cnn.dtf) trained with TensorFlow/Keras on the
CPU, for bench/throughput.sh: Keras layers, a custom train step compiled with
tf.function, Adam 1e-4, batch 50, the same data as dtf (the pixels preloaded
as uint8 and scaled per batch, as dtf does; a fresh shuffle each epoch).

With --precision mixed_bfloat16 (bench/mixed_precision.sh) the model is
built under Keras' global "mixed_bfloat16" policy (bf16 compute, f32
variables), its logits cast back to f32 before the loss, as the Keras mixed
precision guide does.

Prints one JSON line: images_per_sec over the timed steps only (the warm-up
steps, which include tracing, run first and are not counted).
"""
import argparse
import json
import os
import sys
import time

import fmnist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2,
                    help="intra-op threads")
    ap.add_argument("--inter-threads", type=int, default=1,
                    help="inter-op threads")
    ap.add_argument("--data", default=fmnist.DEFAULT_DIR)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=["float32", "mixed_bfloat16"],
                    default="float32")
    a = ap.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.inter_threads)
    tf.random.set_seed(a.seed)
    tf.keras.mixed_precision.set_global_policy(a.precision)
    L = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(784,)),
        L.Reshape((28, 28, 1)),
        L.Conv2D(32, 5, padding="same", activation="relu", name="conv1"),
        L.MaxPool2D(2),
        L.Conv2D(64, 5, padding="same", activation="relu", name="conv2"),
        L.MaxPool2D(2),
        L.Flatten(),
        L.Dense(500, activation="relu", name="fully_connected"),
        L.Dense(10, name="pred"),
        L.Activation("linear", dtype="float32"),  # f32 logits for the loss
    ])
    opt = tf.keras.optimizers.Adam(learning_rate=1e-4)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x_all, y_all = fmnist.load_train(a.data)
    y_all = y_all.astype("int32")
    it = fmnist.batches(len(x_all), a.batch, a.seed)

    def step():
        idx = next(it)
        return train_step(fmnist.to_float(x_all[idx]), y_all[idx])

    for _ in range(a.warmup):
        step()
    rss_setup = fmnist.rss_mb()
    losses = []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        losses.append(float(step()))
    dt = time.perf_counter() - t0
    print(json.dumps({
        "framework": "TensorFlow " + tf.__version__,
        "threads": a.threads, "inter_threads": a.inter_threads,
        "precision": a.precision,
        "images_per_sec": a.steps * a.batch / dt,
        "timed_steps": a.steps, "warmup_steps": a.warmup, "seconds": dt,
        "loss_last_50": sum(losses[-50:]) / len(losses[-50:]),
        "rss_after_warmup_mb": rss_setup,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
