"""The signature of a staged call: what of its arguments a compiled program is specialized to.

A tensor or array leaf contributes its shape and dtype (a global tensor also its placement
and SBP), any other leaf is a static value and contributes itself (it must be hashable).
`flow.jit` and `nn.Graph` key their compiled programs by it (see compile/staging.py), and a
`Compiled` refuses a call whose signature is not the one it was lowered for.
"""

from __future__ import annotations

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor

__all__ = ["describe", "is_array", "signature"]


def is_array(x) -> bool:
    """Whether the leaf `x` is an argument of the compiled program (else a static value)."""
    return isinstance(x, (Tensor, np.ndarray))


def signature(leaves: list) -> tuple:
    """The signature of flattened arguments: one hashable entry per leaf."""
    sig = []
    for x in leaves:
        if isinstance(x, Tensor) and getattr(x, "_dist", None) is not None:
            sig.append(("G", tuple(x.shape), x.dtype.name, x._dist.placement, x._dist.sbp))
        elif isinstance(x, Tensor):
            sig.append(("T", tuple(x.shape), x.dtype.name))
        elif isinstance(x, np.ndarray):
            sig.append(("T", x.shape, _dtypes.as_dtype(x.dtype).name))
        else:
            try:
                hash(x)
            except TypeError:
                raise TypeError(
                    f"flow.jit: argument of type {type(x).__name__} is neither a tensor nor "
                    "hashable; pass tensors/arrays, or hashable static values"
                ) from None
            sig.append(("S", type(x).__name__, x))
    from flow.amp import autocast_key

    return tuple(sig) + autocast_key()  # a trace under flow.autocast casts differently


def describe(sig: tuple) -> str:
    """A signature as the user reads it: `(float32[2, 3], 4)`."""
    parts = []
    for entry in sig:
        if entry[0] == "T":
            parts.append(f"{entry[2]}{list(entry[1])}")
        elif entry[0] == "G":
            parts.append(f"global {entry[2]}{list(entry[1])} sbp={list(entry[4])}")
        else:
            parts.append(repr(entry[2]))
    return "(" + ", ".join(parts) + ")"
