// Lowering of flow.fused: one linalg.generic per flow.fused.
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// No flow op survives, not even inside a fused region:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow.
// The lowered IR, printed in generic form, must be accepted by IREE's own parser and verifier:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null

// One linalg.generic with identity maps; the flow.full is a scalar constant in the body.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<4x3xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<4x3xf32>, tensor<4x3xf32>) outs(%[[INIT]] : tensor<4x3xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[Y]], %[[TWO]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[X]], %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<4x3xf32>
func.func @chain(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = flow.fused (%x = %a, %y = %b) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = flow.full 2.0 : f32 -> tensor<4x3xf32>
    %1 = flow.mul %y, %0 : tensor<4x3xf32>
    %2 = flow.add %x, %1 : tensor<4x3xf32>
    flow.yield %2 : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}

// -----

// Broadcast region arguments are read through projected maps: size-1 dims are collapsed
// away first, a rank-0 operand has the empty map, and equal broadcasts share one input.
// CHECK-LABEL: func.func @broadcasts(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<3xf32>, %[[C:[^:]+]]: tensor<1x3xf32>, %[[S:[^:]+]]: tensor<f32>, %[[V:[^:]+]]: tensor<4xf32>
// CHECK-NEXT:    %[[C1:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0 : i64, 1 : i64]] : tensor<1x3xf32> into tensor<3xf32>
// CHECK-NEXT:    %[[INIT:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[A]], %[[B]], %[[C1]], %[[S]], %[[V]] : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<4xf32>) outs(%[[INIT]] : tensor<4x3xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %[[Z:[^:]+]]: f32, %[[W:[^:]+]]: f32, %[[U:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[T0:.*]] = arith.addf %[[X]], %[[Y]]
// CHECK-NEXT:      %[[T1:.*]] = arith.mulf %[[T0]], %[[Z]]
// CHECK-NEXT:      %[[T2:.*]] = arith.subf %[[T1]], %[[W]]
// CHECK-NEXT:      %[[T3:.*]] = arith.divf %[[T2]], %[[U]]
// CHECK-NEXT:      %[[T4:.*]] = arith.maximumf %[[T3]], %[[Y]]
// CHECK-NEXT:      linalg.yield %[[T4]] : f32
func.func @broadcasts(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %c: tensor<1x3xf32>, %s: tensor<f32>, %v: tensor<4xf32>) -> tensor<4x3xf32> {
  %r = flow.fused (%x = %a, %y = %b, %z = %c, %w = %s, %u = %v) : (tensor<4x3xf32>, tensor<3xf32>, tensor<1x3xf32>, tensor<f32>, tensor<4xf32>) -> tensor<4x3xf32> {
    %0 = flow.broadcast_in_dim %y, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
    %1 = flow.broadcast_in_dim %z, dims = [0, 1] : tensor<1x3xf32> -> tensor<4x3xf32>
    %2 = flow.broadcast_in_dim %w, dims = [] : tensor<f32> -> tensor<4x3xf32>
    %3 = flow.broadcast_in_dim %u, dims = [0] : tensor<4xf32> -> tensor<4x3xf32>
    %4 = flow.broadcast_in_dim %y, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
    %5 = flow.add %x, %0 : tensor<4x3xf32>
    %6 = flow.mul %5, %1 : tensor<4x3xf32>
    %7 = flow.sub %6, %2 : tensor<4x3xf32>
    %8 = flow.div %7, %3 : tensor<4x3xf32>
    %9 = flow.maximum %8, %4 : tensor<4x3xf32>
    flow.yield %9 : tensor<4x3xf32>
  }
  return %r : tensor<4x3xf32>
}

// -----

// Several results: one init per result, one generic yielding them all (a region argument
// may be yielded as it is).
// CHECK-LABEL: func.func @multi_output(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<8xf32>, %[[B:[^:]+]]: tensor<8xf32>
// CHECK-NEXT:    %[[I0:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[I1:.*]] = tensor.empty() : tensor<8xi1>
// CHECK-NEXT:    %[[I2:.*]] = tensor.empty() : tensor<8xi32>
// CHECK-NEXT:    %[[I3:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[R0:.*]], %[[R1:.*]], %[[R2:.*]], %[[R3:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<8xf32>, tensor<8xf32>) outs(%[[I0]], %[[I1]], %[[I2]], %[[I3]] : tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: i1, %{{[^:]+}}: i32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:      %[[P:.*]] = arith.cmpf olt, %[[E]], %[[Y]] : f32
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[P]], %[[E]], %[[Y]] : f32
// CHECK-NEXT:      %[[I:.*]] = arith.fptosi %[[SEL]] : f32 to i32
// CHECK-NEXT:      linalg.yield %[[E]], %[[P]], %[[I]], %[[Y]] : f32, i1, i32, f32
// CHECK-NEXT:    } -> (tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>)
// CHECK-NEXT:    func.return %[[R0]], %[[R1]], %[[R2]], %[[R3]]
func.func @multi_output(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>) {
  %r:4 = flow.fused (%x = %a, %y = %b) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>) {
    %0 = flow.exp %x : tensor<8xf32>
    %1 = flow.compare lt, %0, %y : tensor<8xf32> -> tensor<8xi1>
    %2 = flow.select %1, %0, %y : tensor<8xi1>, tensor<8xf32>
    %3 = flow.cast %2 : tensor<8xf32> -> tensor<8xi32>
    flow.yield %0, %1, %3, %y : tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>
  }
  return %r#0, %r#1, %r#2, %r#3 : tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>
}

// -----

// One argument broadcast two ways is two inputs (`v[i] - v[j]`).
// CHECK-LABEL: func.func @same_argument_twice(
// CHECK-SAME:    %[[V:[^:]+]]: tensor<4xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[V]], %[[V]] : tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%[[I:[^:]+]]: f32, %[[J:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      arith.subf %[[I]], %[[J]]
func.func @same_argument_twice(%v: tensor<4xf32>) -> tensor<4x4xf32> {
  %r = flow.fused (%x = %v) : (tensor<4xf32>) -> tensor<4x4xf32> {
    %0 = flow.broadcast_in_dim %x, dims = [0] : tensor<4xf32> -> tensor<4x4xf32>
    %1 = flow.broadcast_in_dim %x, dims = [1] : tensor<4xf32> -> tensor<4x4xf32>
    %2 = flow.sub %0, %1 : tensor<4x4xf32>
    flow.yield %2 : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

// Rank 0, and the multi-op scalar rules (numpy's pow, a cast) chained in one body.
// CHECK-LABEL: func.func @rank0(
// CHECK:         linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
// CHECK:           arith.sitofp
// CHECK:           math.powf
// CHECK:           %[[T:.*]] = math.tanh
// CHECK-NEXT:      linalg.yield %[[T]] : f32
func.func @rank0(%a: tensor<f32>, %b: tensor<i64>) -> tensor<f32> {
  %r = flow.fused (%x = %a, %n = %b) : (tensor<f32>, tensor<i64>) -> tensor<f32> {
    %0 = flow.cast %n : tensor<i64> -> tensor<f32>
    %1 = flow.pow %x, %0 : tensor<f32>
    %2 = flow.tanh %1 : tensor<f32>
    flow.yield %2 : tensor<f32>
  }
  return %r : tensor<f32>
}
