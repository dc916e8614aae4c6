// flow-partition: the global program becomes one rank's local program: shard shapes,
// collectives for every boxing, no #flow.dist left. Without `rank` it is the program every
// rank runs (even splits, one placement); `rank=R` gives rank R's program.
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-partition | FileCheck %s
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-partition{rank=0}' | FileCheck %s --check-prefix=RANK0
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-partition{rank=1}' | FileCheck %s --check-prefix=RANK1
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-partition{rank=2}' | FileCheck %s --check-prefix=RANK2
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-infer-sbp,flow-partition | FileCheck %s --check-prefix=INFER

// Data parallel: each rank multiplies its rows; the broadcast result is gathered.
// CHECK-LABEL: func.func @data_parallel
// CHECK-SAME:    (%[[X:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x6xf32>) -> tensor<8x6xf32>
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul %[[X]], %[[W]] : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[T:.*]] = flow.tanh %[[Y]] : tensor<4x6xf32>
// CHECK-NEXT:    %[[G:.*]] = flow.all_gather %[[T]] on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    func.return %[[G]] : tensor<8x6xf32>
// INFER-LABEL: func.func @data_parallel
// INFER-SAME:    (%{{.*}}: tensor<4x4xf32>, %{{.*}}: tensor<4x6xf32>) -> tensor<8x6xf32>
// INFER-NEXT:    flow.matmul {{.*}} {sbp_signature = "[S(0)], [B] -> [S(0)]"} : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
// INFER:         flow.all_gather
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!ys = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!yb = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @data_parallel(%x: !x, %w: !w) -> !yb {
  %0 = flow.matmul %x, %w : !x, !w -> !ys
  %1 = flow.tanh %0 : !ys
  %2 = flow.boxing %1 : !ys -> !yb
  func.return %2 : !yb
}

// -----

// Split contraction: each rank holds partial sums, all-reduced.
// CHECK-LABEL: func.func @split_k
// CHECK-SAME:    (%[[X:.*]]: tensor<8x2xf32>, %[[W:.*]]: tensor<2x6xf32>) -> tensor<8x6xf32>
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul %[[X]], %[[W]] : tensor<8x2xf32>, tensor<2x6xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.all_reduce sum %[[Y]] on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x6xf32>
// CHECK-NEXT:    func.return %[[R]]
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!yp = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
!yb = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @split_k(%x: !x, %w: !w) -> !yb {
  %0 = flow.matmul %x, %w : !x, !w -> !yp
  %1 = flow.boxing %0 : !yp -> !yb
  func.return %1 : !yb
}

// -----

// A 2-D placement: rows split on mesh axis 0, columns on axis 1; the row sums are partial
// on axis 1 only, so they are all-reduced within each row of the mesh.
// CHECK-LABEL: func.func @mesh_2d
// CHECK-SAME:    (%[[X:.*]]: tensor<4x4xf32>, %[[W:.*]]: tensor<4x3xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul %[[X]], %[[W]] : tensor<4x4xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.reduce sum %[[Y]], dims = [1] : tensor<4x3xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = flow.all_reduce sum %[[R]] on #flow.placement<"cpu", {{\[\[0, 1\], \[2, 3\]\]}}> axis = 1 : tensor<4xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<4xf32>
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[B, S(1)]>>>
!y = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), S(1)]>>>
!rp = tensor<8xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), P]>>>
!rb = tensor<8xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
func.func @mesh_2d(%x: !x, %w: !w) -> !rb {
  %0 = flow.matmul %x, %w : !x, !w -> !y
  %1 = flow.reduce sum %0, dims = [1] : !y -> !rp
  %2 = flow.boxing %1 : !rp -> !rb
  func.return %2 : !rb
}

// -----

// Uneven split, balanced like OneFlow's: 5 rows over 2 ranks are 3 + 2. Each rank's program
// has its own shapes; without a rank the pass refuses.
// CHECK: 'func.func' op the shards of tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> have different shapes on different ranks ([2, 4], [3, 4]): an uneven split needs a per-rank program (give the pass option rank=R)
// RANK0-LABEL: func.func @uneven
// RANK0-SAME:    (%{{.*}}: tensor<3x4xf32>, %{{.*}}: tensor<4x6xf32>) -> tensor<5x6xf32>
// RANK0-NEXT:    flow.matmul {{.*}} -> tensor<3x6xf32>
// RANK0-NEXT:    flow.all_gather %{{.*}} : tensor<3x6xf32> -> tensor<5x6xf32>
// RANK1-LABEL: func.func @uneven
// RANK1-SAME:    (%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x6xf32>) -> tensor<5x6xf32>
// RANK1-NEXT:    flow.matmul {{.*}} -> tensor<2x6xf32>
// RANK1-NEXT:    flow.all_gather %{{.*}} : tensor<2x6xf32> -> tensor<5x6xf32>
!x = tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!ys = tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!yb = tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @uneven(%x: !x, %w: !w) -> !yb {
  %0 = flow.matmul %x, %w : !x, !w -> !ys
  %1 = flow.boxing %0 : !ys -> !yb
  func.return %1 : !yb
}

// -----

// Two stages on two placements: each rank keeps only its stage; its function takes and
// returns only the shards it holds, and the boxing between stages becomes send / recv.
// CHECK: 'func.func' op @stages uses several placements (#flow.placement<"cpu", [0, 1]>, #flow.placement<"cpu", [2, 3]>): each rank runs a different program, give the pass option rank=R
// RANK0-LABEL: func.func @stages
// RANK0-SAME:    (%[[X:.*]]: tensor<4x6xf32>) {
// RANK0-NEXT:    %[[E:.*]] = flow.exp %[[X]] : tensor<4x6xf32>
// RANK0-NEXT:    flow.send %[[E]], peer = 2, tag = 1 : tensor<4x6xf32>
// RANK0-NEXT:    func.return
// RANK1-LABEL: func.func @stages
// RANK1:         flow.send %{{.*}}, peer = 3, tag = 1 : tensor<4x6xf32>
// RANK2-LABEL: func.func @stages
// RANK2-SAME:    () -> tensor<4x6xf32>
// RANK2-NEXT:    %[[R:.*]] = flow.recv peer = 0, tag = 1 : tensor<4x6xf32>
// RANK2-NEXT:    %[[E:.*]] = flow.exp %[[R]] : tensor<4x6xf32>
// RANK2-NEXT:    func.return %[[E]] : tensor<4x6xf32>
!a = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
func.func @stages(%x: !a) -> !b {
  %0 = flow.exp %x : !a
  %1 = flow.boxing %0 : !a -> !b
  %2 = flow.exp %1 : !b
  func.return %2 : !b
}

// -----

// A value made for the second stage from a local constant: the first stage's ranks drop its
// flow.to_global (they hold no part of it) and only send.
// RANK0-LABEL: func.func @stage_constant
// RANK0-NEXT:    flow.send %{{.*}}, peer = 2, tag = 1 : tensor<4x6xf32>
// RANK0-NOT:     flow.to_global
// RANK0:         func.return
// RANK2-LABEL: func.func @stage_constant
// RANK2-NEXT:    %[[R:.*]] = flow.recv peer = 0, tag = 1 : tensor<4x6xf32>
// RANK2-NEXT:    %[[C:.*]] = flow.full 1.000000e+00 : f32 -> tensor<4x6xf32>
// RANK2-NEXT:    %[[S:.*]] = flow.add %[[R]], %[[C]] : tensor<4x6xf32>
// RANK2-NEXT:    func.return %[[S]] : tensor<4x6xf32>
!a = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
func.func @stage_constant(%x: !a) -> !b {
  %0 = flow.boxing %x : !a -> !b
  %1 = flow.full 1.0 : f32 -> tensor<4x6xf32>
  %2 = flow.to_global %1 : tensor<4x6xf32> -> !b
  %3 = flow.add %0, %2 : !b
  func.return %3 : !b
}

// -----

// flow.to_local / flow.to_global are the identity on shards.
// CHECK-LABEL: func.func @boundaries
// CHECK-SAME:    (%[[X:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[E:.*]] = flow.exp %[[X]] : tensor<4x4xf32>
// CHECK-NEXT:    %[[N:.*]] = flow.neg %[[E]] : tensor<4x4xf32>
// CHECK-NEXT:    func.return %[[N]] : tensor<4x4xf32>
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @boundaries(%x: !x) -> tensor<4x4xf32> {
  %0 = flow.to_local %x : !x -> tensor<4x4xf32>
  %1 = flow.exp %0 : tensor<4x4xf32>
  %2 = flow.to_global %1 : tensor<4x4xf32> -> !x
  %3 = flow.neg %2 : !x
  %4 = flow.to_local %3 : !x -> tensor<4x4xf32>
  func.return %4 : tensor<4x4xf32>
}

// -----

// A shard type that is another rank's shard is an error, never a silent reshape.
// RANK1: 'flow.to_local' op expected result type tensor<2x4xf32>, rank 1's shard, got tensor<3x4xf32>
!x = tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @wrong_shard(%x: !x) -> tensor<3x4xf32> {
  %0 = flow.to_local %x : !x -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}

// -----

// Distributions that are not a signature of the op: partitioning them would be wrong.
// CHECK: 'flow.matmul' op runs as [S(0)], [S(0)] -> [S(0)], which is not one of its SBP signatures (on one placement); run flow-infer-sbp first
// INFER-LABEL: func.func @not_a_signature
// INFER:         flow.all_to_all
// INFER-NEXT:    flow.matmul {{.*}} {sbp_signature = "[S(1)], [S(0)] -> [P]"}
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!y = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @not_a_signature(%x: !x, %w: !w) -> !y {
  %0 = flow.matmul %x, %w : !x, !w -> !y
  func.return %0 : !y
}
