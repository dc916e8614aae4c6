"""Execution tiers (compile/tiers.py): a new program runs at once on the eager kernels while
IREE compiles it in the background, and switches to the compiled program when it is ready.

References are eager mode (the interpreter runs its kernels, so interpreted results equal it
exactly) and a program compiled before its first call (`sync_compile=True`).
"""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.compile import tiers
from flow.compile.interpret import Interpreter
from flow.compile.stages import Compiled
from flow.targets import CompileError, compiler


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A fresh compile cache: a program found in the cache is loaded, never interpreted."""
    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path / "cache"))


def _mlp(x, w1, b1, w2):
    return (flow.relu(x @ w1 + b1) @ w2).softmax(-1)


def _args(rng, n=8):
    return [flow.tensor(rng.standard_normal(s).astype(np.float32))
            for s in ((n, 5), (5, 7), (7,), (7, 3))]  # fmt: skip


def test_sync_compile_setting(monkeypatch):
    monkeypatch.delenv("FLOW_SYNC_COMPILE", raising=False)
    assert not tiers.sync_compile()
    for value, sync in (("1", True), ("on", True), ("0", False), ("off", False), ("", False)):
        monkeypatch.setenv("FLOW_SYNC_COMPILE", value)
        assert tiers.sync_compile() is sync
    assert tiers.sync_compile(False) is False and tiers.sync_compile(True) is True


def test_first_call_is_interpreted_then_compiled(rng, empty_cache):
    args = _args(rng)
    f = flow.jit(_mlp, sync_compile=False)
    want = _mlp(*args).numpy()
    got = f(*args).numpy()
    (program,) = f._cache.values()
    assert isinstance(program, tiers.Tiered)
    if program.tier == "interpreted":  # the compile may already be done on a fast machine
        # the eager kernels in the same order (BLAS results may differ in the last bit with
        # the alignment of their operands)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    compiled = program.wait()
    assert isinstance(compiled, Compiled) and program.tier == "compiled"
    np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-5, atol=1e-6)
    assert program.vmfb == compiled.vmfb
    # the background compile filled the cache: a new function of the same program loads it
    g = flow.jit(_mlp, sync_compile=False)
    np.testing.assert_allclose(g(*args).numpy(), want, rtol=1e-5, atol=1e-6)
    assert isinstance(next(iter(g._cache.values())), Compiled)


def test_sync_compile_runs_compiled_from_the_first_call(rng, empty_cache):
    f = flow.jit(_mlp, sync_compile=True)
    f(*_args(rng))
    assert isinstance(next(iter(f._cache.values())), Compiled)


def test_interpreter_equals_eager_bitwise_on_many_ops(rng):
    x = flow.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    i = flow.tensor(np.array([3, 0, 5, 1], np.int64))

    def fn(x, i):
        y = flow.tanh(x).cumsum(1) * flow.sigmoid(x)
        z = flow.gather(y, 1, i.reshape(4, 1)).squeeze(1)
        return flow.cat([z, y.max(1).values, y.mean(0)]), (x > 0).sum(), y.transpose(0, 1)

    lowered = flow.jit(fn).lower(x, i)
    outs = Interpreter(lowered)(x.numpy(), i.numpy(), *[t.numpy() for t in lowered.captured])
    for got, want in zip(outs, [t.numpy() for t in fn(x, i)]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


class _Step(nn.Graph):
    def __init__(self, model, opt, sync):
        super().__init__(sync_compile=sync)
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(nn.functional.dropout(x, 0.25)), y)
        loss.backward()
        return loss


def _train(sync: bool | None, steps: int, switch_at: int | None = None):
    """`steps` graph steps of a small classifier with dropout and Adam, from fixed seeds;
    with tiers, the step waits for its compile before step `switch_at`."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 4))
    opt = flow.optim.Adam(model.parameters(), lr=0.05)
    step = _Step(model, opt, sync)
    rng = np.random.default_rng(1)
    x = flow.tensor(rng.standard_normal((10, 12)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 10))
    losses, tiers_seen = [], []
    for k in range(steps):
        if k == switch_at:
            next(iter(step._engine.programs.values())).wait()
        losses.append(float(step(x, y)))
        program = next(iter(step._engine.programs.values()))
        tiers_seen.append(getattr(program, "tier", "compiled"))
    return losses, model, opt, tiers_seen, flow.default_generator.get_state().tolist()


def test_training_state_carries_over_the_switch(empty_cache):
    """Parameters, Adam's state and the dropout generator's counter pass from the interpreted
    steps to the compiled ones: the run matches one compiled from its first step."""
    losses, model, opt, seen, generator = _train(False, 6, switch_at=3)
    assert seen[0] == "interpreted" and seen[3:] == ["compiled"] * 3
    ref_losses, ref_model, ref_opt, _, ref_generator = _train(True, 6)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-5)
    state, ref_state = opt.state_dict()["state"], ref_opt.state_dict()["state"]
    for k in ref_state:
        for name in ref_state[k]:
            np.testing.assert_allclose(np.asarray(state[k][name].numpy()),
                                       np.asarray(ref_state[k][name].numpy()),
                                       rtol=1e-4, atol=1e-5)  # fmt: skip
    assert generator == ref_generator


def test_background_compile_error_surfaces_at_the_next_call(rng, empty_cache, monkeypatch):
    monkeypatch.setattr(compiler, "_iree_compile", lambda: "false")  # exits 1, writes nothing
    args = _args(rng, n=11)  # a program no other test compiled (none in the in-process memo)
    f = flow.jit(_mlp, sync_compile=False)
    want = _mlp(*args).numpy()
    # interpreted, while the compile fails
    np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-6, atol=1e-7)
    (program,) = f._cache.values()
    program._job.done.wait()
    with pytest.raises(CompileError, match="iree-compile exited with 1") as info:
        f(*args)
    assert "background compile of _mlp" in "".join(getattr(info.value, "__notes__", []))
    assert len(f._cache) == 0  # forgotten: the next call starts over
    np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-6, atol=1e-7)
    assert next(iter(f._cache.values())).tier == "interpreted"
