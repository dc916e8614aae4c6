"""Per-step metrics of collectives that one rank reaches late, under `flow-run -n 2`: rank 1
sleeps before a barrier and before an eager all-reduce (a partial sum made broadcast). Prints
each step's `comm_ms` and `wait_ms` per rank."""

from __future__ import annotations

import time

import numpy as np

import flow
from flow import placement, sbp

LATE_S = 0.3
rank = flow.env.get_rank()
metrics = flow.profiler.enable_metrics()
pl = placement("cpu", [0, 1])
x = flow.tensor(np.arange(4, dtype=np.float32)).to_global(placement=pl, sbp=sbp.partial_sum)
flow.env.barrier()
metrics.step()  # step 0: both arrive together (after the launch's own agreements)
for late in (True, True, False):
    if late and rank == 1:
        time.sleep(LATE_S)
    flow.env.barrier()
    y = x.to_global(sbp=sbp.broadcast)  # an all-reduce: both are at it, neither waits long
    metrics.step()
np.testing.assert_array_equal(y.to_local().numpy(), 2 * np.arange(4, dtype=np.float32))
for s in metrics.steps[1:]:
    print(f"rank {rank}: step {s['step']} comm {s['comm_ms']:.3f} wait {s['wait_ms']:.3f} "
          f"step {s['step_ms']:.3f} split {s['compute_ms'] + s['comm_ms'] + s['host_ms']:.3f}",
          flush=True)
print(flow.profiler.format_summary(metrics.summary(since=1)), flush=True)
