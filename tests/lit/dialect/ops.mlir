// Round trip of every flow op and attribute: custom form, then custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @unary_float(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3xf32>
// CHECK:         flow.neg %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.abs %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.exp %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.log %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.sqrt %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.rsqrt %[[X]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.tanh %[[X]] : tensor<2x3xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "unary_float"
// GENERIC:       "flow.neg"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @unary_float(%x: tensor<2x3xf32>) {
  %0 = flow.neg %x : tensor<2x3xf32>
  %1 = flow.abs %x : tensor<2x3xf32>
  %2 = flow.exp %x : tensor<2x3xf32>
  %3 = flow.log %x : tensor<2x3xf32>
  %4 = flow.sqrt %x : tensor<2x3xf32>
  %5 = flow.rsqrt %x : tensor<2x3xf32>
  %6 = flow.tanh %x : tensor<2x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @unary_int(
// CHECK-SAME:    %[[X:.*]]: tensor<4xi32>
// CHECK:         flow.neg %[[X]] : tensor<4xi32>
// CHECK-NEXT:    flow.abs %[[X]] : tensor<4xi32>
func.func @unary_int(%x: tensor<4xi32>) {
  %0 = flow.neg %x : tensor<4xi32>
  %1 = flow.abs %x : tensor<4xi32>
  return
}

// -----

// CHECK-LABEL: func.func @binary(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x3xf32>, %[[I:.*]]: tensor<i64>
// CHECK:         flow.add %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.sub %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.mul %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.div %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.maximum %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.minimum %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.pow %[[A]], %[[B]] : tensor<2x3xf32>
// CHECK-NEXT:    flow.div %[[I]], %[[I]] : tensor<i64>
// GENERIC-LABEL: "func.func"() <{sym_name = "binary"
// GENERIC:       "flow.add"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<i64>) {
  %0 = flow.add %a, %b : tensor<2x3xf32>
  %1 = flow.sub %a, %b : tensor<2x3xf32>
  %2 = flow.mul %a, %b : tensor<2x3xf32>
  %3 = flow.div %a, %b : tensor<2x3xf32>
  %4 = flow.maximum %a, %b : tensor<2x3xf32>
  %5 = flow.minimum %a, %b : tensor<2x3xf32>
  %6 = flow.pow %a, %b : tensor<2x3xf32>
  %7 = flow.div %i, %i : tensor<i64>
  return
}

// -----

// CHECK-LABEL: func.func @compare_select(
// CHECK-SAME:    %[[A:.*]]: tensor<3xf32>, %[[B:.*]]: tensor<3xf32>
// CHECK:         flow.compare eq, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    flow.compare ne, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    flow.compare lt, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    flow.compare le, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    flow.compare gt, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    %[[P:.*]] = flow.compare ge, %[[A]], %[[B]] : tensor<3xf32> -> tensor<3xi1>
// CHECK-NEXT:    flow.select %[[P]], %[[A]], %[[B]] : tensor<3xi1>, tensor<3xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "compare_select"
// GENERIC:       "flow.compare"(%{{.*}}, %{{.*}}) <{direction = #flow<compare_direction eq>}>
func.func @compare_select(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  %0 = flow.compare eq, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %1 = flow.compare ne, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %2 = flow.compare lt, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %3 = flow.compare le, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %4 = flow.compare gt, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %5 = flow.compare ge, %a, %b : tensor<3xf32> -> tensor<3xi1>
  %6 = flow.select %5, %a, %b : tensor<3xi1>, tensor<3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @cast(
// CHECK-SAME:    %[[X:.*]]: tensor<2xf32>
// CHECK:         %[[I:.*]] = flow.cast %[[X]] : tensor<2xf32> -> tensor<2xi32>
// CHECK-NEXT:    %[[B:.*]] = flow.cast %[[I]] : tensor<2xi32> -> tensor<2xi1>
// CHECK-NEXT:    flow.cast %[[B]] : tensor<2xi1> -> tensor<2xbf16>
func.func @cast(%x: tensor<2xf32>) {
  %0 = flow.cast %x : tensor<2xf32> -> tensor<2xi32>
  %1 = flow.cast %0 : tensor<2xi32> -> tensor<2xi1>
  %2 = flow.cast %1 : tensor<2xi1> -> tensor<2xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[A:.*]]: tensor<4x2x3xf32>, %[[B:.*]]: tensor<4x3x5xf32>, %[[C:.*]]: tensor<2x3xi32>, %[[D:.*]]: tensor<3x7xi32>
// CHECK:         flow.matmul %[[A]], %[[B]] : tensor<4x2x3xf32>, tensor<4x3x5xf32> -> tensor<4x2x5xf32>
// CHECK-NEXT:    flow.matmul %[[C]], %[[D]] : tensor<2x3xi32>, tensor<3x7xi32> -> tensor<2x7xi32>
func.func @matmul(%a: tensor<4x2x3xf32>, %b: tensor<4x3x5xf32>, %c: tensor<2x3xi32>, %d: tensor<3x7xi32>) {
  %0 = flow.matmul %a, %b : tensor<4x2x3xf32>, tensor<4x3x5xf32> -> tensor<4x2x5xf32>
  %1 = flow.matmul %c, %d : tensor<2x3xi32>, tensor<3x7xi32> -> tensor<2x7xi32>
  return
}

// -----

// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>
// CHECK:         flow.reduce sum %[[X]], dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    flow.reduce max %[[X]], dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK-NEXT:    flow.reduce min %[[X]], dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
// CHECK-NEXT:    flow.reduce prod %[[X]], dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "reduce"
// GENERIC:       "flow.reduce"(%{{.*}}) <{kind = #flow<reduce_kind sum>, dims = array<i64: 1>}>
func.func @reduce(%x: tensor<2x3x4xf32>) {
  %0 = flow.reduce sum %x, dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %1 = flow.reduce max %x, dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %2 = flow.reduce min %x, dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %3 = flow.reduce prod %x, dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @movement(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3xf32>, %[[V:.*]]: tensor<1x3xf32>
// CHECK:         flow.reshape %[[X]] : tensor<2x3xf32> -> tensor<3x1x2xf32>
// CHECK-NEXT:    flow.transpose %[[X]], permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    flow.broadcast_in_dim %[[V]], dims = [0, 2] : tensor<1x3xf32> -> tensor<5x4x3xf32>
func.func @movement(%x: tensor<2x3xf32>, %v: tensor<1x3xf32>) {
  %0 = flow.reshape %x : tensor<2x3xf32> -> tensor<3x1x2xf32>
  %1 = flow.transpose %x, permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %2 = flow.broadcast_in_dim %v, dims = [0, 2] : tensor<1x3xf32> -> tensor<5x4x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @constants(
// CHECK:         flow.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    flow.constant dense<7> : tensor<2x2xi32>
// CHECK-NEXT:    flow.full 5.000000e-01 : f32 -> tensor<4x4xf32>
// CHECK-NEXT:    flow.full 3 : i64 -> tensor<i64>
func.func @constants() {
  %0 = flow.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = flow.constant dense<7> : tensor<2x2xi32>
  %2 = flow.full 0.5 : f32 -> tensor<4x4xf32>
  %3 = flow.full 3 : i64 -> tensor<i64>
  return
}

// -----

// CHECK-LABEL: func.func @placement_and_sbp()
// CHECK-SAME:    p1 = #flow.placement<"cpu", [0, 1, 2, 3]>
// CHECK-SAME:    p2 = #flow.placement<"cuda", [[0, 1], [2, 3]]>
// CHECK-SAME:    s = #flow.sbp<[S(0), B, P]>
func.func @placement_and_sbp() attributes {p1 = #flow.placement<"cpu", [0, 1, 2, 3]>, p2 = #flow.placement<"cuda", [[0, 1], [2, 3]]>, s = #flow.sbp<[S(0), B, P]>} {
  return
}

// -----

// CHECK-LABEL: func.func @dist(
// CHECK-SAME:    %[[A:.*]]: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
// CHECK:         flow.exp %[[A]] : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
// CHECK:         flow.reduce sum %{{.*}}, dims = [1] : tensor<8x4xf32, #flow.dist<{{.*}}>> -> tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
func.func @dist(%a: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>,
                %b: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>) {
  %0 = flow.exp %a : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
  %1 = flow.reduce sum %b, dims = [1] : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>> -> tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
  return
}

// -----

// CHECK-LABEL: func.func @optimization_barrier(
// CHECK:         flow.optimization_barrier %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<4xf32>
func.func @optimization_barrier(%x: tensor<2x3xf32>, %g: tensor<4xf32>) -> tensor<2x3xf32> {
  %0 = flow.optimization_barrier %x, %g : tensor<2x3xf32>, tensor<4xf32>
  return %0 : tensor<2x3xf32>
}
