// Verifier errors of the movement ops. xDSL's --verify-diagnostics prints the diagnostic
// instead of matching `expected-error`, so the printed message is checked.
// RUN: flow-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// Without the flag the first error is reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: movement-invalid.mlir:[[# @LINE + 5]]:3: error: 'flow.slice' op dim 0 reads indices 1 to 7 (start 1, stride 2, size 4) outside [0, 6) of tensor<6x5xf32>
// ERR-NOT: Traceback

// CHECK: 'flow.slice' op dim 0 reads indices 1 to 7 (start 1, stride 2, size 4) outside [0, 6) of tensor<6x5xf32>
func.func @slice_out_of_bounds(%x: tensor<6x5xf32>) {
  %0 = flow.slice %x, start = [1, 0], strides = [2, 1] : tensor<6x5xf32> -> tensor<4x5xf32>
  return
}

// -----

// CHECK: 'flow.slice' op dim 1 reads indices 2 to -1 (start 2, stride -1, size 4) outside [0, 5) of tensor<6x5xf32>
func.func @slice_negative_stride_out_of_bounds(%x: tensor<6x5xf32>) {
  %0 = flow.slice %x, start = [0, 2], strides = [1, -1] : tensor<6x5xf32> -> tensor<6x4xf32>
  return
}

// -----

// CHECK: 'flow.slice' op expected non-zero strides, got [1, 0]
func.func @slice_zero_stride(%x: tensor<6x5xf32>) {
  %0 = flow.slice %x, start = [0, 0], strides = [1, 0] : tensor<6x5xf32> -> tensor<6x1xf32>
  return
}

// -----

// CHECK: 'flow.slice' op expected 2 start entries for tensor<6x5xf32>, got [0]
func.func @slice_rank(%x: tensor<6x5xf32>) {
  %0 = flow.slice %x, start = [0], strides = [1, 1] : tensor<6x5xf32> -> tensor<6x5xf32>
  return
}

// -----

// CHECK: 'flow.pad' op expected non-negative padding, got low [0, -1], high [1, 0]
func.func @pad_negative(%x: tensor<2x3xf32>) {
  %0 = flow.pad %x, low = [0, -1], high = [1, 0], value = (0.0 : f32) : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// CHECK: 'flow.pad' op expected a padding value of type f32, got 0 : i32
func.func @pad_value_type(%x: tensor<2x3xf32>) {
  %0 = flow.pad %x, low = [0, 0], high = [1, 0], value = (0 : i32) : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

// CHECK: 'flow.pad' op expected result type tensor<3x3xf32>, got tensor<3x4xf32>
func.func @pad_result(%x: tensor<2x3xf32>) {
  %0 = flow.pad %x, low = [0, 0], high = [1, 0], value = (0.0 : f32) : tensor<2x3xf32> -> tensor<3x4xf32>
  return
}

// -----

// CHECK: 'flow.concat' op expected operand #1 to match operand #0 in every dim but 1, got tensor<3x1xf32> and tensor<2x3xf32>
func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x1xf32>) {
  %0 = flow.concat dim = 1, %a, %b : tensor<2x3xf32>, tensor<3x1xf32> -> tensor<2x4xf32>
  return
}

// -----

// CHECK: 'flow.concat' op expected every operand to have element type f32, got tensor<2x1xi32> (operand #1)
func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x1xi32>) {
  %0 = flow.concat dim = 1, %a, %b : tensor<2x3xf32>, tensor<2x1xi32> -> tensor<2x4xf32>
  return
}

// -----

// CHECK: 'flow.concat' op expected dim in [0, 2), got 2
func.func @concat_dim(%a: tensor<2x3xf32>) {
  %0 = flow.concat dim = 2, %a : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// CHECK: 'flow.concat' op expected result type tensor<2x4xf32>, got tensor<2x5xf32>
func.func @concat_result(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) {
  %0 = flow.concat dim = 1, %a, %b : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x5xf32>
  return
}

// -----

// CHECK: 'flow.gather' op expected integer indices, got tensor<2x3xf32>
func.func @gather_float_indices(%x: tensor<4x3xf32>, %i: tensor<2x3xf32>) {
  %0 = flow.gather %x, %i, dim = 0 : tensor<4x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// CHECK: 'flow.gather' op expected indices of rank 2 like the operand tensor<4x3xf32>, got tensor<2xi64>
func.func @gather_rank(%x: tensor<4x3xf32>, %i: tensor<2xi64>) {
  %0 = flow.gather %x, %i, dim = 0 : tensor<4x3xf32>, tensor<2xi64> -> tensor<2xf32>
  return
}

// -----

// CHECK: 'flow.gather' op expected indices dim 1 (size 5) to be at most operand dim 1 (size 3), got tensor<2x5xi64> and tensor<4x3xf32>
func.func @gather_too_large(%x: tensor<4x3xf32>, %i: tensor<2x5xi64>) {
  %0 = flow.gather %x, %i, dim = 0 : tensor<4x3xf32>, tensor<2x5xi64> -> tensor<2x5xf32>
  return
}

// -----

// CHECK: 'flow.gather' op cannot gather along dim 0 of size 0 of tensor<0x3xf32>
func.func @gather_from_empty(%x: tensor<0x3xf32>, %i: tensor<2x3xi64>) {
  %0 = flow.gather %x, %i, dim = 0 : tensor<0x3xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
  return
}
