// dtf-opt registers the dtf dialect and the passes its tests use.
// RUN: dtf-opt --show-dialects | FileCheck %s
// CHECK: Available Dialects:
// CHECK-SAME: dtf
// CHECK-SAME: func

// RUN: dtf-opt --help | FileCheck %s --check-prefix=PASSES
// PASSES-DAG: --canonicalize
// PASSES-DAG: --cse
