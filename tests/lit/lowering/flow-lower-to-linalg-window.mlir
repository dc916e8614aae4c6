// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// No flow op survives:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: flow.
// The lowered IR, printed in generic form, must be accepted by IREE's own parser and verifier:
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null

// Without padding or groups, static shapes: im2col. A copy generic gathers the patches
// [ic, kh, kw, n, oh, ow] (the input read at (n, ic, oh + kh, ow + kw)), one 2-D product takes
// the weight as [oc, ic*kh*kw] times the patches as [ic*kh*kw, n*oh*ow], and the [oc, n, ...]
// product (behind a barrier, so IREE keeps it a plain product) is transposed to [n, oc, ...].
// CHECK-LABEL: func.func @conv2d(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x3x8x8xf32>, %[[W:[^:]+]]: tensor<4x3x3x3xf32>
// CHECK-NOT:     tensor.pad
// CHECK:         %[[PE:.*]] = tensor.empty() : tensor<3x3x3x1x6x6xf32>
// CHECK-NEXT:    %[[PATCHES:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d0, (d4 + d1), (d5 + d2))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[X]] : tensor<1x3x8x8xf32>) outs(%[[PE]] : tensor<3x3x3x1x6x6xf32>)
// CHECK:         %[[P2:.*]] = tensor.collapse_shape %[[PATCHES]] {{\[}}[0 : i64, 1 : i64, 2 : i64], [3 : i64, 4 : i64, 5 : i64]] : tensor<3x3x3x1x6x6xf32> into tensor<27x36xf32>
// CHECK-NEXT:    %[[W2:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0 : i64], [1 : i64, 2 : i64, 3 : i64]] : tensor<4x3x3x3xf32> into tensor<4x27xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[EMPTY:.*]] = tensor.empty() : tensor<4x36xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<4x36xf32>)
// CHECK-NEXT:    %[[PROD:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[W2]], %[[P2]] : tensor<4x27xf32>, tensor<27x36xf32>) outs(%[[INIT]] : tensor<4x36xf32>)
// CHECK-NEXT:    ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         %[[BAR:.*]] = "util.optimization_barrier"(%[[PROD]])
// CHECK-NEXT:    %[[GRID:.*]] = tensor.expand_shape %[[BAR]] {{\[}}[0 : i64], [1 : i64, 2 : i64, 3 : i64]] output_shape [4, 1, 6, 6] : tensor<4x36xf32> into tensor<4x1x6x6xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME:      ins(%[[GRID]] : tensor<4x1x6x6xf32>)
// CHECK:         func.return %[[R]] : tensor<1x4x6x6xf32>
func.func @conv2d(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0], groups = 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// Padding becomes tensor.pad with zeros; strides and dilations scale the loop dims of the
// patches' input map; integers multiply and add with muli / addi.
// CHECK-LABEL: func.func @conv1d_int(
// CHECK:         %[[PAD:.*]] = tensor.pad %{{.*}} low[0, 0, 0] high[0, 0, 1] {
// CHECK:           %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT:      tensor.yield %[[Z]] : i32
// CHECK-NEXT:    } : tensor<2x3x9xi32> to tensor<2x3x10xi32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d0, ((d3 * 3) + (d1 * 2)))>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK-SAME:      ins(%[[PAD]] : tensor<2x3x10xi32>) outs(%{{.*}} : tensor<3x4x2x2xi32>)
// CHECK:           arith.muli
// CHECK-NEXT:      arith.addi
func.func @conv1d_int(%x: tensor<2x3x9xi32>, %w: tensor<2x3x4xi32>) -> tensor<2x2x2xi32> {
  %0 = flow.conv %x, %w, strides = [3], dilations = [2], padding = [0, 1], groups = 1 : tensor<2x3x9xi32>, tensor<2x3x4xi32> -> tensor<2x2x2xi32>
  return %0 : tensor<2x2x2xi32>
}

// -----

// Patches past IM2COL_MAX_BYTES (here 576 x 262144 f32, 576 MiB): the direct loop nest, a
// zero-filled contraction over (ic, kh, kw) reading the input in place at (oh + kh, ow + kw).
// CHECK-LABEL: func.func @conv2d_large(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<64x64x66x66xf32>, %[[W:[^:]+]]: tensor<64x64x3x3xf32>
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, (d2 + d5), (d3 + d6))>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[W]] : tensor<64x64x66x66xf32>, tensor<64x64x3x3xf32>)
func.func @conv2d_large(%x: tensor<64x64x66x66xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<64x64x64x64xf32> {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0], groups = 1 : tensor<64x64x66x66xf32>, tensor<64x64x3x3xf32> -> tensor<64x64x64x64xf32>
  return %0 : tensor<64x64x64x64xf32>
}

// -----

// Groups: channels are split with expand_shape, the group is a parallel loop (d1) shared by
// input, weight and result, and the result collapses back to [N, C_out, ...].
// CHECK-LABEL: func.func @conv2d_grouped(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x4x7x6xf32>, %[[W:[^:]+]]: tensor<6x2x3x3xf32>
// The last column of high padding is never read, so it is not added.
// CHECK:         %[[PAD:.*]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 0]
// CHECK:         } : tensor<2x4x7x6xf32> to tensor<2x4x9x7xf32>
// CHECK-NEXT:    %[[XG:.*]] = tensor.expand_shape %[[PAD]] {{\[}}[0 : i64], [1 : i64, 2 : i64], [3 : i64], [4 : i64]] output_shape [2, 2, 2, 9, 7] : tensor<2x4x9x7xf32> into tensor<2x2x2x9x7xf32>
// CHECK-NEXT:    %[[WG:.*]] = tensor.expand_shape %[[W]] {{\[}}[0 : i64, 1 : i64], [2 : i64], [3 : i64], [4 : i64]] output_shape [2, 3, 2, 3, 3] : tensor<6x2x3x3xf32> into tensor<2x3x2x3x3xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, ((d3 * 2) + d6), ((d4 * 2) + d7))>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d1, d2, d5, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-SAME:      ins(%[[XG]], %[[WG]] : tensor<2x2x2x9x7xf32>, tensor<2x3x2x3x3xf32>)
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[R]] {{\[}}[0 : i64], [1 : i64, 2 : i64], [3 : i64], [4 : i64]] : tensor<2x2x3x4x3xf32> into tensor<2x6x4x3xf32>
// CHECK-NEXT:    func.return %[[C]] : tensor<2x6x4x3xf32>
func.func @conv2d_grouped(%x: tensor<2x4x7x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x4x3xf32> {
  %0 = flow.conv %x, %w, strides = [2, 2], dilations = [1, 1], padding = [1, 1, 1, 1], groups = 2 : tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x3xf32>
  return %0 : tensor<2x6x4x3xf32>
}

// -----

// Max pooling: padding holds -inf (the last row of high padding is never read), a tensor.empty of the window shape puts the window
// dims (d4, d5) into the domain as reductions, and the combiner is maximumf.
// CHECK-LABEL: func.func @max_pool(
// CHECK:         %[[PAD:.*]] = tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 0, 2] {
// CHECK:           arith.constant 0xff800000 : f32
// CHECK:         } : tensor<1x3x8x8xf32> to tensor<1x3x9x11xf32>
// CHECK-NEXT:    %[[WIN:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK-NEXT:    %[[NEGINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    %[[EMPTY:.*]] = tensor.empty() : tensor<1x3x4x5xf32>
// CHECK-NEXT:    %[[INIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%[[EMPTY]] : tensor<1x3x4x5xf32>)
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d2 * 2) + d4), ((d3 * 2) + d5))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:      ins(%[[PAD]], %[[WIN]] : tensor<1x3x9x11xf32>, tensor<3x3xf32>) outs(%[[INIT]] : tensor<1x3x4x5xf32>)
// CHECK-NEXT:    ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.maximumf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:      linalg.yield %[[M]] : f32
func.func @max_pool(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x5xf32> {
  %0 = flow.reduce_window max %x, window = [1, 1, 3, 3], strides = [1, 1, 2, 2], dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 1, 1, 1, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x4x5xf32>
  return %0 : tensor<1x3x4x5xf32>
}

// -----

// Sum with a dilated window: zero padding, the window dim is scaled by the dilation.
// CHECK-LABEL: func.func @sum_dilated(
// CHECK:         tensor.pad %{{.*}} low[0, 1] high[1, 1]
// CHECK:           arith.constant 0.000000e+00 : f32
// CHECK:         tensor.empty() : tensor<2x3xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> ((d0 + d2), ((d1 * 2) + (d3 * 3)))>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
// CHECK:           arith.addf
func.func @sum_dilated(%x: tensor<3x9xf32>) -> tensor<3x3xf32> {
  %0 = flow.reduce_window sum %x, window = [2, 3], strides = [1, 2], dilations = [1, 3], padding = [0, 1, 1, 1] : tensor<3x9xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// Integer min pads with the largest integer; only the dims whose window is wider than one
// become window loops.
// CHECK-LABEL: func.func @min_int(
// CHECK:           arith.constant 2147483647 : i32
// CHECK:         tensor.empty() : tensor<2xi32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> ((d0 * 2), ((d1 * 3) + d2))>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK:           arith.minsi
func.func @min_int(%x: tensor<4x7xi32>) -> tensor<3x3xi32> {
  %0 = flow.reduce_window min %x, window = [1, 2], strides = [2, 3], dilations = [1, 1], padding = [1, 1, 0, 2] : tensor<4x7xi32> -> tensor<3x3xi32>
  return %0 : tensor<3x3xi32>
}

// -----

// Windows of one element: a strided copy, with neither a window operand nor a fill.
// CHECK-LABEL: func.func @strided_copy(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<5x7xf32>
// CHECK-NEXT:    %[[EMPTY:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> ((d0 * 2), (d1 * 3))>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[X]] : tensor<5x7xf32>) outs(%[[EMPTY]] : tensor<3x3xf32>)
// CHECK-NEXT:    ^bb0(%[[V:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      linalg.yield %[[V]] : f32
// CHECK:         func.return %[[R]]
func.func @strided_copy(%x: tensor<5x7xf32>) -> tensor<3x3xf32> {
  %0 = flow.reduce_window max %x, window = [1, 1], strides = [2, 3], dilations = [1, 1], padding = [0, 0, 0, 0] : tensor<5x7xf32> -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// Elements past the last window are cut off (the source is sliced and padded less), so
// the operand's extent is exactly what the windows read: 3 + 1 padded elements, one window
// of 2 read from it.
// CHECK-LABEL: func.func @trailing_elements_dropped(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.extract_slice %[[X]][0, 0] [2, 1] [1, 1] : tensor<2x3xf32> to tensor<2x1xf32>
// CHECK-NEXT:    %[[P:.*]] = tensor.pad %[[S]] low[0, 1] high[0, 0] {
// CHECK:         } : tensor<2x1xf32> to tensor<2x2xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, ((d1 * 3) + d2))>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[P]], %{{.*}} : tensor<2x2xf32>, tensor<2xf32>)
func.func @trailing_elements_dropped(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %0 = flow.reduce_window max %x, window = [1, 2], strides = [1, 3], dilations = [1, 1], padding = [0, 0, 1, 0] : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}
