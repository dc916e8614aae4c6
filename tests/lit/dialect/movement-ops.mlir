// Round trip of the movement ops (slice, pad, concat, gather): custom form, then
// custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @slice(
// CHECK-SAME:    %[[X:.*]]: tensor<6x5xf32>
// CHECK:         flow.slice %[[X]], start = [1, 0], strides = [2, 1] : tensor<6x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT:    flow.slice %[[X]], start = [5, 4], strides = [-1, -2] : tensor<6x5xf32> -> tensor<6x3xf32>
// CHECK-NEXT:    flow.slice %[[X]], start = [6, 0], strides = [1, 1] : tensor<6x5xf32> -> tensor<0x5xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "slice"
// GENERIC:       "flow.slice"(%{{.*}}) <{start = array<i64: 1, 0>, strides = array<i64: 2, 1>}> : (tensor<6x5xf32>) -> tensor<3x5xf32>
func.func @slice(%x: tensor<6x5xf32>) {
  %0 = flow.slice %x, start = [1, 0], strides = [2, 1] : tensor<6x5xf32> -> tensor<3x5xf32>
  %1 = flow.slice %x, start = [5, 4], strides = [-1, -2] : tensor<6x5xf32> -> tensor<6x3xf32>
  %2 = flow.slice %x, start = [6, 0], strides = [1, 1] : tensor<6x5xf32> -> tensor<0x5xf32>
  return
}

// -----

// CHECK-LABEL: func.func @pad(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<4xi1>
// CHECK:         flow.pad %[[X]], low = [1, 0], high = [0, 2], value = (-1.500000e+00 : f32) : tensor<2x3xf32> -> tensor<3x5xf32>
// CHECK-NEXT:    flow.pad %[[B]], low = [2], high = [1], value = (true) : tensor<4xi1> -> tensor<7xi1>
// GENERIC-LABEL: "func.func"() <{sym_name = "pad"
// GENERIC:       "flow.pad"(%{{.*}}) <{low = array<i64: 1, 0>, high = array<i64: 0, 2>, value = -1.500000e+00 : f32}>
func.func @pad(%x: tensor<2x3xf32>, %b: tensor<4xi1>) {
  %0 = flow.pad %x, low = [1, 0], high = [0, 2], value = (-1.5 : f32) : tensor<2x3xf32> -> tensor<3x5xf32>
  %1 = flow.pad %b, low = [2], high = [1], value = (true) : tensor<4xi1> -> tensor<7xi1>
  return
}

// -----

// CHECK-LABEL: func.func @concat(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3xi32>, %[[B:.*]]: tensor<2x0xi32>, %[[C:.*]]: tensor<2x1xi32>
// CHECK:         flow.concat dim = 1, %[[A]], %[[B]], %[[C]] : tensor<2x3xi32>, tensor<2x0xi32>, tensor<2x1xi32> -> tensor<2x4xi32>
// CHECK-NEXT:    flow.concat dim = 0, %[[A]] : tensor<2x3xi32> -> tensor<2x3xi32>
// GENERIC-LABEL: "func.func"() <{sym_name = "concat"
// GENERIC:       "flow.concat"(%{{.*}}, %{{.*}}, %{{.*}}) <{dimension = 1 : i64}> : (tensor<2x3xi32>, tensor<2x0xi32>, tensor<2x1xi32>) -> tensor<2x4xi32>
func.func @concat(%a: tensor<2x3xi32>, %b: tensor<2x0xi32>, %c: tensor<2x1xi32>) {
  %0 = flow.concat dim = 1, %a, %b, %c : tensor<2x3xi32>, tensor<2x0xi32>, tensor<2x1xi32> -> tensor<2x4xi32>
  %1 = flow.concat dim = 0, %a : tensor<2x3xi32> -> tensor<2x3xi32>
  return
}

// -----

// CHECK-LABEL: func.func @gather(
// CHECK-SAME:    %[[X:.*]]: tensor<4x3xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[J:.*]]: tensor<4x7xi32>
// CHECK:         flow.gather %[[X]], %[[I]], dim = 0 : tensor<4x3xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
// CHECK-NEXT:    flow.gather %[[X]], %[[J]], dim = 1 : tensor<4x3xf32>, tensor<4x7xi32> -> tensor<4x7xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "gather"
// GENERIC:       "flow.gather"(%{{.*}}, %{{.*}}) <{dimension = 0 : i64}> : (tensor<4x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
func.func @gather(%x: tensor<4x3xf32>, %i: tensor<2x3xi64>, %j: tensor<4x7xi32>) {
  %0 = flow.gather %x, %i, dim = 0 : tensor<4x3xf32>, tensor<2x3xi64> -> tensor<2x3xf32>
  %1 = flow.gather %x, %j, dim = 1 : tensor<4x3xf32>, tensor<4x7xi32> -> tensor<4x7xf32>
  return
}
