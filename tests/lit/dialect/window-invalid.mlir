// Every verifier error of the window ops. xDSL's --verify-diagnostics prints the
// diagnostic instead of matching `expected-error`, so the printed message is checked.
// RUN: flow-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | FileCheck %s
// Without those flags the whole file is parsed first, so the parse error (the last case) is
// reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: window-invalid.mlir:{{[0-9]+}}:27: error: Expected `sum`, `max`, `min`, or `prod`.
// ERR-NOT: Traceback

// CHECK: 'flow.conv' op expected an input of rank 3, 4 or 5 ([N, C, spatial...]), got tensor<3x8xf32>
func.func @f(%x: tensor<3x8xf32>, %w: tensor<4x3xf32>) {
  %0 = flow.conv %x, %w, strides = [], dilations = [], padding = [], groups = 1 : tensor<3x8xf32>, tensor<4x3xf32> -> tensor<3x4xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected a weight of rank 3 like the input, got tensor<4x3x3x3xf32>
func.func @f(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 1 : tensor<1x3x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected input and weight of one element type, got tensor<1x3x8xf32> and tensor<4x3x3xf16>
func.func @f(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf16>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 1 : tensor<1x3x8xf32>, tensor<4x3x3xf16> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected 2 strides, got [1]
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1, 1], padding = [0, 0, 0, 0], groups = 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected dilations >= 1, got [0, 1]
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [0, 1], padding = [0, 0, 0, 0], groups = 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected 2 (low, high) padding pairs, got [[1, 1], [1]]
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [1, 1], padding = [1, 1, 1], groups = 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected non-negative padding, got [[0, 0], [-1, 0]]
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [1, 1], padding = [0, 0, -1, 0], groups = 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x5xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected groups >= 1, got 0
func.func @f(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 0 : tensor<1x3x8xf32>, tensor<4x3x3xf32> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected input channels (3) divisible by groups (2)
func.func @f(%x: tensor<1x3x8xf32>, %w: tensor<4x1x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 2 : tensor<1x3x8xf32>, tensor<4x1x3xf32> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected weight dim 1 to be input channels / groups = 2, got 4 (input tensor<1x4x8xf32>, weight tensor<4x4x3xf32>, groups = 2)
func.func @f(%x: tensor<1x4x8xf32>, %w: tensor<4x4x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 2 : tensor<1x4x8xf32>, tensor<4x4x3xf32> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected output channels (5) divisible by groups (2)
func.func @f(%x: tensor<1x4x8xf32>, %w: tensor<5x2x3xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 2 : tensor<1x4x8xf32>, tensor<5x2x3xf32> -> tensor<1x5x6xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected the dilated kernel (size 9) to fit in the padded input (size 8) in spatial dim 0, got input tensor<1x3x6xf32> and weight tensor<4x3x5xf32>
func.func @f(%x: tensor<1x3x6xf32>, %w: tensor<4x3x5xf32>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [2], padding = [1, 1], groups = 1 : tensor<1x3x6xf32>, tensor<4x3x5xf32> -> tensor<1x4x1xf32>
  return
}

// -----

// CHECK: 'flow.conv' op expected result type tensor<1x4x3xf32>, got tensor<1x4x6xf32>
func.func @f(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [2], dilations = [1], padding = [0, 0], groups = 1 : tensor<1x3x8xf32>, tensor<4x3x3xf32> -> tensor<1x4x6xf32>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected 2 window sizes, got [2]
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window max %x, window = [2], strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<4x6xf32> -> tensor<3x6xf32>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected strides >= 1, got [0, 1]
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window sum %x, window = [2, 1], strides = [0, 1], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<4x6xf32> -> tensor<3x6xf32>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected non-negative padding, got [[0, 0], [0, -2]]
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window sum %x, window = [1, 1], strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, -2] : tensor<4x6xf32> -> tensor<4x4xf32>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected a float or integer operand, got tensor<4x6xi1>
func.func @f(%x: tensor<4x6xi1>) {
  %0 = flow.reduce_window max %x, window = [1, 1], strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<4x6xi1> -> tensor<4x6xi1>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected the dilated window (size 7) to fit in the padded operand (size 6) in dim 1, got tensor<4x6xf32>
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window max %x, window = [1, 4], strides = [1, 1], dilations = [1, 2], padding = [0, 0, 0, 0] : tensor<4x6xf32> -> tensor<4x1xf32>
  return
}

// -----

// CHECK: 'flow.reduce_window' op expected result type tensor<2x3xf32>, got tensor<2x6xf32>
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window max %x, window = [2, 2], strides = [2, 2], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<4x6xf32> -> tensor<2x6xf32>
  return
}

// -----

// CHECK: window-invalid.mlir:[[# @LINE + 3]]:27
// CHECK: Expected `sum`, `max`, `min`, or `prod`.
func.func @f(%x: tensor<4x6xf32>) {
  %0 = flow.reduce_window mean %x, window = [2, 2], strides = [2, 2], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<4x6xf32> -> tensor<2x3xf32>
  return
}
