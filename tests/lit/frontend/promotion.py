# Broadcasting and type promotion are explicit in the traced IR: a lower-rank operand gets a
# flow.broadcast_in_dim, an int tensor combined with a float scalar is cast to f32, and a
# Python scalar becomes a flow.full of the promoted type (never a rank-0 argument).
# RUN: %python %s | FileCheck %s

import numpy as np

import flow


def int_plus_float_scalar(x):
    return x + 1.5


# CHECK-LABEL: func.func @int_plus_float_scalar(
# CHECK-SAME:    %[[X:x]]: tensor<2x3xi32>) -> tensor<2x3xf32>
# CHECK:         %[[XF:.*]] = flow.cast %[[X]] : tensor<2x3xi32> -> tensor<2x3xf32>
# CHECK:         %[[C:.*]] = flow.full 1.500000e+00 : f32 -> tensor<2x3xf32>
# CHECK:         %[[SUM:.*]] = flow.add %[[XF]], %[[C]] : tensor<2x3xf32>
# CHECK:         func.return %[[SUM]]
print(flow.jit(int_plus_float_scalar).lower(np.zeros((2, 3), np.int32)).as_text())


def int_times_int_scalar(x):
    return x * 2


# An int scalar keeps the tensor's int type: no cast.
# CHECK-LABEL: func.func @int_times_int_scalar(
# CHECK-SAME:    %[[X:x]]: tensor<2x3xi32>) -> tensor<2x3xi32>
# CHECK-NOT:     flow.cast
# CHECK:         %[[C:.*]] = flow.full 2 : i32 -> tensor<2x3xi32>
# CHECK:         %[[PROD:.*]] = flow.mul %[[X]], %[[C]] : tensor<2x3xi32>
# CHECK:         func.return %[[PROD]]
print(flow.jit(int_times_int_scalar).lower(np.zeros((2, 3), np.int32)).as_text())


def broadcast_both(a, b):
    return a - b


# [3, 1] - [4] -> [3, 4]: each operand is broadcast to the result shape.
# CHECK-LABEL: func.func @broadcast_both(
# CHECK-SAME:    %[[A:a]]: tensor<3x1xf32>, %[[B:b]]: tensor<4xf32>) -> tensor<3x4xf32>
# CHECK-DAG:     %[[BA:.*]] = flow.broadcast_in_dim %[[A]], dims = [0, 1] : tensor<3x1xf32> -> tensor<3x4xf32>
# CHECK-DAG:     %[[BB:.*]] = flow.broadcast_in_dim %[[B]], dims = [1] : tensor<4xf32> -> tensor<3x4xf32>
# CHECK:         %[[D:.*]] = flow.sub %[[BA]], %[[BB]] : tensor<3x4xf32>
# CHECK:         func.return %[[D]]
a = np.zeros((3, 1), np.float32)
b = np.zeros((4,), np.float32)
print(flow.jit(broadcast_both).lower(a, b).as_text())


def int_tensor_plus_float_tensor(i, f):
    return i + f


# CHECK-LABEL: func.func @int_tensor_plus_float_tensor(
# CHECK-SAME:    %[[I:i]]: tensor<4xi64>, %[[F:f]]: tensor<4xf32>) -> tensor<4xf32>
# CHECK:         %[[IF:.*]] = flow.cast %[[I]] : tensor<4xi64> -> tensor<4xf32>
# CHECK:         flow.add %[[IF]], %[[F]] : tensor<4xf32>
print(
    flow.jit(int_tensor_plus_float_tensor)
    .lower(np.zeros((4,), np.int64), np.zeros((4,), np.float32))
    .as_text()
)
