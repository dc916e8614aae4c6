"""The `flow` MLIR dialect, defined in xDSL: attributes, ops, verifiers.

IREE's MLIR already owns the namespace `flow`, so our dialect lives in xDSL
and never crosses the hand-off to IREE (see lowering/).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.ir import Dialect

from . import ops
from .attrs import DistAttr, PlacementAttr, Sbp, SbpAttr, dist_of
from .ops import *  # noqa: F403  (re-exported op classes, see ops.__all__)

Flow = Dialect(
    "flow",
    list(ops.ALL_OPS),
    [PlacementAttr, SbpAttr, DistAttr, ops.CompareDirectionAttr, ops.ReduceKindAttr],
)


def make_context() -> Context:
    """A context that knows `flow` and the upstream dialects our IR mixes with."""
    from xdsl.dialects import arith, builtin, func, linalg, math, scf, tensor

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, tensor.Tensor,
              linalg.Linalg, scf.Scf, Flow):  # fmt: skip
        ctx.load_dialect(d)
    return ctx


__all__ = ["Flow", "make_context", "DistAttr", "PlacementAttr", "Sbp", "SbpAttr", "dist_of",
           *ops.__all__]  # fmt: skip
