"""The max / min pooling VJP over windows that tile the input (stride = window, no padding),
which routes each window's cotangent in a fixed handful of ops, against the general
per-offset routing it stands in for (ties, NaN, rows past the last whole window, 1-3 spatial
dims, 16-bit floats), against PyTorch, and compiled inside `flow.jit` against eager."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import jit_grads_match_eager

import flow
import flow.nn.functional as F
from flow.primitives import window as W
from flow.primitives.registry import bind

CASES = [((2, 3, 8, 8), (1, 1, 2, 2)), ((2, 3, 9, 7), (1, 1, 2, 2)), ((2, 3, 9), (1, 1, 3)),
         ((1, 2, 4, 6, 6), (1, 1, 2, 3, 2)), ((3, 5), (3, 1)), ((4, 6, 6), (2, 3, 2))]  # fmt: skip


def _grad(x0, ct0, kind, window):
    x = flow.tensor(x0, requires_grad=True)
    y = bind(W.reduce_window, x, kind=kind, window=window, strides=window,
             dilations=(1,) * len(window), padding=((0, 0),) * len(window))  # fmt: skip
    (y * flow.tensor(ct0)).sum().backward()
    return x.grad.numpy()


@pytest.mark.parametrize("shape,window", CASES, ids=str)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_tiled_routing_is_the_general_routing(rng, monkeypatch, shape, window, kind, dt):
    x0 = rng.integers(-2, 3, shape).astype(dt)  # many ties
    x0.reshape(-1)[rng.integers(0, x0.size, 3)] = np.nan
    outs = tuple(n // w for n, w in zip(shape, window))
    ct0 = rng.standard_normal(outs).astype(dt)
    fast = _grad(x0, ct0, kind, window)
    monkeypatch.setattr(W, "_tiles", lambda *args: False)
    general = _grad(x0, ct0, kind, window)
    assert fast.dtype == general.dtype == np.dtype(dt)
    np.testing.assert_array_equal(fast, general)


@pytest.mark.parametrize("shape,window", CASES, ids=str)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_eager_kernel_is_its_decomposition(rng, shape, window, kind, dt):
    """The composite's one eager kernel against the primitives it stands for, bit for bit:
    ties, NaN in the input and in the cotangent, signed zeros."""
    dtype = getattr(flow, dt)
    x0 = rng.integers(-2, 3, shape).astype(np.float32)
    x0.reshape(-1)[rng.integers(0, x0.size, 3)] = np.nan
    x0[x0 == 0] = np.where(rng.random(np.count_nonzero(x0 == 0)) > 0.5, 0.0, -0.0)
    x = flow.tensor(x0).to(dtype)
    y = bind(W.reduce_window, x, kind=kind, window=window, strides=window,
             dilations=(1,) * len(window), padding=((0, 0),) * len(window))  # fmt: skip
    ct0 = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    ct0.reshape(-1)[0] = np.nan
    ct = flow.tensor(ct0).to(dtype)
    whole = bind(W.tiled_extreme_grad, ct, x, y, window=window)
    parts = W.tiled_extreme_grad.decompose(ct, x, y, window=window)
    assert whole.dtype is parts.dtype is dtype and whole.shape == x.shape
    bits = {2: np.uint16, 4: np.uint32}[whole.numpy().dtype.itemsize]
    np.testing.assert_array_equal(whole.numpy().view(bits), parts.numpy().view(bits))


def test_tiled_max_pool_routes_ties_like_torch(rng):
    torch = pytest.importorskip("torch")
    x0 = rng.integers(0, 3, (2, 3, 9, 7)).astype(np.float32)
    ct0 = rng.standard_normal((2, 3, 4, 3)).astype(np.float32)
    x = flow.tensor(x0, requires_grad=True)
    (F.max_pool2d(x, 2) * flow.tensor(ct0)).sum().backward()
    tx = torch.tensor(x0, requires_grad=True)
    (torch.nn.functional.max_pool2d(tx, 2) * torch.tensor(ct0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_tiled_pool_gradients_inside_jit(rng):
    def fn(x):
        return F.max_pool2d(x, 2).sum() + (F.max_pool2d(x * x, (3, 2)) * 2).sum()

    x = rng.integers(-2, 3, (2, 3, 7, 8)).astype(np.float32)
    jit_grads_match_eager(fn, x)


def test_tiled_pool_second_order(rng):
    """The routed cotangent stays differentiable (create_graph): d/dct of the gradient."""
    x = flow.tensor(rng.standard_normal((1, 2, 4, 4)).astype(np.float32), requires_grad=True)
    ct = flow.tensor(rng.standard_normal((1, 2, 2, 2)).astype(np.float32), requires_grad=True)
    (g,) = flow.autograd.grad((F.max_pool2d(x, 2) * ct).sum(), [x], create_graph=True)
    (gct,) = flow.autograd.grad((g * g).sum(), [ct])
    np.testing.assert_allclose(gct.numpy(), 2 * ct.numpy(), rtol=1e-6)
