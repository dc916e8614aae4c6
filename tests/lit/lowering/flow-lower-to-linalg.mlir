// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// No flow op survives:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow.
// The lowered IR, printed in generic form, must be accepted by IREE's own parser and verifier:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null
// Errors are in flow-lower-to-linalg-invalid.mlir.

// CHECK-LABEL: func.func @add_f32(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x3xf32>, %[[B:[^:]+]]: tensor<2x3xf32>
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<2x3xf32>) outs(%[[INIT]] : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NEXT:    } -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[R]] : tensor<2x3xf32>
func.func @add_f32(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = flow.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @binary_float(
// CHECK:         arith.subf
// CHECK:         arith.mulf
// CHECK:         arith.divf
// CHECK:         arith.maximumf
// CHECK:         arith.minimumf
// CHECK:         math.powf
func.func @binary_float(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = flow.sub %a, %b : tensor<4xf32>
  %1 = flow.mul %a, %b : tensor<4xf32>
  %2 = flow.div %a, %b : tensor<4xf32>
  %3 = flow.maximum %a, %b : tensor<4xf32>
  %4 = flow.minimum %a, %b : tensor<4xf32>
  %5 = flow.pow %a, %b : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @binary_int(
// CHECK:         arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:         arith.subi %{{.*}}, %{{.*}} : i32
// CHECK:         arith.muli %{{.*}}, %{{.*}} : i32
// CHECK:         arith.divsi %{{.*}}, %{{.*}} : i32
// CHECK:         arith.maxsi %{{.*}}, %{{.*}} : i32
// CHECK:         arith.minsi %{{.*}}, %{{.*}} : i32
func.func @binary_int(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %0 = flow.add %a, %b : tensor<4xi32>
  %1 = flow.sub %a, %b : tensor<4xi32>
  %2 = flow.mul %a, %b : tensor<4xi32>
  %3 = flow.div %a, %b : tensor<4xi32>
  %4 = flow.maximum %a, %b : tensor<4xi32>
  %5 = flow.minimum %a, %b : tensor<4xi32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// -----

// CHECK-LABEL: func.func @unary_float(
// CHECK:         arith.negf %{{.*}} : f32
// CHECK:         math.absf %{{.*}} : f32
// CHECK:         math.exp %{{.*}} : f32
// CHECK:         math.log %{{.*}} : f32
// CHECK:         math.sqrt %{{.*}} : f32
// CHECK:         math.rsqrt %{{.*}} : f32
// CHECK:         math.tanh %{{.*}} : f32
func.func @unary_float(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = flow.neg %x : tensor<4xf32>
  %1 = flow.abs %x : tensor<4xf32>
  %2 = flow.exp %x : tensor<4xf32>
  %3 = flow.log %x : tensor<4xf32>
  %4 = flow.sqrt %x : tensor<4xf32>
  %5 = flow.rsqrt %x : tensor<4xf32>
  %6 = flow.tanh %x : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Integer negation is 0 - x; integer abs is math.absi.
// CHECK-LABEL: func.func @unary_int(
// CHECK:         ^bb0(%[[X:[^:]+]]: i64, %{{[^:]+}}: i64):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT:      %[[NEG:.*]] = arith.subi %[[ZERO]], %[[X]] : i64
// CHECK-NEXT:      linalg.yield %[[NEG]] : i64
// CHECK:         math.absi %{{.*}} : i64
func.func @unary_int(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %0 = flow.neg %x : tensor<4xi64>
  %1 = flow.abs %x : tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @rank0(
// CHECK:         linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
// CHECK:         math.exp
func.func @rank0(%x: tensor<f32>) -> tensor<f32> {
  %0 = flow.exp %x : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Ordered float predicates, except `ne` which is true on NaN (like numpy).
// CHECK-LABEL: func.func @compare_float(
// CHECK:         tensor.empty() : tensor<4xi1>
// CHECK:         arith.cmpf oeq, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf ole, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf oge, %{{.*}}, %{{.*}} : f32
func.func @compare_float(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %0 = flow.compare eq, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %1 = flow.compare ne, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %2 = flow.compare lt, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %3 = flow.compare le, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %4 = flow.compare gt, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %5 = flow.compare ge, %a, %b : tensor<4xf32> -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// Signed predicates for integers; unsigned for i1, where true > false.
// CHECK-LABEL: func.func @compare_int(
// CHECK:         arith.cmpi eq, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi ne, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi sle, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi sge, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi ult, %{{.*}}, %{{.*}} : i1
func.func @compare_int(%a: tensor<4xi32>, %b: tensor<4xi32>, %p: tensor<4xi1>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %0 = flow.compare eq, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %1 = flow.compare ne, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %2 = flow.compare lt, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %3 = flow.compare le, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %4 = flow.compare gt, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %5 = flow.compare ge, %a, %b : tensor<4xi32> -> tensor<4xi1>
  %6 = flow.compare lt, %p, %p : tensor<4xi1> -> tensor<4xi1>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// CHECK-LABEL: func.func @select(
// CHECK-SAME:    %[[P:[^:]+]]: tensor<4xi1>, %[[A:[^:]+]]: tensor<4xf32>, %[[B:[^:]+]]: tensor<4xf32>
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%[[P]], %[[A]], %[[B]] : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%[[C:[^:]+]]: i1, %[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[C]], %[[X]], %[[Y]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
func.func @select(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @cast(
// CHECK-SAME:    %[[F:[^:]+]]: tensor<4xf32>
// CHECK:         arith.fptosi %{{.*}} : f32 to i32
// CHECK:         arith.sitofp %{{.*}} : i32 to f32
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:         arith.extf %{{.*}} : f32 to f64
// CHECK:         arith.extsi %{{.*}} : i32 to i64
// CHECK:         arith.trunci %{{.*}} : i32 to i8
// CHECK:         arith.uitofp %{{.*}} : i1 to f32
// CHECK:         arith.extui %{{.*}} : i1 to i32
// CHECK:         ^bb0(%[[FX:[^:]+]]: f32, %{{[^:]+}}: i1):
// CHECK-NEXT:      %[[FZ:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      arith.cmpf une, %[[FX]], %[[FZ]] : f32
// CHECK:         ^bb0(%[[IX:[^:]+]]: i32, %{{[^:]+}}: i1):
// CHECK-NEXT:      %[[IZ:.*]] = arith.constant 0 : i32
// CHECK-NEXT:      arith.cmpi ne, %[[IX]], %[[IZ]] : i32
// bf16 -> f16: the bf16 bits become an f32, which truncf rounds (flow-lower-to-linalg-half-casts.mlir).
// CHECK:         ^bb0(%[[H:[^:]+]]: bf16, %{{[^:]+}}: f16):
// CHECK-NEXT:      arith.bitcast %[[H]] : bf16 to i16
// CHECK:           %[[W:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:      arith.truncf %[[W]] : f32 to f16
// A cast to the same type is no op.
// CHECK:         func.return {{.*}}, %[[F]] : {{.*}}
func.func @cast(%f: tensor<4xf32>, %i: tensor<4xi32>, %p: tensor<4xi1>, %h: tensor<4xbf16>) -> (tensor<4xi32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf64>, tensor<4xi64>, tensor<4xi8>, tensor<4xf32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf16>, tensor<4xf32>) {
  %0 = flow.cast %f : tensor<4xf32> -> tensor<4xi32>
  %1 = flow.cast %i : tensor<4xi32> -> tensor<4xf32>
  %2 = flow.cast %f : tensor<4xf32> -> tensor<4xf16>
  %3 = flow.cast %f : tensor<4xf32> -> tensor<4xf64>
  %4 = flow.cast %i : tensor<4xi32> -> tensor<4xi64>
  %5 = flow.cast %i : tensor<4xi32> -> tensor<4xi8>
  %6 = flow.cast %p : tensor<4xi1> -> tensor<4xf32>
  %7 = flow.cast %p : tensor<4xi1> -> tensor<4xi32>
  %8 = flow.cast %f : tensor<4xf32> -> tensor<4xi1>
  %9 = flow.cast %i : tensor<4xi32> -> tensor<4xi1>
  %10 = flow.cast %h : tensor<4xbf16> -> tensor<4xf16>
  %11 = flow.cast %f : tensor<4xf32> -> tensor<4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11 : tensor<4xi32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf64>, tensor<4xi64>, tensor<4xi8>, tensor<4xf32>, tensor<4xi32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf16>, tensor<4xf32>
}

// -----

// A contraction as linalg.generic (not linalg.matmul) on a zero-filled init.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x3xf32>, %[[B:[^:]+]]: tensor<3x4xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[EMPTY:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK-NEXT:    %[[ACC:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x4xf32>) outs(%[[ACC]] : tensor<2x4xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %[[Z:[^:]+]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[Z]], %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NOT:     linalg.matmul
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = flow.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_batch_int(
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK:         linalg.fill ins(%[[ZERO]] : i32)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK:           arith.muli
// CHECK-NEXT:      arith.addi
func.func @matmul_batch_int(%a: tensor<5x2x3xi32>, %b: tensor<5x3x4xi32>) -> tensor<5x2x4xi32> {
  %0 = flow.matmul %a, %b : tensor<5x2x3xi32>, tensor<5x3x4xi32> -> tensor<5x2x4xi32>
  return %0 : tensor<5x2x4xi32>
}

// -----

// Each reduction starts from its identity: 0, -inf, +inf, 1.
// CHECK-LABEL: func.func @reduce_float(
// CHECK:         %[[C0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         linalg.fill ins(%[[C0]] : f32) outs(%{{.*}} : tensor<3xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK:           arith.addf
// CHECK:         %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK:         linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<2xf32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK:           arith.maximumf
// CHECK:         %[[PINF:.*]] = arith.constant 0x7f800000 : f32
// CHECK:         linalg.fill ins(%[[PINF]] : f32) outs(%{{.*}} : tensor<f32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// CHECK:           arith.minimumf
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         linalg.fill ins(%[[ONE]] : f32)
// CHECK:           arith.mulf
func.func @reduce_float(%x: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<3xf32>) {
  %0 = flow.reduce sum %x, dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
  %1 = flow.reduce max %x, dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %2 = flow.reduce min %x, dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %3 = flow.reduce prod %x, dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
  return %0, %1, %2, %3 : tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @reduce_int(
// CHECK:         arith.constant 0 : i32
// CHECK:           arith.addi
// CHECK:         arith.constant -2147483648 : i32
// CHECK:           arith.maxsi
// CHECK:         arith.constant 2147483647 : i32
// CHECK:           arith.minsi
// CHECK:         arith.constant 1 : i32
// CHECK:           arith.muli
func.func @reduce_int(%x: tensor<2x3xi32>) -> (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) {
  %0 = flow.reduce sum %x, dims = [0] : tensor<2x3xi32> -> tensor<3xi32>
  %1 = flow.reduce max %x, dims = [0] : tensor<2x3xi32> -> tensor<3xi32>
  %2 = flow.reduce min %x, dims = [0] : tensor<2x3xi32> -> tensor<3xi32>
  %3 = flow.reduce prod %x, dims = [0] : tensor<2x3xi32> -> tensor<3xi32>
  return %0, %1, %2, %3 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
}

// -----

// Result dim i is operand dim perm[i]: the input is read through the inverse permutation.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3x4xf32>
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK:         %[[T:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2, d0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<4x2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      linalg.yield %[[V]] : f32
// The identity permutation is no op.
// CHECK:         func.return %[[T]], %[[X]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = flow.transpose %x, permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = flow.transpose %x, permutation = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0, %1 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Broadcast size-1 dims are collapsed away first, so every input map is a projection.
// CHECK-LABEL: func.func @broadcast_in_dim(
// CHECK-SAME:    %[[V:[^:]+]]: tensor<3xf32>, %[[C:[^:]+]]: tensor<4x1xf32>, %[[S:[^:]+]]: tensor<f32>, %[[O:[^:]+]]: tensor<1x1xf32>
// CHECK:         %[[R0:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[V]] : tensor<3xf32>)
// CHECK:         %[[CC:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0 : i64, 1 : i64]] : tensor<4x1xf32> into tensor<4xf32>
// CHECK:         %[[R1:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[CC]] : tensor<4xf32>)
// CHECK:         %[[R2:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[S]] : tensor<f32>)
// CHECK:         %[[OC:.*]] = tensor.collapse_shape %[[O]] [] : tensor<1x1xf32> into tensor<f32>
// CHECK:         %[[R3:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[OC]] : tensor<f32>)
// CHECK:         func.return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[C]] :
func.func @broadcast_in_dim(%v: tensor<3xf32>, %c: tensor<4x1xf32>, %s: tensor<f32>, %o: tensor<1x1xf32>) -> (tensor<2x3xf32>, tensor<2x4x5xf32>, tensor<2x3xf32>, tensor<7x6xf32>, tensor<4x1xf32>) {
  %0 = flow.broadcast_in_dim %v, dims = [1] : tensor<3xf32> -> tensor<2x3xf32>
  %1 = flow.broadcast_in_dim %c, dims = [1, 2] : tensor<4x1xf32> -> tensor<2x4x5xf32>
  %2 = flow.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<2x3xf32>
  %3 = flow.broadcast_in_dim %o, dims = [0, 1] : tensor<1x1xf32> -> tensor<7x6xf32>
  %4 = flow.broadcast_in_dim %c, dims = [0, 1] : tensor<4x1xf32> -> tensor<4x1xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x4x5xf32>, tensor<2x3xf32>, tensor<7x6xf32>, tensor<4x1xf32>
}

// -----

// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32>, %[[V:[^:]+]]: tensor<6xf32>, %[[S:[^:]+]]: tensor<f32>, %[[O:[^:]+]]: tensor<1x1xf32>
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0 : i64, 1 : i64]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK-NEXT:    %[[R0:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0 : i64, 1 : i64]] output_shape [3, 2] : tensor<6xf32> into tensor<3x2xf32>
// CHECK-NEXT:    %[[R1:.*]] = tensor.expand_shape %[[V]] {{\[}}[0 : i64, 1 : i64]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
// CHECK-NEXT:    %[[R2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0 : i64, 1 : i64]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK:         %[[R3:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[S]] : tensor<f32>) outs(%{{.*}} : tensor<1x1xf32>)
// CHECK:         %[[R4:.*]] = tensor.collapse_shape %[[O]] [] : tensor<1x1xf32> into tensor<f32>
// CHECK-NEXT:    func.return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[X]] :
func.func @reshape(%x: tensor<2x3xf32>, %v: tensor<6xf32>, %s: tensor<f32>, %o: tensor<1x1xf32>) -> (tensor<3x2xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<1x1xf32>, tensor<f32>, tensor<2x3xf32>) {
  %0 = flow.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = flow.reshape %v : tensor<6xf32> -> tensor<2x3xf32>
  %2 = flow.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %3 = flow.reshape %s : tensor<f32> -> tensor<1x1xf32>
  %4 = flow.reshape %o : tensor<1x1xf32> -> tensor<f32>
  %5 = flow.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3x2xf32>, tensor<2x3xf32>, tensor<6xf32>, tensor<1x1xf32>, tensor<f32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @constants(
// CHECK:         %[[C:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %[[H:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<3x4xf32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%[[H]] : f32) outs(%[[E]] : tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[T:.*]] = arith.constant true
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<i1>
// CHECK-NEXT:    %[[B:.*]] = linalg.fill ins(%[[T]] : i1) outs(%[[E1]] : tensor<i1>) -> tensor<i1>
// CHECK-NEXT:    func.return %[[C]], %[[F]], %[[B]] :
func.func @constants() -> (tensor<2xf32>, tensor<3x4xf32>, tensor<i1>) {
  %0 = flow.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = flow.full 0.5 : f32 -> tensor<3x4xf32>
  %2 = flow.full true -> tensor<i1>
  return %0, %1, %2 : tensor<2xf32>, tensor<3x4xf32>, tensor<i1>
}
