// flow-boxing-to-collectives: distribution in, collectives on shards out (the model is MLIR's
// Shard resharding-partition test). Without `rank` the program is every rank's, so splits
// must be even; `rank=R` gives rank R's program (uneven shards, placement changes).
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-boxing-to-collectives | FileCheck %s
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-boxing-to-collectives{rank=0}' | FileCheck %s --check-prefix=RANK0
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-boxing-to-collectives{rank=1}' | FileCheck %s --check-prefix=RANK1
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-boxing-to-collectives{rank=2}' | FileCheck %s --check-prefix=RANK2

// Every transition of the boxing table on a 1-D placement.
// CHECK-LABEL: func.func @table
// CHECK-SAME:    (%[[S0:.*]]: tensor<8x6xf32, {{.*}}>, %[[S1:.*]]: tensor<8x6xf32, {{.*}}>, %[[B:.*]]: tensor<8x6xf32, {{.*}}>, %[[P:.*]]: tensor<8x6xf32, {{.*}}>)
// S(0) -> B
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[S0]] : tensor<8x6xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[G:.*]] = flow.all_gather %[[L]] on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    flow.to_global %[[G]] : tensor<8x6xf32> -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
// S(1) -> B
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[S1]] : {{.*}} -> tensor<8x3xf32>
// CHECK-NEXT:    %[[G:.*]] = flow.all_gather %[[L]] on {{.*}} axis = 0, dim = 1 : tensor<8x3xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    flow.to_global %[[G]]
// P -> B
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[P]] : {{.*}} -> tensor<8x6xf32>
// CHECK-NEXT:    %[[R:.*]] = flow.all_reduce sum %[[L]] on {{.*}} axis = 0 : tensor<8x6xf32>
// CHECK-NEXT:    flow.to_global %[[R]]
// P -> S(1)
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[P]]
// CHECK-NEXT:    %[[R:.*]] = flow.reduce_scatter sum %[[L]] on {{.*}} axis = 0, dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    flow.to_global %[[R]] : tensor<8x3xf32> -> tensor<8x6xf32, #flow.dist<{{.*}}[S(1)]>>>
// S(0) -> S(1)
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[S0]]
// CHECK-NEXT:    %[[A:.*]] = flow.all_to_all %[[L]] on {{.*}} axis = 0, split_dim = 1, concat_dim = 0 : tensor<4x6xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    flow.to_global %[[A]]
// S(1) -> S(0)
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[S1]]
// CHECK-NEXT:    %[[A:.*]] = flow.all_to_all %[[L]] on {{.*}} axis = 0, split_dim = 0, concat_dim = 1 : tensor<8x3xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    flow.to_global %[[A]]
// B -> S(0): no communication
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[B]]
// CHECK-NEXT:    %[[SL:.*]] = flow.local_slice %[[L]] on {{.*}} axis = 0, dim = 0 : tensor<8x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    flow.to_global %[[SL]]
// B -> P: no communication
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[B]]
// CHECK-NEXT:    %[[PA:.*]] = flow.local_partial %[[L]] on {{.*}} axis = 0 : tensor<8x6xf32>
// CHECK-NEXT:    flow.to_global %[[PA]] : tensor<8x6xf32> -> tensor<8x6xf32, #flow.dist<{{.*}}[P]>>>
// S(0) -> P: gather, then keep on one rank
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[S0]]
// CHECK-NEXT:    %[[G:.*]] = flow.all_gather %[[L]] on {{.*}} axis = 0, dim = 0
// CHECK-NEXT:    %[[PA:.*]] = flow.local_partial %[[G]]
// CHECK-NEXT:    flow.to_global %[[PA]]
// CHECK-NEXT:    func.return
!s0 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!s1 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!p = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
func.func @table(%s0: !s0, %s1: !s1, %b: !b, %p: !p) {
  %0 = flow.boxing %s0 : !s0 -> !b
  %1 = flow.boxing %s1 : !s1 -> !b
  %2 = flow.boxing %p : !p -> !b
  %3 = flow.boxing %p : !p -> !s1
  %4 = flow.boxing %s0 : !s0 -> !s1
  %5 = flow.boxing %s1 : !s1 -> !s0
  %6 = flow.boxing %b : !b -> !s0
  %7 = flow.boxing %b : !b -> !p
  %8 = flow.boxing %s0 : !s0 -> !p
  func.return
}

// -----

// A 2-D placement: one collective per changed mesh axis, within the groups of that axis.
// An axis changes only when no inner axis splits the dims it touches; [B, S(0)] -> [S(0), S(0)]
// has no such order and goes through [B, B].
// CHECK-LABEL: func.func @mesh
// [S(0), B] -> [B, B]
// CHECK:         flow.all_gather %{{.*}} on #flow.placement<"cpu", {{\[\[0, 1\], \[2, 3\]\]}}> axis = 0, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// [S(0), P] -> [S(0), B]
// CHECK:         flow.all_reduce sum %{{.*}} on {{.*}} axis = 1 : tensor<4x6xf32>
// [P, S(1)] -> [S(1), B]
// CHECK:         %[[G:.*]] = flow.all_gather %{{.*}} on {{.*}} axis = 1, dim = 1 : tensor<8x3xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    flow.reduce_scatter sum %[[G]] on {{.*}} axis = 0, dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
// [B, S(0)] -> [S(0), S(0)]
// CHECK:         %[[G:.*]] = flow.all_gather %{{.*}} on {{.*}} axis = 1, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    %[[O:.*]] = flow.local_slice %[[G]] on {{.*}} axis = 0, dim = 0 : tensor<8x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    flow.local_slice %[[O]] on {{.*}} axis = 1, dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
// [S(0), S(1)] -> [B, B]
// CHECK:         %[[G:.*]] = flow.all_gather %{{.*}} on {{.*}} axis = 0, dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    flow.all_gather %[[G]] on {{.*}} axis = 1, dim = 1 : tensor<8x3xf32> -> tensor<8x6xf32>
!sb = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
!bb = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[B, B]>>>
!sp = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), P]>>>
!ps1 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[P, S(1)]>>>
!s1b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(1), B]>>>
!bs0 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[B, S(0)]>>>
!s0s0 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), S(0)]>>>
!s0s1 = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), S(1)]>>>
func.func @mesh(%sb: !sb, %sp: !sp, %ps1: !ps1, %bs0: !bs0, %s0s1: !s0s1) {
  %0 = flow.boxing %sb : !sb -> !bb
  %1 = flow.boxing %sp : !sp -> !sb
  %2 = flow.boxing %ps1 : !ps1 -> !s1b
  %3 = flow.boxing %bs0 : !bs0 -> !s0s0
  %4 = flow.boxing %s0s1 : !s0s1 -> !bb
  func.return
}

// -----

// Uneven split: 5 rows over 2 ranks are 3 (rank 0) + 2 (rank 1). The shard shapes depend on
// the rank, so only a per-rank program can hold them.
// CHECK: 'flow.boxing' op the shards of tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> have different shapes on different ranks ([2, 6], [3, 6]): an uneven split needs a per-rank program (give the pass option rank=R)
// RANK0-LABEL: func.func @uneven
// RANK0:         %[[L:.*]] = flow.to_local %{{.*}} : tensor<5x6xf32, #flow.dist<{{.*}}>> -> tensor<3x6xf32>
// RANK0-NEXT:    flow.all_gather %[[L]] on {{.*}} axis = 0, dim = 0 : tensor<3x6xf32> -> tensor<5x6xf32>
// RANK0:         %[[L:.*]] = flow.to_local %{{.*}} : tensor<5x6xf32, #flow.dist<{{.*}}>> -> tensor<5x6xf32>
// RANK0-NEXT:    flow.reduce_scatter sum %[[L]] on {{.*}} axis = 0, dim = 0 : tensor<5x6xf32> -> tensor<3x6xf32>
// RANK1-LABEL: func.func @uneven
// RANK1:         %[[L:.*]] = flow.to_local %{{.*}} : tensor<5x6xf32, #flow.dist<{{.*}}>> -> tensor<2x6xf32>
// RANK1-NEXT:    flow.all_gather %[[L]] on {{.*}} axis = 0, dim = 0 : tensor<2x6xf32> -> tensor<5x6xf32>
// RANK1:         flow.reduce_scatter sum %{{.*}} on {{.*}} axis = 0, dim = 0 : tensor<5x6xf32> -> tensor<2x6xf32>
!s0 = tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!p = tensor<5x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
func.func @uneven(%x: !s0, %p: !p) -> (!b, !s0) {
  %0 = flow.boxing %x : !s0 -> !b
  %1 = flow.boxing %p : !p -> !s0
  func.return %0, %1 : !b, !s0
}

// -----

// A placement change with the same mesh shape and SBP: shard i goes from source rank i to
// target rank i. Rank 0 only sends (the result is not used), rank 2 only receives.
// CHECK: 'flow.boxing' op changes placement from #flow.placement<"cpu", [0, 1]> to #flow.placement<"cpu", [2, 3]>: point-to-point messages depend on the rank, give the pass option rank=R
// RANK0-LABEL: func.func @send_shards
// RANK0-NEXT:    %[[L:.*]] = flow.to_local %{{.*}} : {{.*}} -> tensor<4x6xf32>
// RANK0-NEXT:    flow.send %[[L]], peer = 2 : tensor<4x6xf32>
// RANK0-NEXT:    func.return
// RANK2-LABEL: func.func @send_shards
// RANK2-NEXT:    %[[R:.*]] = flow.recv peer = 0 : tensor<4x6xf32>
// RANK2-NEXT:    flow.to_global %[[R]] : tensor<4x6xf32> -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
!a = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
func.func @send_shards(%x: !a) {
  %0 = flow.boxing %x : !a -> !b
  func.return
}

// -----

// Other placement changes go through the whole tensor: the source ranks gather it, target
// rank j receives it from source rank j % 2 and slices out its shard locally.
// RANK0-LABEL: func.func @reshard_and_move
// RANK0-NEXT:    %[[L:.*]] = flow.to_local %{{.*}} : {{.*}} -> tensor<4x6xf32>
// RANK0-NEXT:    %[[G:.*]] = flow.all_gather %[[L]] on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
// RANK0-NEXT:    flow.send %[[G]], peer = 2 : tensor<8x6xf32>
// RANK0-NEXT:    flow.send %[[G]], peer = 4 : tensor<8x6xf32>
// RANK0-NEXT:    func.return
// RANK2-LABEL: func.func @reshard_and_move
// RANK2-NEXT:    %[[R:.*]] = flow.recv peer = 0 : tensor<8x6xf32>
// RANK2-NEXT:    %[[S:.*]] = flow.local_slice %[[R]] on #flow.placement<"cpu", [2, 3, 4]> axis = 0, dim = 1 : tensor<8x6xf32> -> tensor<8x2xf32>
// RANK2-NEXT:    flow.to_global %[[S]] : tensor<8x2xf32> -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3, 4]>, #flow.sbp<[S(1)]>>>
!a = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3, 4]>, #flow.sbp<[S(1)]>>>
func.func @reshard_and_move(%x: !a) {
  %0 = flow.boxing %x : !a -> !b
  func.return
}

// -----

// A rank outside the target placement gets no value: its uses must go first (flow-partition
// removes them).
// RANK0: 'flow.boxing' op moves to #flow.placement<"cpu", [2, 3]>, which does not hold rank 0, but its result is used here; flow-partition removes such uses
!a = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
func.func @used_elsewhere(%x: !a) -> !b {
  %0 = flow.boxing %x : !a -> !b
  func.return %0 : !b
}
