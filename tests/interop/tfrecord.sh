#!/usr/bin/env bash
# TFRecord files written by TensorFlow itself (tensorflow-cpu from PyPI in a
# virtualenv under the build tree) feed dtf-run: 4 plain training shards, 2
# gzip evaluation shards whose features the model renames, a corrupt record
# (fatal by default, naming the file and offset; skipped with on_corrupt =
# skip), a label outside the model's classes (the same, naming the record
# too, and counted apart), dtf-run --predict over the gzip shards and unlabeled records, and a
# 1 ps + 2 worker cluster whose workers each read their own files.
# usage: tfrecord.sh BUILD_DIR
# shellcheck source=tests/interop/lib.sh
source "$(dirname "$0")/lib.sh" tfrecord "$@"

"$python" "$here/write_tfrecords.py" "$data" "$work/records" 2> "$work/tf.log" ||
  { cat "$work/tf.log" >&2; fail "TensorFlow could not write the records"; }

# 1. Train on the plain shards, evaluate on the gzip ones.
sed "s#@DIR@#$work/records#g" "$here/tfrecord_mlp.dtf.in" > "$work/model.dtf"
"$bin/dtfc" "$work/model.dtf" -o "$work/model.bin"
"$bin/dtf-run" "$work/model.bin" --model-dir "$work/run" --log-every 50 > "$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "dtf-run failed on the TFRecord files"; }
cat "$work/train.log"
grep -q "data: tfrecord:$work/records/train-\*.tfrecord (x <- feature 'x', y <- feature 'y')" "$work/train.log" ||
  fail "the start-up line does not show the features fed by name"
grep -q "y <- feature 'label'" "$work/train.log" || fail "the eval source's features were not renamed"
python3 "$here/../e2e/check_training.py" "$work/train.log" 300 0.7

# 2. --predict over the gzip shards: 2000 rows of logits in file order.
"$bin/dtf-run" "$work/model.bin" --model-dir "$work/run" \
  --predict "tfrecord:$work/records/test-*.tfrecord.gz" -o "$work/pred.npy"
eval_accuracy=$(sed -n 's/^final:.* accuracy=\([0-9.]*\).*/\1/p' "$work/train.log")
"$python" "$here/check_predictions.py" "$work/pred.npy" "$work/records/test-labels.npy" 0.7 "$eval_accuracy"
"$bin/dtf-run" "$work/model.bin" --model-dir "$work/run" --predict eval -o "$work/pred.csv" > /dev/null
[ "$(wc -l < "$work/pred.csv")" = 2001 ] || fail "--predict eval wrote $(wc -l < "$work/pred.csv") lines, want 2001"

rc=0
"$bin/dtf-run" "$work/model.bin" --model-dir "$work/run" --predict eval -o "$work/pred.txt" 2> "$work/badout.log" || rc=$?
[ "$rc" = 2 ] && grep -q "pred.txt: the output is a .csv or .npy file" "$work/badout.log" ||
  fail "an output that is neither .csv nor .npy was not refused with exit code 2 (got $rc)"

# ... and over records without labels (the logits do not need them): the same
# logits as for the first 100 labelled examples, to float rounding (1e-5
# relative): the batches are cut otherwise in the two files, and on a CPU
# without AVX-512 oneDNN's matmul rounds a batch's tail rows otherwise (4 of
# the 100 rows differed in the last printed digit on an AVX2-only EPYC).
"$bin/dtf-run" "$work/model.bin" --model-dir "$work/run" \
  --predict "tfrecord:$work/records/unlabeled.tfrecord" -o "$work/unlabeled.csv" > /dev/null
python3 - "$work/pred.csv" "$work/unlabeled.csv" <<'PY' ||
import sys
rows = [open(p).read().splitlines()[1:101] for p in sys.argv[1:]]
assert len(rows[0]) == len(rows[1]) == 100, "not 100 rows each"
for i, (a, b) in enumerate(zip(*rows)):
    for x, y in zip(map(float, a.split(",")), map(float, b.split(","))):
        assert abs(x - y) <= 1e-5 * max(1.0, abs(x)), f"row {i + 1}: {a} vs {b}"
PY
  fail "the logits of unlabeled records differ from those of the same images with labels"

# ... and for a model whose inputs take batches of exactly 64: the last
# batch is padded, and every example still gets its row (the 36 of the last
# of 100 unlabeled ones, the same as where they sit in full batches).
sed -e "s#@DIR@#$work/records#g" -e 's/f32\[B, 784\]/f32[64, 784]/' -e 's/i32\[B\]/i32[64]/' \
  -e 's/batch = 50/batch = 64/' -e 's/steps = 300/steps = 20/' "$here/tfrecord_mlp.dtf.in" > "$work/fixed.dtf"
"$bin/dtfc" "$work/fixed.dtf" -o "$work/fixed.bin"
"$bin/dtf-run" "$work/fixed.bin" --model-dir "$work/fixed" --quiet > /dev/null
"$bin/dtf-run" "$work/fixed.bin" --model-dir "$work/fixed" \
  --predict "tfrecord:$work/records/unlabeled.tfrecord" -o "$work/fixed-unlabeled.csv" > /dev/null
"$bin/dtf-run" "$work/fixed.bin" --model-dir "$work/fixed" --predict eval -o "$work/fixed-eval.csv" > /dev/null
[ "$(wc -l < "$work/fixed-unlabeled.csv")" = 101 ] && [ "$(wc -l < "$work/fixed-eval.csv")" = 2001 ] ||
  fail "a fixed-batch model did not get a row for every example"
[ "$(sed -n '2,101p' "$work/fixed-eval.csv")" = "$(sed -n '2,101p' "$work/fixed-unlabeled.csv")" ] ||
  fail "the padded last batch changed the logits of its real examples"

# 3. A corrupt record: fatal by default, with the file and its offset.
offset=$(cat "$work/records/corrupt.offset")
sed -e "s#@DIR@/train-\*.tfrecord#$work/records/corrupt.tfrecord#" -e "s#@DIR@#$work/records#g" \
  -e "s/steps = 300/steps = 20/" "$here/tfrecord_mlp.dtf.in" > "$work/corrupt.dtf"
"$bin/dtfc" "$work/corrupt.dtf" -o "$work/corrupt.bin"
rc=0
"$bin/dtf-run" "$work/corrupt.bin" > "$work/corrupt.log" 2>&1 || rc=$?
cat "$work/corrupt.log"
[ "$rc" = 4 ] || fail "a corrupt record made dtf-run exit $rc, want 4"
grep -q "corrupt.tfrecord: offset $offset: data CRC mismatch" "$work/corrupt.log" ||
  fail "the error does not name corrupt.tfrecord at offset $offset"

# ... skipped with on_corrupt = skip: the other 9 records train.
sed -i 's#corrupt.tfrecord")#corrupt.tfrecord", on_corrupt = skip)#' "$work/corrupt.dtf"
"$bin/dtfc" "$work/corrupt.dtf" -o "$work/skip.bin"
"$bin/dtf-run" "$work/skip.bin" > "$work/skip.log" 2>&1 ||
  { cat "$work/skip.log" >&2; fail "dtf-run failed with on_corrupt = skip"; }
cat "$work/skip.log"
grep -q "corrupt.tfrecord: offset $offset: data CRC mismatch.*record skipped" "$work/skip.log" ||
  fail "no warning names the skipped record"
grep -q "corrupt.tfrecord: skipped 1 corrupt record$" "$work/skip.log" || fail "the skipped record was not counted"

# ... and a label outside the loss's 10 classes: fatal, naming the file, the
# offset and the record; skipped and counted with on_corrupt = skip.
offset=$(cat "$work/records/badlabel.offset")
sed -e "s#@DIR@/train-\*.tfrecord#$work/records/badlabel.tfrecord#" -e "s#@DIR@#$work/records#g" \
  -e "s/steps = 300/steps = 20/" "$here/tfrecord_mlp.dtf.in" > "$work/badlabel.dtf"
"$bin/dtfc" "$work/badlabel.dtf" -o "$work/badlabel.bin"
rc=0
"$bin/dtf-run" "$work/badlabel.bin" > "$work/badlabel.log" 2>&1 || rc=$?
cat "$work/badlabel.log"
[ "$rc" = 4 ] || fail "a label outside the classes made dtf-run exit $rc, want 4"
grep -q "badlabel.tfrecord: offset $offset: record 4: feature 'y' holds 10 (value 1 of 1), but input 'y' holds the labels of a loss over 10 classes: labels lie in 0..9" "$work/badlabel.log" ||
  fail "the error does not name badlabel.tfrecord, offset $offset and record 4"
sed -i 's#badlabel.tfrecord")#badlabel.tfrecord", on_corrupt = skip)#' "$work/badlabel.dtf"
"$bin/dtfc" "$work/badlabel.dtf" -o "$work/badlabel-skip.bin"
"$bin/dtf-run" "$work/badlabel-skip.bin" > "$work/badlabel-skip.log" 2>&1 ||
  { cat "$work/badlabel-skip.log" >&2; fail "dtf-run failed on a bad label with on_corrupt = skip"; }
grep -q "badlabel.tfrecord: skipped 1 record with values the inputs cannot take$" "$work/badlabel-skip.log" ||
  fail "the skipped label was not counted"

# 4. The wrong compression is named.
sed -e "s#compression = gzip#compression = none#" -e "s#@DIR@#$work/records#g" \
  "$here/tfrecord_mlp.dtf.in" > "$work/nogzip.dtf"
"$bin/dtfc" "$work/nogzip.dtf" -o "$work/nogzip.bin"
rc=0
"$bin/dtf-run" "$work/nogzip.bin" --steps 0 > "$work/nogzip.log" 2>&1 || rc=$?
[ "$rc" = 4 ] && grep -q "test-00000-of-00002.tfrecord.gz: is gzip-compressed; add compression = gzip" "$work/nogzip.log" ||
  { cat "$work/nogzip.log" >&2; fail "a gzip file read as plain was not named (exit $rc)"; }
# 5. Between-graph replication on 1 ps + 2 workers (127.0.0.1): with 4 files,
# each worker reads its own 2.
# shellcheck source=tests/e2e/lib.sh
source "$here/../e2e/lib.sh" "$bin" "$work"
cluster_json "$work/cluster.json" 1 2
sed -e "s#@DIR@#$work/records#g" -e "s/steps = 300/steps = 40/" "$here/tfrecord_mlp.dtf.in" > "$work/cluster.dtf"
"$bin/dtfc" "$work/cluster.dtf" -o "$work/cluster.bin"
timeout 300 "$bin/dtf-run" "$work/cluster.bin" --cluster "$work/cluster.json" > "$work/cluster.log" 2>&1 ||
  { cat "$work/cluster.log" >&2; fail "the cluster run on TFRecord files failed"; }
grep "data:\|final:" "$work/cluster.log"
for k in 0 1; do
  grep -q "worker.$k |   data: tfrecord:$work/records/train-\*.tfrecord (files $k mod 2)" "$work/cluster.log" ||
    fail "worker $k did not read only its files"
done
echo "tfrecord test: ok"
