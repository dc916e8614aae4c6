// Round trip of flow.random_bits: custom form, then custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC
// Verifier errors are tested in tests/dialect/test_random_dialect.py.

// CHECK-LABEL: func.func @random_bits(
// CHECK-SAME:    %[[K:[^:]+]]: tensor<i64>
// CHECK:         flow.random_bits %[[K]] : tensor<i64> -> tensor<4x8xi32>
// CHECK-NEXT:    flow.random_bits %[[K]] : tensor<i64> -> tensor<3xi64>
// CHECK-NEXT:    flow.random_bits %[[K]] : tensor<i64> -> tensor<i64>
// CHECK-NEXT:    flow.random_bits %[[K]] : tensor<i64> -> tensor<0x5xi32>
// GENERIC-LABEL: "func.func"() <{sym_name = "random_bits"
// GENERIC:       "flow.random_bits"(%{{.*}}) : (tensor<i64>) -> tensor<4x8xi32>
func.func @random_bits(%key: tensor<i64>) {
  %0 = flow.random_bits %key : tensor<i64> -> tensor<4x8xi32>
  %1 = flow.random_bits %key : tensor<i64> -> tensor<3xi64>
  %2 = flow.random_bits %key : tensor<i64> -> tensor<i64>
  %3 = flow.random_bits %key : tensor<i64> -> tensor<0x5xi32>
  return
}
