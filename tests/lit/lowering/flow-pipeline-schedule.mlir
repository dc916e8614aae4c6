// flow-pipeline-schedule: after flow-partition, order a pipeline stage's program by its
// schedule. Two stages, three micro-batches: stage 0 runs 1F1B as F0 F1 B0 F2 B1 B2 (one
// warm-up forward), the last stage F0 B0 F1 B1 F2 B2; GPipe runs every forward first. Sends
// follow what they send at once, receives wait until their value is needed, a fence after
// each slot holds what later slots need (so IREE computes it there), the update comes last,
// and the tags are gone.
// RUN: flow-opt %s --split-input-file -p 'flow-infer-sbp,flow-partition{rank=0},flow-pipeline-schedule{rank=0}' | FileCheck %s --check-prefix=S0
// RUN: flow-opt %s --split-input-file -p 'flow-infer-sbp,flow-partition{rank=1},flow-pipeline-schedule{rank=1}' | FileCheck %s --check-prefix=S1
// RUN: flow-opt %s --split-input-file -p 'flow-infer-sbp,flow-partition{rank=0},flow-pipeline-schedule{rank=0 schedule=gpipe}' | FileCheck %s --check-prefix=GPIPE

// S0-LABEL: builtin.module {
// S0-LABEL: func.func @step
// S0-NEXT:    %[[A0:.*]] = flow.exp %x0
// S0-NEXT:    flow.send %[[A0]], peer = 1, tag = 1
// S0-NEXT:    %[[A1:.*]] = flow.exp %x1
// S0-NEXT:    flow.send %[[A1]], peer = 1, tag = 3
// S0-NEXT:    %[[H0:.*]] = flow.recv peer = 1, tag = 2
// S0-NEXT:    %[[D0:.*]] = flow.mul %[[H0]], %[[A0]]
// S0-NEXT:    flow.fence %[[D0]] : tensor<4xf32>
// S0-NEXT:    %[[A2:.*]] = flow.exp %x2
// S0-NEXT:    flow.send %[[A2]], peer = 1, tag = 5
// S0-NEXT:    %[[H1:.*]] = flow.recv peer = 1, tag = 4
// S0-NEXT:    %[[D1:.*]] = flow.mul %[[H1]], %[[A1]]
// S0-NEXT:    flow.fence %[[D1]] : tensor<4xf32>
// S0-NEXT:    %[[H2:.*]] = flow.recv peer = 1, tag = 6
// S0-NEXT:    %[[D2:.*]] = flow.mul %[[H2]], %[[A2]]
// S0-NEXT:    flow.fence %[[D2]] : tensor<4xf32>
// S0-NEXT:    flow.add
// S0-NEXT:    flow.add
// S0-NEXT:    func.return
// S0-NOT:     micro_batch
// S0-NOT:     pipeline_

// S1-LABEL: func.func @step
// S1-NEXT:    %[[B0:.*]] = flow.recv peer = 0, tag = 1
// S1-NEXT:    %[[C0:.*]] = flow.tanh %[[B0]]
// S1-NEXT:    flow.fence %[[C0]]
// S1-NEXT:    %[[G0:.*]] = flow.neg %[[C0]]
// S1-NEXT:    flow.send %[[G0]], peer = 0, tag = 2
// S1-NEXT:    %[[B1:.*]] = flow.recv peer = 0, tag = 3
// S1-NEXT:    %[[C1:.*]] = flow.tanh %[[B1]]
// S1-NEXT:    flow.fence %[[C1]]
// S1-NEXT:    %[[G1:.*]] = flow.neg %[[C1]]
// S1-NEXT:    flow.send %[[G1]], peer = 0, tag = 4
// S1-NEXT:    %[[B2:.*]] = flow.recv peer = 0, tag = 5
// S1:         flow.send %{{.*}}, peer = 0, tag = 6
// S1-NEXT:    func.return

// GPIPE-LABEL: func.func @step
// GPIPE-NEXT:    flow.exp %x0
// GPIPE-NEXT:    flow.send %{{.*}}, peer = 1, tag = 1
// GPIPE-NEXT:    flow.exp %x1
// GPIPE-NEXT:    flow.send %{{.*}}, peer = 1, tag = 3
// GPIPE-NEXT:    flow.exp %x2
// GPIPE-NEXT:    flow.send %{{.*}}, peer = 1, tag = 5
// GPIPE-NEXT:    flow.recv peer = 1, tag = 2
// GPIPE-NEXT:    flow.mul
// GPIPE-NEXT:    flow.fence
// GPIPE-NEXT:    flow.recv peer = 1, tag = 4
// GPIPE-NEXT:    flow.mul
// GPIPE-NEXT:    flow.fence
// GPIPE-NEXT:    flow.recv peer = 1, tag = 6
// GPIPE-NEXT:    flow.mul
!a = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [0]>, #flow.sbp<[B]>>>
!b = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [1]>, #flow.sbp<[B]>>>
module attributes {pipeline_stages = [#flow.placement<"cpu", [0]>, #flow.placement<"cpu", [1]>]} {
func.func @step(%x0: !a, %x1: !a, %x2: !a) -> !a {
  %a0 = flow.exp %x0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a
  %b0 = flow.boxing %a0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a -> !b
  %c0 = flow.tanh %b0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !b
  %g0 = flow.neg %c0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b
  %h0 = flow.boxing %g0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b -> !a
  %d0 = flow.mul %h0, %a0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !a
  %a1 = flow.exp %x1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a
  %b1 = flow.boxing %a1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a -> !b
  %c1 = flow.tanh %b1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !b
  %g1 = flow.neg %c1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b
  %h1 = flow.boxing %g1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b -> !a
  %d1 = flow.mul %h1, %a1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !a
  %a2 = flow.exp %x2 {micro_batch = 2 : i64, pipeline_phase = "forward"} : !a
  %b2 = flow.boxing %a2 {micro_batch = 2 : i64, pipeline_phase = "forward"} : !a -> !b
  %c2 = flow.tanh %b2 {micro_batch = 2 : i64, pipeline_phase = "forward"} : !b
  %g2 = flow.neg %c2 {micro_batch = 2 : i64, pipeline_phase = "backward"} : !b
  %h2 = flow.boxing %g2 {micro_batch = 2 : i64, pipeline_phase = "backward"} : !b -> !a
  %d2 = flow.mul %h2, %a2 {micro_batch = 2 : i64, pipeline_phase = "backward"} : !a
  %s0 = flow.add %d0, %d1 {micro_batch = 0 : i64, pipeline_phase = "update"} : !a
  %s1 = flow.add %s0, %d2 {micro_batch = 0 : i64, pipeline_phase = "update"} : !a
  func.return %s1 : !a
}
}

// -----

// Without a stage list the pass only removes the tags.
// S0-LABEL: func.func @untagged
// S0-NEXT:    flow.exp %x : tensor<4xf32>
// S0-NEXT:    func.return
func.func @untagged(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.exp %x {micro_batch = 0 : i64, pipeline_phase = "forward"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
