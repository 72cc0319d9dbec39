// dtf-run's command line: version, help, and precise usage errors.
// RUN: dtf-run --version | FileCheck %s --check-prefix=VERSION
// VERSION: dtf-run {{[0-9]+\.[0-9]+\.[0-9]+}}

// RUN: dtf-run --help | FileCheck %s --check-prefix=HELP
// HELP: usage: dtf-run PLAN [options]
// HELP: --cluster FILE
// HELP: --job NAME
// HELP: --task N

// RUN: not dtf-run 2>&1 | FileCheck %s --check-prefix=NOPLAN
// NOPLAN: dtf-run: error: no plan given

// RUN: not dtf-run plan.bin --frobnicate 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: dtf-run: error: unknown option '--frobnicate' (see dtf-run --help)

// RUN: not dtf-run plan.bin --cluster 2>&1 | FileCheck %s --check-prefix=NOVALUE
// NOVALUE: dtf-run: error: --cluster needs a value

// RUN: not dtf-run plan.bin --compress-push topk:0.7 2>&1 | FileCheck %s --check-prefix=COMPRESS
// COMPRESS: dtf-run: error: --compress-push expects topk:R with 0 < R < 0.5 (the share of each gradient's values sent, e.g. topk:0.01) or onebit, got 'topk:0.7'

// RUN: not dtf-run plan.bin --compress-push onebit 2>&1 | FileCheck %s --check-prefix=COMPRESS-LOCAL
// COMPRESS-LOCAL: dtf-run: error: --wire, --overlap-push, --prefetch-pull, --compress-push and --same-host need a cluster (--cluster FILE or TF_CONFIG)

// RUN: not dtf-run plan.bin --prefetch-pull 2>&1 | FileCheck %s --check-prefix=PREFETCH-LOCAL
// PREFETCH-LOCAL: dtf-run: error: --wire, --overlap-push, --prefetch-pull, --compress-push and --same-host need a cluster (--cluster FILE or TF_CONFIG)

// RUN: not dtf-run a.bin b.bin 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: dtf-run: error: more than one plan given ('a.bin' and 'b.bin')

// RUN: bash -c 'dtf-run --bogus 2>/dev/null; test $? -eq 2'

// RUN: not dtf-run plan.bin --eval-steps 0 2>&1 | FileCheck %s --check-prefix=EVALSTEPS
// EVALSTEPS: dtf-run: error: --eval-steps expects a positive integer, got '0'
