// Every verifier error of the flow dialect. xDSL's --verify-diagnostics prints the
// diagnostic instead of matching `expected-error`, so the printed message is checked.
// RUN: flow-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | FileCheck %s
// Without those flags the first error is reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: invalid.mlir:[[# @LINE + 4]]:32: error: placement device type must not be empty
// ERR-NOT: Traceback

// CHECK: placement device type must not be empty
func.func @f() attributes {p = #flow.placement<"", [0]>} {
  return
}

// -----

// CHECK: invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}
// CHECK: placement rank array must be rectangular (rows of different shapes)
func.func @f() attributes {p = #flow.placement<"cpu", [[0, 1], [2]]>} {
  return
}

// -----

// CHECK: placement ranks must be distinct, got [0, 1, 0]
func.func @f() attributes {p = #flow.placement<"cpu", [0, 1, 0]>} {
  return
}

// -----

// CHECK: placement ranks must be non-negative, got [-1, 1]
func.func @f() attributes {p = #flow.placement<"cpu", [-1, 1]>} {
  return
}

// -----

// CHECK: invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}
// CHECK: placement rank list must not be empty
func.func @f() attributes {p = #flow.placement<"cpu", []>} {
  return
}

// -----

// CHECK: invalid.mlir:[[# @LINE + 2]]:{{[0-9]+}}
// CHECK: expected an SBP entry: S(<dim>), B or P
func.func @f() attributes {s = #flow.sbp<[S(0), X]>} {
  return
}

// -----

// CHECK: expected one SBP entry per placement axis (2), got 1
func.func @f() attributes {d = #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0)]>>} {
  return
}

// -----

// CHECK: split dim 2 is out of range for a tensor of rank 2
func.func @f(%a: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(2)]>>>) {
  %0 = flow.exp %a : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(2)]>>>
  return
}

// -----

// CHECK: 'flow.exp' op expected a floating-point tensor, got tensor<4xi32>
func.func @f(%a: tensor<4xi32>) {
  %0 = flow.exp %a : tensor<4xi32>
  return
}

// -----

// CHECK: 'flow.neg' op expected a floating-point or integer tensor, got tensor<4xi1>
func.func @f(%a: tensor<4xi1>) {
  %0 = flow.neg %a : tensor<4xi1>
  return
}

// -----

// CHECK: operand 'rhs' at position 1 does not verify:
// CHECK-NEXT: attribute tensor<4xf32> expected from variable 'T', but got tensor<3xf32>
func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  %0 = "flow.add"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.pow' op expected floating-point operands, got tensor<4xi32>
func.func @f(%a: tensor<4xi32>) {
  %0 = flow.pow %a, %a : tensor<4xi32>
  return
}

// -----

// CHECK: 'flow.add' op expected floating-point or integer operands, got tensor<4xi1>
func.func @f(%a: tensor<4xi1>) {
  %0 = flow.add %a, %a : tensor<4xi1>
  return
}

// -----

// CHECK: operand 'rhs' at position 1 does not verify:
// CHECK-NEXT: attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  %0 = "flow.compare"(%a, %b) <{direction = #flow<compare_direction lt>}> : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xi1>
  return
}

// -----

// CHECK: 'flow.compare' op expected result type tensor<4xi1>, got tensor<3xi1>
func.func @f(%a: tensor<4xf32>) {
  %0 = flow.compare lt, %a, %a : tensor<4xf32> -> tensor<3xi1>
  return
}

// -----

// CHECK: 'flow.select' op expected predicate of type tensor<4xi1>, got tensor<4xf32>
func.func @f(%p: tensor<4xf32>, %a: tensor<4xf32>) {
  %0 = flow.select %p, %a, %a : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.cast' op expected result of shape (4,), got tensor<5xi32>
func.func @f(%a: tensor<4xf32>) {
  %0 = flow.cast %a : tensor<4xf32> -> tensor<5xi32>
  return
}

// -----

// CHECK: 'flow.matmul' op expected operands of equal rank >= 2, got tensor<4xf32> and tensor<4xf32>
func.func @f(%a: tensor<4xf32>) {
  %0 = flow.matmul %a, %a : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.matmul' op expected equal element types, got tensor<2x3xf32> and tensor<3x4xf16>
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  %0 = flow.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf16> -> tensor<2x4xf32>
  return
}

// -----

// CHECK: 'flow.matmul' op expected equal batch dims, got [2] and [3]
func.func @f(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  %0 = flow.matmul %a, %b : tensor<2x2x3xf32>, tensor<3x3x4xf32> -> tensor<2x2x4xf32>
  return
}

// -----

// CHECK: 'flow.matmul' op expected contracting dims to match, got lhs tensor<2x3xf32> (K=3) and rhs tensor<5x4xf32> (K=5)
func.func @f(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) {
  %0 = flow.matmul %a, %b : tensor<2x3xf32>, tensor<5x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// CHECK: 'flow.matmul' op expected result type tensor<2x4xf32>, got tensor<2x5xf32>
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) {
  %0 = flow.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x5xf32>
  return
}

// -----

// CHECK: 'flow.reduce' op expected reduction dims in [0, 2), got [2]
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.reduce sum %a, dims = [2] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// CHECK: 'flow.reduce' op expected distinct reduction dims, got [1, 1]
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.reduce sum %a, dims = [1, 1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

// CHECK: 'flow.reduce' op expected result type tensor<2xf32>, got tensor<3xf32>
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.reduce max %a, dims = [1] : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

// CHECK: 'flow.reshape' op cannot reshape tensor<2x3xf32> (6 elements) to shape [7]
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

// CHECK: 'flow.transpose' op expected distinct permutation entries, got [0, 0]
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.transpose %a, permutation = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

// CHECK: 'flow.transpose' op expected a permutation of 3 dims, got [1, 0]
func.func @f(%a: tensor<2x3x4xf32>) {
  %0 = flow.transpose %a, permutation = [1, 0] : tensor<2x3x4xf32> -> tensor<3x2xf32>
  return
}

// -----

// CHECK: 'flow.broadcast_in_dim' op expected 1 broadcast dims for tensor<3xf32>, got [0, 1]
func.func @f(%a: tensor<3xf32>) {
  %0 = flow.broadcast_in_dim %a, dims = [0, 1] : tensor<3xf32> -> tensor<2x3xf32>
  return
}

// -----

// CHECK: 'flow.broadcast_in_dim' op expected increasing broadcast dims, got [2, 0]
func.func @f(%a: tensor<2x3xf32>) {
  %0 = flow.broadcast_in_dim %a, dims = [2, 0] : tensor<2x3xf32> -> tensor<2x4x3xf32>
  return
}

// -----

// CHECK: 'flow.broadcast_in_dim' op cannot broadcast operand dim 0 of size 3 to result dim 0 of size 4 (tensor<3xf32> -> shape [4, 2])
func.func @f(%a: tensor<3xf32>) {
  %0 = flow.broadcast_in_dim %a, dims = [0] : tensor<3xf32> -> tensor<4x2xf32>
  return
}

// -----

// CHECK: 'flow.full' op expected result type tensor<2xf32>, got tensor<2xi32>
func.func @f() {
  %0 = flow.full 1.0 : f32 -> tensor<2xi32>
  return
}

// -----

// CHECK: attribute tensor<3xf32> expected from variable 'T', but got tensor<2xf32>
func.func @f() {
  %0 = "flow.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}
