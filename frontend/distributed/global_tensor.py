"""Global tensors in eager mode: `to_global` / `to_local`, the global value of a global
tensor, and global tensors made from a value every rank holds (OneFlow's API).

What a global tensor is (placement, sbp, `GlobalInfo`) is in `flow.distributed.placement`;
how its shards change SBP or placement, with MPI, in `flow.distributed.boxing`; primitives on
global tensors in `flow.distributed.eager_ops`. Inside flow.jit / nn.Graph `to_global` emits a
`flow.redistribute` instead, which the compiler turns into boxing.

Without a launcher the world is one process: placements over rank 0 work and MPI is never
imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from flow.core.autograd import record
from flow.core.errors import user_location
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.dialect.semantics import Sbp
from flow.distributed import env
from flow.distributed.boxing import (
    box,
    change_placement,
    from_first_replicas,
    slice_to,
    world_allgather,
    world_bcast,
)
from flow.distributed.placement import (
    GlobalInfo,
    NdSbp,
    check_split_dims,
    empty_shard,
    fmt_sbp,
    global_info,
    is_global,
    make_global,
    member,
    nd_sbp,
    placement,
)

__all__ = [
    "to_global",
    "to_global_",
    "to_local",
    "global_numpy",
    "from_global_value",
    "grad_to_leaf",
]

# --------------------------------------------------------------------------- to_global / to_local


def to_global(t: Tensor, placement_: placement | None = None, sbp_: Any = None) -> Tensor:
    """A global tensor from `t`, keeping `requires_grad` (so Parameters stay trainable leaves).

    Differentiable: the gradient flows back boxed to `t`'s placement and SBP (to this
    rank's shard when `t` is local). See `_to_global`."""
    out = _to_global(t, placement_, sbp_)
    if out is not t:
        out._requires_grad = False
        record("to_global", _to_global_vjp, (t,), {}, out)
        if out._node is None:  # not recorded (no grad mode): a leaf as trainable as `t`
            out._requires_grad = t._requires_grad
    return out


def to_global_(t: Tensor, placement_: placement | None = None, sbp_: Any = None) -> Tensor:
    """Convert `t` to global IN PLACE (keeping its identity, so a Parameter stays the same
    trainable leaf the optimizer holds); its `.grad`, if any, is converted too.

    A local `t` is taken as the whole value, the same on every rank (a model built from
    one seed everywhere), so a split SBP keeps this rank's piece of it."""
    if t._node is not None:
        raise RuntimeError("to_global_: only leaf tensors can be converted in place")
    src = t
    if not is_global(t):
        if placement_ is None or sbp_ is None:
            raise ValueError("to_global: a local tensor needs both placement and sbp")
        src = _to_global(t, placement_, [Sbp("B")] * len(placement_.hierarchy))
        if t.grad is not None and not is_global(t.grad):
            t.grad = _to_global(t.grad, placement_, [Sbp("B")] * len(placement_.hierarchy))
    new = _to_global(src, placement_, sbp_)
    if new is not t:
        t._data, t._shape, t._dist = new._data, new._shape, new._dist
    if t.grad is not None:
        t.grad = _to_global(t.grad, global_info(t).placement, global_info(t).sbp)
    return t


def _to_global_vjp(ct: Tensor, x: Tensor, out: Tensor) -> tuple[Tensor]:
    if ct._trace is not None:  # the gradient's SBP is left to inference; its placement is x's
        trace = ct._trace
        home = global_info(x).placement.attr if is_global(x) else None
        if home is None and x._trace is trace:
            home = trace.placement_of(x._value)
        if home is None or home == trace.placement_of(ct._value):
            return (ct,)
        pl = placement._from_attr(home)
        return (_traced_to_global(ct, pl, [Sbp("B")] * len(pl.hierarchy)),)
    if is_global(x):
        return (to_global(ct, x.placement, x.sbp),)
    return (to_local(to_global(ct, out.placement, out.sbp)),)


def _to_global(t: Tensor, placement_: placement | None, sbp_: Any) -> Tensor:
    """`Tensor.to_global(placement, sbp)`: local → global (this rank's shard, replica or
    addend; along a `B` axis the replica of the axis's first rank, as in OneFlow) or global →
    global (boxing, and a placement change when it differs)."""
    if t._trace is not None:
        return _traced_to_global(t, placement_, sbp_)
    if is_global(t) and (trace := current_trace()) is not None:
        # a global tensor the traced function captures (a parameter): its boxing is part of
        # the program, which reads the tensor's value at each call (boxed eagerly here, the
        # value at trace time would be baked into every later call)
        lifted = t._lifted_into(trace)
        lifted._dist = t._dist
        return _traced_to_global(lifted, placement_, sbp_)
    if is_global(t):
        info = global_info(t)
        pl = placement_ if placement_ is not None else info.placement
        nd = nd_sbp(sbp_, len(pl.hierarchy), "to_global") if sbp_ is not None else info.sbp
        if sbp_ is None and pl != info.placement:
            if len(pl.hierarchy) != len(info.sbp):
                raise ValueError("to_global: a new placement with another mesh rank needs an sbp")
        check_split_dims("to_global", nd, t.ndim)
        new = GlobalInfo(pl, nd)
        if new == info:
            return t
        if pl == info.placement:
            local = t._data
            if member(pl):
                local = box(t._data, pl, info.sbp, nd)
        else:
            local = change_placement(t._data, t.shape, t._data.dtype, info, new)
        return make_global(local, t.shape, new)
    if placement_ is None or sbp_ is None:
        raise ValueError("to_global: a local tensor needs both placement and sbp")
    if not isinstance(placement_, placement):
        raise TypeError(f"to_global: expected a flow.placement, got {placement_!r}")
    nd = nd_sbp(sbp_, len(placement_.hierarchy), "to_global")
    check_split_dims("to_global", nd, t.ndim)
    data = t.numpy()
    shape = _global_shape_of_shards(data, placement_, nd)
    info = GlobalInfo(placement_, nd)
    if not member(placement_):
        return make_global(empty_shard(shape, data.dtype), shape, info)
    return make_global(from_first_replicas(data, placement_, nd), shape, info)


def _traced_to_global(
    t: Tensor, placement_: placement | None, sbp_: Any, *, whole: bool = False
) -> Tensor:
    """`to_global` inside flow.jit / nn.Graph: a `flow.redistribute` to the named
    distribution, which flow-infer-sbp turns into boxing once it knows `t`'s.

    A value of the global program keeps its global value (only its distribution
    changes, as in eager mode). A local value computed in the trace (constants:
    the same on every rank) may become broadcast, which is what eager mode makes of
    it too; its pieces as shards (S) or addends (P) would need every rank's local
    value, so convert such tensors before the compiled function instead."""
    trace = t._trace
    is_glob = is_global(t) or trace.derives_from_global(t._value)
    pl = placement_
    if pl is None:
        known = list(dict.fromkeys([*(i.placement for i in trace.arg_dists.values()),
                                    *trace.placements]))  # fmt: skip
        if is_global(t):
            pl = global_info(t).placement
        elif len(known) == 1:
            pl = known[0]
        else:
            raise ValueError("to_global: name the placement (this program has several)")
    if not isinstance(pl, placement):
        raise TypeError(f"to_global: expected a flow.placement, got {pl!r}")
    if sbp_ is None:
        if not is_global(t) or len(global_info(t).sbp) != len(pl.hierarchy):
            raise ValueError("to_global: give the sbp of the result")
        sbp_ = global_info(t).sbp
    nd = nd_sbp(sbp_, len(pl.hierarchy), "to_global")
    check_split_dims("to_global", nd, t.ndim)
    if not (is_glob or whole) and any(s.kind != "B" for s in nd):
        raise NotImplementedError(
            f"to_global: inside a compiled function a local tensor becomes global as broadcast "
            f"only (asked for sbp {fmt_sbp(nd)}); convert it before the compiled function, or "
            "make it broadcast first and then change its sbp"
        )
    from flow.dialect.attrs import DistAttr, SbpAttr
    from flow.dialect.distributed import RedistributeOp

    trace.placements[pl] = None
    op = RedistributeOp(
        operands=[t._value],
        result_types=[t._ir_type()],
        properties={"dist": DistAttr(pl.attr, SbpAttr.get(tuple(nd)))},
    )
    trace.emit(op, user_location())
    out = Tensor._traced(op.result, trace, t.dtype)
    out._dist = GlobalInfo(pl, nd)
    return out


def _global_shape_of_shards(data: np.ndarray, pl: placement, nd: NdSbp) -> tuple[int, ...]:
    """The global shape of shards given by each rank (checked to be a balanced split)."""
    from flow.dialect.distributed import local_shape, mesh_coord

    shapes = dict(enumerate(world_allgather(data.shape, "all_gather (shard shapes)")))
    members = pl.attr.rank_list
    first = shapes[members[0]]
    split_axes = {s.dim for s in nd if s.kind == "S"}
    out = list(first)
    for d in split_axes:
        total = 0
        for coord in product(*map(range, pl.hierarchy)):
            if all(c == 0 for c, s in zip(coord, nd) if not (s.kind == "S" and s.dim == d)):
                total += shapes[_rank_at(pl, coord)][d]
        out[d] = total
    for r in members:
        want = local_shape(out, pl.hierarchy, nd, mesh_coord(pl.attr, r))
        if tuple(shapes[r]) != tuple(want):
            got = {m: list(shapes[m]) for m in members}
            raise ValueError(
                f"to_global: the local tensors {got} (by rank) are not the shards of one global "
                f"tensor under sbp {fmt_sbp(nd)} on {pl!r}: rank {r} should hold shape "
                f"{list(want)} of the global shape {out} (balanced split)"
            )
    return tuple(out)


def _rank_at(pl: placement, coord: Sequence[int]) -> int:
    flat = 0
    for c, s in zip(coord, pl.hierarchy):
        flat = flat * s + c
    return pl.attr.rank_list[flat]


def to_local(t: Tensor) -> Tensor:
    """This rank's shard as a local tensor (shares memory); differentiable (the gradient
    is the shard of a global tensor with `t`'s placement and SBP)."""
    if not is_global(t):
        return t
    return record("to_local", _to_local_vjp, (t,), {}, Tensor._eager(t._data))


def _to_local_vjp(ct: Tensor, x: Tensor, out: Tensor) -> tuple[Tensor]:
    info = global_info(x)
    return (make_global(np.asarray(ct.numpy()), x.shape, info),)


def global_numpy(t: Tensor) -> np.ndarray:
    """The global value of a global tensor, on every rank (collective over the world)."""
    info = global_info(t)
    pl = info.placement
    bcast = (Sbp("B"),) * len(info.sbp)
    value = None
    if member(pl):
        value = box(t._data, pl, info.sbp, bcast)
    if any(r not in pl.attr.rank_list for r in range(env.get_world_size())):
        value = world_bcast(value, pl.attr.rank_list[0], "broadcast")
    return value


def from_global_value(value: Tensor, placement_: placement, sbp_: Any) -> Tensor:
    """A global tensor of the global `value` (the same on every rank): this rank keeps its
    shard. How creation ops take `placement=` and `sbp=`."""
    if not isinstance(placement_, placement):
        raise TypeError(f"expected placement to be a flow.placement, got {placement_!r}")
    if sbp_ is None:
        raise ValueError("a global tensor needs an sbp as well as a placement")
    if value._trace is not None:
        return _traced_to_global(value, placement_, sbp_, whole=True)
    nd = nd_sbp(sbp_, len(placement_.hierarchy))
    data = value.numpy()
    check_split_dims("global tensor", nd, data.ndim)
    info = GlobalInfo(placement_, nd)
    out = make_global(np.array(slice_to(data, placement_, nd)), data.shape, info)
    out._requires_grad = value._requires_grad
    return out


# --------------------------------------------------------------------------- autograd


def grad_to_leaf(g: Tensor, leaf: Tensor) -> Tensor:
    """The gradient `g` of `leaf` in the leaf's distribution (a local leaf keeps `g`)."""
    if not is_global(leaf) or g._trace is not None:
        return g  # inside flow.jit the program's SBP inference distributes the gradient
    if not is_global(g):
        raise ValueError(
            f"backward: a local gradient of shape {list(g.shape)} reached the global tensor "
            f"({global_info(leaf).describe()})"
        )
    info = global_info(leaf)
    if global_info(g) == info:
        return g
    return to_global(g, info.placement, info.sbp)
