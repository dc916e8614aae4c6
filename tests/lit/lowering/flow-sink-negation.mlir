// RUN: flow-opt %s --split-input-file -p flow-sink-negation | FileCheck %s

// A negation used only by a sum moves after it: the sum runs on x, one negation on the result.
// CHECK-LABEL: func.func @loss
// CHECK-SAME:    (%[[X:.*]]: tensor<8x4xf32>)
// CHECK-NEXT:    %[[S:.*]] = flow.reduce sum %[[X]], dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
// CHECK-NEXT:    %[[N:.*]] = flow.neg %[[S]] : tensor<f32>
// CHECK-NEXT:    func.return %[[N]]
func.func @loss(%x: tensor<8x4xf32>) -> tensor<f32> {
  %n = flow.neg %x : tensor<8x4xf32>
  %s = flow.reduce sum %n, dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  func.return %s : tensor<f32>
}

// -----

// Partial sums and integers too.
// CHECK-LABEL: func.func @rows
// CHECK-NEXT:    %[[S:.*]] = flow.reduce sum %{{.*}}, dims = [1] : tensor<8x4xi32> -> tensor<8xi32>
// CHECK-NEXT:    flow.neg %[[S]] : tensor<8xi32>
func.func @rows(%x: tensor<8x4xi32>) -> tensor<8xi32> {
  %n = flow.neg %x : tensor<8x4xi32>
  %s = flow.reduce sum %n, dims = [1] : tensor<8x4xi32> -> tensor<8xi32>
  func.return %s : tensor<8xi32>
}

// -----

// A negation with another use stays (moving it would compute it twice); max is left alone.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    %[[N:.*]] = flow.neg
// CHECK-NEXT:    flow.reduce sum %[[N]]
// CHECK-NEXT:    %[[M:.*]] = flow.neg
// CHECK-NEXT:    flow.reduce max %[[M]]
func.func @kept(%x: tensor<8xf32>) -> (tensor<f32>, tensor<8xf32>, tensor<f32>) {
  %n = flow.neg %x : tensor<8xf32>
  %s = flow.reduce sum %n, dims = [0] : tensor<8xf32> -> tensor<f32>
  %m = flow.neg %x : tensor<8xf32>
  %t = flow.reduce max %m, dims = [0] : tensor<8xf32> -> tensor<f32>
  func.return %s, %n, %t : tensor<f32>, tensor<8xf32>, tensor<f32>
}
