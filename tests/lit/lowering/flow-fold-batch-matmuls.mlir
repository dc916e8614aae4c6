// RUN: flow-opt %s --split-input-file -p flow-fold-batch-matmuls,dce | FileCheck %s
// After flow-fold-transposes too, no transpose is left on a 2-D product's result:
// RUN: flow-opt %s --split-input-file -p flow-fold-batch-matmuls,flow-fold-transposes,dce | FileCheck %s --check-prefix=FOLDED

// A linear layer on (batch, tokens, features): `x @ w.T` with w broadcast over the batch
// becomes one product over the batch's rows.
// CHECK-LABEL: func.func @shared_weight
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>)
// CHECK-NEXT:    %[[WT:.*]] = flow.transpose %[[W]], permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.reshape %[[X]] : tensor<4x8x16xf32> -> tensor<32x16xf32>
// CHECK-NEXT:    %[[M:.*]] = flow.matmul %[[R]], %[[WT]] : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT:    %[[Y:.*]] = flow.reshape %[[M]] : tensor<32x32xf32> -> tensor<4x8x32xf32>
// CHECK-NEXT:    func.return %[[Y]]
func.func @shared_weight(%x: tensor<4x8x16xf32>, %w: tensor<32x16xf32>) -> tensor<4x8x32xf32> {
  %wt = flow.transpose %w, permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %wb = flow.broadcast_in_dim %wt, dims = [1, 2] : tensor<16x32xf32> -> tensor<4x16x32xf32>
  %y = flow.matmul %x, %wb : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  func.return %y : tensor<4x8x32xf32>
}

// -----

// The input gradient `g @ (broadcast w)^T` reads the broadcast weight transposed: the
// transpose moves onto the 2-D weight, where it cancels against the weight's own.
// CHECK-LABEL: func.func @input_grad
// CHECK:         flow.matmul %{{.*}}, %{{.*}} : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
// CHECK-NOT:     tensor<4x32x16xf32>
// FOLDED-LABEL:  func.func @input_grad
// FOLDED-SAME:     (%[[G:.*]]: tensor<4x8x32xf32>, %[[W:.*]]: tensor<32x16xf32>)
// FOLDED-NOT:      flow.transpose
// FOLDED:          flow.matmul %{{.*}}, %[[W]] : tensor<32x32xf32>, tensor<32x16xf32>
func.func @input_grad(%g: tensor<4x8x32xf32>, %w: tensor<32x16xf32>) -> tensor<4x8x16xf32> {
  %wt = flow.transpose %w, permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %wb = flow.broadcast_in_dim %wt, dims = [1, 2] : tensor<16x32xf32> -> tensor<4x16x32xf32>
  %wbt = flow.transpose %wb, permutation = [0, 2, 1] : tensor<4x16x32xf32> -> tensor<4x32x16xf32>
  %d = flow.matmul %g, %wbt : tensor<4x8x32xf32>, tensor<4x32x16xf32> -> tensor<4x8x16xf32>
  func.return %d : tensor<4x8x16xf32>
}

// -----

// The weight gradient: the batch sum of x^T @ g is one product over the rows, and with
// flow-fold-transposes the gradient of w (the transpose of that sum) is g^T @ x.
// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8x16xf32>, %[[G:.*]]: tensor<4x8x32xf32>)
// CHECK-NEXT:    %[[XR:.*]] = flow.reshape %[[X]] : tensor<4x8x16xf32> -> tensor<32x16xf32>
// CHECK-NEXT:    %[[XT:.*]] = flow.transpose %[[XR]], permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
// CHECK-NEXT:    %[[GR:.*]] = flow.reshape %[[G]] : tensor<4x8x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT:    %[[M:.*]] = flow.matmul %[[XT]], %[[GR]] : tensor<16x32xf32>, tensor<32x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT:    %[[T:.*]] = flow.transpose %[[M]]
// CHECK-NEXT:    func.return %[[T]]
// FOLDED-LABEL:  func.func @weight_grad
// FOLDED:          %[[GT:.*]] = flow.transpose %{{.*}}, permutation = [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
// FOLDED-NEXT:     %[[M:.*]] = flow.matmul %[[GT]], %{{.*}} : tensor<32x32xf32>, tensor<32x16xf32> -> tensor<32x16xf32>
// FOLDED-NEXT:     func.return %[[M]]
func.func @weight_grad(%x: tensor<4x8x16xf32>, %g: tensor<4x8x32xf32>) -> tensor<32x16xf32> {
  %xt = flow.transpose %x, permutation = [0, 2, 1] : tensor<4x8x16xf32> -> tensor<4x16x8xf32>
  %p = flow.matmul %xt, %g : tensor<4x16x8xf32>, tensor<4x8x32xf32> -> tensor<4x16x32xf32>
  %s = flow.reduce sum %p, dims = [0] : tensor<4x16x32xf32> -> tensor<16x32xf32>
  %t = flow.transpose %s, permutation = [1, 0] : tensor<16x32xf32> -> tensor<32x16xf32>
  func.return %t : tensor<32x16xf32>
}

// -----

// Left alone: a genuinely batched product (attention's q @ k^T), a batch sum that is not
// over the batch dims alone, a product whose batched result is used elsewhere too, and a
// broadcast that also stretches a matrix dim.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     flow.reshape
// CHECK:         flow.matmul %{{.*}} : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
// CHECK:         flow.reduce sum %{{.*}}, dims = [0, 1]
// CHECK:         flow.reduce sum %{{.*}}, dims = [0] : tensor<2x16x8xf32>
// CHECK:         flow.matmul %{{.*}} : tensor<2x8x16xf32>, tensor<2x16x3xf32> -> tensor<2x8x3xf32>
func.func @unchanged(%q: tensor<2x8x16xf32>, %k: tensor<2x16x8xf32>, %g: tensor<2x8x8xf32>,
                     %w: tensor<16x1xf32>) -> (tensor<2x8x8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<2x16x8xf32>, tensor<2x8x3xf32>) {
  %s = flow.matmul %q, %k : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
  %qt = flow.transpose %q, permutation = [0, 2, 1] : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
  %p = flow.matmul %qt, %g : tensor<2x16x8xf32>, tensor<2x8x8xf32> -> tensor<2x16x8xf32>
  %r = flow.reduce sum %p, dims = [0, 1] : tensor<2x16x8xf32> -> tensor<8xf32>
  %p2 = flow.matmul %qt, %g : tensor<2x16x8xf32>, tensor<2x8x8xf32> -> tensor<2x16x8xf32>
  %r2 = flow.reduce sum %p2, dims = [0] : tensor<2x16x8xf32> -> tensor<16x8xf32>
  %wb = flow.broadcast_in_dim %w, dims = [1, 2] : tensor<16x1xf32> -> tensor<2x16x3xf32>
  %y = flow.matmul %q, %wb : tensor<2x8x16xf32>, tensor<2x16x3xf32> -> tensor<2x8x3xf32>
  func.return %s, %r, %r2, %p2, %y : tensor<2x8x8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<2x16x8xf32>, tensor<2x8x3xf32>
}
