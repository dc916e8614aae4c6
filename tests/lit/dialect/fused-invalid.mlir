// Verifier errors of flow.fused and flow.yield. xDSL's --verify-diagnostics prints the
// diagnostic instead of matching `expected-error`, so the printed message is checked.
// RUN: flow-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | FileCheck %s
// Without those flags the whole file is parsed first, so the parse error (the last case) is
// reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: fused-invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: expected 2 operand types for 2 bindings, got 1
// ERR-NOT: Traceback

// CHECK: 'flow.fused' op expected 1 region arguments (one per operand), got 2
func.func @f(%a: tensor<4xf32>) {
  %r = "flow.fused"(%a) ({
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    "flow.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.fused' op expected region argument #0 of type tensor<4xf32> (the operand's), got tensor<4xf16>
func.func @f(%a: tensor<4xf32>) {
  %r = "flow.fused"(%a) ({
  ^bb0(%x: tensor<4xf16>):
    %0 = flow.cast %x : tensor<4xf16> -> tensor<4xf32>
    "flow.yield"(%0) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.fused' op expected at least one result
func.func @f(%a: tensor<4xf32>) {
  flow.fused (%x = %a) : (tensor<4xf32>) -> () {
    flow.yield
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected every result to have shape [4] (that of result #0), got result #1 of type tensor<2x2xf32>
func.func @f(%a: tensor<4xf32>) {
  %r:2 = flow.fused (%x = %a) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<2x2xf32>) {
    flow.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

// CHECK: Operation flow.fused contains empty block in single-block region that expects at least a terminator
func.func @f(%a: tensor<4xf32>) {
  %r = "flow.fused"(%a) ({
  ^bb0(%x: tensor<4xf32>):
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.fused' op expected 'flow.yield' of 1 values, got 2
func.func @f(%a: tensor<4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.exp %x : tensor<4xf32>
    flow.yield %0, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected yield operand #0 of type tensor<4xf32>, got tensor<4xi1>
func.func @f(%a: tensor<4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.compare lt, %x, %x : tensor<4xf32> -> tensor<4xi1>
    flow.yield %0 : tensor<4xi1>
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected only elementwise flow ops, flow.full and flow.broadcast_in_dim in its body, got 'flow.reduce'
func.func @f(%a: tensor<4x4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<4x4xf32>) -> tensor<4xf32> {
    %0 = flow.reduce sum %x, dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
    flow.yield %0 : tensor<4xf32>
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected only elementwise flow ops, flow.full and flow.broadcast_in_dim in its body, got 'flow.fused'
func.func @f(%a: tensor<4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.fused (%y = %x) : (tensor<4xf32>) -> tensor<4xf32> {
      %1 = flow.exp %y : tensor<4xf32>
      flow.yield %1 : tensor<4xf32>
    }
    flow.yield %0 : tensor<4xf32>
  }
  return
}

// -----

// CHECK: 'flow.fused' op using value defined outside the region: operand #1 of 'flow.add' (pass it as an operand)
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.add %x, %b : tensor<4xf32>
    flow.yield %0 : tensor<4xf32>
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected 'flow.broadcast_in_dim' in its body to broadcast a region argument, got the result of 'flow.exp'
func.func @f(%a: tensor<3x4xf32>) {
  %r = flow.fused (%x = %a) : (tensor<3x4xf32>) -> tensor<3x4xf32> {
    %0 = flow.exp %x : tensor<3x4xf32>
    %1 = flow.broadcast_in_dim %0, dims = [0, 1] : tensor<3x4xf32> -> tensor<3x4xf32>
    flow.yield %1 : tensor<3x4xf32>
  }
  return
}

// -----

// CHECK: 'flow.fused' op expected every op in its body to have the result shape [3, 4], got 'flow.exp' of type tensor<4xf32>
func.func @f(%a: tensor<4xf32>, %b: tensor<3x4xf32>) {
  %r = flow.fused (%x = %a, %y = %b) : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32> {
    %0 = flow.exp %x : tensor<4xf32>
    flow.yield %y : tensor<3x4xf32>
  }
  return
}

// -----

// CHECK: 'flow.yield' expects parent op 'flow.fused'
func.func @f(%a: tensor<4xf32>) {
  flow.yield %a : tensor<4xf32>
}

// -----

// CHECK: fused-invalid.mlir:[[# @LINE + 3]]:{{[0-9]+}}
// CHECK: expected 2 operand types for 2 bindings, got 1
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %r = flow.fused (%x = %a, %y = %b) : (tensor<4xf32>) -> tensor<4xf32> {
    flow.yield %x : tensor<4xf32>
  }
  return
}
