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

// --emit=dot draws the programs with Graphviz.
// RUN: dtfc %S/../../../models/logistic_regression.dtf --no-data-check --emit=dot | FileCheck %s --check-prefix=DOT
// DOT: digraph G {
// DOT: label = "dtf.apply_sgd
// DOT: ->
