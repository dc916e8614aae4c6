// flow-opt prints the output of every pipeline that ends at the IREE hand-off in generic form,
// options or not, the per-rank pipelines included (flow-opt.mlir: flow-to-iree-input itself);
// other pipelines print in custom form.
// RUN: flow-opt %s -p 'flow-partition-to-iree-input{rank=0}' | FileCheck %s --check-prefixes=GENERIC,RANK0
// RUN: flow-opt %s -p 'flow-infer-sbp,flow-partition-to-iree-input{rank=1}' | FileCheck %s --check-prefixes=GENERIC,RANK1
// RUN: flow-opt %s -p 'flow-partition-to-iree-input-native{rank=1}' | FileCheck %s --check-prefix=GENERIC
// A pass after the hand-off, or a pipeline that stops before it, prints in custom form:
// RUN: flow-opt %s -p 'flow-partition-to-iree-input{rank=0},dce' | FileCheck %s --check-prefix=CUSTOM
// RUN: flow-opt %s -p 'flow-partition{rank=0}' | FileCheck %s --check-prefix=CUSTOM

// GENERIC:     "builtin.module"() ({
// GENERIC:       "func.func"() <{sym_name = "f"
// GENERIC-NOT:   func.func @
// RANK0:         "func.call"({{.*}}) <{callee = @comm.all_gather.3x3xf32.5x3xf32}>
// RANK1:         "func.call"({{.*}}) <{callee = @comm.all_gather.2x3xf32.5x3xf32}>
// CUSTOM:      builtin.module
// CUSTOM:        func.func @f(
// CUSTOM-NOT:    "func.func"
!x = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!xb = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @f(%x: !x) -> !xb {
  %0 = flow.exp %x : !x
  %1 = flow.boxing %0 : !x -> !xb
  func.return %1 : !xb
}
