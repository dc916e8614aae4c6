// flow-opt --plan-svg draws the parallel plan of the program the passes leave: modules (the
// names of the op locations), each value's SBP, each boxing with its collective and bytes,
// pipeline stages with the schedule's slots per rank. SBP inference runs first where the
// program has not been through it (the second chunk).
// RUN: flow-opt %s --split-input-file -p flow-infer-sbp --plan-svg %t.svg \
// RUN:   --plan-html %t.html -o /dev/null
// RUN: FileCheck %s --check-prefix=TP < %t.svg
// RUN: FileCheck %s --check-prefix=HTML < %t.html
// RUN: FileCheck %s --check-prefix=PP < %t-1.svg

// TP: <svg xmlns="http://www.w3.org/2000/svg"
// TP: flow-opt-plan.mlir: parallel plan
// TP: placements cpu[0, 1]
// TP: >column<
// TP: 8x4xf32  [S(1)]
// TP: >row<
// TP: 8x6xf32 [P] -&gt; [B]: all_reduce 192 B<
// TP: Boxings: 1 (1 distinct), 192 B sent and received per step
// TP-NOT: schedule
// HTML: <!DOCTYPE html>
// HTML: <details><summary>column: 1 ops
// HTML: <td>matmul</td><td>8x6xf32</td><td>cpu[0, 1]</td><td>[P]</td>
// HTML-SAME: <td>[S(1)], [S(0)] -&gt; [P]</td>
// HTML: <td>boxing</td><td>8x6xf32</td><td>cpu[0, 1] -&gt; cpu[0, 1]</td>
// HTML-SAME: <td>[P] -&gt; [B]</td><td>all_reduce 192 B</td>
// HTML: <td>all_reduce</td><td>tensor&lt;8x6xf32&gt; mesh_axis=0 : i64, kind={{[^<]*}}sum{{[^<]*}}</td>
// HTML-SAME: <td>192</td><td>0,1</td>
!place = #flow.placement<"cpu", [0, 1]>
#column = loc("column"("m.py":3:1))
#row = loc("row"("m.py":4:1))
func.func @tp(%a: tensor<8x4xf32, #flow.dist<!place, #flow.sbp<[S(1)]>>>,
              %b: tensor<4x6xf32, #flow.dist<!place, #flow.sbp<[S(0)]>>>)
    -> tensor<8x6xf32, #flow.dist<!place, #flow.sbp<[B]>>> {
  %c = flow.exp %a : tensor<8x4xf32, #flow.dist<!place, #flow.sbp<[S(1)]>>> loc(#column)
  %m = flow.matmul %c, %b : tensor<8x4xf32, #flow.dist<!place, #flow.sbp<[S(1)]>>>,
      tensor<4x6xf32, #flow.dist<!place, #flow.sbp<[S(0)]>>>
      -> tensor<8x6xf32, #flow.dist<!place, #flow.sbp<[B]>>> loc(#row)
  func.return %m : tensor<8x6xf32, #flow.dist<!place, #flow.sbp<[B]>>>
}

// -----

// PP: stage 0 · cpu[0]
// PP: >first<
// PP: stage 1 · cpu[1]
// PP: >second<
// PP: 2x send/recv 16 B
// PP: 1F1B schedule: 2 stages x 2 micro-batches
// PP: rank 0 (stage 0)
// PP: >F0<
// PP: >F1<
// PP: >B0<
// PP: >B1<
// PP: >U<
// PP: rank 1 (stage 1)
!a = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [0]>, #flow.sbp<[B]>>>
!b = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [1]>, #flow.sbp<[B]>>>
#first = loc("first"("m.py":1:1))
#second = loc("second"("m.py":2:1))
#optimizer = loc("optimizer"("m.py":5:1))
module attributes {pipeline_stages = [#flow.placement<"cpu", [0]>, #flow.placement<"cpu", [1]>]} {
func.func @step(%x0: !a, %x1: !a) -> !a {
  %a0 = flow.exp %x0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a loc(#first)
  %b0 = flow.boxing %a0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !a -> !b loc(#second)
  %c0 = flow.tanh %b0 {micro_batch = 0 : i64, pipeline_phase = "forward"} : !b loc(#second)
  %g0 = flow.neg %c0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b loc(#second)
  %h0 = flow.boxing %g0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !b -> !a loc(#first)
  %d0 = flow.mul %h0, %a0 {micro_batch = 0 : i64, pipeline_phase = "backward"} : !a loc(#first)
  %a1 = flow.exp %x1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a loc(#first)
  %b1 = flow.boxing %a1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !a -> !b loc(#second)
  %c1 = flow.tanh %b1 {micro_batch = 1 : i64, pipeline_phase = "forward"} : !b loc(#second)
  %g1 = flow.neg %c1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b loc(#second)
  %h1 = flow.boxing %g1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !b -> !a loc(#first)
  %d1 = flow.mul %h1, %a1 {micro_batch = 1 : i64, pipeline_phase = "backward"} : !a loc(#first)
  %s0 = flow.add %d0, %d1 {micro_batch = 0 : i64, pipeline_phase = "update"} : !a loc(#optimizer)
  func.return %s0 : !a
}
}
