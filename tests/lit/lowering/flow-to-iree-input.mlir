// The hand-off pipeline: generic form, nothing of flow left, and IREE's own parser and
// verifier (the real iree-opt binary) accept the result.
// RUN: flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | FileCheck %s
// RUN: flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | iree-opt --split-input-file | FileCheck %s --check-prefix=IREE
// RUN: flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow
// The pipeline is its passes, run in order:
// RUN: flow-opt %s --split-input-file -p flow-fold-batch-matmuls,flow-fold-transposes,flow-sink-negation,dce,flow-fuse-elementwise,flow-lower-to-linalg --print-op-generic | FileCheck %s

// CHECK-LABEL: "func.func"() <{sym_name = "mlp"
// CHECK:         "linalg.fill"
// CHECK:         "linalg.generic"
// CHECK-SAME:      iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]
// CHECK:         "arith.mulf"
// CHECK:         "arith.addf"
// CHECK:         "arith.maximumf"
// CHECK:         "linalg.generic"
// CHECK:         "arith.maximumf"
// CHECK:         "func.return"
// IREE-LABEL:  func.func @mlp(
// IREE:          linalg.fill
// IREE:          linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// IREE:          arith.maximumf
// IREE:          return
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8xf32> {
  %0 = flow.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = flow.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %2 = flow.add %0, %1 : tensor<8x4xf32>
  %3 = flow.full 0.0 : f32 -> tensor<8x4xf32>
  %4 = flow.maximum %2, %3 : tensor<8x4xf32>
  %5 = flow.reduce max %4, dims = [1] : tensor<8x4xf32> -> tensor<8xf32>
  return %5 : tensor<8xf32>
}

// -----

// Dead flow ops are removed before lowering (xDSL cannot prove a linalg.generic dead).
// CHECK-LABEL: "func.func"() <{sym_name = "dead"
// CHECK-NOT:     "linalg.generic"
// CHECK:         "func.return"(%{{.*}})
// IREE-LABEL:  func.func @dead(
// IREE-NEXT:     return
func.func @dead(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = flow.exp %x : tensor<8xf32>
  %1 = flow.mul %0, %0 : tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

// CHECK-LABEL: "func.func"() <{sym_name = "movement"
// CHECK:         "tensor.collapse_shape"
// CHECK:         "tensor.expand_shape"
// CHECK:         "linalg.generic"
// IREE-LABEL:  func.func @movement(
// IREE:          tensor.collapse_shape
// IREE:          tensor.expand_shape
// IREE:          linalg.generic
func.func @movement(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %0 = flow.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
  %1 = flow.transpose %0, permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  return %1 : tensor<6x4xf32>
}
