"""Every differentiable core primitive's VJP against central finite differences (float64)."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import gradcheck, jit_grads_match_eager

import flow


def _x(rng, *shape, positive=False):
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.5 if positive else x


UNARY = {
    "neg": (flow.neg, False), "abs": (flow.abs, False), "exp": (flow.exp, False),
    "log": (flow.log, True), "sqrt": (flow.sqrt, True), "rsqrt": (flow.rsqrt, True),
    "tanh": (flow.tanh, False), "sin": (flow.sin, False), "cos": (flow.cos, False),
    "tan": (lambda x: flow.tan(x * 0.3), False), "atan": (flow.atan, False),
    "asin": (lambda x: flow.asin(x * 0.2), False), "acos": (lambda x: flow.acos(x * 0.2), False),
    "sinh": (flow.sinh, False), "cosh": (flow.cosh, False), "erf": (flow.erf, False),
    "log1p": (flow.log1p, True), "expm1": (flow.expm1, False), "log2": (flow.log2, True),
    "log10": (flow.log10, True), "sigmoid": (flow.sigmoid, False), "relu": (flow.relu, False),
}  # fmt: skip


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(rng, name):
    fn, positive = UNARY[name]
    gradcheck(fn, _x(rng, 3, 4, positive=positive), name=name)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "maximum": flow.maximum, "minimum": flow.minimum,
    "atan2": flow.atan2, "fmod": flow.fmod,
}  # fmt: skip


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_with_broadcasting(rng, name):
    gradcheck(BINARY[name], _x(rng, 3, 4), _x(rng, 4, positive=True) + 0.3, name=name)


def test_pow(rng):
    gradcheck(flow.pow, _x(rng, 5, positive=True), _x(rng, 5))
    gradcheck(lambda x: x**3, _x(rng, 5))
    gradcheck(lambda x: x**2, _x(rng, 5))


def test_maximum_splits_ties_evenly():
    a = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = flow.tensor([1.0, 1.0, 4.0], requires_grad=True)
    flow.maximum(a, b).sum().backward()
    assert a.grad.tolist() == [0.5, 1.0, 0.0] and b.grad.tolist() == [0.5, 0.0, 1.0]


def test_matmul_batched_and_vector(rng):
    gradcheck(flow.matmul, _x(rng, 2, 3, 4), _x(rng, 4, 5))
    gradcheck(flow.matmul, _x(rng, 4), _x(rng, 2, 4, 3))


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod"])
def test_reductions(rng, name):
    fn = getattr(flow, name)
    gradcheck(lambda x: fn(x, 1), _x(rng, 3, 4, 2))
    gradcheck(lambda x: fn(x, (0, 2), keepdim=True), _x(rng, 3, 4, 2))


def test_prod_with_zeros(rng):
    x = _x(rng, 3, 4)
    x[0, 1] = 0.0
    x[1, :2] = 0.0
    gradcheck(lambda t: flow.prod(t, 1), x)


def test_max_ties_share_gradient():
    x = flow.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    flow.amax(x, 1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5]]


def test_movement_and_selection(rng):
    gradcheck(lambda x: x.reshape(4, 3).T.flatten(), _x(rng, 3, 4))
    gradcheck(lambda x: x.permute(2, 0, 1) * 2, _x(rng, 2, 3, 4))
    gradcheck(lambda x: x.expand(2, 3, 4), _x(rng, 3, 1))
    gradcheck(lambda x, y: flow.where(x > 0, x * y, y), _x(rng, 3, 4), _x(rng, 4))
    gradcheck(lambda x: flow.clamp(x, -0.5, 0.5), _x(rng, 6))


def test_cast_passes_the_gradient_back_in_the_input_dtype():
    x = flow.tensor([1.5, -2.0], dtype=flow.float64, requires_grad=True)
    (x.to(flow.float32) * 3).sum().backward()
    assert x.grad.dtype is flow.float64 and x.grad.tolist() == [3.0, 3.0]


def test_statistics_and_composites(rng):
    gradcheck(lambda x: flow.var(x, 1), _x(rng, 3, 5))
    gradcheck(lambda x: flow.std(x), _x(rng, 3, 5))
    gradcheck(lambda x: flow.logsumexp(x, 1), _x(rng, 3, 5))
    gradcheck(lambda x: flow.norm(x, dim=1), _x(rng, 3, 5))
    gradcheck(lambda x, y: flow.einsum("bij,bjk->bik", x, y), _x(rng, 2, 3, 4), _x(rng, 2, 4, 2))
    gradcheck(lambda x: flow.cumsum(x, 1), _x(rng, 2, 4))


def test_rounding_has_zero_gradient(rng):
    x = flow.tensor(_x(rng, 5) * 3, requires_grad=True)
    (flow.floor(x) + flow.round(x) + flow.ceil(x) + flow.trunc(x)).sum().backward()
    assert x.grad.tolist() == [0.0] * 5


def test_gradients_inside_jit_match_eager(rng):
    a = _x(rng, 4, 3).astype(np.float32)
    w = _x(rng, 3, 2).astype(np.float32)
    b = _x(rng, 2).astype(np.float32)
    jit_grads_match_eager(lambda a, w, b: flow.tanh(a @ w + b).sum(1).exp(), a, w, b)
    jit_grads_match_eager(lambda a: flow.amax(a * a, 1) / flow.sum(a, 0).abs().sum(), a)
