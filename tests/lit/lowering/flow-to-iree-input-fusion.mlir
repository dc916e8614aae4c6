// flow-to-iree-input fuses elementwise chains (flow-fuse-elementwise) unless FLOW_FUSION=0.
// RUN: flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | FileCheck %s
// RUN: env FLOW_FUSION=0 flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | FileCheck %s --check-prefix=OFF
// RUN: flow-opt %s --split-input-file -p flow-to-iree-input --print-op-generic | iree-opt --split-input-file > /dev/null

// An eight-op chain with two scalars and a broadcast bias is exactly one linalg.generic.
// CHECK-LABEL: "func.func"() <{sym_name = "chain"
// CHECK-COUNT-1: "linalg.generic"
// CHECK-NOT:     "linalg.generic"
// CHECK-NOT:     "linalg.fill"
// CHECK:         "func.return"
// OFF-LABEL:   "func.func"() <{sym_name = "chain"
// OFF-COUNT-9:   "linalg.generic"
// OFF-NOT:       "linalg.generic"
// OFF:           "func.return"
func.func @chain(%a: tensor<64x32xf32>, %b: tensor<32xf32>, %c: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %two = flow.full 2.0 : f32 -> tensor<64x32xf32>
  %half = flow.full 0.5 : f32 -> tensor<64x32xf32>
  %bb = flow.broadcast_in_dim %b, dims = [1] : tensor<32xf32> -> tensor<64x32xf32>
  %0 = flow.mul %a, %two : tensor<64x32xf32>
  %1 = flow.add %0, %bb : tensor<64x32xf32>
  %2 = flow.mul %1, %c : tensor<64x32xf32>
  %3 = flow.sub %2, %a : tensor<64x32xf32>
  %4 = flow.exp %3 : tensor<64x32xf32>
  %5 = flow.mul %4, %half : tensor<64x32xf32>
  %6 = flow.add %5, %bb : tensor<64x32xf32>
  %7 = flow.tanh %6 : tensor<64x32xf32>
  return %7 : tensor<64x32xf32>
}

// -----

// Matmul + bias + relu: the contraction, then one generic for the bias add and the relu.
// CHECK-LABEL: "func.func"() <{sym_name = "dense"
// CHECK:         "linalg.fill"
// CHECK:         "linalg.generic"
// CHECK-SAME:      iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]
// CHECK:         "linalg.generic"
// CHECK-SAME:      affine_map<(d0, d1) -> (d1)>
// CHECK:           "arith.addf"
// CHECK-NEXT:      "arith.maximumf"
// CHECK-NEXT:      "linalg.yield"
// CHECK-NOT:     "linalg.generic"
// CHECK:         "func.return"
// OFF-LABEL:   "func.func"() <{sym_name = "dense"
// OFF-COUNT-4:   "linalg.generic"
func.func @dense(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %m = flow.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %bb = flow.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %0 = flow.add %m, %bb : tensor<8x4xf32>
  %zero = flow.full 0.0 : f32 -> tensor<8x4xf32>
  %1 = flow.maximum %0, %zero : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
