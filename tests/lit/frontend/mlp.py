# flow.jit traces an MLP into flow IR: matmul, the bias broadcast along dim 1, add, and
# relu as maximum against a flow.full zero. Arguments keep the Python parameter names.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow


def mlp(x, w, b):
    return flow.relu(x @ w + b)


# CHECK-LABEL: func.func @mlp(
# CHECK-SAME:    %[[X:x]]: tensor<4x3xf32>, %[[W:w]]: tensor<3x2xf32>, %[[B:b]]: tensor<2xf32>) -> tensor<4x2xf32>
# CHECK:         %[[MM:.*]] = flow.matmul %[[X]], %[[W]] : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
# CHECK:         %[[BB:.*]] = flow.broadcast_in_dim %[[B]], dims = [1] : tensor<2xf32> -> tensor<4x2xf32>
# CHECK:         %[[ADD:.*]] = flow.add %[[MM]], %[[BB]] : tensor<4x2xf32>
# CHECK:         %[[ZERO:.*]] = flow.full 0.000000e+00 : f32 -> tensor<4x2xf32>
# CHECK:         %[[RELU:.*]] = flow.maximum %[[ADD]], %[[ZERO]] : tensor<4x2xf32>
# CHECK:         func.return %[[RELU]] : tensor<4x2xf32>
x = np.zeros((4, 3), np.float32)
w = np.zeros((3, 2), np.float32)
b = np.zeros((2,), np.float32)
print(flow.jit(mlp).lower(x, w, b).as_text())


def two_layers(x, w1, b1, w2, b2):
    return flow.relu(x @ w1 + b1) @ w2 + b2


# CHECK-LABEL: func.func @two_layers(
# CHECK-SAME:    %[[X:x]]: tensor<4x3xf32>, %[[W1:w1]]: tensor<3x2xf32>, %[[B1:b1]]: tensor<2xf32>, %[[W2:w2]]: tensor<2x5xf32>, %[[B2:b2]]: tensor<5xf32>) -> tensor<4x5xf32>
# CHECK:         flow.matmul %[[X]], %[[W1]]
# CHECK:         %[[H:.*]] = flow.maximum
# CHECK:         %[[MM:.*]] = flow.matmul %[[H]], %[[W2]] : tensor<4x2xf32>, tensor<2x5xf32> -> tensor<4x5xf32>
# CHECK:         %[[BB:.*]] = flow.broadcast_in_dim %[[B2]], dims = [1] : tensor<5xf32> -> tensor<4x5xf32>
# CHECK:         %[[OUT:.*]] = flow.add %[[MM]], %[[BB]]
# CHECK:         func.return %[[OUT]] : tensor<4x5xf32>
w2 = np.zeros((2, 5), np.float32)
b2 = np.zeros((5,), np.float32)
print(flow.jit(two_layers).lower(x, w, b, w2, b2).as_text())
