"""Functional layers (`flow.nn.functional`), composed from primitives."""

from __future__ import annotations

from flow.ops import window as _window
from flow.ops.movement import embedding, one_hot, pad
from flow.ops.basic import matmul, t
from flow.core.tensor import Tensor
from flow.ops.window import *  # noqa: F403
from . import _activations, _losses, _norms
from ._activations import *  # noqa: F403  (each module lists its functions in __all__)
from ._losses import *  # noqa: F403
from ._norms import *  # noqa: F403


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`input @ weight.T + bias`, with `weight` of shape (out_features, in_features)."""
    out = matmul(input, t(weight))
    return out if bias is None else out + bias


__all__ = ["linear", "pad", "embedding", "one_hot", *_activations.__all__, *_losses.__all__, *_norms.__all__,
           *_window.__all__]  # fmt: skip
