"""A 2x2 mesh of 4 ranks ([[0, 1], [2, 3]]): a compiled all_reduce over each column and each row,
through the group ids of register_mesh (and of register_group), compared with numpy."""

from __future__ import annotations

import sys

import numpy as np

import flow.env
from flow.targets import collectives, compile_mlir, load, register_group, register_mesh

T = "tensor<2x3xf32>"
NAME = collectives.import_name("all_reduce_sum", T)
PROGRAM = f"""
{collectives.declare("all_reduce_sum", T)}
func.func @reduce_over(%x: {T}, %group: i32) -> {T} {{
  %t = arith.constant 0 : i32
  %y, %t1 = func.call @{NAME}(%x, %t, %group) : ({T}, i32, i32) -> ({T}, i32)
  return %y : {T}
}}
"""

rank = flow.env.get_rank()
assert flow.env.get_world_size() == 4, "run on 4 ranks"
mesh = np.array([[0, 1], [2, 3]])
column_group, row_group = register_mesh(mesh)
module = load(compile_mlir(PROGRAM, "cpu"), "cpu")  # imports comm: collectives linked in


def data(r: int) -> np.ndarray:
    return (np.arange(6, dtype=np.float32).reshape(2, 3) + 1) * 10**r


row, col = np.argwhere(mesh == rank)[0]
x = data(rank)
over_rows = module["reduce_over"](x, column_group)[0]  # reduce along axis 0: my column
over_cols = module["reduce_over"](x, row_group)[0]  # reduce along axis 1: my row
np.testing.assert_array_equal(over_rows, sum(data(r) for r in mesh[:, col]))
np.testing.assert_array_equal(over_cols, sum(data(r) for r in mesh[row, :]))
# The same row groups from register_group, each rank naming only its own row (disjoint groups).
own_row = register_group(mesh[row].tolist())
np.testing.assert_array_equal(module["reduce_over"](x, own_row)[0], over_cols)
ranks = (collectives.group_ranks(column_group), collectives.group_ranks(row_group))
sys.stdout.write(f"rank {rank}: mesh ok column={list(ranks[0])} row={list(ranks[1])}\n")
