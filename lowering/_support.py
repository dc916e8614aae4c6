"""What the passes share: located pass errors, all-or-nothing rewrites, small IR helpers.

A pass raises `fail(op, "...")`, which names the op and its source location the way
MLIR's diagnostics do; a pass that rewrites the module in several steps runs them
`atomically`, so that a failure leaves its input intact for the repro `run_pipeline`
saves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import FileLineColLoc, FloatAttr, IntegerAttr, ModuleOp, UnknownLoc
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import PassFailedException

from flow.dialect.locations import source_location
from flow.dialect.ops import is_float

__all__ = ["atomically", "fail", "inverse_permutation", "location_prefix", "to_front", "zero"]


def location_prefix(op: Operation) -> str:
    """`file:line:col: ` of the op's source location, `loc: ` for another kind, else ``."""
    loc = source_location(op) or op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: "
    return "" if isinstance(loc, UnknownLoc) else f"{loc}: "


def fail(op: Operation, msg: str) -> PassFailedException:
    """A pass error naming the op and, when it has one, its source location."""
    return PassFailedException(f"{location_prefix(op)}'{op.name}' op {msg}")


def atomically(module: ModuleOp, rewrite: Callable[[ModuleOp], None]) -> None:
    """Apply `rewrite` to a copy of `module`, keeping the result only if it succeeds.

    A pass that fails halfway then leaves its input intact, for the repro.
    """
    work = module.clone()
    rewrite(work)
    module.body.erase_block(module.body.block, safe_erase=False)
    work.body.move_blocks(module.body)


def zero(element_type: Attribute) -> FloatAttr | IntegerAttr:
    """The attribute 0 of a float or integer element type."""
    if is_float(element_type):
        return FloatAttr(0.0, element_type)  # type: ignore[arg-type]
    return IntegerAttr(0, element_type)  # type: ignore[arg-type]


def inverse_permutation(perm: Sequence[int]) -> list[int]:
    """The permutation that undoes `perm` (`transpose(transpose(x, p), inverse(p)) == x`)."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def to_front(dim: int, ndim: int) -> list[int]:
    """The permutation moving dimension `dim` of `ndim` to the front, the others in order."""
    return [dim] + [d for d in range(ndim) if d != dim]
