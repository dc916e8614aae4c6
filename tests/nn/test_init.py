"""flow.nn.init: gains, fans, exact bounds of the uniform schemes, moments of the normal
ones, deterministic fills, in-place semantics and seeded reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.nn import init

N = 200_000  # samples for moment checks: standard error of the mean ~ 0.0022 sigma


def _big(*shape, dtype=flow.float32):
    return flow.zeros(*shape, dtype=dtype)


def _fills_bound(w: np.ndarray, bound: float) -> None:
    """Every |w| within `bound` (up to float32 rounding), and the extremes close to it."""
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    assert np.abs(w).max() > 0.99 * bound


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01**2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fans_of_linear_and_conv_weights():
    fans = init._calculate_fan_in_and_fan_out
    assert fans(_big(7, 20)) == (20, 7)
    assert fans(_big(16, 4, 3, 3)) == (36, 144)
    assert fans(_big(8, 2, 5)) == (10, 40)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        fans(_big(5))


def test_uniform_bounds_and_moments():
    t = _big(N)
    out = init.uniform_(t, -2.0, 3.0)
    assert out is t
    a = t.numpy()
    assert a.min() >= -2.0 and a.max() <= 3.0
    assert abs(a.mean() - 0.5) < 0.02 and abs(a.std() - 5 / math.sqrt(12)) < 0.02


def test_normal_moments():
    a = init.normal_(_big(N), mean=1.5, std=0.5).numpy()
    assert abs(a.mean() - 1.5) < 0.005 and abs(a.std() - 0.5) < 0.005
    b = init.normal_(_big(N, dtype=flow.float64), std=2.0).numpy()
    assert b.dtype == np.float64 and abs(b.std() - 2.0) < 0.02


def test_trunc_normal_stays_in_bounds_with_truncated_moments():
    mean, std, lo, hi = 0.5, 1.0, -1.0, 1.0
    a = init.trunc_normal_(_big(N), mean, std, lo, hi).numpy()
    assert a.min() >= lo and a.max() <= hi
    alpha, beta = (lo - mean) / std, (hi - mean) / std
    pdf = [math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in (alpha, beta)]
    z = 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2)))
    want_mean = mean + std * (pdf[0] - pdf[1]) / z
    want_var = std**2 * (1 + (alpha * pdf[0] - beta * pdf[1]) / z - ((pdf[0] - pdf[1]) / z) ** 2)
    assert abs(a.mean() - want_mean) < 0.005 and abs(a.var() - want_var) < 0.005


def test_constant_ones_zeros_eye_dirac():
    np.testing.assert_array_equal(init.constant_(_big(2, 3), 0.25).numpy(), 0.25)
    np.testing.assert_array_equal(init.ones_(_big(3)).numpy(), 1)
    np.testing.assert_array_equal(init.zeros_(flow.ones(3)).numpy(), 0)
    np.testing.assert_array_equal(init.eye_(_big(2, 3)).numpy(), np.eye(2, 3))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(_big(2, 2, 2))
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    x = flow.randn(1, 3, 5, 5)
    np.testing.assert_allclose(conv(x).numpy(), x.numpy(), atol=1e-6)


def test_xavier_bounds_and_std():
    w = init.xavier_uniform_(_big(400, 600), gain=2.0).numpy()
    bound = 2.0 * math.sqrt(6 / 1000)
    _fills_bound(w, bound)
    w = init.xavier_normal_(_big(400, 600)).numpy()
    assert abs(w.std() - math.sqrt(2 / 1000)) < 0.01 * math.sqrt(2 / 1000)


def test_kaiming_bounds_modes_and_std():
    t = _big(64, 16, 3, 3)  # fan_in 144, fan_out 576
    w = init.kaiming_uniform_(t, a=math.sqrt(5)).numpy()
    bound = 1 / math.sqrt(144)  # sqrt(3) * sqrt(2 / 6) / sqrt(fan_in)
    _fills_bound(w, bound)
    w = init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu").numpy()
    bound = math.sqrt(6 / 576)
    _fills_bound(w, bound)
    w = init.kaiming_normal_(_big(500, 400), nonlinearity="relu").numpy()
    assert abs(w.std() - math.sqrt(2 / 400)) < 0.01 * math.sqrt(2 / 400)
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(t, mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(_big(0, 3))


def test_orthogonal():
    for shape in [(6, 4), (4, 6), (3, 2, 2)]:
        w = init.orthogonal_(_big(*shape), gain=2.0).numpy().reshape(shape[0], -1)
        small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(small, 4 * np.eye(min(w.shape)), atol=1e-5)


def test_fills_in_place_without_recording_grad():
    p = nn.Parameter(flow.zeros(4, 4))
    data = p.numpy()
    init.kaiming_uniform_(p)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert np.shares_memory(p.numpy(), data)  # written into the existing storage
    with pytest.raises(TypeError, match="floating-point"):
        init.normal_(flow.zeros(3, dtype=flow.int64))


def test_seeded_initialization_is_reproducible():
    def build():
        return nn.Sequential(nn.Linear(8, 4), nn.Conv1d(4, 2, 3), nn.Embedding(5, 3))

    flow.manual_seed(42)
    first = build().state_dict()
    flow.manual_seed(42)
    second = build().state_dict()
    third = build().state_dict()
    for key in first:
        np.testing.assert_array_equal(first[key].numpy(), second[key].numpy(), err_msg=key)
    assert not np.array_equal(first["0.weight"].numpy(), third["0.weight"].numpy())

    gen = flow.Generator().manual_seed(7)
    a = init.normal_(_big(10), generator=gen).numpy().copy()
    gen.manual_seed(7)
    np.testing.assert_array_equal(init.normal_(_big(10), generator=gen).numpy(), a)
