# Reductions trace to flow.reduce over the normalized dims; keepdim=True is a flow.reshape
# of the reduced value back to rank, and mean is a sum divided by the element count.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow

x = np.zeros((2, 3, 4), np.float32)


def sum_keepdim(x):
    return flow.sum(x, dim=1, keepdim=True)


# CHECK-LABEL: func.func @sum_keepdim(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
# CHECK:         %[[R:.*]] = flow.reduce sum %[[X]], dims = [1] : tensor<2x3x4xf32> -> tensor<2x4xf32>
# CHECK:         %[[K:.*]] = flow.reshape %[[R]] : tensor<2x4xf32> -> tensor<2x1x4xf32>
# CHECK:         func.return %[[K]] : tensor<2x1x4xf32>
print(flow.jit(sum_keepdim).lower(x).as_text())


def amax_negative_dims(x):
    return x.amax(dim=(-1, 0))


# Negative dims are normalized and sorted; without keepdim there is no reshape.
# CHECK-LABEL: func.func @amax_negative_dims(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<3xf32>
# CHECK:         %[[R:.*]] = flow.reduce max %[[X]], dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
# CHECK-NOT:     flow.reshape
# CHECK:         func.return %[[R]] : tensor<3xf32>
print(flow.jit(amax_negative_dims).lower(x).as_text())


def mean_keepdim(x):
    return x.mean(dim=-1, keepdim=True)


# CHECK-LABEL: func.func @mean_keepdim(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
# CHECK:         %[[R:.*]] = flow.reduce sum %[[X]], dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
# CHECK:         %[[K:.*]] = flow.reshape %[[R]] : tensor<2x3xf32> -> tensor<2x3x1xf32>
# CHECK:         %[[N:.*]] = flow.full 4.000000e+00 : f32 -> tensor<2x3x1xf32>
# CHECK:         %[[M:.*]] = flow.div %[[K]], %[[N]] : tensor<2x3x1xf32>
# CHECK:         func.return %[[M]]
print(flow.jit(mean_keepdim).lower(x).as_text())


def sum_all(x):
    return x.sum()


# CHECK-LABEL: func.func @sum_all(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<f32>
# CHECK:         %[[R:.*]] = flow.reduce sum %[[X]], dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
# CHECK:         func.return %[[R]] : tensor<f32>
print(flow.jit(sum_all).lower(x).as_text())
