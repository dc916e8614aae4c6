"""The `Flow` xDSL dialect object (every op and attribute of dialect/'s family modules) and
`make_context`; `flow.dialect` re-exports all of it (see dialect/__init__.py)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.ir import Dialect

from . import attr_names, distributed, elementwise, fused, movement, ops, random, structured, window
from .attr_names import *  # noqa: F403
from .attrs import DistAttr, PlacementAttr, Sbp, SbpAttr, dist_of
from .distributed import *  # noqa: F403
from .fused import *  # noqa: F403
from .movement import *  # noqa: F403  (each family module lists its ops in __all__)
from .ops import *  # noqa: F403
from .random import *  # noqa: F403
from .window import *  # noqa: F403

ALL_OPS = (
    elementwise.OPS + structured.OPS + movement.OPS + window.OPS + random.OPS
    + distributed.OPS + fused.OPS
)  # fmt: skip
"""Every op of the dialect, by family."""

Flow = Dialect(
    "flow",
    list(ALL_OPS),
    [
        PlacementAttr,
        SbpAttr,
        DistAttr,
        *elementwise.ATTRS,
        *structured.ATTRS,
        *movement.ATTRS,
        *window.ATTRS,
        *random.ATTRS,
        *distributed.ATTRS,
    ],
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
           *attr_names.__all__, *ops.__all__, *movement.__all__, *window.__all__, *random.__all__,
           *distributed.__all__, *fused.__all__]  # fmt: skip
__all__ = [n for n in __all__ if n != "ALL_OPS"] + ["ALL_OPS"]
