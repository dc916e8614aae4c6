// flow-lower-collectives: rank R's collectives become calls of the `comm` runtime module's
// imports (declared once per name), with transposes for dims other than 0; local_slice and
// local_partial need no call; the groups used are listed on the module in registration order.
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-lower-collectives{rank=0}' | FileCheck %s --check-prefix=RANK0
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p 'flow-lower-collectives{rank=1}' | FileCheck %s --check-prefix=RANK1

// RANK0-LABEL: builtin.module attributes {flow.comm_groups = {{\[\[}}0 : i64, 1 : i64]]}
// Each call takes the token of the previous one (0 for the first) and returns the next.
// RANK0:         func.func @one_d(%[[X:.*]]: tensor<8x6xf32>, %[[Y:.*]]: tensor<3x6xf32>)
// RANK0-NEXT:      %[[T0:.*]] = arith.constant 0 : i32
// RANK0-NEXT:      %[[G:.*]] = arith.constant 1 : i32
// RANK0-NEXT:      %[[R:.*]], %[[T1:.*]] = func.call @comm.all_reduce_sum.8x6xf32(%[[X]], %[[T0]], %[[G]]) : (tensor<8x6xf32>, i32, i32) -> (tensor<8x6xf32>, i32)
// RANK0-NEXT:      %[[G2:.*]] = arith.constant 1 : i32
// RANK0-NEXT:      %[[A:.*]], %[[T2:.*]] = func.call @comm.all_gather.3x6xf32.5x6xf32(%[[Y]], %[[T1]], %[[G2]]) : (tensor<3x6xf32>, i32, i32) -> (tensor<5x6xf32>, i32)
// RANK0-NEXT:      %[[T:.*]] = flow.transpose %[[X]], permutation = [1, 0] : tensor<8x6xf32> -> tensor<6x8xf32>
// RANK0-NEXT:      %[[G3:.*]] = arith.constant 1 : i32
// RANK0-NEXT:      %[[S:.*]], %{{.*}} = func.call @comm.reduce_scatter_sum.6x8xf32.3x8xf32(%[[T]], %[[T2]], %[[G3]]) : (tensor<6x8xf32>, i32, i32) -> (tensor<3x8xf32>, i32)
// RANK0-NEXT:      %[[U:.*]] = flow.transpose %[[S]], permutation = [1, 0] : tensor<3x8xf32> -> tensor<8x3xf32>
// RANK0-NEXT:      %[[L:.*]] = flow.slice %[[X]], start = [0, 0], strides = [1, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
// RANK0-NEXT:      func.return %[[R]], %[[A]], %[[U]], %[[L]], %[[X]]
// RANK0:         func.func private @comm.all_reduce_sum.8x6xf32(tensor<8x6xf32>, i32, i32) -> (tensor<8x6xf32>, i32)
// RANK0-NEXT:    func.func private @comm.all_gather.3x6xf32.5x6xf32(tensor<3x6xf32>, i32, i32) -> (tensor<5x6xf32>, i32)
// RANK0-NEXT:    func.func private @comm.reduce_scatter_sum.6x8xf32.3x8xf32(tensor<6x8xf32>, i32, i32) -> (tensor<3x8xf32>, i32)
// RANK1-LABEL: func.func @one_d
// RANK1:         flow.slice %{{.*}}, start = [4, 0], strides = [1, 1] : tensor<8x6xf32> -> tensor<4x6xf32>
// RANK1-NEXT:    %[[Z:.*]] = flow.full 0.000000e+00 : f32 -> tensor<8x6xf32>
// RANK1-NEXT:    func.return {{.*}}, %[[Z]] :
!p = #flow.placement<"cpu", [0, 1]>
func.func @one_d(%x: tensor<8x6xf32>, %y: tensor<3x6xf32>) -> (tensor<8x6xf32>, tensor<5x6xf32>, tensor<8x3xf32>, tensor<4x6xf32>, tensor<8x6xf32>) {
  %0 = flow.all_reduce sum %x on !p axis = 0 : tensor<8x6xf32>
  %1 = flow.all_gather %y on !p axis = 0, dim = 0 : tensor<3x6xf32> -> tensor<5x6xf32>
  %2 = flow.reduce_scatter sum %x on !p axis = 0, dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  %3 = flow.local_slice %x on !p axis = 0, dim = 0 : tensor<8x6xf32> -> tensor<4x6xf32>
  %4 = flow.local_partial %x on !p axis = 0 : tensor<8x6xf32>
  func.return %0, %1, %2, %3, %4 : tensor<8x6xf32>, tensor<5x6xf32>, tensor<8x3xf32>, tensor<4x6xf32>, tensor<8x6xf32>
}

// -----

// A 2-D mesh: one group per (placement, axis), the one holding the rank, numbered by first use.
// RANK1-LABEL: builtin.module attributes {flow.comm_groups = {{\[\[}}0 : i64, 1 : i64], [1 : i64, 3 : i64]]}
// RANK1:         arith.constant 1 : i32
// RANK1-NEXT:    %{{.*}}, %[[A:.*]] = func.call @comm.all_reduce_max.4xf32
// RANK1:         arith.constant 2 : i32
// RANK1-NEXT:    %{{.*}}, %[[T0:.*]] = func.call @comm.all_to_all.4x2xf32(%{{.*}}, %[[A]], %{{.*}})
// RANK1:         flow.reshape
// Point to point: (peer, tag, ordering token, group); the chain goes on through them.
// RANK1:         %[[Z:.*]] = flow.full 0.000000e+00 : f32 -> tensor<4xf32>
// RANK1-NEXT:    %[[PEER:.*]] = arith.constant 2 : i32
// RANK1-NEXT:    %[[TAG:.*]] = arith.constant 0 : i32
// RANK1-NEXT:    %[[G:.*]] = arith.constant 0 : i32
// RANK1-NEXT:    %[[V:.*]], %[[T1:.*]] = func.call @comm.recv.4xf32(%[[Z]], %[[PEER]], %[[TAG]], %[[T0]], %[[G]]) : (tensor<4xf32>, i32, i32, i32, i32) -> (tensor<4xf32>, i32)
// RANK1-NEXT:    %{{.*}} = arith.constant 0 : i32
// RANK1-NEXT:    %{{.*}} = arith.constant 0 : i32
// RANK1-NEXT:    %{{.*}} = arith.constant 0 : i32
// RANK1-NEXT:    %[[T2:.*]] = func.call @comm.send.4xf32(%[[V]], %{{.*}}, %{{.*}}, %[[T1]], %{{.*}}) : (tensor<4xf32>, i32, i32, i32, i32) -> i32
// RANK1-NEXT:    %[[T3:.*]] = func.call @comm.fence.4xf32(%[[V]], %[[T2]]) : (tensor<4xf32>, i32) -> i32
// RANK1-NEXT:    func.call @comm.fence.2x4xf32(%y, %[[T3]]) : (tensor<2x4xf32>, i32) -> i32
// RANK1:         func.func private @comm.recv.4xf32(tensor<4xf32>, i32, i32, i32, i32) -> (tensor<4xf32>, i32)
// RANK1:         func.func private @comm.send.4xf32(tensor<4xf32>, i32, i32, i32, i32) -> i32
// RANK1:         func.func private @comm.fence.4xf32(tensor<4xf32>, i32) -> i32
!m = #flow.placement<"cpu", [[0, 1], [2, 3]]>
func.func @two_d(%x: tensor<4xf32>, %y: tensor<2x4xf32>) -> (tensor<4xf32>, tensor<4x2xf32>) {
  %0 = flow.all_reduce max %x on !m axis = 1 : tensor<4xf32>
  %1 = flow.all_to_all %y on !m axis = 0, split_dim = 1, concat_dim = 0 : tensor<2x4xf32> -> tensor<4x2xf32>
  %2 = flow.recv peer = 2 : tensor<4xf32>
  flow.send %2, peer = 0 : tensor<4xf32>
  flow.fence %2, %y : tensor<4xf32>, tensor<2x4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4x2xf32>
}
