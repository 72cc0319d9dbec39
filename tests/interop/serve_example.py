# The serving example of docs/interop.md, run by onnx_export.sh in the folder of
# the exported seed CNN (cnn.onnx).
import numpy as np, onnxruntime as ort
session = ort.InferenceSession("cnn.onnx")
images = np.random.rand(8, 784).astype(np.float32)   # a batch of any size
logits = session.run(["logits"], {"x": images})[0]    # [8, 10]
print(logits.argmax(axis=1))
