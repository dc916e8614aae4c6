// flow-infer-sbp: every op on global tensors gets the cheapest signature, boxing where its
// operands need converting, its result encodings, and an `sbp_signature` attribute.
// RUN: flow-opt %s --split-input-file --verify-diagnostics -p flow-infer-sbp | FileCheck %s

// Data parallel: rows split, weight broadcast; the declared broadcast result costs a final
// all-gather (boxing S(0) -> B).
// CHECK-LABEL: func.func @data_parallel
// CHECK-SAME:    (%[[X:.*]]: tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>>, %[[W:.*]]: tensor<4x6xf32, #flow.dist<{{.*}}[B]>>>)
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul %[[X]], %[[W]] {sbp_signature = "[S(0)], [B] -> [S(0)]"} : {{.*}} -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
// CHECK-NEXT:    %[[T:.*]] = flow.tanh %[[Y]] {sbp_signature = "[S(0)] -> [S(0)]"} : tensor<8x6xf32, #flow.dist<{{.*}}[S(0)]>>>
// CHECK-NEXT:    %[[R:.*]] = flow.boxing %[[T]] : tensor<8x6xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8x6xf32, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    func.return %[[R]]
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!y = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @data_parallel(%x: !x, %w: !w) -> !y {
  %0 = flow.matmul %x, %w : !x, !w -> !y
  %1 = flow.tanh %0 : !y
  func.return %1 : !y
}

// -----

// Every matmul signature, and the cheapest conversion when none fits as is:
// S(0) x S(0) re-splits the lhs (all_to_all, 1/4 of it) rather than gathering the rhs (1/2);
// P x P all-reduces the smaller rhs.
// CHECK-LABEL: func.func @matmul_signatures
// CHECK-NEXT:    flow.matmul %[[AS0:.*]], %[[BB:.*]] {sbp_signature = "[S(0)], [B] -> [S(0)]"}
// CHECK-NEXT:    flow.matmul %[[AB:.*]], %[[BS1:.*]] {sbp_signature = "[B], [S(1)] -> [S(1)]"}
// CHECK-NEXT:    flow.matmul %[[AS1:.*]], %[[BS0:.*]] {sbp_signature = "[S(1)], [S(0)] -> [P]"}
// CHECK-SAME:    -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
// CHECK-NEXT:    flow.matmul %{{.*}}, %{{.*}} {sbp_signature = "[B], [B] -> [B]"}
// CHECK-NEXT:    flow.matmul %{{.*}}, %{{.*}} {sbp_signature = "[P], [B] -> [P]"}
// CHECK-NEXT:    flow.matmul %{{.*}}, %{{.*}} {sbp_signature = "[B], [P] -> [P]"}
// CHECK-NEXT:    %[[RE:.*]] = flow.boxing %{{.*}} : tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8x4xf32, #flow.dist<{{.*}}[S(1)]>>>
// CHECK-NEXT:    flow.matmul %[[RE]], %{{.*}} {sbp_signature = "[S(1)], [S(0)] -> [P]"}
// CHECK-NEXT:    %[[AR:.*]] = flow.boxing %{{.*}} : tensor<4x6xf32, #flow.dist<{{.*}}[P]>>> -> tensor<4x6xf32, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    flow.matmul %{{.*}}, %[[AR]] {sbp_signature = "[P], [B] -> [P]"}
!a_s0 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!a_s1 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!a_b = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!a_p = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
!b_s0 = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b_s1 = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!b_b = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!b_p = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
!c = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @matmul_signatures(%a_s0: !a_s0, %a_s1: !a_s1, %a_b: !a_b, %a_p: !a_p,
                             %b_s0: !b_s0, %b_s1: !b_s1, %b_b: !b_b, %b_p: !b_p) {
  %0 = flow.matmul %a_s0, %b_b : !a_s0, !b_b -> !c
  %1 = flow.matmul %a_b, %b_s1 : !a_b, !b_s1 -> !c
  %2 = flow.matmul %a_s1, %b_s0 : !a_s1, !b_s0 -> !c
  %3 = flow.matmul %a_b, %b_b : !a_b, !b_b -> !c
  %4 = flow.matmul %a_p, %b_b : !a_p, !b_b -> !c
  %5 = flow.matmul %a_b, %b_p : !a_b, !b_p -> !c
  %6 = flow.matmul %a_s0, %b_s0 : !a_s0, !b_s0 -> !c
  %7 = flow.matmul %a_p, %b_p : !a_p, !b_p -> !c
  func.return
}

// -----

// Batched matmul splits the batch dim of both operands.
// CHECK-LABEL: func.func @batched
// CHECK-NEXT:    flow.matmul %{{.*}}, %{{.*}} {sbp_signature = "[S(0)], [S(0)] -> [S(0)]"}
!a = tensor<4x8x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<4x3x5xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!c = tensor<4x8x5xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @batched(%a: !a, %b: !b) -> !c {
  %0 = flow.matmul %a, %b : !a, !b -> !c
  func.return %0 : !c
}

// -----

// A partial sum plus a broadcast value: the broadcast side becomes partial for free
// (B -> P), the add stays partial (P + P -> P); exp is not linear, so its operand is
// reduce-scattered first.
// CHECK-LABEL: func.func @partial_plus_broadcast
// CHECK:         %[[P:.*]] = flow.matmul {{.*}} {sbp_signature = "[S(1)], [S(0)] -> [P]"}
// CHECK-NEXT:    %[[B:.*]] = flow.matmul {{.*}} {sbp_signature = "[B], [B] -> [B]"}
// CHECK-NEXT:    %[[BP:.*]] = flow.boxing %[[B]] : {{.*}}[B]>>> -> tensor<8x6xf32, #flow.dist<{{.*}}[P]>>>
// CHECK-NEXT:    %[[S:.*]] = flow.add %[[P]], %[[BP]] {sbp_signature = "[P], [P] -> [P]"}
// CHECK-NEXT:    %[[RS:.*]] = flow.boxing %[[S]] : {{.*}}[P]>>> -> tensor<8x6xf32, #flow.dist<{{.*}}[S(0)]>>>
// CHECK-NEXT:    flow.exp %[[RS]] {sbp_signature = "[S(0)] -> [S(0)]"}
!a_s1 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!a_b = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!b_s0 = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b_b = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!c = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @partial_plus_broadcast(%a: !a_s1, %b: !b_s0, %c: !a_b, %d: !b_b) -> !c {
  %0 = flow.matmul %a, %b : !a_s1, !b_s0 -> !c
  %1 = flow.matmul %c, %d : !a_b, !b_b -> !c
  %2 = flow.add %0, %1 : !c
  %3 = flow.exp %2 : !c
  func.return %3 : !c
}

// -----

// Summing over the split dim leaves partial sums; a max over it cannot, so its operand is
// re-split along the kept dim.
// CHECK-LABEL: func.func @reduce
// CHECK-NEXT:    %[[S:.*]] = flow.reduce sum %[[X:.*]], dims = [1] {sbp_signature = "[S(1)] -> [P]"}
// CHECK-NEXT:    %[[RE:.*]] = flow.boxing %[[X]] : {{.*}}[S(1)]>>> -> tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>>
// CHECK-NEXT:    %[[M:.*]] = flow.reduce max %[[RE]], dims = [1] {sbp_signature = "[S(0)] -> [S(0)]"}
// CHECK-NEXT:    flow.boxing %[[S]] : tensor<8xf32, #flow.dist<{{.*}}[P]>>> -> tensor<8xf32, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    flow.boxing %[[M]] : tensor<8xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8xf32, #flow.dist<{{.*}}[B]>>>
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
!r = tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @reduce(%x: !x) -> (!r, !r) {
  %0 = flow.reduce sum %x, dims = [1] : !x -> !r
  %1 = flow.reduce max %x, dims = [1] : !x -> !r
  func.return %0, %1 : !r, !r
}

// -----

// A 2-D placement: signatures are per mesh axis. Rows split on axis 0, columns on axis 1;
// the sum over columns is partial on axis 1 only.
// CHECK-LABEL: func.func @mesh_2d
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul {{.*}} {sbp_signature = "[S(0), B], [B, S(1)] -> [S(0), S(1)]"}
// CHECK-SAME:    -> tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", {{\[\[0, 1\], \[2, 3\]\]}}>, #flow.sbp<[S(0), S(1)]>>>
// CHECK-NEXT:    %[[R:.*]] = flow.reduce sum %[[Y]], dims = [1] {sbp_signature = "[S(0), S(1)] -> [S(0), P]"}
// CHECK-NEXT:    flow.boxing %[[R]] : tensor<8xf32, #flow.dist<{{.*}}[S(0), P]>>> -> tensor<8xf32, #flow.dist<{{.*}}[S(0), B]>>>
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[B, S(1)]>>>
!y = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[B, B]>>>
!r = tensor<8xf32, #flow.dist<#flow.placement<"cpu", [[0, 1], [2, 3]]>, #flow.sbp<[S(0), B]>>>
func.func @mesh_2d(%x: !x, %w: !w) -> !r {
  %0 = flow.matmul %x, %w : !x, !w -> !y
  %1 = flow.reduce sum %0, dims = [1] : !y -> !r
  func.return %1 : !r
}

// -----

// Local values computed the same way on every rank become broadcast global tensors.
// CHECK-LABEL: func.func @replicated_local
// CHECK:         %[[P:.*]] = flow.compare lt
// CHECK-NEXT:    %[[G:.*]] = flow.to_global %[[P]] : tensor<6x3xi1> -> tensor<6x3xi1, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    %[[S:.*]] = flow.boxing %[[G]] : {{.*}} -> tensor<6x3xi1, #flow.dist<{{.*}}[S(0)]>>>
// CHECK-NEXT:    flow.select %[[S]], %{{.*}}, %{{.*}} {sbp_signature = "[S(0)], [S(0)], [S(0)] -> [S(0)]"}
!x = tensor<6x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @replicated_local(%x: !x) -> !x {
  %c = flow.full 2.0 : f32 -> tensor<6x3xf32>
  %d = flow.full 1.0 : f32 -> tensor<6x3xf32>
  %p = flow.compare lt, %d, %c : tensor<6x3xf32> -> tensor<6x3xi1>
  %0 = flow.select %p, %x, %x : tensor<6x3xi1>, !x
  func.return %0 : !x
}

// -----

// An explicit boxing that inference made an identity goes away.
// CHECK-LABEL: func.func @explicit_boxing
// CHECK-NEXT:    %[[Y:.*]] = flow.matmul
// CHECK-NEXT:    func.return %[[Y]]
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!w = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!yb = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!ys = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @explicit_boxing(%x: !x, %w: !w) -> !ys {
  %0 = flow.matmul %x, %w : !x, !w -> !yb
  %1 = flow.boxing %0 : !yb -> !ys
  func.return %1 : !ys
}

// -----

// CHECK: 'flow.matmul' op expected all global operands on one placement, got #flow.placement<"cpu", [0, 1]>, #flow.placement<"cpu", [2, 3]>; move them with flow.boxing first
!a = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<4x6xf32, #flow.dist<#flow.placement<"cpu", [2, 3]>, #flow.sbp<[B]>>>
!c = tensor<8x6xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
func.func @two_placements(%a: !a, %b: !b) {
  %0 = flow.matmul %a, %b : !a, !b -> !c
  func.return
}

// -----

// CHECK: 'flow.select' op mixes global operands on #flow.placement<"cpu", [0, 1]> with operand #0 of local type tensor<6x3xi1>, which may differ between ranks; convert it with flow.to_global
!x = tensor<6x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func @local_operand(%x: !x, %p: tensor<6x3xi1>) -> !x {
  %0 = flow.select %p, %x, %x : tensor<6x3xi1>, !x
  func.return %0 : !x
}

// -----

// CHECK: 'func.call' op is not a flow op and cannot compute on global tensors
!x = tensor<6x3xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
func.func private @callee(!x) -> !x
func.func @call(%x: !x) -> !x {
  %0 = func.call @callee(%x) : (!x) -> !x
  func.return %0 : !x
}

// -----

// flow.redistribute (a traced to_global) becomes the boxing from the operand's inferred
// distribution, nothing when they agree, and a local constant is first made broadcast.
// CHECK-LABEL: func.func @redistribute
// CHECK-NEXT:    %[[E:.*]] = flow.exp %[[X:.*]] {sbp_signature = "[S(0)] -> [S(0)]"}
// CHECK-NEXT:    %[[B:.*]] = flow.boxing %[[E]] : tensor<8x4xf32, #flow.dist<{{.*}}[S(0)]>>> -> tensor<8x4xf32, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    %[[C:.*]] = flow.full 1.000000e+00 : f32 -> tensor<8x4xf32>
// CHECK-NEXT:    %[[G:.*]] = flow.to_global %[[C]] : tensor<8x4xf32> -> tensor<8x4xf32, #flow.dist<{{.*}}[B]>>>
// CHECK-NEXT:    %[[S:.*]] = flow.boxing %[[G]] : tensor<8x4xf32, #flow.dist<{{.*}}[B]>>> -> tensor<8x4xf32, #flow.dist<{{.*}}[S(1)]>>>
// CHECK-NEXT:    %[[N:.*]] = flow.neg %[[E]] {sbp_signature = "[S(0)] -> [S(0)]"}
// CHECK-NEXT:    %[[M:.*]] = flow.neg %[[S]] {sbp_signature = "[S(1)] -> [S(1)]"}
// CHECK-NEXT:    func.return %[[B]], %[[N]], %[[M]]
!x = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>>>
!b = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
!s1 = tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>>>
func.func @redistribute(%x: !x) -> (!b, !x, !s1) {
  %0 = flow.exp %x : !x
  %1 = flow.redistribute %0 to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : !x -> !b
  %2 = flow.redistribute %0 to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(0)]>> : !x -> !x
  %3 = flow.full 1.0 : f32 -> tensor<8x4xf32>
  %4 = flow.redistribute %3 to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>> : tensor<8x4xf32> -> tensor<8x4xf32>
  %5 = flow.neg %2 : !x
  %6 = flow.neg %4 : tensor<8x4xf32>
  %7 = flow.redistribute %6 to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(1)]>> : tensor<8x4xf32> -> !s1
  func.return %1, %5, %7 : !b, !x, !s1
}

// -----

// CHECK: 'flow.redistribute' op mixes global operands on #flow.placement<"cpu", [0, 1]> with operand #0 of local type tensor<4xf32>, which may differ between ranks; convert it with flow.to_global
func.func @redistribute_local_argument(%x: tensor<4xf32>) {
  %0 = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>> : tensor<4xf32> -> tensor<4xf32>
  return
}
