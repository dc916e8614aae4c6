// RUN: flow-opt %s --split-input-file -p flow-fold-transposes,dce | FileCheck %s

// The weight gradient of `x @ w.T`: (x.T @ g).T becomes g.T @ x, with no transpose left
// on x and none on the result.
// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME:    (%[[X:.*]]: tensor<64x784xf32>, %[[G:.*]]: tensor<64x256xf32>)
// CHECK-NEXT:    %[[GT:.*]] = flow.transpose %[[G]], permutation = [1, 0]
// CHECK-NEXT:    %[[M:.*]] = flow.matmul %[[GT]], %[[X]] : tensor<256x64xf32>, tensor<64x784xf32> -> tensor<256x784xf32>
// CHECK-NEXT:    func.return %[[M]]
func.func @weight_grad(%x: tensor<64x784xf32>, %g: tensor<64x256xf32>) -> tensor<256x784xf32> {
  %xt = flow.transpose %x, permutation = [1, 0] : tensor<64x784xf32> -> tensor<784x64xf32>
  %m = flow.matmul %xt, %g : tensor<784x64xf32>, tensor<64x256xf32> -> tensor<784x256xf32>
  %t = flow.transpose %m, permutation = [1, 0] : tensor<784x256xf32> -> tensor<256x784xf32>
  func.return %t : tensor<256x784xf32>
}

// -----

// Two transposes compose; inverse ones cancel.
// CHECK-LABEL: func.func @compose
// CHECK-SAME:    (%[[A:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[T:.*]] = flow.transpose %[[A]], permutation = [2, 0, 1]
// CHECK-NEXT:    func.return %[[T]], %[[A]]
func.func @compose(%a: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %t1 = flow.transpose %a, permutation = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %t2 = flow.transpose %t1, permutation = [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %s1 = flow.transpose %a, permutation = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %s2 = flow.transpose %s1, permutation = [2, 0, 1] : tensor<3x4x2xf32> -> tensor<2x3x4xf32>
  func.return %t2, %s2 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// A matmul result used twice keeps its transpose (rewriting would compute it twice).
// CHECK-LABEL: func.func @shared_result
// CHECK:         %[[M:.*]] = flow.matmul
// CHECK:         flow.transpose %[[M]]
func.func @shared_result(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<4x2xf32>) {
  %m = flow.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %t = flow.transpose %m, permutation = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  func.return %m, %t : tensor<2x4xf32>, tensor<4x2xf32>
}

// -----

// Batched: only a swap of the last two dims folds into the matmul.
// CHECK-LABEL: func.func @batched
// CHECK-NOT:     flow.transpose %{{.*}} : tensor<5x2x4xf32>
// CHECK:         flow.matmul %{{.*}}, %{{.*}} : tensor<5x4x3xf32>, tensor<5x3x2xf32> -> tensor<5x4x2xf32>
func.func @batched(%a: tensor<5x2x3xf32>, %b: tensor<5x3x4xf32>) -> tensor<5x4x2xf32> {
  %m = flow.matmul %a, %b : tensor<5x2x3xf32>, tensor<5x3x4xf32> -> tensor<5x2x4xf32>
  %t = flow.transpose %m, permutation = [0, 2, 1] : tensor<5x2x4xf32> -> tensor<5x4x2xf32>
  func.return %t : tensor<5x4x2xf32>
}
