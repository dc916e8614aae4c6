// flow-print-comm-plan{rank=R}: rank R's collectives, with their local types and bytes, on stderr;
// the IR passes through unchanged.
// RUN: flow-opt %s -p 'flow-partition{rank=1},flow-print-comm-plan{rank=1}' 2>&1 >/dev/null | FileCheck %s
// RUN: flow-opt %s -p 'flow-print-comm-plan{rank=1}' 2>&1 >/dev/null | FileCheck %s --check-prefix=GLOBAL

// CHECK-LABEL: communication plan of rank 1:
// CHECK-NEXT:    flow.all_gather tensor<2x3xf32> (24 bytes) mesh_axis=0 : i64, dim=0 : i64
// GLOBAL-LABEL: communication plan of rank 1:
// GLOBAL-NEXT:    (no communication)

!x = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!xb = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @gather(%x: !x) -> !xb {
  %0 = flow.exp %x : !x
  %1 = flow.boxing %0 : !x -> !xb
  func.return %1 : !xb
}

