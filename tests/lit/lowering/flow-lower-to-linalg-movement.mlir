// flow-lower-to-linalg on the movement ops: slice, pad, concat, gather.
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// No flow op survives:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow.
// The lowered IR, printed in generic form, must be accepted by IREE's own parser and verifier:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null

// Positive strides: one tensor.extract_slice.
// CHECK-LABEL: func.func @slice_positive(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<6x5xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.extract_slice %[[X]][1, 0] [3, 2] [2, 3] : tensor<6x5xf32> to tensor<3x2xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @slice_positive(%x: tensor<6x5xf32>) -> tensor<3x2xf32> {
  %0 = flow.slice %x, start = [1, 0], strides = [2, 3] : tensor<6x5xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// A negative stride: a generic over the result reads operand[start + i * stride] with tensor.extract.
// CHECK-LABEL: func.func @slice_negative(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<6x5xf32>
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<6x2xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%[[INIT]] : tensor<6x2xf32>)
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[M1:.*]] = arith.constant -1 : index
// CHECK-NEXT:      %[[IM:.*]] = arith.muli %[[I]], %[[M1]] : index
// CHECK-NEXT:      %[[C5:.*]] = arith.constant 5 : index
// CHECK-NEXT:      %[[II:.*]] = arith.addi %[[IM]], %[[C5]] : index
// CHECK-NEXT:      %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[JJ:.*]] = arith.muli %[[J]], %[[C2]] : index
// CHECK-NEXT:      %[[V:.*]] = tensor.extract %[[X]][%[[II]], %[[JJ]]] : tensor<6x5xf32>
// CHECK-NEXT:      linalg.yield %[[V]] : f32
// CHECK:         func.return %[[R]]
func.func @slice_negative(%x: tensor<6x5xf32>) -> tensor<6x2xf32> {
  %0 = flow.slice %x, start = [5, 0], strides = [-1, 2] : tensor<6x5xf32> -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}

// -----

// The identity slice folds away; an empty one is just tensor.empty.
// CHECK-LABEL: func.func @slice_trivial(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<6x5xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<0x5xf32>
// CHECK-NEXT:    func.return %[[X]], %[[E]]
func.func @slice_trivial(%x: tensor<6x5xf32>) -> (tensor<6x5xf32>, tensor<0x5xf32>) {
  %0 = flow.slice %x, start = [0, 0], strides = [1, 1] : tensor<6x5xf32> -> tensor<6x5xf32>
  %1 = flow.slice %x, start = [6, 0], strides = [-1, 1] : tensor<6x5xf32> -> tensor<0x5xf32>
  return %0, %1 : tensor<6x5xf32>, tensor<0x5xf32>
}

// -----

// CHECK-LABEL: func.func @pad(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32>
// CHECK-NEXT:    %[[C:.*]] = arith.constant -1.500000e+00 : f32
// CHECK-NEXT:    %[[P:.*]] = tensor.pad %[[X]] low[1, 0] high[0, 2] {
// CHECK-NEXT:    ^bb0(%{{.*}}: index, %{{.*}}: index):
// CHECK-NEXT:      tensor.yield %[[C]] : f32
// CHECK-NEXT:    } : tensor<2x3xf32> to tensor<3x5xf32>
// CHECK-NEXT:    func.return %[[P]]
func.func @pad(%x: tensor<2x3xf32>) -> tensor<3x5xf32> {
  %0 = flow.pad %x, low = [1, 0], high = [0, 2], value = (-1.5 : f32) : tensor<2x3xf32> -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

// Padding an empty tensor is a fill.
// CHECK-LABEL: func.func @pad_empty(
// CHECK:         %[[C:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<3xi32>
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%[[C]] : i32) outs(%[[E]] : tensor<3xi32>)
// CHECK-NEXT:    func.return %[[F]]
func.func @pad_empty(%x: tensor<0xi32>) -> tensor<3xi32> {
  %0 = flow.pad %x, low = [1], high = [2], value = (7 : i32) : tensor<0xi32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

// Operands without elements along the dim are dropped.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x3xf32>, %[[B:[^:]+]]: tensor<2x0xf32>, %[[C:[^:]+]]: tensor<2x1xf32>
// CHECK-NEXT:    %[[R:.*]] = tensor.concat dim(1) %[[A]], %[[C]], %[[A]] : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x0xf32>, %c: tensor<2x1xf32>) -> tensor<2x7xf32> {
  %0 = flow.concat dim = 1, %a, %b, %c, %a : tensor<2x3xf32>, tensor<2x0xf32>, tensor<2x1xf32>, tensor<2x3xf32> -> tensor<2x7xf32>
  return %0 : tensor<2x7xf32>
}

// -----

// CHECK-LABEL: func.func @concat_one_left(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[A]]
func.func @concat_one_left(%a: tensor<2x3xf32>, %b: tensor<2x0xf32>) -> tensor<2x3xf32> {
  %0 = flow.concat dim = 1, %b, %a : tensor<2x0xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A generic over the indices clamps each index into [0, size) and reads it with tensor.extract.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x3xf32>, %[[I:[^:]+]]: tensor<2x5xi32>
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x5xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[I]] : tensor<2x5xi32>) outs(%[[INIT]] : tensor<2x5xf32>)
// CHECK-NEXT:    ^bb0(%[[IDX:[^:]+]]: i32, %{{.*}}: f32):
// CHECK-NEXT:      %[[R0:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[CAST:.*]] = arith.index_cast %[[IDX]] : i32 to index
// CHECK-NEXT:      %[[LO:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[HI:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[A:.*]] = arith.maxsi %[[CAST]], %[[LO]] : index
// CHECK-NEXT:      %[[B:.*]] = arith.minsi %[[A]], %[[HI]] : index
// CHECK-NEXT:      %[[V:.*]] = tensor.extract %[[X]][%[[R0]], %[[B]]] : tensor<4x3xf32>
// CHECK-NEXT:      linalg.yield %[[V]] : f32
// CHECK:         func.return %[[R]]
func.func @gather(%x: tensor<4x3xf32>, %i: tensor<2x5xi32>) -> tensor<2x5xf32> {
  %0 = flow.gather %x, %i, dim = 1 : tensor<4x3xf32>, tensor<2x5xi32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
