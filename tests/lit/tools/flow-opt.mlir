// flow-opt runs named pipelines pass by pass, with xDSL's opt options.
// RUN: flow-opt %s -p flow-to-iree-input --print-between-passes | FileCheck %s
// RUN: flow-opt %s --print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK: IR after dce:
// CHECK-NOT: flow.neg
// CHECK: flow.exp
// CHECK-NOT: flow.neg
// CHECK: IR after flow-fuse-elementwise:
// CHECK: flow.exp
// The final output (generic form, for IREE):
// CHECK: "builtin.module"
// CHECK-NOT: flow.
// CHECK: math.exp
// GENERIC: "flow.exp"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.exp %a : tensor<4xf32>
  %1 = flow.neg %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
