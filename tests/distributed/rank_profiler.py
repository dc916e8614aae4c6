"""A profiled data-parallel nn.Graph step on every rank (dp_graph_step.py), exported as one
trace: the path is argv[1]. The compiled per-rank program all-reduces the weight gradients
through the `comm` module; an eager all-reduce of a global tensor runs too. Prints
`rank R: profiled` when done."""

from __future__ import annotations

import sys

from dp_graph_step import data_parallel_step

import flow
from flow.distributed.placement import sbp

rank = flow.env.get_rank()
pl, model, step, x, y = data_parallel_step()
step(x, y)  # traced and compiled before the profile: what is profiled is the steady step

with flow.profiler.profile() as prof:
    for _ in range(3):
        loss = step(x, y)
        prof.step()
    partial = flow.ones(4).to_global(pl, sbp.partial_sum).to_global(sbp=sbp.broadcast)
path = prof.export_chrome_trace(sys.argv[1])
assert (path is not None) == (rank == 0), path
print(f"rank {rank}: profiled", flush=True)
