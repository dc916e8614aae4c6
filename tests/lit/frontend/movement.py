# transpose / permute / .t() trace to flow.transpose with the full permutation;
# reshape / view / unsqueeze / flatten trace to flow.reshape.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow


def permute(x):
    return x.permute(2, 0, 1)


# CHECK-LABEL: func.func @permute(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
# CHECK:         %[[T:.*]] = flow.transpose %[[X]], permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
# CHECK:         func.return %[[T]]
print(flow.jit(permute).lower(np.zeros((2, 3, 4), np.float32)).as_text())


def transpose_negative(x):
    return flow.transpose(x, 0, -1)


# CHECK-LABEL: func.func @transpose_negative(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
# CHECK:         %[[T:.*]] = flow.transpose %[[X]], permutation = [2, 1, 0] : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
# CHECK:         func.return %[[T]]
print(flow.jit(transpose_negative).lower(np.zeros((2, 3, 4), np.float32)).as_text())


def t_then_matmul(a, b):
    return a.t() @ b


# CHECK-LABEL: func.func @t_then_matmul(
# CHECK-SAME:    %[[A:a]]: tensor<3x2xf32>, %[[B:b]]: tensor<3x5xf32>) -> tensor<2x5xf32>
# CHECK:         %[[AT:.*]] = flow.transpose %[[A]], permutation = [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
# CHECK:         %[[MM:.*]] = flow.matmul %[[AT]], %[[B]] : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<2x5xf32>
# CHECK:         func.return %[[MM]]
a = np.zeros((3, 2), np.float32)
b = np.zeros((3, 5), np.float32)
print(flow.jit(t_then_matmul).lower(a, b).as_text())


def reshape_infer(x):
    return x.reshape(-1, 4)


# CHECK-LABEL: func.func @reshape_infer(
# CHECK-SAME:    %[[X:x]]: tensor<2x3x4xf32>) -> tensor<6x4xf32>
# CHECK:         %[[R:.*]] = flow.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
# CHECK:         func.return %[[R]]
print(flow.jit(reshape_infer).lower(np.zeros((2, 3, 4), np.float32)).as_text())
