"""Functional layers (`flow.nn.functional`), composed from primitives."""

from __future__ import annotations

from flow.amp import is_autocast_enabled
from flow.core.tensor import Tensor
from flow.ops import conv as _conv
from flow.ops import interpolate as _interpolate
from flow.ops import pooling as _pooling
from flow.ops.basic import add_bias, as_tensor, matmul, t
from flow.ops.conv import *  # noqa: F403
from flow.ops.conv import fold, unfold
from flow.ops.gather import embedding, one_hot
from flow.ops.interpolate import *  # noqa: F403
from flow.ops.movement import pad
from flow.ops.pooling import *  # noqa: F403

from . import _activations, _losses, _norms
from ._attention import scaled_dot_product_attention
from ._activations import *  # noqa: F403  (each module lists its functions in __all__)
from ._losses import *  # noqa: F403
from ._norms import *  # noqa: F403


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`input @ weight.T + bias`, with `weight` of shape (out_features, in_features)."""
    out = matmul(input, t(weight))
    if bias is not None and bias.dtype is not out.dtype and is_autocast_enabled():
        bias = bias.to(out.dtype)  # under flow.autocast the output stays in its low dtype
    return out if bias is None else add_bias(out, as_tensor(bias), -1)


__all__ = ["linear", "pad", "scaled_dot_product_attention", "embedding", "one_hot", "fold",
           "unfold", *_activations.__all__, *_losses.__all__, *_norms.__all__, *_conv.__all__,
           *_pooling.__all__, *_interpolate.__all__]  # fmt: skip
