// flow-compile --emit stops early: `flow` prints the parsed, verified flow IR; `linalg`
// prints what is handed to IREE (generic form, nothing of flow left), which IREE parses.

// RUN: flow-compile %s --emit flow | FileCheck %s --check-prefix=FLOW
// RUN: flow-compile %s --emit linalg | FileCheck %s --check-prefix=LINALG
// RUN: flow-compile %s --emit linalg | FileCheck %s --check-prefix=NOFLOW
// RUN: flow-compile %s --emit linalg -o %t.linalg.mlir
// RUN: iree-opt %t.linalg.mlir | FileCheck %s --check-prefix=IREE

// FLOW-LABEL: func.func @mlp_sum(
// FLOW-SAME:    %[[X:.*]]: tensor<2x3xf32>, %[[W:.*]]: tensor<3x2xf32>, %[[B:.*]]: tensor<2xf32>
// FLOW:         %[[MM:.*]] = flow.matmul %[[X]], %[[W]]
// FLOW:         %[[BB:.*]] = flow.broadcast_in_dim %[[B]], dims = [1]
// FLOW:         %[[ADD:.*]] = flow.add %[[MM]], %[[BB]]
// FLOW:         %[[ZERO:.*]] = flow.full 0.000000e+00 : f32 -> tensor<2x2xf32>
// FLOW:         %[[RELU:.*]] = flow.maximum %[[ADD]], %[[ZERO]]
// FLOW:         %[[SUM:.*]] = flow.reduce sum %[[RELU]], dims = [1] : tensor<2x2xf32> -> tensor<2xf32>
// FLOW:         func.return %[[SUM]] : tensor<2xf32>

// LINALG-LABEL: "func.func"() <{sym_name = "mlp_sum"
// LINALG:         "linalg.generic"
// LINALG-SAME:      iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]
// LINALG:           "arith.mulf"
// LINALG:         "arith.maximumf"
// LINALG:         %[[RED:.*]] = "linalg.generic"
// LINALG-SAME:      iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]
// LINALG:           "arith.addf"
// LINALG:         "func.return"(%[[RED]]) : (tensor<2xf32>) -> ()

// NOFLOW-NOT: flow.

// IREE-LABEL: func.func @mlp_sum(
// IREE:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// IREE:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// IREE:         return

func.func @mlp_sum(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = flow.matmul %x, %w : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %1 = flow.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<2x2xf32>
  %2 = flow.add %0, %1 : tensor<2x2xf32>
  %3 = flow.full 0.0 : f32 -> tensor<2x2xf32>
  %4 = flow.maximum %2, %3 : tensor<2x2xf32>
  %5 = flow.reduce sum %4, dims = [1] : tensor<2x2xf32> -> tensor<2xf32>
  return %5 : tensor<2xf32>
}
