#!/usr/bin/env bash
# Trains a small model with `dtf-run --model-dir` and reads the run's directory
# with TensorBoard's own event reader (EventAccumulator, the tensorboard package
# from PyPI in a virtualenv kept in the build folder): the scalars must be at
# the summary steps with the values the log printed, the evaluations under
# eval/, and the plain-text log must hold the run's lines.
# usage: tensorboard.sh BUILD_DIR DTF_RUN PLAN_SOURCE
#   PLAN_SOURCE: dtfc's path (compiles synthetic.dtf) or
#   write-summaries-test-plan's (a plan with the same settings, built in code)
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR DTF_RUN PLAN_SOURCE" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
dtf_run=$2 plan_source=$3
venv=$build/summaries-venv

# shellcheck source=tests/support/venv.sh
source "$here/../support/venv.sh"
ensure_venv "$venv" "$here/requirements.txt" "summaries test"

work=$build/summaries-test
rm -rf "$work"
mkdir -p "$work"
if [ "$(basename "$plan_source")" = dtfc ]; then
  "$plan_source" "$here/synthetic.dtf" -o "$work/plan.bin"
else
  "$plan_source" "$work/plan.bin"
fi
"$dtf_run" "$work/plan.bin" --model-dir "$work/run" --threads 1 > "$work/stdout" 2> "$work/stderr" || {
  echo "summaries test: dtf-run failed:" >&2; cat "$work/stdout" "$work/stderr" >&2; exit 1; }
cat "$work/stdout" "$work/stderr"
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" "$here/check_run_dir.py" "$work/run" "$work/stdout"
