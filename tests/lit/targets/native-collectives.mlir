// flow-compile --rank R compiles rank R's program of a global program. On cuda and rocm its
// collectives stay in IREE as IREE's own flow.collective.* ops on channels (NCCL / RCCL):
// S(0)->B all_gather, P->B all_reduce, P->S(0) reduce_scatter, S(0)->S(1) all_to_all, and a
// placement change as send_recv on the world channel; IREE compiles them for sm_80 and
// gfx942. On cpu they are calls of the `comm` runtime module (MPI). Running the GPU modules
// needs GPUs (and IREE's NCCL / RCCL channel setup), so here they are compiled only.

// RUN: flow-compile %s --target cuda --rank 1 --emit linalg | FileCheck %s --check-prefixes=IREE,RANK1
// RUN: flow-compile %s --target rocm --rank 0 --emit linalg | FileCheck %s --check-prefixes=IREE,RANK0
// RUN: flow-compile %s --target cuda --rank 1 --emit linalg | FileCheck %s --check-prefix=NOCOMM
// RUN: flow-compile %s --target cuda --rank 1 --emit linalg -o %t.rank1.mlir
// RUN: iree-opt %t.rank1.mlir | FileCheck %s --check-prefix=PARSED
// RUN: flow-compile %s --target cuda --rank 0 -o %t.cuda0.vmfb
// RUN: iree-dump-module %t.cuda0.vmfb | FileCheck %s --check-prefixes=MODULE,CUDA
// RUN: flow-compile %s --target cuda --rank 1 -o %t.cuda1.vmfb
// RUN: iree-dump-module %t.cuda1.vmfb | FileCheck %s --check-prefixes=MODULE,CUDA
// RUN: flow-compile %s --target rocm --rank 0 -o %t.rocm0.vmfb
// RUN: iree-dump-module %t.rocm0.vmfb | FileCheck %s --check-prefixes=MODULE,ROCM
// RUN: flow-compile %s --target rocm --rank 1 -o %t.rocm1.vmfb
// RUN: iree-dump-module %t.rocm1.vmfb | FileCheck %s --check-prefixes=MODULE,ROCM
// RUN: flow-compile %s --target cpu --rank 1 --emit linalg | FileCheck %s --check-prefix=CPU

// IREE-LABEL:  "func.func"() <{sym_name = "main"
// IREE:          %[[WORLD:.*]] = "util.global.load"() <{global = @__flow_channel_0}> : () -> !flow.channel
// IREE-NEXT:     %[[AXIS:.*]] = "util.global.load"() <{global = @__flow_channel_1}> : () -> !flow.channel
// IREE:          "flow.collective.all_gather"(%{{.*}}, %{{.*}}, %[[AXIS]]) <{element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<6x4xf32>, tensor<3x4xf32>, !flow.channel) -> tensor<6x4xf32>
// IREE:          "flow.collective.all_reduce"(%{{.*}}, %{{.*}}, %[[AXIS]]) <{reduction_op = 1 : i32, element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<6x4xf32>, tensor<6x4xf32>, !flow.channel) -> tensor<6x4xf32>
// IREE:          "flow.collective.reduce_scatter"(%{{.*}}, %{{.*}}, %[[AXIS]]) <{reduction_op = 1 : i32, element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<3x4xf32>, tensor<6x4xf32>, !flow.channel) -> tensor<3x4xf32>
// IREE:          "flow.collective.all_to_all"(%{{.*}}, %{{.*}}, %[[AXIS]]) <{element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<4x3xf32>, tensor<4x3xf32>, !flow.channel) -> tensor<4x3xf32>
// Rank 1 sends its rows to rank 0 (the new placement's first member) and receives rank 0's.
// RANK1:         %[[TO:.*]] = "arith.constant"() <{value = 0 : index}> : () -> index
// RANK1-NEXT:    %[[NONE:.*]] = "arith.constant"() <{value = -1 : index}> : () -> index
// RANK1-NEXT:    "flow.collective.send_recv"(%{{.*}}, %{{.*}}, %[[WORLD]], %[[TO]], %[[NONE]])
// RANK1:         %[[NONE2:.*]] = "arith.constant"() <{value = -1 : index}> : () -> index
// RANK1-NEXT:    %[[FROM:.*]] = "arith.constant"() <{value = 0 : index}> : () -> index
// RANK1-NEXT:    "flow.collective.send_recv"(%{{.*}}, %{{.*}}, %[[WORLD]], %[[NONE2]], %[[FROM]])
// RANK0:         "flow.collective.send_recv"
// RANK0:         "flow.collective.send_recv"
// IREE:          "util.optimization_barrier"
// IREE-NEXT:     "func.return"
// Channels: the world, then one split per (placement, mesh axis) of the global program
// ([0, 1] and [1, 0]); color = the group, key = the rank's position in it.
// IREE:          "util.global"() <{sym_name = "__flow_channel_0", sym_visibility = "public", type = !flow.channel}>
// IREE:          "util.initializer"()
// IREE-NEXT:       %[[DEFAULT:.*]] = "flow.channel.default"() : () -> !flow.channel
// IREE-NEXT:       "util.global.store"(%[[DEFAULT]]) <{global = @__flow_channel_0}>
// IREE-NEXT:       "arith.constant"() <{value = 0 : index}>
// RANK0-NEXT:      "arith.constant"() <{value = 0 : index}>
// RANK1-NEXT:      "arith.constant"() <{value = 1 : index}>
// IREE-NEXT:       "flow.channel.split"
// IREE-NEXT:       "util.global.store"(%{{.*}}) <{global = @__flow_channel_1}>
// IREE-NEXT:       "arith.constant"() <{value = 0 : index}>
// RANK0-NEXT:      "arith.constant"() <{value = 1 : index}>
// RANK1-NEXT:      "arith.constant"() <{value = 0 : index}>
// IREE-NEXT:       "flow.channel.split"
// IREE-NEXT:       "util.global.store"(%{{.*}}) <{global = @__flow_channel_2}>
// IREE-NEXT:       "util.return"

// NOCOMM-NOT: comm.

// PARSED:      func.func @main
// PARSED:        flow.collective.all_gather f32, {{.*}} : (tensor<6x4xf32>, tensor<3x4xf32>, !flow.channel) -> {{.*}} as tensor<6x4xf32>
// PARSED:        flow.collective.all_reduce sum, f32,
// PARSED:        flow.collective.reduce_scatter sum, f32,
// PARSED:        flow.collective.all_to_all f32,
// PARSED:        flow.collective.send_recv f32,
// PARSED:      util.global public @__flow_channel_1 : !flow.channel
// PARSED:      util.initializer {
// PARSED:        flow.channel.default : !flow.channel
// PARSED:        flow.channel.split

// MODULE:      Exported Functions:
// MODULE:        main(
// MODULE:        __init(
// MODULE:      `hal.executable.format`
// CUDA-NEXT:   `cuda-nvptx-fb`
// ROCM-NEXT:   `rocm-hsaco-fb`

// CPU-NOT:     flow.collective
// CPU:         "func.call"(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) <{callee = @comm.all_gather.3x4xf32.6x4xf32}>
// CPU:         "func.call"(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) <{callee = @comm.all_reduce_sum.6x4xf32}>

!pl = #flow.placement<"cuda", [0, 1]>
!moved = #flow.placement<"cuda", [1, 0]>
!xs = tensor<6x4xf32, #flow.dist<!pl, #flow.sbp<[S(0)]>>>
!xb = tensor<6x4xf32, #flow.dist<!pl, #flow.sbp<[B]>>>
!xt = tensor<6x4xf32, #flow.dist<!pl, #flow.sbp<[S(1)]>>>
!xm = tensor<6x4xf32, #flow.dist<!moved, #flow.sbp<[S(0)]>>>
!yp = tensor<6x4xf32, #flow.dist<!pl, #flow.sbp<[P]>>>
func.func @main(%x: !xs, %y: !yp) -> (!xb, !xb, !xs, !xt, !xm) {
  %0 = flow.boxing %x : !xs -> !xb
  %1 = flow.boxing %y : !yp -> !xb
  %2 = flow.boxing %y : !yp -> !xs
  %3 = flow.boxing %x : !xs -> !xt
  %4 = flow.boxing %x : !xs -> !xm
  func.return %0, %1, %2, %3, %4 : !xb, !xb, !xs, !xt, !xm
}
