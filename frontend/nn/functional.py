"""Functional layers (`flow.nn.functional`), composed from primitives."""

from __future__ import annotations

from .._ops import matmul, relu, t
from .._tensor import Tensor


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`input @ weight.T + bias`, with `weight` of shape (out_features, in_features)."""
    out = matmul(input, t(weight))
    return out if bias is None else out + bias


__all__ = ["linear", "relu"]
