"""The autograd engine: accumulation, graph lifetime, grad modes, custom Functions, errors."""

from __future__ import annotations

import numpy as np
import pytest

import flow


def test_grad_accumulates_and_zeroing_is_the_users_job():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


def test_second_backward_needs_retain_graph():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_non_scalar_backward_needs_gradient():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        y.backward()
    y.backward(gradient=flow.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_on_a_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        flow.tensor([1.0]).sum().backward()


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point dtype"):
        flow.tensor([1, 2], requires_grad=True)


def test_no_grad_detach_and_leaf_flags():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    with flow.no_grad():
        y = x * 2
    assert not y.requires_grad and y.is_leaf
    z = (x * 2).detach()
    assert not z.requires_grad
    w = x * 2
    assert w.requires_grad and not w.is_leaf and w.grad_fn is not None
    assert x.is_leaf and x.grad_fn is None

    @flow.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad
    with pytest.raises(RuntimeError, match="leaf variables"):
        w.requires_grad = False


def test_comparisons_are_not_differentiable_outputs():
    x = flow.tensor([1.0, -2.0], requires_grad=True)
    assert not (x > 0).requires_grad
    assert not flow.argmax(x).requires_grad


def test_autograd_grad_returns_without_accumulating():
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x**3).sum()
    (g,) = flow.autograd.grad(y, x)
    assert g.tolist() == [3.0, 12.0, 27.0] and x.grad is None
    u = flow.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="was not used"):
        flow.autograd.grad((x * 2).sum(), [x, u])
    gx, gu = flow.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None and gx.tolist() == [2.0, 2.0, 2.0]


def test_higher_order_with_create_graph():
    x = flow.tensor([2.0], requires_grad=True)
    (g,) = flow.autograd.grad((x**3).sum(), x, create_graph=True)
    (gg,) = flow.autograd.grad(g.sum(), x)
    assert g.tolist() == [12.0] and gg.tolist() == [12.0]


class Exp(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = flow.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ScaledSquare(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * ctx.k * x, None


def test_custom_function():
    x = flow.tensor([0.0, 1.0], requires_grad=True)
    y = Exp.apply(x)
    assert y.requires_grad and not Exp.apply(x.detach()).requires_grad
    (y * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([0.0, 1.0]), rtol=1e-6)
    z = flow.tensor([3.0], requires_grad=True)
    ScaledSquare.apply(z, 5.0).sum().backward()
    assert z.grad.tolist() == [30.0]


def test_custom_function_inside_jit():
    def step(x):
        x = x.detach().requires_grad_()
        return flow.autograd.grad(Exp.apply(x).sum(), x)[0]

    x = np.array([0.5, -1.0], np.float32)
    np.testing.assert_allclose(flow.jit(step)(x).numpy(), np.exp(x), rtol=1e-6)
