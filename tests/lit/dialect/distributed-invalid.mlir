// Verifier errors of the distribution ops and collectives. xDSL's --verify-diagnostics prints
// the diagnostic instead of matching `expected-error`, so the printed message is checked.
// RUN: flow-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// Without the flag the first error is reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: distributed-invalid.mlir:[[# @LINE + 6]]:3: error: 'flow.boxing' op expected a change of distribution, got tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> on both sides
// ERR-NOT: Traceback

// CHECK: 'flow.boxing' op expected a change of distribution, got tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>> on both sides
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @boxing_identity(%x: !s0) {
  %0 = flow.boxing %x : !s0 -> !s0
  return
}

// -----

// CHECK: 'flow.boxing' op expected operand and result to have the same shape and element type, got tensor<8x4xf32, #flow.dist<{{.*}}>> and tensor<4x8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<4x8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @boxing_shape(%x: !s0) {
  %0 = flow.boxing %x : !s0 -> !b
  return
}

// -----

// CHECK: 'flow.boxing' op expected result to be a global tensor (#flow.dist encoding), got tensor<8x4xf32>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @boxing_to_local(%x: !s0) {
  %0 = flow.boxing %x : !s0 -> tensor<8x4xf32>
  return
}

// -----

// CHECK: split dim 2 is out of range for a tensor of rank 2 (tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(2)]>>>)
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!s2 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(2)]>>>
func.func @boxing_split_dim(%x: !s0) {
  %0 = flow.boxing %x : !s0 -> !s2
  return
}

// -----

// CHECK: 'flow.to_local' op expected a shard of tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>: tensor<2x4xf32> or tensor<3x4xf32>, got tensor<4x4xf32>
!u = tensor<5x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @to_local_shape(%x: !u) {
  %0 = flow.to_local %x : !u -> tensor<4x4xf32>
  return
}

// -----

// CHECK: 'flow.to_local' op expected result to be a local tensor (no #flow.dist), got tensor<8x4xf32, #flow.dist<{{.*}}>>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @to_local_global(%x: !s0) {
  %0 = "flow.to_local"(%x) : (!s0) -> !s0
  return
}

// -----

// CHECK: 'flow.to_local' op expected operand to be a global tensor (#flow.dist encoding), got tensor<8x4xf32>
func.func @to_local_of_local(%x: tensor<8x4xf32>) {
  %0 = flow.to_local %x : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.to_global' op expected equal element types, got tensor<8x4xf32, #flow.dist<{{.*}}>> and tensor<4x4xf16>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @to_global_element_type(%x: tensor<4x4xf16>) {
  %0 = flow.to_global %x : tensor<4x4xf16> -> !s0
  return
}

// -----

// CHECK: 'flow.to_global' op expected a shard of tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), S(1)]>>>: tensor<4x2xf32>, got tensor<4x4xf32>
!m = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), S(1)]>>>
func.func @to_global_2d(%x: tensor<4x4xf32>) {
  %0 = flow.to_global %x : tensor<4x4xf32> -> !m
  return
}

// -----

// CHECK: 'flow.all_reduce' op expected mesh axis in [0, 1) of #flow.placement<"cpu", [0, 1]>, got 1
func.func @all_reduce_axis(%x: tensor<8x4xf32>) {
  %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [0, 1]> axis = 1 : tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.all_reduce' op expected operand #0 to be a local tensor (no #flow.dist), got tensor<8x4xf32, #flow.dist<{{.*}}>>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @all_reduce_global(%x: !s0) {
  %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [0, 1]> axis = 0 : !s0
  return
}

// -----

// CHECK: 'flow.all_gather' op expected operand tensor<4x4xf32> or tensor<5x4xf32>, got tensor<3x4xf32>
func.func @all_gather_piece(%x: tensor<3x4xf32>) {
  %0 = flow.all_gather %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<3x4xf32> -> tensor<9x4xf32>
  return
}

// -----

// CHECK: 'flow.all_gather' op expected dim in [0, 2) for tensor<8x4xf32>, got 2
func.func @all_gather_dim(%x: tensor<4x4xf32>) {
  %0 = flow.all_gather %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 2 : tensor<4x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.reduce_scatter' op expected result tensor<8x2xf32>, got tensor<4x4xf32>
func.func @reduce_scatter_dim(%x: tensor<8x4xf32>) {
  %0 = flow.reduce_scatter sum %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 1 : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// CHECK: 'flow.all_to_all' op expected split_dim and concat_dim to differ, got 0
func.func @all_to_all_same_dims(%x: tensor<8x4xf32>) {
  %0 = flow.all_to_all %x on #flow.placement<"cpu", [0, 1]> axis = 0, split_dim = 0, concat_dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.all_to_all' op expected the result to be the operand tensor<8x4xf32> cut into 2 along dim 1 and gathered along dim 0, got tensor<8x2xf32>
func.func @all_to_all_shape(%x: tensor<8x4xf32>) {
  %0 = flow.all_to_all %x on #flow.placement<"cpu", [0, 1]> axis = 0, split_dim = 1, concat_dim = 0 : tensor<8x4xf32> -> tensor<8x2xf32>
  return
}

// -----

// CHECK: 'flow.local_slice' op expected result tensor<3x4xf32> or tensor<4x4xf32>, got tensor<2x4xf32>
func.func @local_slice_piece(%x: tensor<10x4xf32>) {
  %0 = flow.local_slice %x on #flow.placement<"cpu", [0, 1, 2]> axis = 0, dim = 0 : tensor<10x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// CHECK: 'flow.local_slice' op expected operand and result element types to match, got tensor<8x4xf32> and tensor<4x4xi32>
func.func @local_slice_element_type(%x: tensor<8x4xf32>) {
  %0 = flow.local_slice %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0 : tensor<8x4xf32> -> tensor<4x4xi32>
  return
}

// -----

// CHECK: attribute tensor<8x4xf32> expected from variable 'T', but got tensor<4x4xf32>
func.func @local_partial_type(%x: tensor<8x4xf32>) {
  %0 = "flow.local_partial"(%x) <{placement = #flow.placement<"cpu", [0, 1]>, mesh_axis = 0 : i64}> : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// CHECK: 'flow.send' op expected a non-negative peer rank, got -1
func.func @send_peer(%x: tensor<8x4xf32>) {
  flow.send %x, peer = -1 : tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.recv' op expected result to be a local tensor (no #flow.dist), got tensor<8x4xf32, #flow.dist<{{.*}}>>
!s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @recv_global() {
  %0 = flow.recv peer = 0 : !s0
  return
}

// -----

// CHECK: 'flow.redistribute' op expected operand and result to have the same shape and element type, got tensor<8x4xf32> and tensor<4x8xf32>
func.func @redistribute_shape(%x: tensor<8x4xf32>) {
  %0 = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : tensor<8x4xf32> -> tensor<4x8xf32>
  return
}

// -----

// CHECK: 'flow.redistribute' op split dim 2 is out of range for a tensor of rank 2
func.func @redistribute_split_dim(%x: tensor<8x4xf32>) {
  %0 = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(2)]>> : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.redistribute' op expected the result to be typed with #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>, got tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @redistribute_result_type(%x: tensor<8x4xf32>) {
  %0 = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : tensor<8x4xf32> -> tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
  return
}

// -----

// CHECK: 'flow.redistribute' op expected dist to be a #flow.dist attribute, got #flow.sbp<[B]>
func.func @redistribute_not_a_dist(%x: tensor<8x4xf32>) {
  %0 = flow.redistribute %x to #flow.sbp<[B]> : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// CHECK: 'flow.send' op expected tag in [0, 32767], got 40000
func.func @send_tag(%x: tensor<4xf32>) {
  flow.send %x, peer = 1, tag = 40000 : tensor<4xf32>
  return
}

// -----

// CHECK: 'flow.fence' op expected value #0 to be a local tensor (no #flow.dist), got tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @fence_global(%x: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>) {
  flow.fence %x : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
  return
}
