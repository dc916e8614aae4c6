"""The flow dialect's elementwise and structured ops, under the one name they had together.

The ops live in their family modules (`elementwise.py`, `structured.py`, and
`movement.py`, `window.py`, `random.py` for the others) on the base in
`base.py`; this module gathers the first two families, which is what
`flow.dialect.ops` has always held, so code that imports them from here keeps
working.
"""

from __future__ import annotations

from .base import FLOAT_TYPES, FlowOp, is_bool, is_float, is_int  # noqa: F401  (FLOAT_TYPES: as before)
from .elementwise import *  # noqa: F403  (the op classes)
from .elementwise import (
    ELEMENTWISE_OPS,
    BitwiseOp,
    CompareDirection,
    CompareDirectionAttr,
    ElementwiseOp,
)
from .structured import *  # noqa: F403
from .structured import STRUCTURED_OPS, ReduceKind, ReduceKindAttr

ALL_OPS = ELEMENTWISE_OPS + STRUCTURED_OPS

__all__ = [c.__name__ for c in ALL_OPS] + [
    "CompareDirection", "CompareDirectionAttr", "ElementwiseOp", "FlowOp", "BitwiseOp",
    "ReduceKind", "ReduceKindAttr", "ELEMENTWISE_OPS", "STRUCTURED_OPS", "ALL_OPS",
    "is_float", "is_int", "is_bool",
]  # fmt: skip
