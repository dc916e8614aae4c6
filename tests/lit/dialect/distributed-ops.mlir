// Round trip of the distribution ops (boxing, to_local / to_global) and the collectives
// on shards: custom form, then custom -> generic -> custom.
// RUN: flow-opt %s --split-input-file | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | flow-opt --split-input-file | FileCheck %s
// RUN: flow-opt %s --split-input-file --print-op-generic | FileCheck %s --check-prefix=GENERIC

!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!mesh = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), P]>>>
!moved = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>

// CHECK-LABEL: func.func @global(
// CHECK-SAME:    %[[X:.*]]: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
// CHECK-NEXT:    %[[B:.*]] = flow.boxing %[[X]] : tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
// CHECK-NEXT:    flow.boxing %[[X]] : {{.*}} -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[S(0)]>>>
// CHECK-NEXT:    %[[L:.*]] = flow.to_local %[[X]] : tensor<8x4xf32, #flow.dist<{{.*}}>> -> tensor<4x4xf32>
// CHECK-NEXT:    flow.to_global %[[L]] : tensor<4x4xf32> -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
// CHECK-NEXT:    flow.to_local %{{.*}} : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), P]>>> -> tensor<4x4xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "global"
// GENERIC:       "flow.boxing"(%{{.*}}) : (tensor<8x4xf32, {{.*}}) -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
// GENERIC:       "flow.to_local"(%{{.*}}) : (tensor<8x4xf32, {{.*}}) -> tensor<4x4xf32>
func.func @global(%x: !s0, %m: !mesh) {
  %0 = flow.boxing %x : !s0 -> !b
  %1 = flow.boxing %x : !s0 -> !moved
  %2 = flow.to_local %x : !s0 -> tensor<4x4xf32>
  %3 = flow.to_global %2 : tensor<4x4xf32> -> !s0
  %4 = flow.to_local %m : !mesh -> tensor<4x4xf32>
  return
}

// -----

// Uneven (balanced) splits: 5 rows over 2 ranks are 3 + 2; either shard shape verifies.
// CHECK-LABEL: func.func @uneven(
// CHECK:         flow.to_local %{{.*}} : tensor<5x4xf32, #flow.dist<{{.*}}>> -> tensor<3x4xf32>
// CHECK-NEXT:    flow.to_local %{{.*}} : tensor<5x4xf32, #flow.dist<{{.*}}>> -> tensor<2x4xf32>
// CHECK-NEXT:    flow.all_gather %{{.*}} on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<2x4xf32> -> tensor<5x4xf32>
!u = tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @uneven(%x: !u) {
  %0 = flow.to_local %x : !u -> tensor<3x4xf32>
  %1 = flow.to_local %x : !u -> tensor<2x4xf32>
  %2 = flow.all_gather %1 on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<2x4xf32> -> tensor<5x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @collectives(
// CHECK-SAME:    %[[X:.*]]: tensor<8x4xf32>
// CHECK-NEXT:    flow.all_reduce sum %[[X]] on #flow.placement<"cpu", [[0, 1], [2, 3]]> axis = 1 : tensor<8x4xf32>
// CHECK-NEXT:    flow.all_reduce max %[[X]] on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>
// CHECK-NEXT:    flow.all_gather %[[X]] on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    flow.reduce_scatter sum %[[X]] on #flow.placement<"cpu", [[0, 1], [2, 3]]> axis = 0, dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    flow.all_to_all %[[X]] on #flow.placement<"cpu", [0, 1]> axis = 0, split_dim = 1, concat_dim = 0 : tensor<8x4xf32> -> tensor<16x2xf32>
// CHECK-NEXT:    flow.local_slice %[[X]] on #flow.placement<"cpu", [0, 1, 2]> axis = 0, dim = 0 : tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    flow.local_partial %[[X]] on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>
// CHECK-NEXT:    flow.send %[[X]], peer = 1 : tensor<8x4xf32>
// CHECK-NEXT:    flow.recv peer = 0 : tensor<8x4xf32>
// CHECK-NEXT:    flow.send %[[X]], peer = 1, tag = 7 : tensor<8x4xf32>
// CHECK-NEXT:    flow.recv peer = 0, tag = 7 : tensor<8x4xf32>
// CHECK-NEXT:    flow.fence %[[X]], %{{.*}} : tensor<8x4xf32>, tensor<8x4xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "collectives"
// GENERIC:       "flow.all_reduce"(%{{.*}}) <{kind = #flow<reduce_kind sum>, placement = #flow.placement<"cpu", [[0, 1], [2, 3]]>, mesh_axis = 1 : i64}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
// GENERIC:       "flow.all_to_all"(%{{.*}}) <{placement = #flow.placement<"cpu", [0, 1]>, mesh_axis = 0 : i64, split_dim = 1 : i64, concat_dim = 0 : i64}>
// GENERIC:       "flow.send"(%{{.*}}) <{peer = 1 : i64}> : (tensor<8x4xf32>) -> ()
// GENERIC:       "flow.recv"() <{peer = 0 : i64}> : () -> tensor<8x4xf32>
func.func @collectives(%x: tensor<8x4xf32>) {
  %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [[0, 1], [2, 3]]> axis = 1 : tensor<8x4xf32>
  %1 = flow.all_reduce max %x on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>
  %2 = flow.all_gather %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
  %3 = flow.reduce_scatter sum %x on #flow.placement<"cpu", [[0, 1], [2, 3]]> axis = 0, dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %4 = flow.all_to_all %x on #flow.placement<"cpu", [0, 1]> axis = 0, split_dim = 1, concat_dim = 0 : tensor<8x4xf32> -> tensor<16x2xf32>
  %5 = flow.local_slice %x on #flow.placement<"cpu", [0, 1, 2]> axis = 0, dim = 0 : tensor<8x4xf32> -> tensor<3x4xf32>
  %6 = flow.local_partial %x on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>
  flow.send %x, peer = 1 : tensor<8x4xf32>
  %7 = flow.recv peer = 0 : tensor<8x4xf32>
  flow.send %x, peer = 1, tag = 7 : tensor<8x4xf32>
  %8 = flow.recv peer = 0, tag = 7 : tensor<8x4xf32>
  flow.fence %x, %8 : tensor<8x4xf32>, tensor<8x4xf32>
  return
}

// -----

// flow.redistribute names only the target distribution; its operand and result may be typed
// without an encoding (a traced program before flow-infer-sbp) or with one.
// CHECK-LABEL: func.func @redistribute(
// CHECK-NEXT:    flow.redistribute %{{.*}} to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>> : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    flow.redistribute %{{.*}} to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8x4xf32, #flow.dist<{{.*}}[B]>>>
// GENERIC-LABEL: "func.func"() <{sym_name = "redistribute"
// GENERIC:       "flow.redistribute"(%{{.*}}) <{dist = #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @redistribute(%x: tensor<8x4xf32>, %y: !s0) {
  %0 = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>> : tensor<8x4xf32> -> tensor<8x4xf32>
  %1 = flow.redistribute %y to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : !s0 -> !b
  return
}
