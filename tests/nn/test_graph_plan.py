"""`nn.Graph.plan()`: the traced step's ops carry their module's path (the names of their
locations, backward ops included, the update named "optimizer"), and the plan groups them so;
`plan(*inputs)` traces a step without running it."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = self.model(x).sum()
        loss.backward()
        return loss


def _graph():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    return model, _Step(model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))


def test_traced_ops_are_named_with_their_module_path():
    model, step = _graph()
    x = flow.tensor(np.ones((2, 3), np.float32))
    lowered = step._engine.trace_only((x,), build=step._recorded_build, config=step.config,
                                      find_stages=step._find_stages)  # fmt: skip
    text = lowered.as_text(debug_info=True)
    matmuls = [line for line in text.splitlines() if "flow.matmul" in line]
    assert len(matmuls) == 5  # two forward, three backward (x needs no gradient)
    assert sum('loc("model.0"' in m for m in matmuls) == 2  # forward and weight gradient
    assert sum('loc("model.2"' in m for m in matmuls) == 3
    assert 'flow.sub' in text and 'loc("optimizer"' in text
    assert 'loc("model.0"("' in text  # the user's line stays inside the name


def test_plan_of_the_last_step_groups_ops_by_module():
    model, step = _graph()
    with pytest.raises(RuntimeError, match=r"_Step.plan: not traced yet"):
        step.plan()
    step(flow.tensor(np.ones((2, 3), np.float32)))
    facts = step.plan().facts
    assert [m.scope for m in facts.modules][:3] == ["model.0", "model.1", "model.2"]
    assert "optimizer" in [m.scope for m in facts.modules]
    assert facts.boxings == [] and facts.stages == []
    assert ">model.2<" in step.plan().svg()


def test_plan_with_inputs_traces_without_running():
    model, step = _graph()
    before = [p.numpy().copy() for p in model.parameters()]
    opt = step._engine.optimizers[0]
    plan = step.plan(flow.tensor(np.ones((2, 3), np.float32)))
    assert {"model.0", "model.2", "optimizer"} <= {m.scope for m in plan.facts.modules}
    assert all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.parameters()))
    assert opt.state == {} or all(not v for v in opt.state.values())
    assert step._engine.step_count == 0
