# An eager tensor captured by a traced function becomes an extra function argument after
# the user's arguments (closure conversion), never a constant baked into the IR; a tensor
# captured twice is one argument.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow

weight = flow.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
bias = flow.tensor(np.ones(2, dtype=np.float32))


def linear(x):
    return x @ weight + bias


# CHECK-LABEL: func.func @linear(
# CHECK-SAME:    %[[X:x]]: tensor<4x3xf32>, %[[W:[0-9a-z_]+]]: tensor<3x2xf32>, %[[B:[0-9a-z_]+]]: tensor<2xf32>) -> tensor<4x2xf32>
# CHECK-NOT:     dense<
# CHECK-NOT:     flow.constant
# CHECK:         %[[MM:.*]] = flow.matmul %[[X]], %[[W]]
# CHECK:         %[[BB:.*]] = flow.broadcast_in_dim %[[B]], dims = [1]
# CHECK:         flow.add %[[MM]], %[[BB]]
# CHECK:       captured: 2 [(3, 2), (2,)]
lowered = flow.jit(linear).lower(np.zeros((4, 3), np.float32))
print(lowered.as_text())
print("captured:", len(lowered.captured), [tuple(t.shape) for t in lowered.captured])


def reuse(x):
    return x * weight + weight


# CHECK-LABEL: func.func @reuse(
# CHECK-SAME:    %[[X:x]]: tensor<3x2xf32>, %[[W:[0-9a-z_]+]]: tensor<3x2xf32>) -> tensor<3x2xf32>
# CHECK:         %[[M:.*]] = flow.mul %[[X]], %[[W]]
# CHECK:         flow.add %[[M]], %[[W]]
# CHECK:       captured: 1
lowered = flow.jit(reuse).lower(np.zeros((3, 2), np.float32))
print(lowered.as_text())
print("captured:", len(lowered.captured))


def returns_capture(x):
    return x + 1.0, bias


# Returning a captured tensor returns its argument.
# CHECK-LABEL: func.func @returns_capture(
# CHECK-SAME:    %[[X:x]]: tensor<2xf32>, %[[B:[0-9a-z_]+]]: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
# CHECK:         %[[Y:.*]] = flow.add %[[X]]
# CHECK:         func.return %[[Y]], %[[B]] : tensor<2xf32>, tensor<2xf32>
print(flow.jit(returns_capture).lower(np.zeros((2,), np.float32)).as_text())
