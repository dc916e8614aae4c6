// flow-compile reports bad targets and bad input MLIR-style, exits 1, shows no traceback.
// This file is itself the malformed input.

// RUN: not flow-compile %s --target tpu -o %t.vmfb 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: flow-compile: error: unknown target 'tpu'; expected one of: cpu, cuda, rocm, vulkan
// TARGET-NOT: Traceback

// RUN: not flow-compile %s --target cpu -o %t.vmfb 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not flow-compile %s --emit flow 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: compile-errors.mlir:[[# @LINE + 6]]:{{[0-9]+}}: error: {{.*}}
// PARSE-NEXT: {{.*}}flow.add %a, %b : tensor<4xf32, foo>
// PARSE-NEXT: {{ *\^+}}
// PARSE-NOT: Traceback
// PARSE-NOT: internal error
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.add %a, %b : tensor<4xf32, foo>
  return %0 : tensor<4xf32>
}

// RUN: not flow-compile %S/does-not-exist.mlir -o %t.vmfb 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: flow-compile: error: no such file: {{.*}}does-not-exist.mlir
// NOFILE-NOT: Traceback
