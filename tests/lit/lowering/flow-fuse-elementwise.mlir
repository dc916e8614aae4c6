// RUN: flow-opt %s --split-input-file -p flow-fuse-elementwise | FileCheck %s
// RUN: flow-opt %s --split-input-file -p 'flow-fuse-elementwise{multi-output=true}' | FileCheck %s --check-prefix=MULTI

// `c = a + b * 2` becomes one flow.fused; the scalar 2 (flow.full) is copied into the body.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<4x3xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%[[X:.*]] = %[[B]], %[[Y:.*]] = %[[A]]) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
// CHECK-NEXT:      %[[TWO:.*]] = flow.full 2.000000e+00 : f32 -> tensor<4x3xf32>
// CHECK-NEXT:      %[[M:.*]] = flow.mul %[[X]], %[[TWO]]
// CHECK-NEXT:      %[[S:.*]] = flow.add %[[Y]], %[[M]]
// CHECK-NEXT:      flow.yield %[[S]] : tensor<4x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
func.func @chain(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %two = flow.full 2.0 : f32 -> tensor<4x3xf32>
  %0 = flow.mul %b, %two : tensor<4x3xf32>
  %1 = flow.add %a, %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// Eight elementwise ops, two scalars and a broadcast (read twice): one flow.fused; the
// broadcast operand enters at its own shape.
// CHECK-LABEL: func.func @eight_ops(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<3xf32>, %[[C:[^:]+]]: tensor<4x3xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%[[X:.*]] = %[[A]], %[[Y:.*]] = %[[B]], %[[Z:.*]] = %[[C]]) : (tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32> {
// CHECK:           %[[BY:.*]] = flow.broadcast_in_dim %[[Y]], dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:      flow.mul %[[X]]
// CHECK-NEXT:      flow.add %{{.*}}, %[[BY]]
// CHECK-NEXT:      flow.mul %{{.*}}, %[[Z]]
// CHECK-NEXT:      flow.sub %{{.*}}, %[[X]]
// CHECK-NEXT:      flow.exp
// CHECK-NEXT:      flow.mul
// CHECK-NEXT:      flow.add %{{.*}}, %[[BY]]
// CHECK-NEXT:      %[[T:.*]] = flow.tanh
// CHECK-NEXT:      flow.yield %[[T]]
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
func.func @eight_ops(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %c: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %two = flow.full 2.0 : f32 -> tensor<4x3xf32>
  %half = flow.full 0.5 : f32 -> tensor<4x3xf32>
  %bb = flow.broadcast_in_dim %b, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %0 = flow.mul %a, %two : tensor<4x3xf32>
  %1 = flow.add %0, %bb : tensor<4x3xf32>
  %2 = flow.mul %1, %c : tensor<4x3xf32>
  %3 = flow.sub %2, %a : tensor<4x3xf32>
  %4 = flow.exp %3 : tensor<4x3xf32>
  %5 = flow.mul %4, %half : tensor<4x3xf32>
  %6 = flow.add %5, %bb : tensor<4x3xf32>
  %7 = flow.tanh %6 : tensor<4x3xf32>
  return %7 : tensor<4x3xf32>
}

// -----

// exp(a * b) is also returned. By default a value used outside stays the result of its own
// group; with multi-output=true it is an extra result of one flow.fused.
// CHECK-LABEL: func.func @multi_use(
// CHECK-NEXT:    %[[E:.*]] = flow.fused (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT:      flow.mul
// CHECK-NEXT:      %[[E1:.*]] = flow.exp
// CHECK-NEXT:      flow.yield %[[E1]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%[[X:.*]] = %[[E]], %{{.*}} = %{{.*}}) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT:      flow.add %[[X]]
// CHECK-NEXT:      flow.neg
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]], %[[E]]
// MULTI-LABEL: func.func @multi_use(
// MULTI-NEXT:    %[[E:.*]], %[[R:.*]] = flow.fused ({{.*}}) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
// MULTI-NEXT:      flow.mul
// MULTI-NEXT:      %[[E1:.*]] = flow.exp
// MULTI-NEXT:      flow.add %[[E1]]
// MULTI-NEXT:      %[[N:.*]] = flow.neg
// MULTI-NEXT:      flow.yield %[[E1]], %[[N]]
// MULTI-NEXT:    }
// MULTI-NEXT:    func.return %[[R]], %[[E]]
func.func @multi_use(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = flow.mul %a, %b : tensor<8xf32>
  %1 = flow.exp %0 : tensor<8xf32>
  %2 = flow.add %1, %c : tensor<8xf32>
  %3 = flow.neg %2 : tensor<8xf32>
  return %3, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// A reduction breaks fusion: one group before it, one after (of the reduced shape).
// CHECK-LABEL: func.func @reduction(
// CHECK-NEXT:    %[[P:.*]] = flow.fused ({{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      flow.full 1.000000e+00
// CHECK-NEXT:      flow.mul
// CHECK-NEXT:      flow.add
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = flow.reduce sum %[[P]]
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%{{.*}} = %[[S]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      flow.sqrt
// CHECK-NEXT:      flow.neg
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
func.func @reduction(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %one = flow.full 1.0 : f32 -> tensor<4x8xf32>
  %0 = flow.mul %x, %x : tensor<4x8xf32>
  %1 = flow.add %0, %one : tensor<4x8xf32>
  %s = flow.reduce sum %1, dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %2 = flow.sqrt %s : tensor<4xf32>
  %3 = flow.neg %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Softmax: the reductions split it in two groups; each absorbs the broadcast of a reduction.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>
// CHECK-NEXT:    %[[M:.*]] = flow.reduce max %[[X]]
// CHECK-NEXT:    %[[E:.*]] = flow.fused (%{{.*}} = %[[X]], %[[MA:.*]] = %[[M]]) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      flow.broadcast_in_dim %[[MA]], dims = [0]
// CHECK-NEXT:      flow.sub
// CHECK-NEXT:      flow.exp
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = flow.reduce sum %[[E]]
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%{{.*}} = %[[E]], %[[SA:.*]] = %[[S]]) : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      flow.broadcast_in_dim %[[SA]], dims = [0]
// CHECK-NEXT:      flow.div
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
// MULTI-LABEL: func.func @softmax(
// MULTI-COUNT-2: flow.fused
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = flow.reduce max %x, dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %mb = flow.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %0 = flow.sub %x, %mb : tensor<4x8xf32>
  %1 = flow.exp %0 : tensor<4x8xf32>
  %s = flow.reduce sum %1, dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %sb = flow.broadcast_in_dim %s, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %2 = flow.div %1, %sb : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// With multi-output=true a group stops at an op that used one of its values before it
// (the reduction): joining the div would need the reduction of the group's own result.
// The mul is returned through the exp's group as an extra result.
// CHECK-LABEL: func.func @convex(
// CHECK-NEXT:    flow.mul
// CHECK-NEXT:    flow.exp
// CHECK-NEXT:    flow.reduce
// CHECK-NEXT:    flow.fused
// MULTI-LABEL: func.func @convex(
// MULTI-NEXT:    %[[M:.*]], %[[E:.*]] = flow.fused ({{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// MULTI-NEXT:      %[[M1:.*]] = flow.mul
// MULTI-NEXT:      %[[E1:.*]] = flow.exp %[[M1]]
// MULTI-NEXT:      flow.yield %[[M1]], %[[E1]]
// MULTI-NEXT:    }
// MULTI-NEXT:    %[[S:.*]] = flow.reduce sum %[[E]]
// MULTI-NEXT:    %[[R:.*]] = flow.fused (%{{.*}} = %[[E]], %{{.*}} = %[[S]], %{{.*}} = %[[M]]) : (tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// MULTI-NEXT:      flow.broadcast_in_dim
// MULTI-NEXT:      flow.div
// MULTI-NEXT:      flow.add
// MULTI-NEXT:      flow.yield
// MULTI-NEXT:    }
// MULTI-NEXT:    func.return %[[R]]
func.func @convex(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = flow.mul %a, %b : tensor<4x8xf32>
  %1 = flow.exp %0 : tensor<4x8xf32>
  %s = flow.reduce sum %1, dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %sb = flow.broadcast_in_dim %s, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %2 = flow.div %1, %sb : tensor<4x8xf32>
  %3 = flow.add %2, %0 : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// A matmul breaks fusion; bias add and relu fuse with the bias broadcast and the 0.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x16xf32>, %[[W:[^:]+]]: tensor<16x4xf32>, %[[B:[^:]+]]: tensor<4xf32>
// CHECK-NEXT:    %[[XS:.*]] = flow.fused (%{{.*}} = %[[X]]) : (tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK:         }
// CHECK-NEXT:    %[[MM:.*]] = flow.matmul %[[XS]], %[[W]]
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%{{.*}} = %[[MM]], %[[BA:.*]] = %[[B]]) : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT:      flow.broadcast_in_dim %[[BA]], dims = [1]
// CHECK-NEXT:      flow.full 0.000000e+00
// CHECK-NEXT:      flow.add
// CHECK-NEXT:      flow.maximum
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
func.func @matmul(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %two = flow.full 2.0 : f32 -> tensor<8x16xf32>
  %xs = flow.mul %x, %two : tensor<8x16xf32>
  %m = flow.matmul %xs, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %bb = flow.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
  %0 = flow.add %m, %bb : tensor<8x4xf32>
  %zero = flow.full 0.0 : f32 -> tensor<8x4xf32>
  %1 = flow.maximum %0, %zero : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

// -----

// Transposes and reshapes break fusion; a group whose result is used twice is fine.
// CHECK-LABEL: func.func @movement(
// CHECK-NEXT:    %[[G:.*]] = flow.fused ({{.*}}) : (tensor<2x6xf32>) -> tensor<2x6xf32> {
// CHECK-NEXT:      flow.exp
// CHECK-NEXT:      flow.add
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[T:.*]] = flow.transpose %[[G]]
// CHECK-NEXT:    %[[H:.*]] = flow.fused (%{{.*}} = %[[T]]) : (tensor<6x2xf32>) -> tensor<6x2xf32> {
// CHECK-NEXT:      flow.neg
// CHECK-NEXT:      flow.mul
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[RS:.*]] = flow.reshape %[[G]]
// CHECK-NEXT:    %[[ABS:.*]] = flow.abs %[[RS]]
// CHECK-NEXT:    func.return %[[H]], %[[ABS]]
func.func @movement(%x: tensor<2x6xf32>) -> (tensor<6x2xf32>, tensor<3x4xf32>) {
  %0 = flow.exp %x : tensor<2x6xf32>
  %1 = flow.add %0, %x : tensor<2x6xf32>
  %t = flow.transpose %1, permutation = [1, 0] : tensor<2x6xf32> -> tensor<6x2xf32>
  %2 = flow.neg %t : tensor<6x2xf32>
  %3 = flow.mul %2, %t : tensor<6x2xf32>
  %r = flow.reshape %1 : tensor<2x6xf32> -> tensor<3x4xf32>
  %4 = flow.abs %r : tensor<3x4xf32>
  return %3, %4 : tensor<6x2xf32>, tensor<3x4xf32>
}

// -----

// A broadcast that is also used outside stays, and is copied into the body; a size-1 dim
// broadcast is fine too.
// CHECK-LABEL: func.func @shared_broadcast(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x3xf32>, %[[B:[^:]+]]: tensor<1x3xf32>
// CHECK-NEXT:    %[[BB:.*]] = flow.broadcast_in_dim %[[B]], dims = [0, 1]
// CHECK-NEXT:    %[[R:.*]] = flow.fused (%{{.*}} = %[[X]], %[[BA:.*]] = %[[B]]) : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32> {
// CHECK-NEXT:      flow.broadcast_in_dim %[[BA]], dims = [0, 1]
// CHECK-NEXT:      flow.mul
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]], %[[BB]]
func.func @shared_broadcast(%x: tensor<4x3xf32>, %b: tensor<1x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %bb = flow.broadcast_in_dim %b, dims = [0, 1] : tensor<1x3xf32> -> tensor<4x3xf32>
  %0 = flow.mul %x, %bb : tensor<4x3xf32>
  return %0, %bb : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Compare, select and cast fuse; results of other element types are fine.
// CHECK-LABEL: func.func @compare_select_cast(
// CHECK-NEXT:    %[[R:.*]] = flow.fused ({{.*}}) : (tensor<6xf32>) -> tensor<6xi32> {
// CHECK-NEXT:      flow.full
// CHECK-NEXT:      flow.compare gt
// CHECK-NEXT:      flow.select
// CHECK-NEXT:      flow.cast
// CHECK-NEXT:      flow.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]]
func.func @compare_select_cast(%a: tensor<6xf32>) -> tensor<6xi32> {
  %zero = flow.full 0.0 : f32 -> tensor<6xf32>
  %p = flow.compare gt, %a, %zero : tensor<6xf32> -> tensor<6xi1>
  %s = flow.select %p, %a, %zero : tensor<6xi1>, tensor<6xf32>
  %c = flow.cast %s : tensor<6xf32> -> tensor<6xi32>
  return %c : tensor<6xi32>
}

// -----

// A single op with nothing to absorb needs no region.
// CHECK-LABEL: func.func @single(
// CHECK-NEXT:    flow.add
// CHECK-NEXT:    func.return
// CHECK-NOT:     flow.fused
func.func @single(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
  %0 = flow.add %a, %b : tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

// Global tensors are left to flow-partition.
// CHECK-LABEL: func.func @global(
// CHECK-NEXT:    flow.exp
// CHECK-NEXT:    flow.neg
// CHECK-NEXT:    func.return
func.func @global(%a: tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>) -> tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> {
  %0 = flow.exp %a : tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
  %1 = flow.neg %0 : tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
  return %1 : tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
}

// -----

// A cast with several uses is a leaf: each group redoes it, and it is gone (not materialized).
// CHECK-LABEL: func.func @shared_cast(
// CHECK-SAME:    %[[J:[^:]+]]: tensor<2xi32>
// CHECK-NOT:     flow.cast
// CHECK:         flow.fused (%[[X:.*]] = %[[J]])
// CHECK-NEXT:      flow.cast %[[X]] : tensor<2xi32> -> tensor<2xi64>
// CHECK:         flow.fused (%[[Y:.*]] = %[[J]])
// CHECK-NEXT:      flow.cast %[[Y]] : tensor<2xi32> -> tensor<2xi64>
// MULTI-LABEL: func.func @shared_cast(
// MULTI-NOT:     flow.cast %
// MULTI:         flow.fused
// MULTI-NEXT:      flow.cast
// MULTI:         flow.fused
// MULTI-NEXT:      flow.cast
func.func @shared_cast(%j: tensor<2xi32>) -> (tensor<2xi64>, tensor<2xi64>) {
  %k = flow.cast %j : tensor<2xi32> -> tensor<2xi64>
  %four = flow.full 4 : i64 -> tensor<2xi64>
  %five = flow.full 5 : i64 -> tensor<2xi64>
  %a = flow.add %k, %four : tensor<2xi64>
  %b = flow.add %k, %five : tensor<2xi64>
  return %a, %b : tensor<2xi64>, tensor<2xi64>
}
