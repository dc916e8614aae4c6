// Round trip of flow.fused and flow.yield: custom form, then custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<4x3xf32>
// CHECK:         %[[R:.*]] = flow.fused (%[[X:.*]] = %[[A]], %[[Y:.*]] = %[[B]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
// CHECK-NEXT:      %[[TWO:.*]] = flow.full 2.000000e+00 : f32 -> tensor<4x3xf32>
// CHECK-NEXT:      %[[M:.*]] = flow.mul %[[Y]], %[[TWO]] : tensor<4x3xf32>
// CHECK-NEXT:      %[[S:.*]] = flow.add %[[X]], %[[M]] : tensor<4x3xf32>
// CHECK-NEXT:      flow.yield %[[S]] : tensor<4x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
// GENERIC-LABEL: "func.func"() <{sym_name = "chain"
// GENERIC:       "flow.fused"(%{{.*}}, %{{.*}}) ({
// GENERIC-NEXT:  ^{{.*}}(%{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<4x3xf32>):
// GENERIC:       "flow.yield"(%{{.*}}) : (tensor<4x3xf32>) -> ()
// GENERIC-NEXT:  }) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
func.func @chain(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = flow.fused (%x = %a, %y = %b) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = flow.full 2.0 : f32 -> tensor<4x3xf32>
    %1 = flow.mul %y, %0 : tensor<4x3xf32>
    %2 = flow.add %x, %1 : tensor<4x3xf32>
    flow.yield %2 : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}

// -----

// Several results, a broadcast region argument, compare / select / cast, and attributes.
// CHECK-LABEL: func.func @multi_output(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<3xf32>
// CHECK:         %[[R:.*]], %[[S:.*]], %[[T:.*]] = flow.fused (%[[X:.*]] = %[[A]], %[[Y:.*]] = %[[B]]) : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>) {
// CHECK-NEXT:      %[[BY:.*]] = flow.broadcast_in_dim %[[Y]], dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:      %[[SUM:.*]] = flow.add %[[X]], %[[BY]] : tensor<4x3xf32>
// CHECK-NEXT:      %[[P:.*]] = flow.compare gt, %[[SUM]], %[[X]] : tensor<4x3xf32> -> tensor<4x3xi1>
// CHECK-NEXT:      %[[SEL:.*]] = flow.select %[[P]], %[[SUM]], %[[X]] : tensor<4x3xi1>, tensor<4x3xf32>
// CHECK-NEXT:      %[[C:.*]] = flow.cast %[[SEL]] : tensor<4x3xf32> -> tensor<4x3xi32>
// CHECK-NEXT:      flow.yield %[[SUM]], %[[P]], %[[C]] : tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>
// CHECK-NEXT:    } attributes {note = "kept"}
// CHECK-NEXT:    func.return %[[R]], %[[S]], %[[T]]
func.func @multi_output(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>) {
  %r:3 = flow.fused (%x = %a, %y = %b) : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>) {
    %0 = flow.broadcast_in_dim %y, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
    %1 = flow.add %x, %0 : tensor<4x3xf32>
    %2 = flow.compare gt, %1, %x : tensor<4x3xf32> -> tensor<4x3xi1>
    %3 = flow.select %2, %1, %x : tensor<4x3xi1>, tensor<4x3xf32>
    %4 = flow.cast %3 : tensor<4x3xf32> -> tensor<4x3xi32>
    flow.yield %1, %2, %4 : tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>
  } attributes {note = "kept"}
  return %r#0, %r#1, %r#2 : tensor<4x3xf32>, tensor<4x3xi1>, tensor<4x3xi32>
}

// -----

// Rank 0, and a region argument passed straight through.
// CHECK-LABEL: func.func @scalar(
// CHECK:         flow.fused (%[[X:.*]] = %{{.*}}) : (tensor<f32>) -> (tensor<f32>, tensor<f32>) {
// CHECK-NEXT:      %[[E:.*]] = flow.exp %[[X]] : tensor<f32>
// CHECK-NEXT:      flow.yield %[[E]], %[[X]] : tensor<f32>, tensor<f32>
func.func @scalar(%a: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %r:2 = flow.fused (%x = %a) : (tensor<f32>) -> (tensor<f32>, tensor<f32>) {
    %0 = flow.exp %x : tensor<f32>
    flow.yield %0, %x : tensor<f32>, tensor<f32>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<f32>
}
