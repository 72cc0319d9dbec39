// dtfc's command line: version, help, and a clear error without input.
// RUN: dtfc --version | FileCheck %s --check-prefix=VERSION
// VERSION: dtfc {{[0-9]+\.[0-9]+\.[0-9]+}} (MLIR 19.

// RUN: dtfc --help | FileCheck %s --check-prefix=HELP
// HELP: dtfc: compiles a dtf model into a training plan
// HELP: dtfc model.dtf -o plan.bin

// RUN: not dtfc 2>&1 | FileCheck %s --check-prefix=NOINPUT
// NOINPUT: dtfc: error: no input file (see dtfc --help)

// The exit code says what kind of failure it was: 2 for usage errors.
// RUN: bash -c 'dtfc 2>/dev/null; test $? -eq 2'

// --emit=dot draws each task's program with Graphviz: the worker_step, the
// ps side (per ps task with --ps N or a bound plan), the rendezvous keys as
// dashed edges and the pulls as dotted ones.
// RUN: dtfc %S/../../../models/logistic_regression.dtf --no-data-check --emit=dot | FileCheck %s --check-prefix=DOT
// DOT: digraph plan {
// DOT: subgraph cluster_worker {
// DOT: label = "dtf.matmul\n{{.*}}logistic_regression.dtf:25:16"
// DOT: subgraph cluster_ps0 {
// DOT: label = "ps_update (each ps: the updates of its variables)";
// DOT: label = "dtf.fused\n{{.*}}logistic_regression.dtf:20:9"
// DOT: -> ps0_{{[0-9]+}} [style = dashed, label = "W:grad"
// DOT: [style = dotted, label = "pull"
// RUN: dtfc %S/../../../models/mlp.dtf --no-data-check --emit=dot --ps 2 | FileCheck %s --check-prefix=DOT2
// DOT2: subgraph cluster_ps0 {
// DOT2-NEXT: label = "ps_update on /job:ps/task:0";
// DOT2: subgraph cluster_ps1 {
// DOT2-NEXT: label = "ps_update on /job:ps/task:1";
// DOT2: dtf.fused
