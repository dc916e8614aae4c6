// flow-channel-table: the module records each placement a collective or boxing uses, with its
// channel index, for the native (NCCL/RCCL) collectives lowering.
// RUN: flow-opt %s -p flow-channel-table | FileCheck %s

// CHECK-LABEL: builtin.module attributes {flow.channel_table = {{\[\[}}#flow.placement<"cpu", [0, 1]>, 0 : i64]]}
// CHECK:         func.func @gather

!x = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!xb = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @gather(%x: !x) -> !xb {
  %0 = flow.exp %x : !x
  %1 = flow.boxing %0 : !x -> !xb
  func.return %1 : !xb
}

