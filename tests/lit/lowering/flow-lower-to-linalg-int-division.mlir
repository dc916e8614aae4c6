// Integer division and remainder never divide by 0 or compute INT_MIN / -1 (a trap on x86):
// those lanes divide by 1, and a zero divisor's quotient is then 0, like numpy.
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null
// A fused region's body is built by the same rule:
// RUN: flow-opt %s --split-input-file -p flow-fuse-elementwise,flow-lower-to-linalg | FileCheck %s --check-prefix=FUSED

// CHECK-LABEL: func.func @div_i8(
// CHECK:         ^bb0(%[[X:[^:]+]]: i8, %[[Y:[^:]+]]: i8, %{{[^:]+}}: i8):
// CHECK-DAG:       %[[ZERO:.*]] = arith.constant 0 : i8
// CHECK-DAG:       %[[ONE:.*]] = arith.constant 1 : i8
// CHECK-DAG:       %[[M1:.*]] = arith.constant -1 : i8
// CHECK-DAG:       %[[MIN:.*]] = arith.constant -128 : i8
// CHECK:           %[[BY0:.*]] = arith.cmpi eq, %[[Y]], %[[ZERO]] : i8
// CHECK:           %[[XMIN:.*]] = arith.cmpi eq, %[[X]], %[[MIN]] : i8
// CHECK:           %[[YM1:.*]] = arith.cmpi eq, %[[Y]], %[[M1]] : i8
// CHECK:           %[[OVF:.*]] = arith.andi %[[XMIN]], %[[YM1]] : i1
// CHECK:           %[[BAD:.*]] = arith.ori %[[BY0]], %[[OVF]] : i1
// CHECK:           %[[SAFE:.*]] = arith.select %[[BAD]], %[[ONE]], %[[Y]] : i8
// CHECK:           %[[Q:.*]] = arith.divsi %[[X]], %[[SAFE]] : i8
// CHECK:           %[[R:.*]] = arith.select %[[BY0]], %[[ZERO]], %[[Q]] : i8
// CHECK:           linalg.yield %[[R]] : i8
func.func @div_i8(%a: tensor<4xi8>, %b: tensor<4xi8>) -> tensor<4xi8> {
  %0 = flow.div %a, %b : tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// x % 1 == 0 covers both guarded cases: no select after the remainder, x - (x / y) * y (the
// SPIR-V lowering of arith.remsi gets INT_MIN's sign wrong).
// CHECK-LABEL: func.func @rem_i64(
// CHECK:         ^bb0(%[[X:[^:]+]]: i64, %[[Y:[^:]+]]: i64, %{{[^:]+}}: i64):
// CHECK:           arith.constant -9223372036854775808 : i64
// CHECK:           %[[SAFE:.*]] = arith.select %{{.*}}, %{{.*}}, %[[Y]] : i64
// CHECK-NEXT:      %[[Q:.*]] = arith.divsi %[[X]], %[[SAFE]] : i64
// CHECK-NEXT:      %[[P:.*]] = arith.muli %[[Q]], %[[SAFE]] : i64
// CHECK-NEXT:      %[[R:.*]] = arith.subi %[[X]], %[[P]] : i64
// CHECK-NEXT:      linalg.yield %[[R]] : i64
// CHECK-NOT:     arith.remsi
func.func @rem_i64(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  %0 = flow.rem %a, %b : tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// FUSED-LABEL: func.func @fused_div_i32(
// FUSED:         linalg.generic
// FUSED:           %[[SAFE:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// FUSED-NEXT:      %[[Q:.*]] = arith.divsi %{{.*}}, %[[SAFE]] : i32
// FUSED-NEXT:      %[[D:.*]] = arith.select %{{.*}}, %{{.*}}, %[[Q]] : i32
// FUSED-NEXT:      arith.addi %[[D]], %{{.*}} : i32
// FUSED-NOT:     linalg.generic
func.func @fused_div_i32(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = flow.div %a, %b : tensor<4xi32>
  %1 = flow.add %0, %a : tensor<4xi32>
  return %1 : tensor<4xi32>
}
