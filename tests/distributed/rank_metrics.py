"""Per-step metrics of the data-parallel nn.Graph step of dp_graph_step.py under
`flow-run -n 2`, written by `FLOW_METRICS` (the environment names the path; rank r writes
`<stem>.rank<r><suffix>`). Prints, on each rank, a summary line and `rank R: grads B` with B
the bytes of the step's gradients, which the step all-reduces."""

from __future__ import annotations

from dp_graph_step import data_parallel_step

import flow

rank = flow.env.get_rank()
pl, model, step, x, y = data_parallel_step()
for _ in range(4):
    float(step(x, y).to_local().numpy())
grads = sum(p.to_local().numpy().nbytes for p in model.parameters())
print(flow.profiler.format_summary(flow.profiler.enable_metrics().summary(since=1)))
print(f"rank {rank}: grads {grads}", flush=True)
