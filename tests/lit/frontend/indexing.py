# Indexing traces to flow.slice (+ flow.reshape for dropped / new dims); integer-array
# indices to one flow.gather on the flattened indexed dims; cat to flow.concat.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow

x = np.zeros((4, 6), np.float32)


def basic(x):
    return x[1:, ::2]


# CHECK-LABEL: func.func @basic(
# CHECK-SAME:    %[[X:x]]: tensor<4x6xf32>) -> tensor<3x3xf32>
# CHECK-NEXT:    %[[S:.*]] = flow.slice %[[X]], start = [1, 0], strides = [1, 2] : tensor<4x6xf32> -> tensor<3x3xf32>
# CHECK-NEXT:    func.return %[[S]]
print(flow.jit(basic).lower(x).as_text())


def int_and_reverse(x):
    return x[-1, ::-1]


# An int index is a size-1 slice whose dim the reshape drops; a negative step is a negative stride.
# CHECK-LABEL: func.func @int_and_reverse(
# CHECK-SAME:    %[[X:x]]: tensor<4x6xf32>) -> tensor<6xf32>
# CHECK-NEXT:    %[[S:.*]] = flow.slice %[[X]], start = [3, 5], strides = [1, -1] : tensor<4x6xf32> -> tensor<1x6xf32>
# CHECK-NEXT:    %[[R:.*]] = flow.reshape %[[S]] : tensor<1x6xf32> -> tensor<6xf32>
# CHECK-NEXT:    func.return %[[R]]
print(flow.jit(int_and_reverse).lower(x).as_text())


def take_rows(x, idx):
    return x[idx]


# A traced index is checked first: the position of the first index outside [-4, 4) and its value
# are two extra results, which the caller turns into eager's IndexError. Then negative entries
# wrap (select), then one gather along the indexed dim.
# CHECK-LABEL: func.func @take_rows(
# CHECK-SAME:    %[[X:x]]: tensor<4x6xf32>, %[[I:idx]]: tensor<2x3xi64>) -> (tensor<2x3x6xf32>, tensor<i64>, tensor<i64>)
# CHECK:         %[[POS:.*]] = flow.reduce min %{{.*}}, dims = [0] : tensor<6xi64> -> tensor<i64>
# CHECK:         %[[VAL:.*]] = flow.reduce sum %{{.*}}, dims = [0] : tensor<6xi64> -> tensor<i64>
# CHECK:         %[[NEG:.*]] = flow.compare lt, %[[I]], %{{.*}} : tensor<2x3xi64> -> tensor<2x3xi1>
# CHECK:         %[[UP:.*]] = flow.add %[[I]], %{{.*}} : tensor<2x3xi64>
# CHECK:         %[[W:.*]] = flow.select %[[NEG]], %[[UP]], %[[I]] : tensor<2x3xi1>, tensor<2x3xi64>
# CHECK:         %[[FLAT:.*]] = flow.reshape %[[W]] : tensor<2x3xi64> -> tensor<6xi64>
# CHECK:         %[[B:.*]] = flow.broadcast_in_dim %[[FLAT]], dims = [0] : tensor<6xi64> -> tensor<6x6xi64>
# CHECK:         %[[G:.*]] = flow.gather %[[X]], %[[B]], dim = 0 : tensor<4x6xf32>, tensor<6x6xi64> -> tensor<6x6xf32>
# CHECK:         %[[R:.*]] = flow.reshape %[[G]] : tensor<6x6xf32> -> tensor<2x3x6xf32>
# CHECK:         func.return %[[R]], %[[POS]], %[[VAL]]
print(flow.jit(take_rows).lower(x, np.zeros((2, 3), np.int64)).as_text())


def constant_pairs(x):
    return x[[0, -1], [2, 5]]


# Constant index arrays become one constant of linear positions into the flattened dims.
# CHECK-LABEL: func.func @constant_pairs(
# CHECK-SAME:    %[[X:x]]: tensor<4x6xf32>) -> tensor<2xf32>
# CHECK-NEXT:    %[[C:.*]] = flow.constant dense<[2, 23]> : tensor<2xi64>
# CHECK-NEXT:    %[[F:.*]] = flow.reshape %[[X]] : tensor<4x6xf32> -> tensor<24xf32>
# CHECK-NEXT:    %[[G:.*]] = flow.gather %[[F]], %[[C]], dim = 0 : tensor<24xf32>, tensor<2xi64> -> tensor<2xf32>
# CHECK-NEXT:    func.return %[[G]]
print(flow.jit(constant_pairs).lower(x).as_text())


def cat(a, b):
    return flow.cat([a, b, a], dim=-1)


# CHECK-LABEL: func.func @cat(
# CHECK-SAME:    %[[A:a]]: tensor<4x6xf32>, %[[B:b]]: tensor<4x2xi32>) -> tensor<4x14xf32>
# CHECK-NEXT:    %[[BF:.*]] = flow.cast %[[B]] : tensor<4x2xi32> -> tensor<4x2xf32>
# CHECK-NEXT:    %[[C:.*]] = flow.concat dim = 1, %[[A]], %[[BF]], %[[A]] : tensor<4x6xf32>, tensor<4x2xf32>, tensor<4x6xf32> -> tensor<4x14xf32>
# CHECK-NEXT:    func.return %[[C]]
print(flow.jit(cat).lower(x, np.zeros((4, 2), np.int32)).as_text())
