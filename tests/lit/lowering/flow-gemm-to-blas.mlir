// RUN: flow-opt %s --split-input-file -p 'flow-gemm-to-blas{policy=all}' | FileCheck %s
// RUN: flow-opt %s --split-input-file -p 'flow-gemm-to-blas{policy=none}' | FileCheck %s --check-prefix=NONE
// RUN: flow-opt %s --split-input-file -p 'flow-to-iree-input' | FileCheck %s --check-prefix=DEFAULT

// A product reads through transposes of its operands' last two dims: the call names them
// (`nt`: the right operand transposed) and the transpose goes. One declaration per name.
// CHECK-LABEL: func.func @dense
// CHECK-SAME:    (%[[X:.*]]: tensor<8x6xf32>, %[[W:.*]]: tensor<4x6xf32>)
// CHECK-NOT:     flow.transpose
// CHECK:         %[[Y:.*]] = func.call @blas.matmul_nt.8x6xf32.4x6xf32(%[[X]], %[[W]]) : (tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[Z:.*]] = func.call @blas.matmul_nt.8x6xf32.4x6xf32(%[[X]], %[[W]])
// CHECK-NEXT:    %[[R:.*]] = flow.tanh %[[Y]]
// CHECK:         func.func private @blas.matmul_nt.8x6xf32.4x6xf32(tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<8x4xf32>
// CHECK-NOT:     func.func private
// NONE-LABEL:  func.func @dense
// NONE-NOT:      blas
// NONE:          flow.matmul
// DEFAULT-NOT:   blas.matmul
func.func @dense(%x: tensor<8x6xf32>, %w: tensor<4x6xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %wt = flow.transpose %w, permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %y = flow.matmul %x, %wt : tensor<8x6xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %z = flow.matmul %x, %wt : tensor<8x6xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %r = flow.tanh %y : tensor<8x4xf32>
  func.return %r, %z : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Batched, the left operand transposed (`tn`), f64.
// CHECK-LABEL: func.func @batched
// CHECK:         func.call @blas.matmul_tn.2x5x3xf64.2x5x4xf64(%{{.*}}, %{{.*}}) : (tensor<2x5x3xf64>, tensor<2x5x4xf64>) -> tensor<2x3x4xf64>
func.func @batched(%a: tensor<2x5x3xf64>, %b: tensor<2x5x4xf64>) -> tensor<2x3x4xf64> {
  %at = flow.transpose %a, permutation = [0, 2, 1] : tensor<2x5x3xf64> -> tensor<2x3x5xf64>
  %c = flow.matmul %at, %b : tensor<2x3x5xf64>, tensor<2x5x4xf64> -> tensor<2x3x4xf64>
  func.return %c : tensor<2x3x4xf64>
}

// -----

// Left alone: a transpose that is not of the last two dims (it stays, read as it is), a
// half-precision or integer product (BLAS has no gemm for them), and an unused product (dce
// drops it; a call would stay). (A product with a dynamic dim stays too.)
// CHECK-LABEL: func.func @kept
// CHECK:         %[[T:.*]] = flow.transpose %{{.*}}, permutation = [1, 0, 2]
// CHECK:         func.call @blas.matmul_nn.3x2x4xf32.3x4x5xf32(%[[T]], %{{.*}})
// CHECK:         flow.matmul %{{.*}} : tensor<4x4xf16>
// CHECK:         flow.matmul %{{.*}} : tensor<4x4xi32>
// CHECK:         flow.matmul %{{.*}} : tensor<2x2xf32>
func.func @kept(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>, %h: tensor<4x4xf16>,
                %i: tensor<4x4xi32>, %s: tensor<2x2xf32>)
    -> (tensor<3x2x5xf32>, tensor<4x4xf16>, tensor<4x4xi32>) {
  %at = flow.transpose %a, permutation = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %c = flow.matmul %at, %b : tensor<3x2x4xf32>, tensor<3x4x5xf32> -> tensor<3x2x5xf32>
  %hh = flow.matmul %h, %h : tensor<4x4xf16>, tensor<4x4xf16> -> tensor<4x4xf16>
  %ii = flow.matmul %i, %i : tensor<4x4xi32>, tensor<4x4xi32> -> tensor<4x4xi32>
  %unused = flow.matmul %s, %s : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  func.return %c, %hh, %ii : tensor<3x2x5xf32>, tensor<4x4xf16>, tensor<4x4xi32>
}
