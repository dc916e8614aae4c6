// flow-partition-to-iree-input{rank=R}: rank R's program of a global program, ready for IREE:
// partitioned, a pipeline stage's micro-batches in schedule order, collectives as calls of the
// `comm` runtime module, everything lowered; the groups the calls use stay on the module.
// flow-opt prints a hand-off pipeline's output in generic form (as IREE receives it); a second
// flow-opt prints it back in custom form for the checks.
// RUN: flow-opt %s --split-input-file -p 'flow-partition-to-iree-input{rank=0}' | flow-opt --split-input-file | FileCheck %s --check-prefix=RANK0
// RUN: flow-opt %s --split-input-file -p 'flow-partition-to-iree-input{rank=1}' | flow-opt --split-input-file | FileCheck %s --check-prefix=RANK1
// RUN: flow-opt %s --split-input-file -p 'flow-partition-to-iree-input{rank=1}' | flow-opt --split-input-file | FileCheck %s --check-prefix=NOFLOW
// NOFLOW-NOT: {{ flow\.[a-z_]+ [^=]}}
// NOFLOW-NOT: #flow.
// The pipeline is its passes, run in order:
// RUN: flow-opt %s --split-input-file --print-op-generic -p 'flow-partition-to-iree-input{rank=0}' > %t.pipeline
// RUN: flow-opt %s --split-input-file --print-op-generic -p 'flow-partition{rank=0},flow-pipeline-schedule{rank=0},flow-lower-collectives{rank=0},flow-to-iree-input' > %t.passes
// RUN: diff %t.pipeline %t.passes
// With FLOW_COMM_PLAN=1 it prints each rank's collectives on stderr, and the program is the same:
// RUN: env FLOW_COMM_PLAN=1 flow-opt %s --split-input-file -p 'flow-partition-to-iree-input{rank=1}' 2>&1 >/dev/null | FileCheck %s --check-prefix=PLAN
// RUN: env FLOW_COMM_PLAN=1 flow-opt %s --split-input-file -p 'flow-partition-to-iree-input{rank=1}' 2>/dev/null | flow-opt --split-input-file | FileCheck %s --check-prefix=RANK1
// The native variant records the global program's channel table first, then splits it:
// RUN: flow-opt %s --split-input-file -p 'flow-partition-to-iree-input-native{rank=1}' | flow-opt --split-input-file --allow-unregistered-dialect | FileCheck %s --check-prefix=NATIVE
// Without a rank the program must be the same on every rank:
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-partition-to-iree-input | FileCheck %s --check-prefix=NORANK

// An uneven S(0) -> B: each rank's own shard shape, one all_gather call, its group recorded.
// RANK0-LABEL: builtin.module attributes {flow.comm_groups = {{\[\[}}0 : i64, 1 : i64]]}
// RANK0:         func.func @gather(%[[X:.*]]: tensor<3x3xf32>) -> tensor<5x3xf32>
// RANK0:           %[[E:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<3x3xf32>)
// RANK0:             math.exp
// RANK0:           %[[T:.*]] = arith.constant 0 : i32
// RANK0-NEXT:      %[[G:.*]] = arith.constant 1 : i32
// RANK0-NEXT:      %[[Y:.*]], %{{.*}} = func.call @comm.all_gather.3x3xf32.5x3xf32(%[[E]], %[[T]], %[[G]]) : (tensor<3x3xf32>, i32, i32) -> (tensor<5x3xf32>, i32)
// RANK0-NEXT:      func.return %[[Y]] : tensor<5x3xf32>
// RANK0:         func.func private @comm.all_gather.3x3xf32.5x3xf32(tensor<3x3xf32>, i32, i32) -> (tensor<5x3xf32>, i32)
// RANK1-LABEL: builtin.module attributes {flow.comm_groups = {{\[\[}}0 : i64, 1 : i64]]}
// RANK1:         func.func @gather(%{{.*}}: tensor<2x3xf32>) -> tensor<5x3xf32>
// RANK1:           func.call @comm.all_gather.2x3xf32.5x3xf32
// PLAN:        communication plan of rank 1:
// PLAN-NEXT:     flow.all_gather tensor<2x3xf32> (24 bytes) mesh_axis=0 : i64, dim=0 : i64
// NATIVE-LABEL: func.func @gather(%{{.*}}: tensor<2x3xf32>) -> tensor<5x3xf32>
// NATIVE:         "flow.collective.all_gather"
// NATIVE-NOT:     func.call
// NATIVE:         "flow.channel.split"
// NORANK: 'func.func' op the shards of tensor<5x3xf32, {{.*}} have different shapes on different ranks ([2, 3], [3, 3]): an uneven split needs a per-rank program (give the pass option rank=R)
!x = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!xb = tensor<5x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @gather(%x: !x) -> !xb {
  %0 = flow.exp %x : !x
  %1 = flow.boxing %0 : !x -> !xb
  func.return %1 : !xb
}

// -----

// Two pipeline stages, two micro-batches. Stage 0 runs 1F1B: F0, F1, then B0, B1, so its
// second send precedes its first receive; sends and receives are chained by their tokens.
// Stage 1 holds no argument of stage 0. No tag and no stage list is left.
// RANK0-LABEL: builtin.module {
// RANK0:         func.func @stages(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// RANK0:           %[[T1:.*]] = func.call @comm.send.4xf32(%a0, {{.*}}) : (tensor<4xf32>, i32, i32, i32, i32) -> i32
// RANK0:           %[[T2:.*]] = func.call @comm.send.4xf32(%a1, %{{.*}}, %{{.*}}, %[[T1]], %{{.*}})
// RANK0:           %h0, %[[T3:.*]] = func.call @comm.recv.4xf32(%{{.*}}, %{{.*}}, %{{.*}}, %[[T2]], %{{.*}})
// RANK0:           %h1, %{{.*}} = func.call @comm.recv.4xf32(%{{.*}}, %{{.*}}, %{{.*}}, %[[T3]], %{{.*}})
// RANK0:           arith.addf
// RANK0-NOT:     micro_batch
// RANK0-NOT:     pipeline_
// RANK1-LABEL: builtin.module {
// RANK1:         func.func @stages() {
// RANK1:           %b0, %{{.*}} = func.call @comm.recv.4xf32
// RANK1:           func.call @comm.send.4xf32(%g0,
// RANK1:           %b1, %{{.*}} = func.call @comm.recv.4xf32
// RANK1:           func.call @comm.send.4xf32(%g1,
// RANK1-NEXT:      func.return
// PLAN:        communication plan of rank 1:
// PLAN-NEXT:     flow.recv tensor<4xf32> (16 bytes) peer=0 : i64, tag=1 : i64
// PLAN-NEXT:     flow.send tensor<4xf32> (16 bytes) peer=0 : i64, tag=2 : i64
// PLAN-NEXT:     flow.recv tensor<4xf32> (16 bytes) peer=0 : i64, tag=3 : i64
// PLAN-NEXT:     flow.send tensor<4xf32> (16 bytes) peer=0 : i64, tag=4 : i64
// NATIVE-LABEL: func.func @stages()
// NATIVE:         "flow.collective.send_recv"
// NORANK: 'func.func' op @stages uses several placements ({{.*}}): each rank runs a different program, give the pass option rank=R
!a = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [0]>, #flow.sbp<[B]>>>
!b = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [1]>, #flow.sbp<[B]>>>
module attributes {pipeline_stages = [#flow.placement<"cpu", [0]>, #flow.placement<"cpu", [1]>]} {
func.func @stages(%x0: !a, %x1: !a) -> !a {
  %a0 = flow.exp %x0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a
  %b0 = flow.boxing %a0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a -> !b
  %g0 = flow.neg %b0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b
  %h0 = flow.boxing %g0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b -> !a
  %a1 = flow.exp %x1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a
  %b1 = flow.boxing %a1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a -> !b
  %g1 = flow.neg %b1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b
  %h1 = flow.boxing %g1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b -> !a
  %s = flow.add %h0, %h1 {micro_batch = 0 : i64, pipeline_phase = "update"} : !a
  func.return %s : !a
}
}
