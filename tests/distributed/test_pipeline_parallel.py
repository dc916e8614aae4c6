"""Pipeline parallelism (rank_pipeline.py): a two-stage nn.Graph with four micro-batches under
1F1B and GPipe equals single-device training, on 2 ranks and, with 2-way tensor or data
parallelism inside each stage, on 4 ranks. Bad stage declarations fail at trace time with the
module and stages named (a world of one)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import HERE, launch

import flow
import flow.nn as nn
from flow.distributed.placement import placement, sbp


@pytest.mark.parametrize(("nproc", "mode"), [(2, "tp"), (4, "tp"), (4, "dp")])
def test_pipeline_training_equals_single_device(nproc, mode):
    run = launch(nproc, HERE / "rank_pipeline.py", mode, timeout=300)
    assert run.checks_passed(nproc) > 30, run.describe()


class _Step(nn.Graph):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b
        params = list({id(p): p for p in [*a.parameters(), *b.parameters()]}.values())
        self.add_optimizer(flow.optim.SGD(params, lr=0.1))

    def build(self, x):
        loss = self.b(self.a(x)).sum()
        loss.backward()
        return loss


def _call(a, b, stages, batch=4, micro=2):
    for module, (sid, pl) in zip((a, b), stages):
        module.to(nn.graph.GraphModule).set_stage(sid, pl)
    step = _Step(a, b)
    step.config.set_gradient_accumulation_steps(micro)
    x = flow.tensor(np.ones((batch, 3), np.float32)).to_global(placement("cpu", [0]), sbp.broadcast)
    return step(x)


def test_a_stage_id_that_skips_a_stage():
    p = placement("cpu", [0])
    with pytest.raises(ValueError, match=r"stage ids \[0, 2\] skip stage 1"):
        _call(nn.Linear(3, 3), nn.Linear(3, 1), [(0, p), (2, p)])


def test_overlapping_stage_placements():
    p = placement("cpu", [0])
    with pytest.raises(
        ValueError,
        match=r"placements of stage 0 \(a, ranks \[0\]\) and stage 1 "
        r"\(b, ranks \[0\]\) overlap on ranks \[0\]",
    ):
        _call(nn.Linear(3, 3), nn.Linear(3, 1), [(0, p), (1, p)])


def test_a_module_on_two_stages():
    shared = nn.Linear(3, 3)
    a, b = nn.Sequential(shared, nn.ReLU()), nn.Sequential(shared, nn.Linear(3, 1))
    a.to(nn.graph.GraphModule).set_stage(0, placement("cpu", [0]))
    with pytest.raises(ValueError, match="already stage 0"):
        a.to(nn.graph.GraphModule).set_stage(1, placement("cpu", [0]))
    # A submodule shared by two stages is named with both.
    b.to(nn.graph.GraphModule).set_stage(1, placement("cpu", [0]))
    step = _Step(a, b)
    with pytest.raises(
        ValueError,
        match=r"module Linear is used on stage 0 \(a.0\) and on stage 1 "
        r"\(b.0\)",
    ):
        step(flow.tensor(np.ones((4, 3), np.float32)))


def test_micro_batches_must_divide_the_batch():
    p = placement("cpu", [0])
    a, b = nn.Linear(3, 3), nn.Linear(3, 1)
    a.to_global(p, sbp.broadcast)
    b.to_global(p, sbp.broadcast)
    with pytest.raises(ValueError, match="batch dim divisible by 3"):
        _call(a, b, [(0, p)], batch=4, micro=3)


def test_set_stage_checks_its_arguments():
    with pytest.raises(TypeError, match="expected a flow.placement"):
        nn.Linear(2, 2).to(nn.graph.GraphModule).set_stage(0, [0, 1])
    with pytest.raises(ValueError, match="expected a stage id >= 0"):
        nn.Linear(2, 2).to(nn.graph.GraphModule).set_stage(-1, placement("cpu", [0]))
    with pytest.raises(ValueError, match="set_pipeline_schedule: expected one of 1f1b, gpipe"):
        _Step(nn.Linear(2, 2), nn.Linear(2, 1)).config.set_pipeline_schedule("zigzag")


def test_schedule_slots():
    from flow.lowering.pipeline_schedule import schedule_slots

    f = [("forward", k) for k in range(4)]
    b = [("backward", k) for k in range(4)]
    assert schedule_slots("gpipe", 2, 0, 4)[:-1] == f + b
    assert schedule_slots("1f1b", 2, 0, 4)[:-1] == [f[0], f[1], b[0], f[2], b[1], f[3], b[2], b[3]]
    assert schedule_slots("1f1b", 2, 1, 4)[:-1] == [f[0], b[0], f[1], b[1], f[2], b[2], f[3], b[3]]
    assert schedule_slots("1f1b", 4, 0, 2)[:-1] == f[:2] + b[:2]  # fewer micro-batches than stages
    with pytest.raises(ValueError, match="unknown pipeline schedule"):
        schedule_slots("zigzag", 2, 0, 4)
