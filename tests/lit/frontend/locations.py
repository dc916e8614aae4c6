# as_text(debug_info=True) prints each op's location as the user's file:line (the line that
# called the op, not a line inside flow), so IR and errors point back at the model code.
# RUN: %python %s | FileCheck %s

import numpy as np

import flow


def mlp(x, w, b):
    h = x @ w
    return flow.relu(h + b)


# CHECK-LABEL: func.func @mlp(
# CHECK:         flow.matmul {{.*}} loc("{{.*}}locations.py":[[# @LINE - 5]]:{{[0-9]+}})
# CHECK:         flow.broadcast_in_dim {{.*}} loc("{{.*}}locations.py":[[# @LINE - 5]]:{{[0-9]+}})
# CHECK:         flow.add {{.*}} loc("{{.*}}locations.py":[[# @LINE - 6]]:{{[0-9]+}})
# CHECK:         flow.full {{.*}} loc("{{.*}}locations.py":[[# @LINE - 7]]:{{[0-9]+}})
# CHECK:         flow.maximum {{.*}} loc("{{.*}}locations.py":[[# @LINE - 8]]:{{[0-9]+}})
# CHECK-NOT:     loc("{{.*}}frontend/_
x = np.zeros((4, 3), np.float32)
w = np.zeros((3, 2), np.float32)
b = np.zeros((2,), np.float32)
print(flow.jit(mlp).lower(x, w, b).as_text(debug_info=True))


def plain(x):
    return x * 2.0


# Without debug_info there are no locations.
# CHECK-LABEL: func.func @plain(
# CHECK-NOT:     loc(
# CHECK:         func.return
print(flow.jit(plain).lower(np.zeros((2,), np.float32)).as_text())
