"""`graph.config.enable_zero`: argument checks, and the trace-time error on a model without a
data-parallel placement (one process: local parameters, a single-rank placement)."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
import flow.nn.functional as F
from flow.distributed.placement import placement, sbp


class Step(nn.Graph):
    def __init__(self, model, **zero):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        self.config.enable_zero(True, **zero)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def _batch():
    return flow.tensor(np.ones((4, 3), np.float32)), flow.tensor(np.array([0, 1, 0, 1]))


@pytest.mark.parametrize("kw, match", [
    (dict(stage=4), "stage must be 1, 2 or 3, got 4"),
    (dict(stage=0), "stage must be 1, 2 or 3, got 0"),
    (dict(stage="2"), "stage must be 1, 2 or 3"),
    (dict(shard_min_size=0), "shard_min_size must be an int >= 1, got 0"),
    (dict(shard_restore_level=5), "shard_restore_level must be 0, 1 or 2, got 5"),
])  # fmt: skip
def test_bad_arguments_name_what_is_expected(kw, match):
    with pytest.raises(ValueError, match=match):
        Step(nn.Linear(3, 2), **kw)


def test_mode_must_be_a_bool():
    g = Step(nn.Linear(3, 2))
    with pytest.raises(TypeError, match="mode must be True or False"):
        g.config.enable_zero("yes")
    g.config.enable_zero(False)
    assert g.config.zero is None
    assert np.isfinite(g(*_batch()).numpy())  # off again: a plain step


def test_local_model_has_no_data_parallel_axis():
    g = Step(nn.Linear(3, 2), stage=1)
    with pytest.raises(RuntimeError, match="needs a data-parallel placement, but model.weight "
                                           "is a local tensor"):  # fmt: skip
        g(*_batch())


def test_single_rank_placement_has_no_data_parallel_axis():
    model = nn.Linear(3, 2).to_global(placement("cpu", [0]), sbp.broadcast)
    g = Step(model, stage=2)
    x, y = (t.to_global(placement("cpu", [0]), sbp.broadcast) for t in _batch())
    with pytest.raises(RuntimeError, match=r"needs a data-parallel axis \(a 1-D placement of 2 "
                                           "or more ranks\\), but model.weight is placed on"):
        g(x, y)
