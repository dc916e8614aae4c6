"""Gradient oracles: central finite differences in float64 (and jit == eager for backward)."""

from __future__ import annotations

import numpy as np

import flow


def numeric_grads(fn, arrays, eps=1e-6):
    """d sum(fn(*arrays) * w) / d arrays by central differences, w a fixed random weight."""
    rng = np.random.default_rng(123)
    out = np.asarray(fn(*[flow.tensor(a) for a in arrays]).numpy(), np.float64)
    weight = rng.standard_normal(out.shape)

    def scalar(*xs):
        with flow.no_grad():
            y = fn(*[flow.tensor(x) for x in xs]).numpy().astype(np.float64)
        return float((y * weight).sum())

    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a, dtype=np.float64)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (scalar(*plus) - scalar(*minus)) / (2 * eps)
        grads.append(g)
    return grads, weight


def analytic_grads(fn, arrays, weight):
    ts = [flow.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * flow.tensor(weight, dtype=out.dtype)).sum().backward()
    return [t.grad.numpy() for t in ts]


def gradcheck(fn, *arrays, rtol=1e-5, atol=1e-7, name=None):
    """Backward of `fn` (float64 inputs) matches finite differences."""
    arrays = [np.asarray(a, np.float64) for a in arrays]
    num, weight = numeric_grads(fn, arrays)
    ana = analytic_grads(fn, arrays, weight)
    for i, (n, a) in enumerate(zip(num, ana)):
        np.testing.assert_allclose(
            a,
            n,
            rtol=rtol,
            atol=atol,
            err_msg=f"{name or getattr(fn, '__name__', 'fn')}: input {i}",
        )


def jit_grads_match_eager(fn, *arrays, rtol=1e-5, atol=1e-6):
    """Gradients computed inside flow.jit equal the eager ones."""

    def step(*xs):
        ts = [x.detach().requires_grad_() for x in xs]
        out = fn(*ts)
        return flow.autograd.grad(out.sum(), ts)

    eager = step(*[flow.tensor(a) for a in arrays])
    compiled = flow.jit(step)(*arrays)
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=rtol, atol=atol)
