// What flow-lower-to-linalg refuses, and how it says so.
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-lower-to-linalg | FileCheck %s
// Without --verify-diagnostics: an MLIR-style error naming the pass, exit code 1, no traceback.
// RUN: not flow-opt %s -p flow-lower-to-linalg 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: flow-lower-to-linalg-invalid.mlir: error: 'func.func' op @global_argument argument #0 has type tensor<8x4xf32, #flow.dist<{{.*}}>>: global tensors must be partitioned first (flow-partition)
// ERR-NEXT: note: while running pass 'flow-lower-to-linalg'
// ERR-NOT: Traceback

// CHECK: 'func.func' op @global_argument argument #0 has type tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>: global tensors must be partitioned first (flow-partition)
func.func @global_argument(%a: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>) -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> {
  %0 = flow.exp %a : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
  return %0 : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
}

// -----

// CHECK: 'func.func' op @global_result result #0 has type tensor<2xf32, #flow.dist<{{.*}}>>: global tensors must be partitioned first (flow-partition)
func.func @global_result() -> tensor<2xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>> {
  %0 = flow.full 1.0 : f32 -> tensor<2xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
  return %0 : tensor<2xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
}

// -----

// CHECK: 'flow.full' op result #0 has type tensor<2xf32, #flow.dist<{{.*}}>>: global tensors must be partitioned first (flow-partition)
func.func @global_value() {
  %0 = flow.full 1.0 : f32 -> tensor<2xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
  return
}

// -----

// arith works on signless integers only.
// CHECK: 'flow.add' op expected signless integer elements (arith has no ui8), got tensor<4xui8>
func.func @unsigned(%a: tensor<4xui8>) -> tensor<4xui8> {
  %0 = flow.add %a, %a : tensor<4xui8>
  return %0 : tensor<4xui8>
}
