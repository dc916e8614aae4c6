"""`F.scaled_dot_product_attention` (PyTorch semantics), and the attention core that
`nn.MultiheadAttention` shares.

Both are composed from primitives (matmul, softmax, dropout), so they run eagerly,
trace into `flow.jit` / `nn.Graph` and differentiate like any composite. The softmax
over the keys is a masked one: a row whose keys are all masked out gives zero weights
(as PyTorch's `scaled_dot_product_attention` does) instead of NaN, with a zero gradient.

Mask conventions follow PyTorch, which differ between the two: for
`scaled_dot_product_attention` a bool mask is True where attention is *allowed*; for
`MultiheadAttention` a bool `attn_mask` / `key_padding_mask` is True where it is *not*.
Float masks are added to the scores in both.
"""

from __future__ import annotations

import math

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.ops import basic as O
from flow.ops.logical import isfinite

from ._activations import dropout

_NEG_INF = float("-inf")


def _masked_softmax(s: Tensor) -> Tensor:
    """Softmax over the last dim of scores that may hold -inf; all -inf rows give zeros."""
    m = O.amax(s, -1, keepdim=True).detach()
    m = O.where(isfinite(m), m, 0.0)
    e = O.exp(s - m)
    d = O.sum(e, -1, keepdim=True)
    return e / O.where(d == 0, 1.0, d)


def _float_tensor(op: str, name: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {name} to be a tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"{op}: expected {name} to be a floating-point tensor, got {t.dtype!r}")
    return t


def _attend(q: Tensor, k: Tensor, v: Tensor, keep: Tensor | None, bias: Tensor | None,
            dropout_p: float, scale: float) -> tuple[Tensor, Tensor]:  # fmt: skip
    """`softmax(q @ k^T * scale + bias, masked where not keep) @ v`, and the weights."""
    s = O.matmul(q, O.transpose(k, -2, -1)) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = O.where(keep, s, _NEG_INF)
    w = _masked_softmax(s)
    if dropout_p > 0:
        w = dropout(w, dropout_p, True)
    return O.matmul(w, v), w


def _causal_keep(length: int, source: int) -> Tensor:
    """The (L, S) bool mask of a causal attention: position i sees keys 0..i."""
    return O.tensor(np.tril(np.ones((length, source), dtype=bool)))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:  # fmt: skip
    """`softmax(query @ key^T * scale + mask) @ value` over (..., L, E) x (..., S, E).

    `attn_mask` broadcasts to (..., L, S): a bool mask keeps the scores where True,
    a float mask is added. `is_causal` masks out the keys after each query (the
    upper triangle of the (L, S) scores). `scale` defaults to `1 / sqrt(E)`;
    `dropout_p` is applied to the weights whenever it is positive, as in PyTorch.
    """
    op = "scaled_dot_product_attention"
    q, k, v = (_float_tensor(op, n, t) for n, t in (("query", query), ("key", key),
                                                     ("value", value)))  # fmt: skip
    if enable_gqa:
        raise NotImplementedError(f"{op}: enable_gqa=True is not supported")
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError(f"{op}: expected query, key and value of shape (..., L, E), "
                         f"(..., S, E), (..., S, Ev); got {list(q.shape)}, {list(k.shape)}, "
                         f"{list(v.shape)}")  # fmt: skip
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E) and value "
                         f"(..., S, Ev) to agree on E and S; got {list(q.shape)}, "
                         f"{list(k.shape)}, {list(v.shape)}")  # fmt: skip
    if q.dtype is not k.dtype or q.dtype is not v.dtype:
        raise TypeError(f"{op}: expected query, key and value of one dtype, got {q.dtype!r}, "
                        f"{k.dtype!r}, {v.dtype!r}")  # fmt: skip
    if not 0 <= dropout_p <= 1:
        raise ValueError(f"{op}: dropout_p has to be between 0 and 1, got {dropout_p}")
    length, source = q.shape[-2], k.shape[-2]
    keep = bias = None
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{op}: an explicit attn_mask must not be given with "
                             "is_causal=True")  # fmt: skip
        keep = _causal_keep(length, source)
    elif attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise TypeError(f"{op}: expected attn_mask to be a tensor, got "
                            f"{type(attn_mask).__name__}")  # fmt: skip
        batch = O.broadcast_shapes(op, tuple(q.shape[:-2]), tuple(k.shape[:-2]))
        scores = (*batch, length, source)
        try:
            fits = O.broadcast_shapes(op, tuple(attn_mask.shape), scores) == scores
        except Exception:
            fits = False
        if not fits:
            raise ValueError(f"{op}: attn_mask of shape {list(attn_mask.shape)} does not "
                             f"broadcast to the scores' shape {list(scores)}")  # fmt: skip
        if attn_mask.dtype is _dtypes.bool_:
            keep = attn_mask
        elif attn_mask.dtype.is_floating_point:
            bias = O.to(attn_mask, q.dtype)
        else:
            raise TypeError(f"{op}: expected a bool or floating-point attn_mask, got "
                            f"{attn_mask.dtype!r}")  # fmt: skip
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _attend(q, k, v, keep, bias, float(dropout_p), s)[0]


__all__ = ["scaled_dot_product_attention"]
