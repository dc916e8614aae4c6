"""`flow.nn.functional` normalizations vs numpy references of their formulas.

References reduce in float64 with numpy's `mean`/`var` (biased for normalizing,
`ddof=1` for the running variance), independent of flow's composites.
"""

from __future__ import annotations

import numpy as np
import pytest
from checks import check, data

import flow
import flow.nn.functional as F

F32 = np.float32
EPS = 1e-5


def per_channel(v, ndim):
    return np.asarray(v, np.float64).reshape(1, -1, *([1] * (ndim - 2)))


def np_batch_norm(x, mean, var, w=None, b=None, eps=EPS):
    x = x.astype(np.float64)
    y = (x - per_channel(mean, x.ndim)) / np.sqrt(per_channel(var, x.ndim) + eps)
    if w is not None:
        y = y * per_channel(w, x.ndim)
    if b is not None:
        y = y + per_channel(b, x.ndim)
    return y.astype(F32)


def batch_stats(x):
    axes = (0, *range(2, x.ndim))
    x = x.astype(np.float64)
    return x.mean(axes), x.var(axes), x.var(axes, ddof=1)


# --------------------------------------------------------------------------- batch norm


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 2)])
def test_batch_norm_eval_and_train(rng, shape):
    x = data(rng, shape) * 3 + 1
    c = shape[1]
    rm, rv = data(rng, (c,)), data(rng, (c,), positive=True)
    w, b = data(rng, (c,)), data(rng, (c,))

    def fn(a, rm, rv, w, b):
        return (F.batch_norm(a, rm, rv, w, b),
                F.batch_norm(a, None, None, w, b, training=True, eps=1e-3),
                F.batch_norm(a, rm, rv))  # fmt: skip

    def ref(a, rm, rv, w, b):
        mean, var, _ = batch_stats(a)
        return (np_batch_norm(a, rm, rv, w, b), np_batch_norm(a, mean, var, w, b, eps=1e-3),
                np_batch_norm(a, rm, rv))  # fmt: skip

    check(fn, ref, x, rm, rv, w, b, rtol=1e-4, atol=1e-5)


def test_batch_norm_updates_running_stats_in_place(rng):
    x = data(rng, (5, 3, 4)) * 2 + 3
    rm0, rv0 = data(rng, (3,)), data(rng, (3,), positive=True)
    rm, rv = flow.tensor(rm0), flow.tensor(rv0)
    xt = flow.tensor(x.transpose(1, 0, 2).copy()).permute(1, 0, 2)  # non-contiguous input
    out = F.batch_norm(xt, rm, rv, training=True, momentum=0.25)
    mean, var, unbiased = batch_stats(x)
    np.testing.assert_allclose(out.numpy(), np_batch_norm(x, mean, var), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm.numpy(), 0.75 * rm0 + 0.25 * mean, rtol=1e-5)
    np.testing.assert_allclose(rv.numpy(), 0.75 * rv0 + 0.25 * unbiased, rtol=1e-5)
    assert rm.dtype is flow.float32 and rm.shape == (3,)


def test_batch_norm_in_jit_updates_running_stats_like_eager(rng):
    x = data(rng, (4, 2)) * 2 + 1
    rm, rv = flow.zeros(2), flow.ones(2)
    out = flow.jit(lambda a: F.batch_norm(a, rm, rv, training=True, momentum=0.5))(x)
    mean, var, unbiased = batch_stats(x)
    np.testing.assert_allclose(out.numpy(), np_batch_norm(x, mean, var), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rm.numpy(), 0.5 * mean, rtol=1e-5)  # written back after the call
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * unbiased, rtol=1e-5)
    out = flow.jit(lambda a: F.batch_norm(a, rm, rv))(x)  # evaluation reads the stats
    np.testing.assert_allclose(out.numpy(), np_batch_norm(x, rm.numpy(), rv.numpy()), rtol=1e-5)


# --------------------------------------------------------------------------- instance norm


def test_instance_norm(rng):
    x = data(rng, (2, 3, 4, 5)) * 2 - 1
    w, b = data(rng, (3,)), data(rng, (3,))
    rm0, rv0 = data(rng, (3,)), data(rng, (3,), positive=True)

    def ref(a, w, b):
        a64 = a.astype(np.float64)
        m, v = a64.mean((2, 3), keepdims=True), a64.var((2, 3), keepdims=True)
        y = (a64 - m) / np.sqrt(v + EPS) * per_channel(w, 4) + per_channel(b, 4)
        return y.astype(F32), np_batch_norm(a, rm0, rv0, w, b)

    def fn(a, w, b):
        return (F.instance_norm(a, weight=w, bias=b),
                F.instance_norm(a, flow.tensor(rm0), flow.tensor(rv0), w, b,
                                use_input_stats=False))  # fmt: skip

    check(fn, ref, x, w, b, rtol=1e-4, atol=1e-5)
    rm, rv = flow.tensor(rm0), flow.tensor(rv0)
    F.instance_norm(flow.tensor(x), rm, rv, momentum=0.5)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(rm.numpy(), 0.5 * rm0 + 0.5 * x64.mean((2, 3)).mean(0), rtol=1e-5)
    unbiased = x64.var((2, 3), ddof=1).mean(0)
    np.testing.assert_allclose(rv.numpy(), 0.5 * rv0 + 0.5 * unbiased, rtol=1e-5)


# --------------------------------------------------------------------------- layer / rms / group


def np_layer_norm(x, k, w=None, b=None, eps=EPS):
    axes = tuple(range(x.ndim - k, x.ndim))
    x = x.astype(np.float64)
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(F32)


def test_layer_norm(rng):
    x = data(rng, (3, 4, 5)) * 4 + 2
    w, b = data(rng, (4, 5)), data(rng, (5,))

    def fn(a, w, b):
        t = a.permute(0, 2, 1)  # (3, 5, 4), non-contiguous eagerly
        return (F.layer_norm(a, (4, 5), w), F.layer_norm(a, 5, None, b),
                F.layer_norm(t, [4], eps=1e-2), F.layer_norm(a, (3, 4, 5)),
                F.layer_norm(a.reshape(3, 4, 5, 1), (1,), bias=flow.ones(1)))  # fmt: skip

    def ref(a, w, b):
        return (
            np_layer_norm(a, 2, w),
            np_layer_norm(a, 1, None, b),
            np_layer_norm(a.transpose(0, 2, 1), 1, eps=1e-2),
            np_layer_norm(a, 3),
            np.ones((3, 4, 5, 1), F32),
        )  # a size-1 normalized dim leaves only the bias

    check(fn, ref, x, w, b, rtol=1e-4, atol=1e-5)


def test_rms_norm(rng):
    x = data(rng, (2, 3, 4))
    w = data(rng, (3, 4))

    def ref(a, w):
        a64 = a.astype(np.float64)
        eps = np.finfo(F32).eps
        r1 = a64 / np.sqrt((a64**2).mean(-1, keepdims=True) + eps)
        r2 = a64 / np.sqrt((a64**2).mean((1, 2), keepdims=True) + 0.1) * w
        return r1.astype(F32), r2.astype(F32)

    check(lambda a, w: (F.rms_norm(a, 4), F.rms_norm(a, (3, 4), w, eps=0.1)), ref, x, w,
          rtol=1e-5, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("shape, groups", [((2, 6, 5), 3), ((3, 4, 2, 2), 4), ((5, 4), 1)])
def test_group_norm(rng, shape, groups):
    x = data(rng, shape) * 3 + 1
    c = shape[1]
    w, b = data(rng, (c,)), data(rng, (c,))

    def ref(a, w, b):
        n = a.shape[0]
        g = a.astype(np.float64).reshape(n, groups, -1)
        y = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + EPS)
        y = y.reshape(a.shape) * per_channel(w, a.ndim) + per_channel(b, a.ndim)
        return y.astype(F32)

    check(lambda a, w, b: F.group_norm(a, groups, w, b), ref, x, w, b, rtol=1e-4, atol=1e-5)


def test_normalize(rng):
    x = data(rng, (4, 3, 2))
    x[0, :, 0] = 0.0  # a zero vector stays zero (the norm is clamped to eps)

    def ref(a):
        a64 = a.astype(np.float64)

        def norm(p, axis):
            n = np.linalg.norm(np.moveaxis(a64, axis, -1), ord=p, axis=-1)
            return np.maximum(np.expand_dims(n, axis), 1e-12)

        return tuple((a64 / norm(p, axis)).astype(F32) for p, axis in
                     ((2, 1), (1, 0), (np.inf, -1), (3, 1)))  # fmt: skip

    def fn(a):
        return (F.normalize(a), F.normalize(a, 1.0, 0), F.normalize(a, float("inf"), -1),
                F.normalize(a, 3.0))  # fmt: skip

    check(fn, ref, x, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "fn, exc, message",
    [
        (lambda: F.batch_norm(flow.ones(3), None, None, training=True), ValueError,
         r"batch_norm: expected input of shape \(N, C, \*\) \(at least 2 dims\), got \[3\]"),
        (lambda: F.batch_norm(flow.ones(1, 3), None, None, training=True), ValueError,
         r"expected more than 1 value per channel when training, got input of shape \[1, 3\]"),
        (lambda: F.batch_norm(flow.ones(4, 3), flow.zeros(2), flow.ones(3)), ValueError,
         r"batch_norm: expected running_mean of shape \[3\], got \[2\]"),
        (lambda: F.batch_norm(flow.ones(4, 3), None, None), ValueError,
         "running_mean and running_var are required when not training"),
        (lambda: F.batch_norm(flow.ones(4, 3, dtype=flow.int64), None, None), TypeError,
         "batch_norm: expected a floating-point input, got flow.int64"),
        (lambda: F.layer_norm(flow.ones(2, 5), (3,)), ValueError,
         r"layer_norm: given normalized_shape=\[3\], expected input of shape \[\*, 3\], "
         r"got \[2, 5\]"),
        (lambda: F.layer_norm(flow.ones(2, 5), 5, flow.ones(4)), ValueError,
         r"layer_norm: expected weight of shape \[5\], got \[4\]"),
        (lambda: F.layer_norm(flow.ones(2, 5), "5"), TypeError,
         "expected normalized_shape to be an int or a sequence of ints"),
        (lambda: F.group_norm(flow.ones(2, 6, 3), 4), ValueError,
         "group_norm: expected num_groups to be a positive divisor of the 6 channels, got 4"),
        (lambda: F.group_norm(flow.ones(2, 6), 3, flow.ones(3)), ValueError,
         r"group_norm: expected weight of shape \[6\], got \[3\]"),
        (lambda: F.instance_norm(flow.ones(2, 3, 1)), ValueError,
         "instance_norm: expected more than 1 spatial element when training"),
        (lambda: F.instance_norm(flow.ones(2, 3)), ValueError,
         r"instance_norm: expected input of shape \(N, C, \*spatial\)"),
        (lambda: F.normalize(flow.ones(2, 3), 0.0), ValueError,
         r"normalize: expected p > 0 or \+-inf, got 0.0"),
        (lambda: F.normalize(flow.ones(3)), IndexError,
         "normalize: dim 1 is out of range for a tensor of rank 1"),
        (lambda: F.rms_norm(flow.ones(2, 3), (2,)), ValueError,
         r"rms_norm: given normalized_shape=\[2\]"),
    ],
)  # fmt: skip
def test_errors(fn, exc, message):
    with pytest.raises(exc, match=message):
        fn()


def test_shape_errors_inside_jit_match_eager():
    with pytest.raises(ValueError, match=r"layer_norm: given normalized_shape=\[4\]"):
        flow.jit(lambda a: F.layer_norm(a, 4))(np.ones((2, 3), F32))
