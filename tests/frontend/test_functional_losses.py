"""`flow.nn.functional` losses vs numpy references written from PyTorch's documented formulas.

Class-index references gather with `np.take_along_axis`; weighted means divide
by the summed weight of the non-ignored targets; label smoothing mixes
`(1 - e)` of the NLL with `e / C` of the (weighted) sum over all classes.
"""

from __future__ import annotations

import numpy as np
import pytest
from checks import check, data

import flow
import flow.nn.functional as F

F32 = np.float32
REDUCTIONS = ("none", "mean", "sum")


def np_log_softmax(a, axis):
    a = a.astype(np.float64)
    s = a - a.max(axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis, keepdims=True))


def reduce(loss, reduction, denominator=None):
    if reduction == "none":
        return loss.astype(F32)
    total = loss.sum()
    if reduction == "sum":
        return np.asarray(total, F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / (loss.size if denominator is None else denominator), F32)


def np_nll(logp, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """NLL of class indices from log-probabilities `logp` with the class dim at 0 or 1."""
    class_dim = 0 if logp.ndim == 1 else 1
    lp = np.moveaxis(logp.astype(np.float64), class_dim, -1)  # (..., C)
    c = lp.shape[-1]
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    picked = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    target_weight = w[safe] * valid
    loss = -picked * target_weight
    if smoothing:
        loss = (1 - smoothing) * loss + smoothing / c * (-(lp * w).sum(-1) * valid)
    return reduce(loss, reduction, target_weight.sum())


def np_ce_probs(logits, probs, weight=None, reduction="mean", smoothing=0.0):
    class_dim = 0 if logits.ndim == 1 else 1
    c = logits.shape[class_dim]
    p = probs.astype(np.float64) * (1 - smoothing) + smoothing / c
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    shape = [1] * logits.ndim
    shape[class_dim] = c
    loss = -(p * np_log_softmax(logits, class_dim) * w.reshape(shape)).sum(class_dim)
    return reduce(loss, reduction, loss.size)


# --------------------------------------------------------------------------- cross entropy


LAYOUTS = [((6, 4), (6,)), ((2, 4, 3, 2), (2, 3, 2)), ((3, 5, 7), (3, 7))]


@pytest.mark.parametrize("input_shape, target_shape", LAYOUTS)
def test_cross_entropy_class_indices(rng, input_shape, target_shape):
    c = input_shape[1]
    logits = data(rng, input_shape) * 3
    target = rng.integers(0, c, target_shape)
    target.flat[::4] = -100  # ignored
    weight = (rng.random(c) + 0.2).astype(F32)
    cases = [(r, s) for r in REDUCTIONS for s in (0.0, 0.2)]

    def fn(x, t, w):
        t1 = flow.where(t == -100, 1, t)  # with ignore_index=1, -100 would be out of bounds
        return tuple(F.cross_entropy(x, t, w, reduction=r, label_smoothing=s) for r, s in cases) + (
            F.cross_entropy(x, t), F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"),
            F.cross_entropy(x, t1, ignore_index=1, reduction="none"))  # fmt: skip

    def ref(x, t, w):
        lp = np_log_softmax(x, 1)
        return tuple(np_nll(lp, t, w, reduction=r, smoothing=s) for r, s in cases) + (
            np_nll(lp, t), np_nll(lp, t, reduction="sum"),
            np_nll(lp, np.where(t == -100, 1, t), ignore_index=1, reduction="none"))  # fmt: skip

    check(fn, ref, logits, target, weight, rtol=1e-5, atol=1e-5)


def test_cross_entropy_takes_indices_with_a_trailing_1_as_oneflow_does(rng):
    """OneFlow's docs train with `flow.ones(N, 1, dtype=flow.int64)` targets: the trailing 1
    is dropped (OneFlow flattens the target), eager and compiled alike."""
    logits = data(rng, (6, 4))
    target = rng.integers(0, 4, (6, 1))

    def fn(x, t):
        return F.cross_entropy(x, t), F.nll_loss(F.log_softmax(x, 1), t, reduction="sum")

    def ref(x, t):
        lp = np_log_softmax(x, 1)
        return np_nll(lp, t[:, 0]), np_nll(lp, t[:, 0], reduction="sum")

    check(fn, ref, logits, target, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"expected target of shape \[6\]"):
        F.cross_entropy(flow.tensor(logits), flow.tensor(rng.integers(0, 4, (6, 2))))


def test_cross_entropy_probabilities(rng):
    logits = data(rng, (5, 3)) * 2
    probs = rng.dirichlet(np.ones(3), 5).astype(F32)
    logits_k = data(rng, (2, 3, 4))
    probs_k = np.moveaxis(rng.dirichlet(np.ones(3), (2, 4)), -1, 1).astype(F32)
    weight = (rng.random(3) + 0.5).astype(F32)

    def fn(x, p, w, xk, pk):
        return tuple(
            F.cross_entropy(x, p, w, reduction=r, label_smoothing=0.1) for r in REDUCTIONS
        ) + (F.cross_entropy(xk, pk), F.cross_entropy(x.T.T, p))

    def ref(x, p, w, xk, pk):
        return tuple(np_ce_probs(x, p, w, r, 0.1) for r in REDUCTIONS) + (
            np_ce_probs(xk, pk), np_ce_probs(x, p))  # fmt: skip

    check(fn, ref, logits, probs, weight, logits_k, probs_k, rtol=1e-5, atol=1e-5)


def test_cross_entropy_unbatched_and_all_ignored(rng):
    logits = data(rng, (4,))
    weight = (rng.random(4) + 0.5).astype(F32)

    def fn(x, t, w):
        t0 = t.reshape(())  # a 0-d class index for an unbatched (C,) input
        return (F.cross_entropy(x, t0, w, label_smoothing=0.3), F.nll_loss(x, t0, reduction="none"),
                F.cross_entropy(x.reshape(1, 4), flow.full((1,), -100, flow.int64)))  # fmt: skip

    def ref(x, t, w):
        return (np_nll(np_log_softmax(x, 0), t[0], w, smoothing=0.3),
                np_nll(x, t[0], reduction="none"), np.asarray(np.nan, F32))  # fmt: skip

    check(fn, ref, logits, np.array([2]), weight)


def test_out_of_range_targets(rng):
    x = data(rng, (3, 4))
    with pytest.raises(IndexError, match="cross_entropy: target 4 is out of bounds for 4 classes"):
        F.cross_entropy(flow.tensor(x), flow.tensor([0, 4, 1]))
    with pytest.raises(IndexError, match="nll_loss: target -1 is out of bounds"):
        F.nll_loss(flow.tensor(x), flow.tensor([0, -1, 1]))
    # Compiled code raises the same error after the call (tests/frontend/test_index_checks.py).
    with pytest.raises(IndexError, match="cross_entropy: target 4 is out of bounds for 4 classes"):
        flow.jit(lambda a, t: F.cross_entropy(a, t, reduction="sum"))(x, np.array([0, 4, 1]))


# --------------------------------------------------------------------------- regression


def test_regression_losses(rng):
    x, y = data(rng, (3, 4)) * 2, data(rng, (4, 3)) * 2

    def fn(a, b):
        a = a.T  # non-contiguous input
        return tuple(
            out for r in REDUCTIONS for out in (
                F.mse_loss(a, b, r), F.l1_loss(a, b, r), F.smooth_l1_loss(a, b, r, beta=0.5),
                F.smooth_l1_loss(a, b, r, beta=0.0), F.huber_loss(a, b, r, delta=0.7))
        )  # fmt: skip

    def ref(a, b):
        d = np.abs(a.T.astype(np.float64) - b)
        smooth = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25)
        huber = np.where(d < 0.7, 0.5 * d * d, 0.7 * (d - 0.35))
        return tuple(reduce(loss, r) for r in REDUCTIONS for loss in (d * d, d, smooth, d, huber))

    check(fn, ref, x, y, rtol=1e-5, atol=1e-5)


def test_regression_target_broadcasts_with_a_warning(rng):
    x, y = data(rng, (3, 4)), data(rng, (4,))
    with pytest.warns(UserWarning, match=r"mse_loss: using a target size \(\[4\]\) that is "
                                         r"different to the input size \(\[3, 4\]\)"):  # fmt: skip
        got = F.mse_loss(flow.tensor(x), flow.tensor(y), reduction="none")
    np.testing.assert_allclose(got.numpy(), (x - y) ** 2, rtol=1e-6)


# --------------------------------------------------------------------------- binary / kl


def test_binary_cross_entropy(rng):
    p = rng.random((4, 3)).astype(F32)
    p[0, 0], p[0, 1], p[1, 0] = 0.0, 1.0, 1e-30  # the logs are clamped at -100
    t = rng.random((4, 3)).astype(F32)
    t[0, 0], t[0, 1] = 1.0, 0.0
    w = (rng.random(3) + 0.5).astype(F32)

    def ref(x, t, w):
        x, t = x.astype(np.float64), t.astype(np.float64)
        with np.errstate(divide="ignore"):
            loss = -w * (
                t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100)
            )
        return tuple(reduce(loss, r) for r in REDUCTIONS)

    check(lambda x, t, w: tuple(F.binary_cross_entropy(x, t, w, r) for r in REDUCTIONS),
          ref, p, t, w, rtol=1e-5, atol=1e-4)  # fmt: skip


def test_binary_cross_entropy_with_logits(rng):
    x = data(rng, (4, 3)) * 5
    x[0, :] = [60.0, -60.0, 0.0]  # sigmoid saturates; the log-sum-exp form stays exact
    t = rng.random((4, 3)).astype(F32)
    w, pw = (rng.random(3) + 0.5).astype(F32), (rng.random(3) * 3).astype(F32)

    def ref(x, t, w, pw):
        x, t = x.astype(np.float64), t.astype(np.float64)
        log_p, log_q = -np.logaddexp(0, -x), -np.logaddexp(0, x)  # log sigmoid(x), log(1 - ...)
        plain = -(t * log_p + (1 - t) * log_q)
        weighted = -w * (pw * t * log_p + (1 - t) * log_q)
        return (*(reduce(weighted, r) for r in REDUCTIONS), reduce(plain, "mean"))

    def fn(x, t, w, pw):
        return (*(F.binary_cross_entropy_with_logits(x, t, w, r, pos_weight=pw)
                  for r in REDUCTIONS), F.binary_cross_entropy_with_logits(x, t))  # fmt: skip

    check(fn, ref, x, t, w, pw, rtol=1e-5, atol=1e-5)


def test_kl_div(rng):
    x = np_log_softmax(data(rng, (4, 5)), 1).astype(F32)
    t = rng.dirichlet(np.ones(5), 4).astype(F32)
    t[0, :2] = 0.0  # 0 * log 0 counts as 0
    lt = np_log_softmax(data(rng, (4, 5)), 1).astype(F32)

    def ref(x, t, lt):
        x64, t64 = x.astype(np.float64), t.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            pointwise = np.where(t64 > 0, t64 * (np.log(t64) - x64), 0.0)
        from_log = np.exp(lt) * (lt - x64)
        return (*(reduce(pointwise, r) for r in REDUCTIONS),
                np.asarray(pointwise.sum() / 4, F32), reduce(from_log, "sum"))  # fmt: skip

    def fn(x, t, lt):
        return (*(F.kl_div(x, t, r) for r in REDUCTIONS), F.kl_div(x, t, "batchmean"),
                F.kl_div(x, lt, "sum", log_target=True))  # fmt: skip

    check(fn, ref, x, t, lt, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "fn, exc, message",
    [
        (lambda: F.cross_entropy(flow.ones(3, 4), flow.tensor([0, 1])), ValueError,
         r"cross_entropy: expected target of shape \[3\] with class indices in \[0, 4\) \(or "
         r"class probabilities of shape \[3, 4\]\), got int64 target of shape \[2\]"),
        (lambda: F.cross_entropy(flow.ones(3, 4), flow.ones(3)), ValueError,
         r"expected target of shape \[3\] with class indices .* got float32 target of shape"),
        (lambda: F.nll_loss(flow.ones(3, 4), flow.ones(3, 4)), ValueError,
         r"nll_loss: expected target of shape \[3\] with class indices in \[0, 4\), got float32"),
        (lambda: F.cross_entropy(flow.ones(3, 4, dtype=flow.int64), flow.tensor([0, 1, 2])),
         TypeError, "cross_entropy: expected a floating-point input, got flow.int64"),
        (lambda: F.cross_entropy(flow.ones(3, 4), flow.tensor([0, 1, 2]), reduction="avg"),
         ValueError, "cross_entropy: reduction must be one of 'none', 'mean', 'sum', got 'avg'"),
        (lambda: F.cross_entropy(flow.ones(3, 4), flow.tensor([0, 1, 2]), label_smoothing=1.5),
         ValueError, "label_smoothing must be between 0.0 and 1.0, got 1.5"),
        (lambda: F.cross_entropy(flow.ones(3, 4), flow.tensor([0, 1, 2]), flow.ones(3)),
         ValueError, r"expected weight of shape \[4\] \(one per class\), got \[3\]"),
        (lambda: F.cross_entropy(flow.full((), 1.0, flow.float32), flow.tensor([0])),
         ValueError, r"expected input of shape \(C,\), \(N, C\) or \(N, C, d1, ...\)"),
        (lambda: F.mse_loss(flow.ones(2), flow.ones(2), "batchmean"), ValueError,
         "mse_loss: reduction must be one of"),
        (lambda: F.mse_loss(flow.tensor([1, 2]), flow.tensor([1, 2])), TypeError,
         "mse_loss: expected floating-point input and target, got flow.int64"),
        (lambda: F.smooth_l1_loss(flow.ones(2), flow.ones(2), beta=-1.0), ValueError,
         "smooth_l1_loss: beta must be non-negative, got -1.0"),
        (lambda: F.huber_loss(flow.ones(2), flow.ones(2), delta=0.0), ValueError,
         "huber_loss: delta must be positive, got 0.0"),
        (lambda: F.binary_cross_entropy(flow.ones(2, 3) * 0.5, flow.ones(3)), ValueError,
         r"binary_cross_entropy: expected target of the input's shape \[2, 3\], got \[3\]"),
        (lambda: F.binary_cross_entropy(flow.ones(2) * 1.5, flow.ones(2)), ValueError,
         "all elements of input should be between 0 and 1, got 1.5"),
        (lambda: F.binary_cross_entropy_with_logits(flow.ones(2, 3), flow.ones(2)), ValueError,
         r"binary_cross_entropy_with_logits: expected target of the input's shape \[2, 3\]"),
        (lambda: F.kl_div(flow.ones(2), flow.ones(2), "avg"), ValueError,
         "kl_div: reduction must be one of 'none', 'mean', 'sum', 'batchmean', got 'avg'"),
    ],
)  # fmt: skip
def test_errors(fn, exc, message):
    with pytest.raises(exc, match=message):
        fn()


def test_errors_inside_jit_match_eager():
    with pytest.raises(ValueError, match=r"cross_entropy: expected target of shape \[3\]"):
        flow.jit(F.cross_entropy)(np.ones((3, 4), F32), np.array([0, 1]))


def test_empty_batch():
    """An empty batch sums to 0, and its mean is 0 / 0 = NaN (as in PyTorch)."""

    def fn(x, t, y):
        return (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum"),
                F.cross_entropy(x, t, reduction="none"), F.mse_loss(y, y),
                F.l1_loss(y, y, reduction="sum"), F.layer_norm(y, 3), F.softmax(y, 0))  # fmt: skip

    def ref(x, t, y):
        nan, zero = np.asarray(np.nan, F32), np.asarray(0.0, F32)
        return nan, zero, np.zeros((0,), F32), nan, zero, y, y

    check(fn, ref, np.zeros((0, 4), F32), np.zeros((0,), np.int64), np.zeros((0, 3), F32))


@pytest.mark.parametrize(
    "name, fn",
    [
        ("cross_entropy", lambda x: F.cross_entropy(x, flow.tensor([0, 2, -100, 1]),
                                                    flow.tensor([0.5, 1.0, 2.0], dtype=flow.float64),
                                                    label_smoothing=0.2)),
        ("layer_norm+gelu", lambda x: (F.gelu(F.layer_norm(x, 3)) * x).sum()),
        ("batch_norm+softmax", lambda x: (F.softmax(F.batch_norm(x, None, None, training=True), 1)
                                          * x).sum()),
        ("bce_with_logits", lambda x: F.binary_cross_entropy_with_logits(x, F.sigmoid(x * 0.5))),
    ],
)  # fmt: skip
def test_gradients_match_finite_differences(rng, name, fn):
    """The composites are differentiable through their primitives' VJPs (float64, eagerly)."""
    a = rng.standard_normal((4, 3))
    x = flow.tensor(a, requires_grad=True)
    fn(x).backward()
    numeric = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += 1e-6
        lo[i] -= 1e-6
        numeric[i] = (fn(flow.tensor(hi)).item() - fn(flow.tensor(lo)).item()) / 2e-6
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-5, atol=1e-7, err_msg=name)
