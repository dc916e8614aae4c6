// Round trip of the window ops: custom form, then custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @conv(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x4x9x8xf32>, %[[W:[^:]+]]: tensor<6x2x3x2xf32>
// CHECK:         flow.conv %[[X]], %[[W]], strides = [2, 3], dilations = [2, 1], padding = [1, 2, 0, 0], groups = 2 : tensor<2x4x9x8xf32>, tensor<6x2x3x2xf32> -> tensor<2x6x4x3xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "conv"
// GENERIC:       "flow.conv"(%{{.*}}, %{{.*}}) <{strides = array<i64: 2, 3>, dilations = array<i64: 2, 1>, padding = array<i64: 1, 2, 0, 0>, groups = 2 : i64}>
func.func @conv(%x: tensor<2x4x9x8xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<2x6x4x3xf32> {
  %0 = flow.conv %x, %w, strides = [2, 3], dilations = [2, 1], padding = [1, 2, 0, 0], groups = 2 : tensor<2x4x9x8xf32>, tensor<6x2x3x2xf32> -> tensor<2x6x4x3xf32>
  return %0 : tensor<2x6x4x3xf32>
}

// -----

// CHECK-LABEL: func.func @conv_1d_and_3d(
// CHECK:         flow.conv %{{.*}}, %{{.*}}, strides = [1], dilations = [1], padding = [0, 0], groups = 1 : tensor<1x3x7xi32>, tensor<2x3x3xi32> -> tensor<1x2x5xi32>
// CHECK-NEXT:    flow.conv %{{.*}}, %{{.*}}, strides = [1, 2, 1], dilations = [1, 1, 1], padding = [1, 1, 0, 0, 0, 1], groups = 1 : tensor<1x2x4x5x6xf16>, tensor<3x2x3x3x3xf16> -> tensor<1x3x4x2x5xf16>
func.func @conv_1d_and_3d(%x: tensor<1x3x7xi32>, %w: tensor<2x3x3xi32>, %y: tensor<1x2x4x5x6xf16>, %v: tensor<3x2x3x3x3xf16>) {
  %0 = flow.conv %x, %w, strides = [1], dilations = [1], padding = [0, 0], groups = 1 : tensor<1x3x7xi32>, tensor<2x3x3xi32> -> tensor<1x2x5xi32>
  %1 = flow.conv %y, %v, strides = [1, 2, 1], dilations = [1, 1, 1], padding = [1, 1, 0, 0, 0, 1], groups = 1 : tensor<1x2x4x5x6xf16>, tensor<3x2x3x3x3xf16> -> tensor<1x3x4x2x5xf16>
  return
}

// -----

// CHECK-LABEL: func.func @reduce_window(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x3x8x8xf32>
// CHECK:         flow.reduce_window max %[[X]], window = [1, 1, 3, 3], strides = [1, 1, 2, 2], dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 1, 1, 1, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x4x5xf32>
// CHECK-NEXT:    flow.reduce_window sum %[[X]], window = [1, 1, 2, 2], strides = [1, 1, 1, 1], dilations = [1, 1, 3, 1], padding = [0, 0, 0, 0, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x5x7xf32>
// CHECK-NEXT:    flow.reduce_window min %[[X]], window = [1, 1, 1, 1], strides = [1, 1, 4, 4], dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x2x2xf32>
// CHECK-NEXT:    flow.reduce_window prod %[[X]], window = [1, 3, 1, 1], strides = [1, 1, 1, 1], dilations = [1, 1, 1, 1], padding = [0, 0, 1, 1, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "reduce_window"
// GENERIC:       "flow.reduce_window"(%{{.*}}) <{kind = #flow<reduce_kind max>, window = array<i64: 1, 1, 3, 3>, strides = array<i64: 1, 1, 2, 2>, dilations = array<i64: 1, 1, 1, 1>, padding = array<i64: 0, 0, 0, 0, 1, 1, 1, 2>}>
func.func @reduce_window(%x: tensor<1x3x8x8xf32>) {
  %0 = flow.reduce_window max %x, window = [1, 1, 3, 3], strides = [1, 1, 2, 2], dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 1, 1, 1, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x4x5xf32>
  %1 = flow.reduce_window sum %x, window = [1, 1, 2, 2], strides = [1, 1, 1, 1], dilations = [1, 1, 3, 1], padding = [0, 0, 0, 0, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x5x7xf32>
  %2 = flow.reduce_window min %x, window = [1, 1, 1, 1], strides = [1, 1, 4, 4], dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x2x2xf32>
  %3 = flow.reduce_window prod %x, window = [1, 3, 1, 1], strides = [1, 1, 1, 1], dilations = [1, 1, 1, 1], padding = [0, 0, 1, 1, 0, 0, 0, 0] : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  return
}

// -----

// An empty batch dim under a window of one stays empty.
// CHECK-LABEL: func.func @reduce_window_empty(
// CHECK:         flow.reduce_window max %{{.*}} : tensor<0x6xi64> -> tensor<0x3xi64>
func.func @reduce_window_empty(%x: tensor<0x6xi64>) {
  %0 = flow.reduce_window max %x, window = [1, 2], strides = [1, 2], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<0x6xi64> -> tensor<0x3xi64>
  return
}
