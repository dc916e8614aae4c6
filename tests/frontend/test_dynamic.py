"""Shape polymorphism (compile/dynamic.py): calls that differ in sizes share one compiled
program with those dims dynamic. References: numpy, and eager training of a copy of the
model on the same batches; compiles are counted at IREE's entry points."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.compile import dynamic as dynamic_mod
from flow.compile.stages import Compiled
from flow.targets import CompileError, compiler

RNG = np.random.default_rng(7)
W = RNG.standard_normal((12, 5)).astype(np.float32)


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """A fresh compile cache, and the IREE compiles run meanwhile (their sources)."""
    from flow.targets import cache

    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memory()
    seen: list[str] = []
    for name in ("_compile_uncached", "_compile_in_child"):
        real = getattr(compiler, name)

        def counted(source, *rest, _real=real):
            seen.append(source)
            return _real(source, *rest)

        monkeypatch.setattr(compiler, name, counted)
    return seen


def layer(x):
    w = flow.tensor(W)
    return flow.relu(x @ w).mean(0), (x * x).sum(1)


def layer_ref(x):
    return np.maximum(x @ W, 0).mean(0), (x * x).sum(1)


def check(fn, n):
    x = RNG.standard_normal((n, 12)).astype(np.float32)
    for got, want in zip(fn(flow.tensor(x)), layer_ref(x)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_second_size_makes_the_dim_dynamic(compiles):
    f = flow.jit(layer, sync_compile=True)
    check(f, 4)
    assert len(compiles) == 1 and "?x" not in compiles[0]
    check(f, 6)  # the second size: one dynamic program
    assert len(compiles) == 2 and "tensor<?x12xf32>" in compiles[1]
    for n in (9, 1, 31, 6):
        check(f, n)
    assert len(compiles) == 2


def test_marked_dims_are_dynamic_from_the_first_call(compiles):
    f = flow.jit(layer, sync_compile=True, dynamic={"x": 0})
    check(f, 5)
    assert len(compiles) == 1 and "tensor<?x12xf32>" in compiles[0]
    for n in (2, 17):
        check(f, n)
    assert len(compiles) == 1
    g = flow.jit(layer, sync_compile=True, dynamic=0)  # dim 0 of every argument
    check(g, 1)  # a size of 1 traces the companions 2 and 3
    check(g, 8)
    assert len(compiles) == 1  # the same dynamic program, from the cache


def test_dynamic_false_compiles_each_shape(compiles):
    f = flow.jit(layer, sync_compile=True, dynamic=False)
    for n in (4, 6, 9):
        check(f, n)
    assert len(compiles) == 3


def test_a_branch_on_the_size_gets_its_own_program(compiles):
    @flow.jit(sync_compile=True)
    def f(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    for n in (6, 8, 3, 10):
        x = RNG.standard_normal((n, 3)).astype(np.float32)
        want = x * 2 if n > 4 else x - 1
        np.testing.assert_allclose(f(flow.tensor(x)).numpy(), want, rtol=1e-6)
    assert len(compiles) == 3  # 6 (static), then the dynamic one, and 3's own


def test_a_size_the_program_cannot_generalize_stays_static(compiles):
    def f(x):
        return x * (1 / x.shape[0])

    auto = flow.jit(f, sync_compile=True)
    marked = flow.jit(f, sync_compile=True, dynamic=0)
    for n in (4, 6, 7):
        x = RNG.standard_normal((n, 2)).astype(np.float32)
        np.testing.assert_allclose(auto(flow.tensor(x)).numpy(), x / n, rtol=1e-6)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_allclose(marked(flow.tensor(x)).numpy(), x / n, rtol=1e-6)
        if n == 4:  # the marked function says once why it stays static
            assert any("cannot be dynamic" in str(w.message) for w in caught)
    assert len(compiles) == 3  # one program per size, the two functions share them


def _vulkan_here() -> bool:
    from flow.targets import available

    return "vulkan" in available()


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.skipif(
    "not _vulkan_here()", reason="no Vulkan device here (lavapipe: mesa-vulkan-drivers)"))])
def test_training_graph_with_a_partial_last_batch(compiles, device):
    """An nn.Graph step over batches of 8, 8, 5, 8, 3: after the first two sizes one
    program serves every batch, and the parameters track eager training (on the cpu)."""
    flow.manual_seed(0)
    ref = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 3))
    model = copy.deepcopy(ref).to(device)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = flow.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    class Step(nn.Graph):
        def __init__(self):
            super().__init__(sync_compile=True)
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()
            return loss

    step = Step()
    for n in (8, 8, 5, 8, 3):
        x = flow.tensor(RNG.standard_normal((n, 12)).astype(np.float32))
        y = flow.tensor(RNG.integers(0, 3, n))
        loss = step(x.to(device), y.to(device))
        ref_opt.zero_grad()
        ref_loss = loss_fn(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.numpy(), ref_loss.numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.cpu().numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
    steady = [s for s in compiles if "tensor<?x12xf32>" in s]
    assert len(steady) == 1 and len(compiles) == 2  # the batch of 8, then the dynamic step


def test_background_compile_serves_every_size(compiles):
    f = flow.jit(layer, sync_compile=False, dynamic=0)
    check(f, 4)  # interpreted while the dynamic program compiles
    programs = list(f._cache.values())
    programs[0].wait()
    assert programs[0].tier == "compiled"
    check(f, 7)  # compiled already: no interpreted call
    assert isinstance(list(f._cache.values())[1], Compiled)
    assert len(compiles) == 1


def test_a_failed_dynamic_compile_falls_back_to_static(compiles, monkeypatch):
    def rejected(self, target, *, in_child):
        raise CompileError("injected", target=target.name, flags=())

    monkeypatch.setattr(dynamic_mod.Family, "_build", rejected)
    f = flow.jit(layer, sync_compile=False, dynamic=0)
    check(f, 4)
    program = list(f._cache.values())[0]
    program.wait()  # the size's own static program, compiled instead
    assert program.tier == "compiled"
    check(f, 4)
    check(f, 6)  # the family stays static: a program of its own
    assert sum("?x" in s for s in compiles) == 0


def test_bad_dynamic_options():
    with pytest.raises(TypeError, match="dynamic=True does not say which dims"):
        flow.jit(layer, dynamic=True)
    with pytest.raises(TypeError, match="must be a dim"):
        flow.jit(layer, dynamic="x")
    with pytest.raises(TypeError, match="'z', which is no argument"):
        flow.jit(layer, dynamic={"z": 0})(flow.zeros(3, 12))
    with pytest.raises(IndexError, match="marks dim 2 of argument 'x', which has 2 dims"):
        flow.jit(layer, dynamic={"x": 2})(flow.zeros(3, 12))
    with pytest.raises(ValueError, match="marks dims that cannot vary"):
        flow.jit(layer, dynamic={"x": 1})(flow.zeros(3, 12))  # 12 must match the weight
