# Comparisons trace to flow.compare (an i1 tensor) and where to flow.select, after the
# same broadcasting and promotion as arithmetic.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow


def where_gt(x, y):
    return flow.where(x > y, x, y)


# CHECK-LABEL: func.func @where_gt(
# CHECK-SAME:    %[[X:x]]: tensor<2x3xf32>, %[[Y:y]]: tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK:         %[[C:.*]] = flow.compare gt, %[[X]], %[[Y]] : tensor<2x3xf32> -> tensor<2x3xi1>
# CHECK:         %[[S:.*]] = flow.select %[[C]], %[[X]], %[[Y]] : tensor<2x3xi1>, tensor<2x3xf32>
# CHECK:         func.return %[[S]] : tensor<2x3xf32>
x = np.zeros((2, 3), np.float32)
print(flow.jit(where_gt).lower(x, x).as_text())


def where_scalar(x):
    return flow.where(x >= 0, x, 0.0)


# A scalar branch and a scalar comparand become flow.full of the tensor's shape.
# CHECK-LABEL: func.func @where_scalar(
# CHECK-SAME:    %[[X:x]]: tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK:         %[[Z:.*]] = flow.full 0.000000e+00 : f32 -> tensor<2x3xf32>
# CHECK:         %[[C:.*]] = flow.compare ge, %[[X]], %[[Z]]
# CHECK:         %[[Z2:.*]] = flow.full 0.000000e+00 : f32 -> tensor<2x3xf32>
# CHECK:         %[[S:.*]] = flow.select %[[C]], %[[X]], %[[Z2]]
# CHECK:         func.return %[[S]]
print(flow.jit(where_scalar).lower(x).as_text())


def int_eq_mask(i, x):
    return flow.where(i == 1, x, -x)


# An integer comparison keeps its operand type; the condition is broadcast to the values.
# CHECK-LABEL: func.func @int_eq_mask(
# CHECK-SAME:    %[[I:i]]: tensor<3xi32>, %[[X:x]]: tensor<2x3xf32>) -> tensor<2x3xf32>
# CHECK:         %[[ONE:.*]] = flow.full 1 : i32 -> tensor<3xi32>
# CHECK:         %[[C:.*]] = flow.compare eq, %[[I]], %[[ONE]] : tensor<3xi32> -> tensor<3xi1>
# CHECK:         %[[N:.*]] = flow.neg %[[X]]
# CHECK:         %[[BC:.*]] = flow.broadcast_in_dim %[[C]], dims = [1] : tensor<3xi1> -> tensor<2x3xi1>
# CHECK:         %[[S:.*]] = flow.select %[[BC]], %[[X]], %[[N]] : tensor<2x3xi1>, tensor<2x3xf32>
# CHECK:         func.return %[[S]]
print(flow.jit(int_eq_mask).lower(np.zeros((3,), np.int32), x).as_text())
