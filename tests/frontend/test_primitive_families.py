"""The primitive families (frontend/primitives/): each VJP sits in its kernel's module, and the
window VJP's host-built masks reach global tensors as broadcast constants."""

from __future__ import annotations

import numpy as np

import flow
import flow.nn.functional as F
from flow.primitives.registry import PRIMITIVES


def test_each_vjp_is_defined_beside_its_kernel():
    apart = [
        f"{name}: kernel in {p.impl.__module__}, VJP in {p.vjp.__module__}"
        for name, p in sorted(PRIMITIVES.items())
        if p.vjp is not None and p.vjp.__module__ != p.impl.__module__
    ]
    assert not apart, "\n".join(apart)


def _max_pool1d_grad(x: np.ndarray, k: int, pad: int) -> np.ndarray:
    """d sum(max_pool1d(x, k, stride=1, padding=pad)) / dx: each window's first maximum."""
    n = x.shape[-1]
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], constant_values=-np.inf)
    grad = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        for start in range(n + 2 * pad - k + 1):
            at = start + int(np.argmax(xp[idx][start : start + k])) - pad
            grad[idx][at] += 1
    return grad


def test_max_pool_backward_on_a_global_tensor_with_a_long_dim():
    # 130 result positions: the VJP's per-offset padding masks (> 64 elements) are captured
    # host tensors, which a global op must take as broadcast constants.
    x = np.random.default_rng(0).standard_normal((1, 2, 130)).astype(np.float32)
    t = flow.tensor(x).to_global(flow.placement("cpu", [0]), (flow.sbp.broadcast,))
    t.requires_grad = True
    F.max_pool1d(t, 3, stride=1, padding=1).sum().backward()
    assert t.grad.is_global
    np.testing.assert_array_equal(t.grad.numpy(), _max_pool1d_grad(x, 3, 1))
