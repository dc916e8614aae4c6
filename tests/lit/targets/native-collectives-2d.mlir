// A 2-D placement on cuda / rocm: one channel per mesh axis, split from the world by the
// rank's group along that axis (axis 0: groups [0, 2], [1, 3]; axis 1: groups [0, 1], [2, 3]),
// and each collective on the channel of its axis. Compiled for sm_80 and gfx942, not run.

// RUN: flow-compile %s --target cuda --rank 2 --emit linalg | FileCheck %s --check-prefixes=IREE,RANK2
// RUN: flow-compile %s --target rocm --rank 1 --emit linalg | FileCheck %s --check-prefixes=IREE,RANK1
// RUN: flow-compile %s --target cuda --rank 2 -o %t.cuda.vmfb
// RUN: iree-dump-module %t.cuda.vmfb | FileCheck %s --check-prefix=CUDA
// RUN: flow-compile %s --target rocm --rank 1 -o %t.rocm.vmfb
// RUN: iree-dump-module %t.rocm.vmfb | FileCheck %s --check-prefix=ROCM

// (S(0), S(1)) -> (B, B): all_gather along axis 1 (dim 1, moved to the front), then along
// axis 0; (P, P) -> (B, S(0)): all_reduce along axis 0, reduce_scatter along axis 1.
// IREE-LABEL:  "func.func"() <{sym_name = "main"
// IREE-NEXT:   ^bb0(%[[X:.*]]: tensor<4x3xf32>, %[[Y:.*]]: tensor<8x6xf32>):
// IREE-NEXT:     %[[AXIS1:.*]] = "util.global.load"() <{global = @__flow_channel_2}> : () -> !flow.channel
// IREE-NEXT:     %[[AXIS0:.*]] = "util.global.load"() <{global = @__flow_channel_1}> : () -> !flow.channel
// IREE-NEXT:     tensor.empty
// IREE-NEXT:     "flow.collective.all_gather"(%{{.*}}, %[[X]], %[[AXIS0]]) {{.*}} : (tensor<8x3xf32>, tensor<4x3xf32>, !flow.channel) -> tensor<8x3xf32>
// IREE:          "flow.collective.all_gather"(%{{.*}}, %{{.*}}, %[[AXIS1]]) {{.*}} : (tensor<6x8xf32>, tensor<3x8xf32>, !flow.channel) -> tensor<6x8xf32>
// IREE:          %[[SUM:.*]] = "flow.collective.all_reduce"(%{{.*}}, %[[Y]], %[[AXIS0]]) <{reduction_op = 1 : i32
// IREE:          "flow.collective.reduce_scatter"(%{{.*}}, %[[SUM]], %[[AXIS1]]) <{reduction_op = 1 : i32, {{.*}} : (tensor<4x6xf32>, tensor<8x6xf32>, !flow.channel) -> tensor<4x6xf32>
// IREE:          "util.initializer"()
// IREE-NEXT:       %[[WORLD:.*]] = "flow.channel.default"()
// IREE-NEXT:       "util.global.store"(%[[WORLD]]) <{global = @__flow_channel_0}>
// RANK2-NEXT:      %[[C0:.*]] = "arith.constant"() <{value = 0 : index}>
// RANK2-NEXT:      %[[K0:.*]] = "arith.constant"() <{value = 1 : index}>
// RANK1-NEXT:      %[[C0:.*]] = "arith.constant"() <{value = 1 : index}>
// RANK1-NEXT:      %[[K0:.*]] = "arith.constant"() <{value = 0 : index}>
// IREE-NEXT:       %[[S0:.*]] = "flow.channel.split"(%[[WORLD]], %[[C0]], %[[K0]])
// IREE-NEXT:       "util.global.store"(%[[S0]]) <{global = @__flow_channel_1}>
// RANK2-NEXT:      %[[C1:.*]] = "arith.constant"() <{value = 1 : index}>
// RANK2-NEXT:      %[[K1:.*]] = "arith.constant"() <{value = 0 : index}>
// RANK1-NEXT:      %[[C1:.*]] = "arith.constant"() <{value = 0 : index}>
// RANK1-NEXT:      %[[K1:.*]] = "arith.constant"() <{value = 1 : index}>
// IREE-NEXT:       %[[S1:.*]] = "flow.channel.split"(%[[WORLD]], %[[C1]], %[[K1]])
// IREE-NEXT:       "util.global.store"(%[[S1]]) <{global = @__flow_channel_2}>

// CUDA: `cuda-nvptx-fb`
// ROCM: `rocm-hsaco-fb`

!m = #flow.placement<"cuda", [[0, 1], [2, 3]]>
!xs = tensor<8x6xf32, #flow.dist<!m, #flow.sbp<[S(0), S(1)]>>>
!xb = tensor<8x6xf32, #flow.dist<!m, #flow.sbp<[B, B]>>>
!yp = tensor<8x6xf32, #flow.dist<!m, #flow.sbp<[P, P]>>>
!ys = tensor<8x6xf32, #flow.dist<!m, #flow.sbp<[B, S(0)]>>>
func.func @main(%x: !xs, %y: !yp) -> (!xb, !ys) {
  %0 = flow.boxing %x : !xs -> !xb
  %1 = flow.boxing %y : !yp -> !ys
  func.return %0, %1 : !xb, !ys
}
