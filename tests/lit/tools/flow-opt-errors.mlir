// flow-opt reports bad input and bad pipelines MLIR-style, exits 1, and shows no traceback.
// This file is itself the malformed input.

// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: flow-opt-errors.mlir:[[# @LINE + 5]]:{{[0-9]+}}: error: {{.*}}
// PARSE-NEXT: {{.*}}flow.add %a, %b : tensor<4xf32, foo>
// PARSE-NEXT: {{ *\^+}}
// PARSE-NOT: Traceback
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.add %a, %b : tensor<4xf32, foo>
  return %0 : tensor<4xf32>
}

// RUN: not flow-opt %s -p dce,no-such-pass 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: flow-opt: error: unknown pass 'no-such-pass' in pipeline 'dce,no-such-pass'; registered passes: {{.*}}flow-lower-to-linalg, {{.*}}flow-to-iree-input
// UNKNOWN-NOT: Traceback

// RUN: not flow-opt %s -p 'dce{' 2>&1 | FileCheck %s --check-prefix=SPEC
// SPEC: flow-opt: error: invalid pass pipeline 'dce{'
// SPEC-NOT: Traceback

// RUN: not flow-opt %S/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: flow-opt: error: [Errno 2] No such file or directory
