"""Three steps of keras.optimizers.Ftrl on a 6-element variable, for the
reference values of tests/unit/kernels/FtrlTest.cpp (FtrlMatchesKerasFtrl).

    bench/venv.sh's python bench/peers/keras_ftrl_steps.py

prints, per configuration and dtype, the variable after each step with 17
significant digits. Keras 3 on TensorFlow; the test holds these numbers so
that CI checks the kernel against Keras without TensorFlow installed. Keras
keeps the learning rate in an f32 variable and builds the accumulators from
an f32 constant, so a float64 variable sees float32(0.1) for both; the test
feeds the kernel the same.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

VAR = [0.5, -0.3, 0.0, 1.2, -2.0, 0.05]
GRADS = [
    [0.2, -0.1, 0.4, 0.0, -0.8, 0.3],
    [-0.5, 0.25, 0.0, 0.1, 0.6, -0.3],
    [0.05, 0.0, -0.7, 0.9, -0.2, 0.3],
]
CONFIGS = {
    "half_power": dict(learning_rate=0.1, learning_rate_power=-0.5,
                       initial_accumulator_value=0.1,
                       l1_regularization_strength=0.01,
                       l2_regularization_strength=0.02,
                       l2_shrinkage_regularization_strength=0.03, beta=0.5),
    "other_power": dict(learning_rate=0.3, learning_rate_power=-0.7,
                        initial_accumulator_value=0.2),
}

print("keras", keras.__version__)
for name, config in CONFIGS.items():
    for dtype in ("float32", "float64"):
        var = keras.Variable(np.array(VAR, dtype=dtype), dtype=dtype)
        opt = keras.optimizers.Ftrl(**config)
        for step, g in enumerate(GRADS):
            opt.apply_gradients([(np.array(g, dtype=dtype), var)])
            values = ", ".join(f"{float(v):.17g}" for v in var.numpy())
            print(f"{name} {dtype} step {step + 1}: {{{values}}}")
