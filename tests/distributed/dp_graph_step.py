"""The data-parallel nn.Graph step that rank_profiler.py and rank_metrics.py run on every
rank: parameters broadcast global tensors, the batch split, so the compiled per-rank
program all-reduces the weight gradients through the `comm` module."""

from __future__ import annotations

import numpy as np

import flow
import flow.nn as nn
from flow.distributed.placement import placement, sbp


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__(sync_compile=True)  # compiled calls from the first step on
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def data_parallel_step():
    """(placement, model, step, x, y): an 8-16-4 MLP with SGD over every rank, a batch of 8."""
    pl = placement("cpu", list(range(flow.env.get_world_size())))
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    model = model.to_global(pl, sbp.broadcast)
    step = Step(model, flow.optim.SGD(model.parameters(), lr=0.1))
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 8).astype(np.int64))
    x = x.to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
    y = y.to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
    return pl, model, step, x, y
