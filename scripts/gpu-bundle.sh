#!/usr/bin/env bash
# Packs what checks dtf on a GPU machine into one folder of at most 58 MiB,
# for a machine that has a GPU, a CUDA driver and libraries (or a Python
# environment holding cuBLAS, cuDNN and NCCL) but none of this project's
# packages: dtf-run and every library it links but the C and C++ runtimes
# (gzip-compressed, unpacked by check.sh), the GPU unit tests (dtf-gpu-tests,
# which check.sh runs on the real driver with DTF_GPU=real), the CUDA
# emulation (for --emulate),
# the check plans (the seed CNN and the MLP with every op on /gpu:0 and soft
# placement, so that the same plan runs on the CPU where no driver loads, and
# the seed CNN under mixed_bfloat16 and with TF32 allowed, the labels check's
# plans),
# Fashion-MNIST, and check.sh (scripts/gpu-bundle-check.sh).
# usage: scripts/gpu-bundle.sh DIR [BUILD_DIR]   (default: build/, configured)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/gpu-bundle.sh DIR [BUILD_DIR]" >&2; exit 2; }
dir=$1
build=$(cd "${2:-$root/build}" && pwd)
data=/usr/share/datasets/fashion-mnist
# The device tool carries at most 64 MiB: the bundle and the repository's
# tracked files (about 6 MiB) together.
limit=$((58 * 1024 * 1024))

echo "gpu-bundle: building dtf-run, dtfc, the GPU unit tests and the CUDA emulation in $build"
ninja -C "$build" dtf-run dtfc dtf-gpu-tests dtf-cuda-emu > /dev/null
[ -f "$data/train-images-idx3-ubyte.gz" ] ||
  { echo "gpu-bundle: Fashion-MNIST is not at $data (scripts/setup.sh installs it)" >&2; exit 1; }

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/plans" "$dir/data/fashion-mnist"
for exe in dtf-run dtf-gpu-tests; do
  cp "$build/bin/$exe" "$dir/bin/$exe"
  strip "$dir/bin/$exe"
done
# The emulation is looked up beside the running executable.
cp "$build/bin/libdtf-cuda-emu.so" "$dir/bin/"
cp "$data"/*.gz "$dir/data/fashion-mnist/"

# Every library dtf-run, the unit tests and the emulation load but the C and
# C++ runtimes, which the GPU machine's own (newer) system provides; one copy
# each, found there through check.sh's LD_LIBRARY_PATH.
libs=$(mktemp -d)
trap 'rm -rf "$libs"' EXIT
ldd "$build/bin/dtf-run" "$build/bin/dtf-gpu-tests" "$build/bin/libdtf-cuda-emu.so" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
      *) cp -L "$lib" "$libs/" ;;
    esac
  done
tar -C "$libs" -czf "$dir/lib.tar.gz" .

# The check plans: each model's graph on /gpu:0 with soft placement (the CPU
# run of the same plan is the reference), reading Fashion-MNIST from
# ./fashion-mnist (check.sh runs in a folder where that is the bundle's copy).
for model in mnist_cnn mlp; do
  python3 "$root/tests/e2e/gpu_model.py" "$root/models/$model.dtf" "$dir/plans/$model.dtf" 1000 \
    "soft_placement = true"
  sed -i "s|\"$data\"|\"fashion-mnist\"|g" "$dir/plans/$model.dtf"
  "$build/bin/dtfc" "$dir/plans/$model.dtf" -o "$dir/plans/$model.plan" 2> "$dir/plans/$model.dtfc.log" ||
    { cat "$dir/plans/$model.dtfc.log" >&2; exit 1; }
  grep -q "fashion-mnist" "$dir/plans/$model.dtf" || { echo "gpu-bundle: $model reads no Fashion-MNIST" >&2; exit 1; }
done
# The seed CNN under the mixed_bfloat16 policy: bf16 matmuls and convolutions
# (cuBLAS GemmEx, cuDNN tensor-op convolutions on the GPU; oneDNN on the CPU).
"$build/bin/dtfc" "$dir/plans/mnist_cnn.dtf" --precision=mixed_bfloat16 -o "$dir/plans/mnist_cnn_bf16.plan" \
  2> "$dir/plans/mnist_cnn_bf16.dtfc.log" || { cat "$dir/plans/mnist_cnn_bf16.dtfc.log" >&2; exit 1; }
# The seed CNN with TF32 allowed (session(allow_tf32 = true)): cuBLAS and
# cuDNN may use the tensor cores for f32.
python3 "$root/tests/e2e/gpu_model.py" "$root/models/mnist_cnn.dtf" "$dir/plans/mnist_cnn_tf32.dtf" 1000 \
  "soft_placement = true, allow_tf32 = true"
sed -i "s|\"$data\"|\"fashion-mnist\"|g" "$dir/plans/mnist_cnn_tf32.dtf"
"$build/bin/dtfc" "$dir/plans/mnist_cnn_tf32.dtf" -o "$dir/plans/mnist_cnn_tf32.plan" \
  2> "$dir/plans/mnist_cnn_tf32.dtfc.log" || { cat "$dir/plans/mnist_cnn_tf32.dtfc.log" >&2; exit 1; }
# A label outside the classes on the GPU (tests/e2e/gpu_labels.sh): the
# classifier with every op on /gpu:0 reading labels/bad.csv (example 37's
# label made 7 in the graph) and labels/good.csv; the bad data's plan with
# soft placement too, for the CPU's message.
mkdir -p "$dir/data/labels"
python3 "$root/tests/e2e/gpu_labels_data.py" "$dir/data/labels"
rm "$dir/data/labels/column.csv"
for data in good bad; do
  sed "s|@DATA@|labels/$data.csv|" "$root/tests/e2e/gpu_labels.dtf" > "$dir/plans/labels_$data.dtf"
  "$build/bin/dtfc" "$dir/plans/labels_$data.dtf" -o "$dir/plans/labels_$data.plan" 2> "$dir/plans/labels_$data.dtfc.log" ||
    { cat "$dir/plans/labels_$data.dtfc.log" >&2; exit 1; }
done
sed 's|^  train {$|  train {\n    session = session(soft_placement = true)|' "$dir/plans/labels_bad.dtf" \
  > "$dir/plans/labels_bad_soft.dtf"
"$build/bin/dtfc" "$dir/plans/labels_bad_soft.dtf" -o "$dir/plans/labels_bad_soft.plan" \
  2> "$dir/plans/labels_bad_soft.dtfc.log" || { cat "$dir/plans/labels_bad_soft.dtfc.log" >&2; exit 1; }
cp "$root/scripts/gpu-bundle-check.sh" "$dir/check.sh"
chmod +x "$dir/check.sh"
git -C "$root" describe --always --dirty > "$dir/VERSION" 2> /dev/null || echo unknown > "$dir/VERSION"

# The plans compress to a sixth (their constants are mostly zeros); check.sh
# unpacks them.
nplans=$(find "$dir/plans" -name "*.plan" | wc -l)
tar -C "$dir" -czf "$dir/plans.tar.gz" plans
rm -rf "$dir/plans"

size=$(du -sb "$dir" | cut -f1)
echo "gpu-bundle: $dir holds $((size / 1024 / 1024)) MiB of $((limit / 1024 / 1024)) ($nplans plans; dtf-run $(($(stat -c %s "$dir/bin/dtf-run") / 1024 / 1024)) MiB, dtf-gpu-tests $(($(stat -c %s "$dir/bin/dtf-gpu-tests") / 1024 / 1024)) MiB, libraries $(($(stat -c %s "$dir/lib.tar.gz") / 1024 / 1024)) MiB compressed)"
[ "$size" -le "$limit" ] || { echo "gpu-bundle: over $((limit / 1024 / 1024)) MiB" >&2; exit 1; }
