"""`flow.nn.functional` losses, composed from primitives (PyTorch semantics).

Class-index targets select their log-probability through a one-hot mask
(`iota == target`) and a sum over the class dim, so no gather primitive is
needed and the same code traces. Weighted `mean` reductions divide by the
total weight of the targets that count (not ignored), exactly as PyTorch.
Target values out of range raise eagerly; in compiled code the program computes the
first bad target and the call raises the same IndexError (frontend/_index_checks.py).
"""

from __future__ import annotations

import warnings

import numpy as np

from flow.core import dtypes as _dtypes
from flow.ops import index_checks as checks
from flow import primitives as P
from flow.ops.basic import (
    as_tensor,
    promote,
    abs,
    broadcast_to,
    eq,
    log,
    maximum,
    mean,
    ne,
    reshape,
    sum,
    to,
    unsqueeze,
    where,
)
from flow.primitives.registry import bind, composite
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from ._activations import log_softmax, logsigmoid

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(op: str, reduction: str, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed)
        raise op_error(op, f"reduction must be one of {names}, got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    return loss


def _float_input(op: str, input) -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected a floating-point input, got {x.dtype!r}", cls=TypeError)
    return x


def _pair(op: str, input, target) -> tuple[Tensor, Tensor]:
    """Input and target in one float dtype and shape (broadcasting, with PyTorch's warning)."""
    x, t = as_tensor(input), as_tensor(target)
    if tuple(x.shape) != tuple(t.shape):
        warnings.warn(
            f"{op}: using a target size ({list(t.shape)}) that is different to the input size "
            f"({list(x.shape)}); this will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )
    x, t = promote(op, x, t)
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected floating-point input and target, got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    return x, t


# --------------------------------------------------------------------------- regression


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Squared error `(input - target)**2`."""
    _check_reduction("mse_loss", reduction)
    x, t = _pair("mse_loss", input, target)
    d = x - t
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Absolute error `|input - target|`."""
    _check_reduction("l1_loss", reduction)
    x, t = _pair("l1_loss", input, target)
    return _reduce(abs(x - t), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:  # fmt: skip
    """`0.5 d**2 / beta` where `|d| < beta`, else `|d| - 0.5 beta` (L1 when beta = 0)."""
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise op_error("smooth_l1_loss", f"beta must be non-negative, got {beta}")
    x, t = _pair("smooth_l1_loss", input, target)
    d = abs(x - t)
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:  # fmt: skip
    """`0.5 d**2` where `|d| < delta`, else `delta (|d| - 0.5 delta)`."""
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise op_error("huber_loss", f"delta must be positive, got {delta}")
    x, t = _pair("huber_loss", input, target)
    d = abs(x - t)
    return _reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)


# --------------------------------------------------------------------------- binary


def _same_shape(op: str, x: Tensor, t: Tensor) -> Tensor:
    t = as_tensor(t)
    if tuple(t.shape) != tuple(x.shape):
        raise op_error(op, f"expected target of the input's shape {list(x.shape)}, got "
                           f"{list(t.shape)}")  # fmt: skip
    return to(t, x.dtype)


def _weighted(op: str, loss: Tensor, weight) -> Tensor:
    if weight is None:
        return loss
    w, _ = promote(op, as_tensor(weight), loss)
    return loss * w


def _check_unit_interval(op: str, name: str, t: Tensor) -> None:
    """Eagerly, every value of `t` in [0, 1] (compiled code cannot check values)."""
    if t._data is not None:
        bad = ~((t._data >= 0) & (t._data <= 1))
        if bad.any():
            raise op_error(op, f"all elements of {name} should be between 0 and 1, got "
                               f"{t._data[bad].reshape(-1)[0].item()!r}")  # fmt: skip


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:  # fmt: skip
    """`-w (t log(x) + (1 - t) log(1 - x))`, each log clamped to >= -100 like PyTorch."""
    op = "binary_cross_entropy"
    _check_reduction(op, reduction)
    x = _float_input(op, input)
    t = _same_shape(op, x, target)
    _check_unit_interval(op, "input", x)
    _check_unit_interval(op, "target", t)
    log_x = maximum(log(x), -100.0)
    log_1mx = maximum(bind(P.log1p, -x), -100.0)
    loss = (t - 1.0) * log_1mx - t * log_x
    return _reduce(_weighted(op, loss, weight), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:  # fmt: skip
    """BCE of `sigmoid(input)`, as `(1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x)` (stable)."""
    op = "binary_cross_entropy_with_logits"
    _check_reduction(op, reduction)
    x = _float_input(op, input)
    t = _same_shape(op, x, target)
    ls = logsigmoid(x)
    if pos_weight is not None:
        pw, _ = promote(op, as_tensor(pos_weight), x)
        ls = ls * ((pw - 1.0) * t + 1.0)
    loss = (1.0 - t) * x - ls
    return _reduce(_weighted(op, loss, weight), reduction)


def kl_div(input: Tensor, target: Tensor, reduction: str = "mean",
           log_target: bool = False) -> Tensor:  # fmt: skip
    """Pointwise `target (log(target) - input)` (0 where target is 0); input holds log-probs.

    `reduction="batchmean"` divides the sum by the batch size (the true KL
    divergence per sample); `"mean"` divides by the number of elements.
    """
    op = "kl_div"
    _check_reduction(op, reduction, (*_REDUCTIONS, "batchmean"))
    x, t = _pair(op, input, target)
    if log_target:
        loss = bind(P.exp, t) * (t - x)
    else:
        loss = where(eq(t, 0.0), 0.0, t * log(t)) - t * x
    if reduction == "batchmean":
        return sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction)


# --------------------------------------------------------------------------- classification


def _class_layout(op: str, x: Tensor) -> tuple[int, int]:
    """The class dim of input `(C,)`, `(N, C)` or `(N, C, d1, ...)`, and the class count."""
    if x.ndim == 0:
        raise op_error(op, "expected input of shape (C,), (N, C) or (N, C, d1, ...), got a "
                           "0-d tensor")  # fmt: skip
    class_dim = 0 if x.ndim == 1 else 1
    return class_dim, x.shape[class_dim]


def _class_indices(op: str, x: Tensor, target, class_dim: int, ignore_index: int,
                   probabilities_allowed: bool) -> Tensor:  # fmt: skip
    t = as_tensor(target)
    c = x.shape[class_dim]
    expected = (*x.shape[:class_dim], *x.shape[class_dim + 1 :])
    if t.dtype.kind == 1 and expected and tuple(t.shape) == (*expected, 1):
        t = reshape(t, *expected)  # OneFlow takes indices with a trailing 1 as well: (N, 1)
    if tuple(t.shape) != expected or t.dtype.kind != 1:
        also = (
            f" (or class probabilities of shape {list(x.shape)})" if probabilities_allowed else ""
        )
        raise op_error(op, f"expected target of shape {list(expected)} with class indices in "
                           f"[0, {c}){also}, got {t.dtype.name} target of shape "
                           f"{list(t.shape)}")  # fmt: skip
    if t._data is not None:
        v = t._data
        bad = (v != ignore_index) & ((v < 0) | (v >= c))
        if bad.any():
            raise op_error(op, f"target {v[bad].reshape(-1)[0]} is out of bounds for {c} classes",
                           cls=IndexError)  # fmt: skip
    else:
        checks.check_targets(op, t, c, ignore_index)
    return to(t, _dtypes.int64)


def _class_weight(op: str, weight, x: Tensor, class_dim: int) -> Tensor | None:
    """The per-class weight as a tensor broadcastable against the input, or None."""
    if weight is None:
        return None
    w = as_tensor(weight)
    c = x.shape[class_dim]
    if tuple(w.shape) != (c,):
        raise op_error(op, f"expected weight of shape [{c}] (one per class), got {list(w.shape)}")
    view = [1] * x.ndim
    view[class_dim] = c
    return to(reshape(w, *view), x.dtype)


def _nll_terms(logp, t, w, class_dim, ignore_index) -> tuple[Tensor, Tensor, Tensor]:
    """Per-target `-w[t] logp[t]` (0 where ignored), the target weights, and the valid mask."""
    onehot = eq(bind(P.iota, dim=class_dim, shape=tuple(logp.shape), dtype=_dtypes.int64),
                broadcast_to(unsqueeze(t, class_dim), logp.shape))  # fmt: skip
    valid = ne(t, ignore_index)
    picked = sum(where(onehot, logp, 0.0), class_dim)
    if w is None:
        tw = to(valid, logp.dtype)
    else:
        tw = where(valid, sum(where(onehot, broadcast_to(w, logp.shape), 0.0), class_dim), 0.0)
    return where(valid, -picked * tw, 0.0), tw, valid


def _nll_parts(logp, t, *, class_dim, ignore_index, reduction) -> Tensor:
    """The unweighted NLL of index targets, reduced: what `nll` computes as one kernel."""
    nll, tw, _ = _nll_terms(logp, t, None, class_dim, ignore_index)
    if reduction == "none":
        return nll
    return _weighted_mean(sum(nll), sum(tw)) if reduction == "mean" else sum(nll)


def _all(a: np.ndarray) -> np.ndarray:
    return P.reduce.impl(a, kind="sum", dims=tuple(range(a.ndim)))


@composite("nll", _nll_parts)
def _nll(logp, t, *, class_dim, ignore_index, reduction):
    """`_nll_parts` on numpy, the same bits: each target's log-probability is one element
    (the masked sum over classes adds zeros to it), negated where the target counts."""
    valid = t != ignore_index
    picked = _at_targets(logp, np.where(valid, t, 0), class_dim)
    nll = np.where(valid, -picked, np.zeros((), logp.dtype))
    if reduction == "none":
        return nll
    if reduction == "sum":
        return _all(nll)
    count = _all(valid.astype(logp.dtype))
    return np.where(count == 0, np.array(np.nan, logp.dtype), _all(nll) / count)


def _nll_grad_parts(ct, logp, t, *, class_dim, ignore_index, reduction) -> Tensor:
    """The cotangent of `_nll_parts` for `logp`: minus the result's cotangent (over the
    number of counted targets, for `mean`) at each counted target's class."""
    onehot = eq(bind(P.iota, dim=class_dim, shape=tuple(logp.shape), dtype=_dtypes.int64),
                broadcast_to(unsqueeze(t, class_dim), logp.shape))  # fmt: skip
    valid = ne(t, ignore_index)
    hit = onehot & broadcast_to(unsqueeze(valid, class_dim), logp.shape)
    if reduction == "none":
        g = unsqueeze(ct, class_dim)
    else:
        g = ct / sum(to(valid, logp.dtype)) if reduction == "mean" else ct
    return where(hit, broadcast_to(-g, logp.shape), 0.0)


@composite("nll_grad", _nll_grad_parts)
def _nll_grad(ct, logp, t, *, class_dim, ignore_index, reduction):
    valid = t != ignore_index
    if reduction == "none":
        g = -ct
    else:
        g = np.broadcast_to(-(ct / _all(valid.astype(logp.dtype))) if reduction == "mean"
                            else -ct, t.shape)  # fmt: skip
    grad = np.zeros(logp.shape, logp.dtype)
    _at_targets(grad, np.where(valid, t, 0), class_dim, np.where(valid, g, 0))
    return grad


def _at_targets(a: np.ndarray, t: np.ndarray, class_dim: int, values=None):
    """`a`'s element at each target's class (`a` has the targets' shape with the class dim
    inserted at `class_dim`), or, given `values`, those elements set to them."""
    if a.ndim == 2 and class_dim == 1:  # [batch, classes]: plain integer indexing, no index build
        at = (np.arange(a.shape[0]), t)
        if values is None:
            return a[at]
        a[at] = values
        return None
    at = np.expand_dims(t, class_dim)
    if values is None:
        return np.take_along_axis(a, at, class_dim).squeeze(class_dim)
    np.put_along_axis(a, at, np.expand_dims(values, class_dim), class_dim)
    return None


_nll.vjp = lambda ct, logp, t, *, out, **params: (bind(_nll_grad, ct, logp, t, **params), None)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:  # fmt: skip
    """Negative log-likelihood of class indices, given log-probabilities `input`.

    `mean` divides by the summed weight of the non-ignored targets (NaN if all
    are ignored, as in PyTorch).
    """
    op = "nll_loss"
    _check_reduction(op, reduction)
    x = _float_input(op, input)
    class_dim, _ = _class_layout(op, x)
    t = _class_indices(op, x, target, class_dim, ignore_index, False)
    w = _class_weight(op, weight, x, class_dim)
    if w is None:
        return bind(_nll, x, t, class_dim=class_dim, ignore_index=ignore_index,
                    reduction=reduction)  # fmt: skip
    loss, tw, _ = _nll_terms(x, t, w, class_dim, ignore_index)
    if reduction == "mean":
        return _weighted_mean(sum(loss), sum(tw))
    return _reduce(loss, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:  # fmt: skip
    """Cross entropy of the logits `input` with class indices or class probabilities.

    Index targets have the input's shape minus the class dim; probability
    targets (floats) have the input's shape. With `label_smoothing` e, index
    targets mix `(1 - e)` of their NLL with `e / C` of the summed (weighted)
    negative log-probabilities of all classes, and probability targets become
    `(1 - e) target + e / C`. `mean` divides by the summed weight of the
    non-ignored targets for indices, and by the number of samples for
    probabilities.
    """
    op = "cross_entropy"
    _check_reduction(op, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise op_error(op, f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    x = _float_input(op, input)
    class_dim, c = _class_layout(op, x)
    w = _class_weight(op, weight, x, class_dim)
    logp = log_softmax(x, class_dim)
    tt = as_tensor(target)
    if tt.dtype.is_floating_point and tuple(tt.shape) == tuple(x.shape):
        probs = to(tt, x.dtype)
        if label_smoothing > 0:
            probs = probs * (1.0 - label_smoothing) + label_smoothing / c
        terms = probs * logp if w is None else probs * logp * w
        loss = -sum(terms, class_dim)
        if reduction == "mean":
            return sum(loss) / (x.numel() // c if c else 0)
        return _reduce(loss, reduction)
    t = _class_indices(op, x, tt, class_dim, ignore_index, True)
    if w is None and label_smoothing == 0:
        return bind(_nll, logp, t, class_dim=class_dim, ignore_index=ignore_index,
                    reduction=reduction)  # fmt: skip
    nll, tw, valid = _nll_terms(logp, t, w, class_dim, ignore_index)
    if label_smoothing > 0:
        all_classes = -sum(logp if w is None else logp * w, class_dim)
        smooth = where(valid, all_classes, 0.0)
        eps_c = label_smoothing / c
        if reduction == "none":
            return nll * (1.0 - label_smoothing) + smooth * eps_c
        total = sum(nll) * (1.0 - label_smoothing) + sum(smooth) * eps_c
    else:
        if reduction == "none":
            return nll
        total = sum(nll)
    return _weighted_mean(total, sum(tw)) if reduction == "mean" else total


def _weighted_mean(total: Tensor, weight: Tensor) -> Tensor:
    """`total / weight`, NaN when no target counts (`weight` 0) as in PyTorch. The NaN is
    selected, not left to 0 / 0: Vulkan leaves division by zero undefined (lavapipe gives 0)."""
    return where(eq(weight, 0.0), float("nan"), total / weight)


__all__ = [
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy",
]  # fmt: skip
