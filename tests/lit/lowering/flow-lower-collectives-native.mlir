// flow-lower-collectives-native: rank R's collectives become IREE's own `flow.collective.*` ops
// (generic form: IREE's Flow dialect, for cuda / rocm) on channels held in public util.globals:
// channel 0 the world, channel i + 1 a split of it per (placement, mesh axis), made once by an
// initializer (color = the group's index, key = the rank's position in it, -1 outside).
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-lower-collectives-native{rank=0}' | FileCheck %s --check-prefix=RANK0
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-lower-collectives-native{rank=1}' | FileCheck %s --check-prefix=RANK1
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-lower-collectives-native' | FileCheck %s --check-prefix=NORANK

// RANK0-LABEL: func.func @one_d(
// RANK0-SAME:      %[[X:.*]]: tensor<8x6xf32>, %[[Y:.*]]: tensor<4x6xf32>)
// RANK0-NEXT:      %[[CH:.*]] = "util.global.load"() <{global = @__flow_channel_1}> : () -> !flow.channel
// RANK0-NEXT:      %[[E0:.*]] = tensor.empty() : tensor<8x6xf32>
// RANK0-NEXT:      %[[R:.*]] = "flow.collective.all_reduce"(%[[E0]], %[[X]], %[[CH]]) <{reduction_op = 1 : i32, element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<8x6xf32>, tensor<8x6xf32>, !flow.channel) -> tensor<8x6xf32>
// RANK0-NEXT:      %[[E1:.*]] = tensor.empty() : tensor<8x6xf32>
// RANK0-NEXT:      %[[G:.*]] = "flow.collective.all_gather"(%[[E1]], %[[Y]], %[[CH]]) <{element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<8x6xf32>, tensor<4x6xf32>, !flow.channel) -> tensor<8x6xf32>
// RANK0-NEXT:      %[[T:.*]] = flow.transpose %[[X]], permutation = [1, 0] : tensor<8x6xf32> -> tensor<6x8xf32>
// RANK0-NEXT:      %[[E2:.*]] = tensor.empty() : tensor<3x8xf32>
// RANK0-NEXT:      %[[S:.*]] = "flow.collective.reduce_scatter"(%[[E2]], %[[T]], %[[CH]]) <{reduction_op = 4 : i32, element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<3x8xf32>, tensor<6x8xf32>, !flow.channel) -> tensor<3x8xf32>
// RANK0-NEXT:      %[[U:.*]] = flow.transpose %[[S]], permutation = [1, 0] : tensor<3x8xf32> -> tensor<8x3xf32>
// RANK0-NEXT:      %[[E3:.*]] = tensor.empty() : tensor<8x6xf32>
// RANK0-NEXT:      %[[A:.*]] = "flow.collective.all_to_all"(%[[E3]], %[[X]], %[[CH]]) <{element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<8x6xf32>, tensor<8x6xf32>, !flow.channel) -> tensor<8x6xf32>
// RANK0-NEXT:      flow.reshape %[[A]] : tensor<8x6xf32> -> tensor<2x4x6xf32>
// RANK0-NEXT:      flow.transpose {{.*}} permutation = [1, 0, 2]
// RANK0-NEXT:      %[[A2:.*]] = flow.reshape {{.*}} : tensor<4x2x6xf32> -> tensor<4x12xf32>
// RANK0-NEXT:      %[[L:.*]] = flow.slice %[[X]], start = [0, 0], strides = [1, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
// RANK0-NEXT:      func.return %[[R]], %[[G]], %[[U]], %[[A2]], %[[L]] :
// RANK0:         "util.global"() <{sym_name = "__flow_channel_0", sym_visibility = "public", type = !flow.channel}> : () -> ()
// RANK0-NEXT:    "util.global"() <{sym_name = "__flow_channel_1", sym_visibility = "public", type = !flow.channel}> : () -> ()
// RANK0-NEXT:    "util.initializer"() <{function_type = () -> ()}> ({
// RANK0-NEXT:      %[[WORLD:.*]] = "flow.channel.default"() : () -> !flow.channel
// RANK0-NEXT:      "util.global.store"(%[[WORLD]]) <{global = @__flow_channel_0}> : (!flow.channel) -> ()
// RANK0-NEXT:      %[[COLOR:.*]] = arith.constant 0 : index
// RANK0-NEXT:      %[[KEY:.*]] = arith.constant 0 : index
// RANK0-NEXT:      %[[SPLIT:.*]] = "flow.channel.split"(%[[WORLD]], %[[COLOR]], %[[KEY]]) : (!flow.channel, index, index) -> !flow.channel
// RANK0-NEXT:      "util.global.store"(%[[SPLIT]]) <{global = @__flow_channel_1}> : (!flow.channel) -> ()
// RANK0-NEXT:      "util.return"() : () -> ()
// RANK1-LABEL: func.func @one_d
// RANK1:           flow.slice %{{.*}}, start = [4, 0], strides = [1, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
// RANK1:           %[[COLOR:.*]] = arith.constant 0 : index
// RANK1-NEXT:      %[[KEY:.*]] = arith.constant 1 : index
// RANK1-NEXT:      "flow.channel.split"(%{{.*}}, %[[COLOR]], %[[KEY]])
// NORANK: 'builtin.module' op flow-lower-collectives-native needs the option rank=R
!p = #flow.placement<"cpu", [0, 1]>
func.func @one_d(%x: tensor<8x6xf32>, %y: tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x3xf32>, tensor<4x12xf32>, tensor<4x6xf32>) {
  %0 = flow.all_reduce sum %x on !p axis = 0 : tensor<8x6xf32>
  %1 = flow.all_gather %y on !p axis = 0, dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  %2 = flow.reduce_scatter max %x on !p axis = 0, dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  %3 = flow.all_to_all %x on !p axis = 0, split_dim = 0, concat_dim = 1 : tensor<8x6xf32> -> tensor<4x12xf32>
  %4 = flow.local_slice %x on !p axis = 0, dim = 0 : tensor<8x6xf32> -> tensor<4x6xf32>
  func.return %0, %1, %2, %3, %4 : tensor<8x6xf32>, tensor<8x6xf32>, tensor<8x3xf32>, tensor<4x12xf32>, tensor<4x6xf32>
}

// -----

// Uneven pieces (5 rows over 2 ranks: 3 and 2): IREE's collectives take equal pieces, so each
// piece is padded to 3 rows and cut back afterwards. Rank 1's shards.
// RANK1-LABEL: func.func @uneven(
// RANK1-SAME:      %[[X:.*]]: tensor<5x6xf32>, %[[Y:.*]]: tensor<2x6xf32>, %[[Z:.*]]: tensor<5x4xf32>
// RANK1:           %[[YP:.*]] = flow.pad %[[Y]], low = [0, 0], high = [1, 0], value = (0.000000e+00 : f32) : tensor<2x6xf32> -> tensor<3x6xf32>
// RANK1-NEXT:      %[[E:.*]] = tensor.empty() : tensor<6x6xf32>
// RANK1-NEXT:      %[[G:.*]] = "flow.collective.all_gather"(%[[E]], %[[YP]], %{{.*}})
// RANK1-NEXT:      %[[G0:.*]] = flow.slice %[[G]], start = [0, 0], strides = [1, 1] : tensor<6x6xf32> -> tensor<3x6xf32>
// RANK1-NEXT:      %[[G1:.*]] = flow.slice %[[G]], start = [3, 0], strides = [1, 1] : tensor<6x6xf32> -> tensor<2x6xf32>
// RANK1-NEXT:      %[[GATHERED:.*]] = flow.concat dim = 0, %[[G0]], %[[G1]] : tensor<3x6xf32>, tensor<2x6xf32> -> tensor<5x6xf32>
// RANK1-NEXT:      %[[X0:.*]] = flow.slice %[[X]], start = [0, 0], strides = [1, 1] : tensor<5x6xf32> -> tensor<3x6xf32>
// RANK1-NEXT:      %[[X1:.*]] = flow.slice %[[X]], start = [3, 0], strides = [1, 1] : tensor<5x6xf32> -> tensor<2x6xf32>
// RANK1-NEXT:      %[[X1P:.*]] = flow.pad %[[X1]], low = [0, 0], high = [1, 0]
// RANK1-NEXT:      %[[XP:.*]] = flow.concat dim = 0, %[[X0]], %[[X1P]] : tensor<3x6xf32>, tensor<3x6xf32> -> tensor<6x6xf32>
// RANK1-NEXT:      %[[E2:.*]] = tensor.empty() : tensor<3x6xf32>
// RANK1-NEXT:      %[[RS:.*]] = "flow.collective.reduce_scatter"(%[[E2]], %[[XP]], %{{.*}}) <{reduction_op = 1 : i32
// RANK1-NEXT:      %[[MINE:.*]] = flow.slice %[[RS]], start = [0, 0], strides = [1, 1] : tensor<3x6xf32> -> tensor<2x6xf32>
// RANK1:           %[[A:.*]] = "flow.collective.all_to_all"({{.*}} : (tensor<6x4xf32>, tensor<6x4xf32>, !flow.channel) -> tensor<6x4xf32>
// RANK1-NEXT:      flow.slice %[[A]], start = [0, 0], strides = [1, 1] : tensor<6x4xf32> -> tensor<2x4xf32>
// RANK1-NEXT:      flow.slice %[[A]], start = [3, 0], strides = [1, 1] : tensor<6x4xf32> -> tensor<2x4xf32>
// RANK1-NEXT:      flow.concat dim = 0
// RANK1:           func.return %[[GATHERED]], %[[MINE]], %{{.*}} :
!p = #flow.placement<"cpu", [0, 1]>
func.func @uneven(%x: tensor<5x6xf32>, %y: tensor<2x6xf32>, %z: tensor<5x4xf32>) -> (tensor<5x6xf32>, tensor<2x6xf32>, tensor<2x8xf32>) {
  %0 = flow.all_gather %y on !p axis = 0, dim = 0 : tensor<2x6xf32> -> tensor<5x6xf32>
  %1 = flow.reduce_scatter sum %x on !p axis = 0, dim = 0 : tensor<5x6xf32> -> tensor<2x6xf32>
  %2 = flow.all_to_all %z on !p axis = 0, split_dim = 0, concat_dim = 1 : tensor<5x4xf32> -> tensor<2x8xf32>
  func.return %0, %1, %2 : tensor<5x6xf32>, tensor<2x6xf32>, tensor<2x8xf32>
}

// -----

// A 2-D mesh: one channel per mesh axis, split by the rank's group along that axis
// (axis 1: groups [0, 1], [2, 3]; axis 0: groups [0, 2], [1, 3]); i32 travels as si32 (4).
// RANK1-LABEL: func.func @two_d
// RANK1-NEXT:      %[[CH2:.*]] = "util.global.load"() <{global = @__flow_channel_2}>
// RANK1-NEXT:      %[[CH1:.*]] = "util.global.load"() <{global = @__flow_channel_1}>
// RANK1:           "flow.collective.all_reduce"(%{{.*}}, %{{.*}}, %[[CH1]]) <{reduction_op = 3 : i32, element_type = 4 : i32
// RANK1:           "flow.collective.all_gather"(%{{.*}}, %{{.*}}, %[[CH2]]) <{element_type = 4 : i32
// RANK1:           %[[W:.*]] = "flow.channel.default"()
// RANK1:           %[[C1:.*]] = arith.constant 0 : index
// RANK1-NEXT:      %[[K1:.*]] = arith.constant 1 : index
// RANK1-NEXT:      %[[AXIS1:.*]] = "flow.channel.split"(%[[W]], %[[C1]], %[[K1]])
// RANK1-NEXT:      "util.global.store"(%[[AXIS1]]) <{global = @__flow_channel_1}>
// RANK1-NEXT:      %[[C0:.*]] = arith.constant 1 : index
// RANK1-NEXT:      %[[K0:.*]] = arith.constant 0 : index
// RANK1-NEXT:      %[[AXIS0:.*]] = "flow.channel.split"(%[[W]], %[[C0]], %[[K0]])
// RANK1-NEXT:      "util.global.store"(%[[AXIS0]]) <{global = @__flow_channel_2}>
!m = #flow.placement<"cpu", [[0, 1], [2, 3]]>
func.func @two_d(%x: tensor<4x6xi32>) -> (tensor<4x6xi32>, tensor<8x6xi32>) {
  %0 = flow.all_reduce min %x on !m axis = 1 : tensor<4x6xi32>
  %1 = flow.all_gather %x on !m axis = 0, dim = 0 : tensor<4x6xi32> -> tensor<8x6xi32>
  func.return %0, %1 : tensor<4x6xi32>, tensor<8x6xi32>
}

// -----

// Point to point on the world channel (peer = world rank, the other side -1). The transfers of
// each (peer, direction) are chained: a source passes through a barrier with the previous one
// of its chain (and the values fenced since the last transfer), and the results pass through
// one with every chain's last, so IREE keeps their order and keeps the sends. A send and a
// receive are not chained: IREE may issue them together.
// RANK1-LABEL: func.func @p2p(
// RANK1-SAME:      %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<2x4xf32>
// RANK1-NEXT:      %[[WORLD:.*]] = "util.global.load"() <{global = @__flow_channel_0}>
// RANK1-NEXT:      %[[SRC:.*]] = tensor.empty() : tensor<4xf32>
// RANK1-NEXT:      %[[DST:.*]] = tensor.empty() : tensor<4xf32>
// RANK1-NEXT:      %[[NONE:.*]] = arith.constant -1 : index
// RANK1-NEXT:      %[[FROM:.*]] = arith.constant 2 : index
// RANK1-NEXT:      %[[V:.*]] = "flow.collective.send_recv"(%[[DST]], %[[SRC]], %[[WORLD]], %[[NONE]], %[[FROM]]) <{element_type = 9 : i32, tied_operands = [0 : index]}> : (tensor<4xf32>, tensor<4xf32>, !flow.channel, index, index) -> tensor<4xf32>
// RANK1-NEXT:      tensor.empty
// RANK1-NEXT:      %[[TO:.*]] = arith.constant 2 : index
// RANK1-NEXT:      %[[NONE2:.*]] = arith.constant -1 : index
// RANK1-NEXT:      %[[S1:.*]] = "flow.collective.send_recv"(%{{.*}}, %[[X]], %[[WORLD]], %[[TO]], %[[NONE2]])
// RANK1-NEXT:      %[[V1:.*]], %{{.*}} = "util.optimization_barrier"(%[[V]], %[[S1]])
// RANK1-NEXT:      tensor.empty
// RANK1-NEXT:      arith.constant 2 : index
// RANK1-NEXT:      arith.constant -1 : index
// RANK1-NEXT:      %[[S2:.*]] = "flow.collective.send_recv"(%{{.*}}, %[[V1]], %[[WORLD]],
// RANK1-NEXT:      %[[V2:.*]], %{{.*}} = "util.optimization_barrier"(%[[V]], %[[Y]])
// RANK1-NEXT:      tensor.empty
// RANK1-NEXT:      %[[TO0:.*]] = arith.constant 0 : index
// RANK1-NEXT:      arith.constant -1 : index
// RANK1-NEXT:      %[[S3:.*]] = "flow.collective.send_recv"(%{{.*}}, %[[V2]], %[[WORLD]], %[[TO0]], %{{.*}})
// RANK1-NEXT:      %[[OUT:.*]], %{{.*}}, %{{.*}}, %{{.*}} = "util.optimization_barrier"(%[[V]], %[[V]], %[[S2]], %[[S3]])
// RANK1-NEXT:      func.return %[[OUT]] : tensor<4xf32>
func.func @p2p(%x: tensor<4xf32>, %y: tensor<2x4xf32>) -> tensor<4xf32> {
  %0 = flow.recv peer = 2, tag = 3 : tensor<4xf32>
  flow.send %x, peer = 2 : tensor<4xf32>
  flow.send %0, peer = 2, tag = 1 : tensor<4xf32>
  flow.fence %y : tensor<2x4xf32>
  flow.send %0, peer = 0 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// The global program's channel table (compile_for_rank records it): every rank splits every
// channel, in table order, with color -1 where it is not in the placement.
// RANK0-LABEL: func.func @stage
// RANK0-NEXT:      "util.global.load"() <{global = @__flow_channel_1}>
// RANK0:           %[[C:.*]] = arith.constant 0 : index
// RANK0-NEXT:      %[[K:.*]] = arith.constant 0 : index
// RANK0-NEXT:      "flow.channel.split"(%{{.*}}, %[[C]], %[[K]])
// RANK0-NEXT:      "util.global.store"(%{{.*}}) <{global = @__flow_channel_1}>
// RANK0-NEXT:      %[[NOC:.*]] = arith.constant -1 : index
// RANK0-NEXT:      %[[NOK:.*]] = arith.constant 0 : index
// RANK0-NEXT:      "flow.channel.split"(%{{.*}}, %[[NOC]], %[[NOK]])
// RANK0-NEXT:      "util.global.store"(%{{.*}}) <{global = @__flow_channel_2}>
// RANK0-NOT:     attributes {flow.channel_table
builtin.module attributes {flow.channel_table = [[#flow.placement<"cpu", [0, 1]>, 0 : i64], [#flow.placement<"cpu", [2, 3]>, 0 : i64]]} {
  func.func @stage(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<4xf32>
    func.return %0 : tensor<4xf32>
  }
}

// -----

// RANK0: 'flow.all_reduce' op runs on axis 0 of #flow.placement<"cpu", [0, 2]>, which is not in the program's flow.channel_table
builtin.module attributes {flow.channel_table = [[#flow.placement<"cpu", [0, 1]>, 0 : i64]]} {
  func.func @not_in_table(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [0, 2]> axis = 0 : tensor<4xf32>
    func.return %0 : tensor<4xf32>
  }
}

// -----

// RANK1: 'flow.all_reduce' op runs on #flow.placement<"cpu", [0, 2]>, which does not hold rank 1
func.func @not_mine(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [0, 2]> axis = 0 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// A mesh axis of one rank needs no communication and no channel.
// RANK1-LABEL: func.func @single(%{{.*}}: tensor<4xf32>) -> tensor<4xf32> {
// RANK1-NEXT:      func.return %x : tensor<4xf32>
// RANK1-NEXT:    }
// RANK1-NEXT:  }
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = flow.all_reduce sum %x on #flow.placement<"cpu", [[0], [1]]> axis = 1 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
