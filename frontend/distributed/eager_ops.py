"""Eager primitives on global tensors, and the constants and creation ops they meet.

`global_bind` runs a primitive with global operands: it picks the cheapest SBP signature of the
op (`flow.dialect.sbp`, the same rules the compiler uses), boxes the operands
(`flow.distributed.boxing`), runs the numpy kernel on the shards and wraps the shard of the
result with the signature's output SBP.

VJP rules build constants (`full`, `iota`) with no tensor operand. While the rule of a node over
global tensors runs, `creating_like` makes such creation ops produce global, broadcast (`B`)
tensors on that node's placement, so the backward pass stays global. Local constants (made by
`full` / `iota`, or marked with `mark_constant`) are the same on every rank, so a global op that
meets one takes it as broadcast.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from xdsl.utils.exceptions import VerifyException

from flow.core import dtypes
from flow.core.autograd import record
from flow.core.errors import op_error, strip_op_prefix
from flow.core.tensor import Tensor
from flow.dialect.semantics import Sbp
from flow.distributed import env
from flow.distributed.boxing import box, world_allgather
from flow.distributed.placement import (
    GlobalInfo,
    coord,
    empty_shard,
    global_info,
    is_global,
    make_global,
    member,
    placement,
)

__all__ = [
    "global_bind",
    "creation_placement",
    "creating_like",
    "eager_create",
    "global_create",
    "mark_constant",
    "propagate_constant",
]

# --------------------------------------------------------------------------- eager global ops

_LOCAL_SHAPE_PARAMS = ("shape", "sizes")


def _describe(args: Sequence[Tensor]) -> str:
    parts = []
    for i, a in enumerate(args):
        if is_global(a):
            parts.append(f"operand #{i}: global, {global_info(a).describe()}")
        else:
            parts.append(f"operand #{i}: local tensor of shape {list(a.shape)}")
    return "; ".join(parts)


def global_bind(prim: Any, args: Sequence[Tensor], params: dict) -> Tensor:
    """Run primitive `prim` on global tensors: choose the SBP signature, box, compute shards."""
    glob = next((a for a in args if is_global(a)), None)
    if glob is not None and any(_is_constant(a) for a in args):
        pl0 = global_info(glob).placement
        args = [_broadcast_constant(a, pl0) if _is_constant(a) else a for a in args]
    if any(not is_global(a) for a in args):
        raise op_error(
            prim.name,
            f"expected all operands to be global tensors (convert local ones with "
            f".to_global(placement, sbp)), got {_describe(args)}",
        )
    infos = [global_info(a) for a in args]
    pl = infos[0].placement
    if any(i.placement != pl for i in infos):
        raise op_error(
            prim.name,
            f"expected all global operands on one placement (move them with "
            f".to_global(placement=...)), got {_describe(args)}",
        )
    if any(a._trace is not None for a in args):
        raise op_error(prim.name, "global tensors inside flow.jit go through the compiled path",
                       cls=NotImplementedError)  # fmt: skip
    from xdsl.ir import Block

    from flow.dialect import sbp as sbp_rules
    from flow.dialect.distributed import local_shape

    ir_params = prim.to_ir(params)
    in_types = [a._ir_type() for a in args]
    try:
        ty = prim.op.infer(in_types, **ir_params)
        block = Block(arg_types=in_types)
        op = prim.op.make(*block.args, **ir_params)
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err))) from None
    sig = sbp_rules.choose(op, [i.sbp for i in infos], pl.hierarchy)
    out_nd = sig.outputs[0]
    out_shape = tuple(ty.get_shape())
    info = GlobalInfo(pl, out_nd)
    expected = dtypes.from_ir(ty.element_type).np_dtype
    if not member(pl):
        return record(prim.name, prim.vjp, args, params,
                      make_global(empty_shard(out_shape, expected), out_shape, info))  # fmt: skip
    shards = [
        box(a._data, pl, i.sbp, want) if i.sbp != want else a._data
        for a, i, want in zip(args, infos, sig.inputs)
    ]
    local_out = local_shape(out_shape, pl.hierarchy, out_nd, coord(pl))
    local_params = dict(params)
    for key in _LOCAL_SHAPE_PARAMS:
        if key in local_params:
            local_params[key] = tuple(local_out)
    with np.errstate(all="ignore"):
        out = np.asarray(prim.impl(*shards, **local_params))
    if out.dtype != expected:
        out = out.astype(expected)
    if tuple(out.shape) != tuple(local_out):
        raise AssertionError(
            f"{prim.name}: shard of shape {list(out.shape)} under signature {sig.name}, "
            f"expected {list(local_out)}"
        )
    return record(prim.name, prim.vjp, args, params, make_global(out, out_shape, info))


# --------------------------------------------------------------------------- creation and constants

class _Creation(threading.local):
    placement: placement | None = None  # (per thread; the class attribute is the default)


_CREATION = _Creation()


def creation_placement() -> placement | None:
    """The placement creation ops currently produce broadcast tensors on (None: local)."""
    return _CREATION.placement


@contextlib.contextmanager
def creating_like(*tensors: Any) -> Iterator[None]:
    """Within: creation ops make `B` tensors on the placement of the first global tensor
    in `tensors` (unchanged when none is global)."""
    pl = next((global_info(t).placement for t in tensors if is_global(t)), None)
    if pl is None:
        yield
        return
    prev = creation_placement()
    _CREATION.placement = pl
    try:
        yield
    finally:
        _CREATION.placement = prev


_CONSTANTS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
"""Local tensors made by `full` / `iota`: the same on every rank, so a global op that
meets one (a loss's one-hot `iota`, a mask of ones) takes it as broadcast."""


def eager_create(prim: Any, params: dict) -> Tensor:
    """An eager `full` / `iota`: global `B` inside `creating_like`, else a local constant."""
    if creation_placement() is not None:
        return global_create(prim, params)
    try:
        dtype = prim.eager_dtype((), params)
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err))) from None
    out = Tensor._eager(np.asarray(prim.impl(**params)).astype(dtype.np_dtype, copy=False), dtype)
    _CONSTANTS[id(out)] = out
    return out


_DRAWN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
"""The constants computed from random numbers: the same on every rank only when every rank's
generator has the same seed, which `_broadcast_constant` checks."""


def _is_constant(t: Tensor) -> bool:
    return not is_global(t) and _CONSTANTS.get(id(t)) is t


def mark_constant(t: Tensor, *, drawn: bool = False) -> Tensor:
    """Register the local tensor `t` as the same on every rank (made from constants, or with
    `drawn` from a random generator): a global op meeting it takes it as broadcast."""
    _CONSTANTS[id(t)] = t
    if drawn:
        _DRAWN[id(t)] = t
    return t


def propagate_constant(args: Sequence[Tensor], out: Tensor) -> None:
    """`out`, computed eagerly from `args`, is a constant when all of them are."""
    get = _CONSTANTS.get
    for a in args:  # (a loop: this runs for every eager op, and mostly stops at the first)
        if get(id(a)) is not a:
            return
    mark_constant(out, drawn=any(_DRAWN.get(id(a)) is a for a in args))


def _broadcast_constant(t: Tensor, pl: placement) -> Tensor:
    """The local constant `t` as a `B` global tensor on `pl`."""
    if _DRAWN.get(id(t)) is t and env.get_world_size() > 1:
        digest = zlib.crc32(np.ascontiguousarray(t._data).tobytes())
        digests = world_allgather(digest, "all_gather (random tensor digests)")
        if len(set(digests)) > 1:
            raise ValueError(
                f"a local random tensor of shape {list(t.shape)} differs between ranks and "
                "cannot meet global tensors as a broadcast one: seed every rank the same "
                "(flow.manual_seed), or make it global (placement=, sbp=)"
            )
        _DRAWN.pop(id(t), None)  # checked once
    info = GlobalInfo(pl, (Sbp("B"),) * len(pl.hierarchy))
    local = t._data if member(pl) else empty_shard(t.shape, t._data.dtype)
    return make_global(local, t.shape, info)


def global_create(prim: Any, params: dict) -> Tensor:
    """Run creation primitive `prim` as a global `B` tensor on `creation_placement()`."""
    pl = creation_placement()
    assert pl is not None
    ty = prim.op.infer([], **prim.to_ir(params))
    shape = tuple(ty.get_shape())
    dtype = dtypes.from_ir(ty.element_type).np_dtype
    info = GlobalInfo(pl, (Sbp("B"),) * len(pl.hierarchy))
    if not member(pl):
        return make_global(empty_shard(shape, dtype), shape, info)
    out = np.array(prim.impl(**params), dtype=dtype)  # a writable copy, 0-d kept 0-d
    return make_global(out, shape, info)
