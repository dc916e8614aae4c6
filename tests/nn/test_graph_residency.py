"""nn.Graph keeps parameters and optimizer state in device buffers between steps (only the
batch and the learning rate are uploaded), with eager semantics; a traced program whose
compiled module is cached skips lowering."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.targets import available, cache, runtime

RNG = np.random.default_rng(3)
X = RNG.standard_normal((16, 8)).astype(np.float32)
T = RNG.integers(0, 4, 16)


def _model_and_opt():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


class Step(nn.Graph):
    def __init__(self, model, opt, target=None):
        super().__init__(target=target)
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(opt)

    def build(self, x, t):
        loss = self.loss_fn(self.model(x), t)
        loss.backward()
        return loss


@pytest.mark.parametrize("target", ["cpu", "vulkan"])
def test_state_stays_on_device_and_equals_eager(target):
    if target not in available():
        pytest.skip(f"no {target} device on this machine")
    model_g, opt_g = _model_and_opt()
    model_e, opt_e = _model_and_opt()
    graph = Step(model_g, opt_g, target)
    loss_fn = nn.CrossEntropyLoss()
    x, t = flow.tensor(X), flow.tensor(T)
    n_state = 2 * len(list(model_g.parameters()))  # parameters and momentum buffers
    for step in range(5):
        if step == 3:  # an eager in-place update between compiled steps
            with flow.no_grad():
                model_g[0].weight.mul_(0.5)
                model_e[0].weight.mul_(0.5)
        runtime.reset_transfer_stats()
        graph(x, t)
        stats = runtime.transfer_stats()
        if step in (1, 2):  # steady state: only x, t and the learning rate are uploaded
            assert stats.uploads == 3 and stats.resident_args == n_state
        opt_e.zero_grad()
        loss_fn(model_e(x), t).backward()
        opt_e.step()
    for pg, pe in zip(model_g.parameters(), model_e.parameters()):
        np.testing.assert_allclose(pg.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6)
    state = model_g.state_dict()
    np.testing.assert_array_equal(state["0.weight"].numpy(), model_g[0].weight.numpy())


def test_cached_program_skips_lowering(monkeypatch, tmp_path):
    import flow.lowering

    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path))
    cache.clear_memory()

    def f(a, b):
        return flow.relu(a @ b) * 2.0

    a = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 3)).astype(np.float32)
    expected = flow.jit(f)(a, b).numpy()
    cache.clear_memory()  # as in a new process: the module comes from disk

    def no_lowering(*args, **kwargs):
        raise AssertionError("lowering ran although the program is cached")

    monkeypatch.setattr(flow.lowering, "run_pipeline", no_lowering)
    np.testing.assert_array_equal(flow.jit(f)(a, b).numpy(), expected)
    monkeypatch.setenv("FLOW_FUSION", "0")  # a knob of the lowering: part of the key
    with pytest.raises(AssertionError, match="lowering ran"):
        flow.jit(f)(a, b)


def test_cpu_driver_trial_settles_on_one_driver(monkeypatch):
    from flow.targets.runtime import CPU_DRIVERS, Function

    monkeypatch.delenv("FLOW_CPU_DRIVER", raising=False)
    f = flow.jit(lambda a: a * 2.0 + 1.0)
    x = flow.tensor(X)
    y = x
    for _ in range(14):  # results of one driver feed the other during the trial
        y = f(y) * 0.5
    np.testing.assert_allclose(y.numpy(), X + 7.0, rtol=1e-5)  # y -> y + 0.5 per call
    (compiled,) = f._cache.values()
    assert isinstance(compiled._fn, Function) and compiled._fn.module.driver in CPU_DRIVERS
    monkeypatch.setenv("FLOW_CPU_DRIVER", "local-sync")
    g = flow.jit(lambda a: a + 1.0)
    g(x)
    (compiled,) = g._cache.values()
    assert isinstance(compiled._fn, Function) and compiled._fn.module.driver == "local-sync"
