// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// No flow op survives:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow.
// The lowered IR, printed in generic form, must be accepted by IREE's own parser and verifier:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null

// The key is the generic's only input (read at every point); the linear index
// d0 * 3 + d1 is hashed with the key by SplitMix64, and i32 keeps the high half.
// CHECK-LABEL: func.func @bits_i32(
// CHECK-SAME:    %[[K:[^:]+]]: tensor<i64>
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x3xi32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[K]] : tensor<i64>) outs(%[[INIT]] : tensor<2x3xi32>)
// CHECK-NEXT:    ^bb0(%[[KEY:[^:]+]]: i64, %{{[^:]+}}: i32):
// CHECK-NEXT:      %[[I0:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[R:.*]] = arith.index_cast %[[I0]] : index to i64
// CHECK-NEXT:      %[[I1:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[C:.*]] = arith.index_cast %[[I1]] : index to i64
// CHECK-NEXT:      %[[THREE:.*]] = arith.constant 3 : i64
// CHECK-NEXT:      %[[ROW:.*]] = arith.muli %[[R]], %[[THREE]] : i64
// CHECK-NEXT:      %[[LIN:.*]] = arith.addi %[[ROW]], %[[C]] : i64
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-NEXT:      %[[CTR:.*]] = arith.addi %[[LIN]], %[[ONE]] : i64
// CHECK-NEXT:      %[[GAMMA:.*]] = arith.constant -7046029254386353131 : i64
// CHECK-NEXT:      %[[W:.*]] = arith.muli %[[CTR]], %[[GAMMA]] : i64
// CHECK-NEXT:      %[[Z0:.*]] = arith.addi %[[KEY]], %[[W]] : i64
// CHECK:           arith.shrui %[[Z0]], %{{.*}} : i64
// CHECK:           arith.constant -4658895280553007687 : i64
// CHECK:           arith.constant -7723592293110705685 : i64
// CHECK:           arith.constant 31 : i64
// CHECK-NEXT:      arith.shrui
// CHECK-NEXT:      %[[Z:.*]] = arith.xori
// CHECK-NEXT:      %[[C32:.*]] = arith.constant 32 : i64
// CHECK-NEXT:      %[[HI:.*]] = arith.shrui %[[Z]], %[[C32]] : i64
// CHECK-NEXT:      %[[T:.*]] = arith.trunci %[[HI]] : i64 to i32
// CHECK-NEXT:      linalg.yield %[[T]] : i32
func.func @bits_i32(%key: tensor<i64>) -> tensor<2x3xi32> {
  %0 = flow.random_bits %key : tensor<i64> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// -----

// i64 bits are the full hash; a rank-0 result hashes linear index 0.
// CHECK-LABEL: func.func @bits_i64_rank0(
// CHECK:         linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
// CHECK-NOT:       linalg.index
// CHECK:           arith.constant 31 : i64
// CHECK-NEXT:      arith.shrui
// CHECK-NEXT:      %[[Z:.*]] = arith.xori
// CHECK-NEXT:      linalg.yield %[[Z]] : i64
func.func @bits_i64_rank0(%key: tensor<i64>) -> tensor<i64> {
  %0 = flow.random_bits %key : tensor<i64> -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// CHECK-LABEL: func.func @bits_empty(
// CHECK:         tensor.empty() : tensor<4x0xi64>
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%{{.*}} : tensor<4x0xi64>)
func.func @bits_empty(%key: tensor<i64>) -> tensor<4x0xi64> {
  %0 = flow.random_bits %key : tensor<i64> -> tensor<4x0xi64>
  return %0 : tensor<4x0xi64>
}
