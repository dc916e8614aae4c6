"""Global tensors in eager mode (OneFlow's `placement`, `sbp`, `to_global`, eager boxing).

Representation: a global tensor is an ordinary `flow.Tensor` whose `_data` is this
rank's local shard (its piece for `S`, the whole value for `B`, its addend for `P`)
and whose `_shape` is the GLOBAL shape, so `shape`, `ndim` and `numel()` describe
the global tensor as in OneFlow. Its distribution lives in the `_dist` slot, a
`GlobalInfo` (placement plus one dialect `Sbp` per mesh axis); local tensors have
no `_dist` (the slot is unset or None). Ranks that are not in a tensor's placement
hold an empty shard.

Boxing (OneFlow's table, per mesh axis, within the axis groups of `rank_groups`:
one MPI sub-communicator per group, its ranks ordered by their coordinate):
P→B all-reduce, P→S reduce-scatter, S→B all-gather, S(i)→S(j) all-to-all,
B→S local slice, B→P the group's first rank keeps the value and the others hold
zeros, S→P through B. Splits are balanced (`balanced_split`), uneven ones
included. An N-d transition is done axis by axis where each step is valid on its
own; otherwise through the all-`B` value (innermost axis first, then outermost
first to the target). A placement change gathers to `B`, sends the value to the
new ranks, then slices.

Eager global ops: `bind` hands every primitive with a global operand to
`global_bind`, which picks the cheapest SBP signature of the op (`flow.dialect.sbp`,
the same rules the compiler uses), boxes the operands, runs the numpy kernel on
the shards and wraps the shard of the result with the signature's output SBP.

Without a launcher the world is one process: placements over rank 0 work and MPI
is never imported.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from types import SimpleNamespace
from typing import Any

import numpy as np
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from flow.dialect import sbp as sbp_rules
from flow.dialect.attrs import PlacementAttr, Sbp
from flow.dialect.distributed import (
    balanced_offset,
    balanced_split,
    local_shape,
    mesh_coord,
    rank_groups,
)

from flow import env
from flow.core import dtypes as _dtypes
from flow.core.tensor import Size, Tensor

__all__ = [
    "GlobalInfo",
    "placement",
    "sbp",
    "global_bind",
    "is_global",
    "from_global_value",
    "creating_like",
    "creation_placement",
    "global_create",
    "grad_to_leaf",
    "to_global_",
    "mark_constant",
    "propagate_constant",
]

# --------------------------------------------------------------------------- placement


# Placement device types; each names a target (frontend/_device.py): a program on global
# tensors of a `cuda` placement compiles for the cuda target (hip is rocm).
_DEVICE_TYPES = ("cpu", "cuda", "rocm", "hip", "vulkan")


class placement:  # noqa: N801  (OneFlow's name)
    """Where a global tensor lives: a device type and an N-d array of process ranks.

    `flow.placement("cpu", [0, 1])` is a 1-D mesh of two ranks;
    `flow.placement("cpu", [[0, 1], [2, 3]])` a 2x2 mesh (one SBP entry per axis).
    The type (cpu, cuda, rocm or hip, vulkan) is the target its programs compile for.
    """

    __slots__ = ("_attr", "_nested")

    def __init__(self, type: str = "cpu", ranks: Sequence | int | None = None) -> None:  # noqa: A002
        if ranks is None:
            raise TypeError(
                "flow.placement: ranks are required, e.g. flow.placement('cpu', [0, 1])"
            )
        if isinstance(ranks, (int, np.integer)):
            ranks = [int(ranks)]
        if not isinstance(type, str) or type.split(":")[0] not in _DEVICE_TYPES:
            raise ValueError(
                f"flow.placement: type must be one of {', '.join(_DEVICE_TYPES)}, got {type!r}"
            )
        try:
            attr = PlacementAttr.get(type, _as_int_lists(ranks))
        except (ValueError, VerifyException) as err:
            raise ValueError(f"flow.placement: {err}") from None
        world = env.get_world_size()
        outside = [r for r in attr.rank_list if r >= world]
        if outside:
            raise ValueError(
                f"flow.placement: ranks {outside} of {list(attr.rank_list)} are outside the "
                f"world of {world} process{'es' if world != 1 else ''} (ranks 0..{world - 1})"
            )
        self._attr = attr
        self._nested = _as_int_lists(ranks)

    @classmethod
    def _from_attr(cls, attr: PlacementAttr) -> placement:
        """The placement of a dialect attribute."""
        out = object.__new__(cls)
        out._attr = attr
        out._nested = np.asarray(attr.rank_list).reshape(attr.mesh_shape).tolist()
        return out

    @classmethod
    def all(cls, type: str = "cpu") -> placement:  # noqa: A002
        """Every rank of the world, as a 1-D mesh."""
        return cls(type, list(range(env.get_world_size())))

    @property
    def type(self) -> str:
        return self._attr.device.data

    @property
    def ranks(self) -> list:
        """The rank array, as a (nested) list."""
        return self._nested

    @property
    def hierarchy(self) -> tuple[int, ...]:
        """The mesh shape."""
        return self._attr.mesh_shape

    @property
    def attr(self) -> PlacementAttr:
        """The dialect attribute `#flow.placement<...>`."""
        return self._attr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, placement) and other._attr == self._attr

    def __hash__(self) -> int:
        return hash(self._attr)

    def __repr__(self) -> str:
        return f'flow.placement(type="{self.type}", ranks={self._nested})'


def _as_int_lists(ranks: Any) -> Any:
    if isinstance(ranks, (int, np.integer)):
        return int(ranks)
    if isinstance(ranks, np.ndarray):
        return _as_int_lists(ranks.tolist())
    if isinstance(ranks, (list, tuple, range)):
        return [_as_int_lists(r) for r in ranks]
    raise TypeError(f"flow.placement: ranks must be ints in (nested) lists, got {ranks!r}")


# --------------------------------------------------------------------------- sbp


class _SbpEntry:
    """One SBP entry as the user sees it: `flow.sbp.split(dim=0)`, `broadcast`, `partial_sum`."""

    __slots__ = ("sbp",)

    def __init__(self, sbp: Sbp) -> None:
        self.sbp = sbp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SbpEntry) and other.sbp == self.sbp

    def __hash__(self) -> int:
        return hash(self.sbp)

    def __repr__(self) -> str:
        if self.sbp.kind == "S":
            return f"flow.sbp.split(dim={self.sbp.dim})"
        return "flow.sbp.broadcast" if self.sbp.kind == "B" else "flow.sbp.partial_sum"


def _split(dim: int) -> _SbpEntry:
    """Split along `dim` (balanced pieces, the first ranks one larger when uneven)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
        raise ValueError(f"flow.sbp.split: dim must be a non-negative int, got {dim!r}")
    return _SbpEntry(Sbp("S", int(dim)))


sbp = SimpleNamespace(
    split=_split,
    broadcast=_SbpEntry(Sbp("B")),
    partial_sum=_SbpEntry(Sbp("P")),
    sbp=_SbpEntry,
)
"""`flow.sbp`: `split(dim)`, `broadcast`, `partial_sum` (and the entry type, `sbp.sbp`)."""

NdSbp = tuple[Sbp, ...]


def _nd_sbp(value: Any, ndim: int, what: str = "sbp") -> NdSbp:
    entries = value if isinstance(value, (list, tuple)) else (value,)
    out = []
    for e in entries:
        if isinstance(e, _SbpEntry):
            out.append(e.sbp)
        elif isinstance(e, Sbp):
            out.append(e)
        else:
            raise TypeError(f"{what}: expected flow.sbp entries, got {e!r}")
    if len(out) != ndim:
        raise ValueError(
            f"{what}: expected one SBP entry per placement axis ({ndim}), got {len(out)} "
            f"({_fmt_sbp(tuple(out))})"
        )
    return tuple(out)


def _fmt_sbp(nd: NdSbp) -> str:
    return "(" + ", ".join(repr(_SbpEntry(s)) for s in nd) + ("," if len(nd) == 1 else "") + ")"


# --------------------------------------------------------------------------- tensor metadata


@dataclass(frozen=True)
class GlobalInfo:
    """The distribution of a global tensor: placement and one SBP per mesh axis."""

    placement: placement
    sbp: NdSbp

    def describe(self) -> str:
        return f"placement={self.placement!r}, sbp={_fmt_sbp(self.sbp)}"


def is_global(t: Tensor) -> bool:
    return getattr(t, "_dist", None) is not None


def _info(t: Tensor) -> GlobalInfo:
    info = getattr(t, "_dist", None)
    assert info is not None
    return info


def _check_split_dims(op: str, nd: NdSbp, ndim: int) -> None:
    for s in nd:
        if s.kind == "S" and not 0 <= s.dim < ndim:
            raise ValueError(
                f"{op}: split dim {s.dim} is out of range for a tensor of rank {ndim} "
                f"(sbp {_fmt_sbp(nd)})"
            )


def _make_global(local: np.ndarray, shape: Sequence[int], info: GlobalInfo) -> Tensor:
    t = Tensor._eager(np.asarray(local))
    t._shape = Size(tuple(shape))
    t._dist = info
    return t


def _rank() -> int:
    return env.get_rank()


def _member(pl: placement) -> bool:
    return _rank() in pl.attr.rank_list


def _coord(pl: placement) -> tuple[int, ...]:
    return mesh_coord(pl.attr, _rank())


def _empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """The shard of a rank outside the placement: no elements."""
    return np.zeros((0, *tuple(shape)[1:]), dtype)


# --------------------------------------------------------------------------- communicators

_COMMS: dict[tuple[int, ...], Any] = {}


def _mpi() -> Any:
    from flow.targets.collectives import mpi

    return mpi()


def _group_comm(ranks: tuple[int, ...]) -> Any:
    """A communicator over `ranks` (in that order); collective only over those ranks."""
    comm = _COMMS.get(ranks)
    if comm is None:
        world = _mpi().COMM_WORLD
        with _watch("create_group", ranks):
            comm = world.Create_group(world.group.Incl(list(ranks)))
        _COMMS[ranks] = comm
    return comm


_faults: Any = None


def _watch(name: str, ranks: Sequence[int] | None = None, *, peer: int | None = None) -> Any:
    """Bound a blocking MPI call (flow.targets.faults): a collective of the eager communicator
    over `ranks`, a world collective (no `ranks`), or a point-to-point call with `peer`."""
    global _faults
    if _faults is None:
        from flow.targets import faults

        _faults = faults
    if peer is not None:
        return _faults.watch(name, _faults.group(_faults.WORLD, (peer,)), p2p=True)
    if ranks is None:
        return _faults.watch(name, _faults.group(_faults.WORLD, range(env.get_world_size())))
    return _faults.watch(name, _faults.group("global tensors", ranks))


def _axis_group(pl: placement, axis: int) -> tuple[int, ...]:
    me = _rank()
    for g in rank_groups(pl.attr, axis):
        if me in g:
            return g
    raise AssertionError("rank not in placement")


# --------------------------------------------------------------------------- per-axis boxing


def _moved(x: np.ndarray, dim: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, dim, 0))


def _all_reduce(x: np.ndarray, group: tuple[int, ...]) -> np.ndarray:
    comm = _group_comm(group)
    send = np.ascontiguousarray(x).reshape(np.shape(x))  # 0-d stays 0-d
    out = np.empty_like(send)
    with _watch("all_reduce", group):
        comm.Allreduce(send, out, op=_mpi().SUM)
    return out


def _reduce_scatter(x: np.ndarray, group: tuple[int, ...], dim: int) -> np.ndarray:
    """Sum over the group, keeping this member's balanced piece along `dim`."""
    comm, k = _group_comm(group), len(group)
    moved = _moved(x, dim)
    sizes = balanced_split(moved.shape[0], k)
    row = int(np.prod(moved.shape[1:], dtype=np.int64))
    out = np.empty((sizes[comm.rank], *moved.shape[1:]), x.dtype)
    with _watch("reduce_scatter", group):
        comm.Reduce_scatter(moved, out, recvcounts=[s * row for s in sizes], op=_mpi().SUM)
    return np.moveaxis(out, 0, dim)


def _all_gather(x: np.ndarray, group: tuple[int, ...], dim: int, n: int) -> np.ndarray:
    """Concatenate the members' pieces along `dim` (balanced pieces of `n` elements)."""
    comm, k = _group_comm(group), len(group)
    moved = _moved(x, dim)
    sizes = balanced_split(n, k)
    row = int(np.prod(moved.shape[1:], dtype=np.int64))
    out = np.empty((n, *moved.shape[1:]), x.dtype)
    counts = [s * row for s in sizes]
    displs = [balanced_offset(n, k, i) * row for i in range(k)]
    mpi_type = _mpi()._typedict[x.dtype.char] if x.dtype != np.bool_ else _mpi().BOOL
    with _watch("all_gather", group):
        comm.Allgatherv(moved, [out, counts, displs, mpi_type])
    return np.moveaxis(out, 0, dim)


def _all_to_all(
    x: np.ndarray, group: tuple[int, ...], src: int, dst: int, n_src: int
) -> np.ndarray:
    """S(src) → S(dst): cut along `dst`, exchange, concatenate along `src`."""
    comm, k = _group_comm(group), len(group)
    n_dst = x.shape[dst]
    pieces = [
        np.ascontiguousarray(np.take(x, range(balanced_offset(n_dst, k, i),
                                              balanced_offset(n_dst, k, i + 1)), axis=dst))
        for i in range(k)
    ]  # fmt: skip
    with _watch("all_to_all", group):
        received = comm.alltoall(pieces)
    del n_src
    return np.concatenate(received, axis=src)


def _local_slice(x: np.ndarray, dim: int, k: int, i: int) -> np.ndarray:
    n = x.shape[dim]
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(balanced_offset(n, k, i), balanced_offset(n, k, i + 1))
    return x[tuple(idx)]


def _axis_box(
    x: np.ndarray, pl: placement, axis: int, src: Sbp, dst: Sbp, axis_shape: Sequence[int]
) -> np.ndarray:
    """Box this rank's shard along one mesh axis; `axis_shape` is the tensor the axis sees."""
    if src == dst:
        return x
    k = pl.hierarchy[axis]
    i = _coord(pl)[axis]
    if k == 1:
        return x
    group = _axis_group(pl, axis)
    if src.kind == "B":
        if dst.kind == "S":
            return _local_slice(x, dst.dim, k, i)
        return x if i == 0 else np.zeros_like(x)
    if src.kind == "P":
        if dst.kind == "B":
            return _all_reduce(x, group)
        if dst.kind == "S":
            return _reduce_scatter(x, group, dst.dim)
    if src.kind == "S":
        if dst.kind == "S":
            return _all_to_all(x, group, src.dim, dst.dim, axis_shape[src.dim])
        full = _all_gather(x, group, src.dim, axis_shape[src.dim])
        return full if dst.kind == "B" else _axis_box(full, pl, axis, Sbp("B"), dst, axis_shape)
    raise AssertionError(f"no boxing {src} -> {dst}")


def _axis_view(shape: Sequence[int], pl: placement, nd: NdSbp, axis: int) -> tuple[int, ...]:
    """The shape of the tensor mesh axis `axis` distributes: split by the outer axes only."""
    coord = _coord(pl)
    return local_shape(shape, pl.hierarchy[:axis], nd[:axis], coord[:axis])


def _direct_ok(cur: NdSbp, axis: int, src: Sbp, dst: Sbp) -> bool:
    """Whether one axis can change on its own: no inner axis splits a dim it touches."""
    dims = {s.dim for s in (src, dst) if s.kind == "S"}
    return not any(s.kind == "S" and s.dim in dims for s in cur[axis + 1 :])


def _box_same_placement(x: np.ndarray, shape: Sequence[int], pl: placement, src: NdSbp,
                        dst: NdSbp) -> np.ndarray:  # fmt: skip
    """Box this rank's shard from `src` to `dst` on one placement (members only)."""
    cur = list(src)
    while tuple(cur) != tuple(dst):
        for a in range(len(cur)):
            if cur[a] != dst[a] and _direct_ok(tuple(cur), a, cur[a], dst[a]):
                x = _axis_box(x, pl, a, cur[a], dst[a], _axis_view(shape, pl, tuple(cur), a))
                cur[a] = dst[a]
                break
        else:  # through the replicated value: innermost axis first, then outermost first
            for a in reversed(range(len(cur))):
                x = _axis_box(x, pl, a, cur[a], Sbp("B"), _axis_view(shape, pl, tuple(cur), a))
                cur[a] = Sbp("B")
    return x


def _slice_global(value: np.ndarray, pl: placement, nd: NdSbp) -> np.ndarray:
    """This rank's shard of the global `value` under `nd` (B→S slices, B→P zeros)."""
    if not _member(pl):
        return _empty(value.shape, value.dtype)
    x = value
    for a, (k, s, i) in enumerate(zip(pl.hierarchy, nd, _coord(pl))):
        del a
        if s.kind == "S":
            x = _local_slice(x, s.dim, k, i)
        elif s.kind == "P" and i != 0:
            x = np.zeros_like(x)
    return x


def _change_placement(x: np.ndarray, shape: Sequence[int], dtype: np.dtype, src: GlobalInfo,
                      dst: GlobalInfo) -> np.ndarray:  # fmt: skip
    """Move a tensor to another placement: gather to B, send/recv the value, slice."""
    src_ranks, dst_ranks = src.placement.attr.rank_list, dst.placement.attr.rank_list
    me = _rank()
    value = None
    if me in src_ranks:
        value = _box_same_placement(x, shape, src.placement, src.sbp, (Sbp("B"),) * len(src.sbp))
    world = _mpi().COMM_WORLD if env.get_world_size() > 1 else None
    requests = []
    for j, r in enumerate(r for r in dst_ranks if r not in src_ranks):
        sender = src_ranks[j % len(src_ranks)]
        if me == sender:
            requests.append((r, world.isend(np.array(value), dest=r, tag=7001)))
        if me == r:
            with _watch("recv", peer=sender):
                value = world.recv(source=sender, tag=7001)
    for r, req in requests:
        with _watch("send", peer=r):
            req.wait()
    if me not in dst_ranks:
        return _empty(shape, dtype)
    return _slice_global(value, dst.placement, dst.sbp)


# --------------------------------------------------------------------------- to_global / to_local


def to_global(t: Tensor, placement_: placement | None = None, sbp_: Any = None) -> Tensor:
    """A global tensor from `t`, keeping `requires_grad` (so Parameters stay trainable leaves).

    Differentiable: the gradient flows back boxed to `t`'s placement and SBP (to this
    rank's shard when `t` is local). See `_to_global`."""
    from flow.core.autograd import record

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
        t.grad = _to_global(t.grad, _info(t).placement, _info(t).sbp)
    return t


def _to_global_vjp(ct: Tensor, x: Tensor, out: Tensor) -> tuple[Tensor]:
    if ct._trace is not None:  # the gradient's SBP is left to inference; its placement is x's
        trace = ct._trace
        home = _info(x).placement.attr if is_global(x) else None
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
    addend) or global → global (boxing, and a placement change when it differs)."""
    if t._trace is not None:
        return _traced_to_global(t, placement_, sbp_)
    if is_global(t):
        info = _info(t)
        pl = placement_ if placement_ is not None else info.placement
        nd = _nd_sbp(sbp_, len(pl.hierarchy), "to_global") if sbp_ is not None else info.sbp
        if sbp_ is None and pl != info.placement:
            if len(pl.hierarchy) != len(info.sbp):
                raise ValueError("to_global: a new placement with another mesh rank needs an sbp")
        _check_split_dims("to_global", nd, t.ndim)
        new = GlobalInfo(pl, nd)
        if new == info:
            return t
        if pl == info.placement:
            local = t._data
            if _member(pl):
                local = _box_same_placement(t._data, t.shape, pl, info.sbp, nd)
        else:
            local = _change_placement(t._data, t.shape, t._data.dtype, info, new)
        return _make_global(local, t.shape, new)
    if placement_ is None or sbp_ is None:
        raise ValueError("to_global: a local tensor needs both placement and sbp")
    if not isinstance(placement_, placement):
        raise TypeError(f"to_global: expected a flow.placement, got {placement_!r}")
    nd = _nd_sbp(sbp_, len(placement_.hierarchy), "to_global")
    _check_split_dims("to_global", nd, t.ndim)
    data = t.numpy()
    shape = _global_shape_of_shards(data, placement_, nd)
    info = GlobalInfo(placement_, nd)
    local = data if _member(placement_) else _empty(shape, data.dtype)
    return _make_global(local, shape, info)


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
    from flow.dialect.attrs import DistAttr, SbpAttr
    from flow.dialect.distributed import RedistributeOp

    from flow.core.errors import user_location

    trace = t._trace
    is_glob = is_global(t) or trace.derives_from_global(t._value)
    pl = placement_
    if pl is None:
        known = list(dict.fromkeys([*(i.placement for i in trace.arg_dists.values()),
                                    *trace.placements]))  # fmt: skip
        if is_global(t):
            pl = _info(t).placement
        elif len(known) == 1:
            pl = known[0]
        else:
            raise ValueError("to_global: name the placement (this program has several)")
    if not isinstance(pl, placement):
        raise TypeError(f"to_global: expected a flow.placement, got {pl!r}")
    if sbp_ is None:
        if not is_global(t) or len(_info(t).sbp) != len(pl.hierarchy):
            raise ValueError("to_global: give the sbp of the result")
        sbp_ = _info(t).sbp
    nd = _nd_sbp(sbp_, len(pl.hierarchy), "to_global")
    _check_split_dims("to_global", nd, t.ndim)
    if not (is_glob or whole) and any(s.kind != "B" for s in nd):
        raise NotImplementedError(
            f"to_global: inside a compiled function a local tensor becomes global as broadcast "
            f"only (asked for sbp {_fmt_sbp(nd)}); convert it before the compiled function, or "
            "make it broadcast first and then change its sbp"
        )
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
    if env.get_world_size() == 1:
        shapes = {0: data.shape}
    else:
        with _watch("all_gather (shard shapes)"):
            shapes = dict(enumerate(_mpi().COMM_WORLD.allgather(data.shape)))
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
                f"tensor under sbp {_fmt_sbp(nd)} on {pl!r}: rank {r} should hold shape "
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
    from flow.core.autograd import record

    if not is_global(t):
        return t
    return record("to_local", _to_local_vjp, (t,), {}, Tensor._eager(t._data))


def _to_local_vjp(ct: Tensor, x: Tensor, out: Tensor) -> tuple[Tensor]:
    info = _info(x)
    return (_make_global(np.asarray(ct.numpy()), x.shape, info),)


def global_numpy(t: Tensor) -> np.ndarray:
    """The global value of a global tensor, on every rank (collective over the world)."""
    info = _info(t)
    pl = info.placement
    bcast = (Sbp("B"),) * len(info.sbp)
    value = None
    if _member(pl):
        value = _box_same_placement(t._data, t.shape, pl, info.sbp, bcast)
    if any(r not in pl.attr.rank_list for r in range(env.get_world_size())):
        with _watch("broadcast"):
            value = _mpi().COMM_WORLD.bcast(value, root=pl.attr.rank_list[0])
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
    nd = _nd_sbp(sbp_, len(placement_.hierarchy))
    data = value.numpy()
    _check_split_dims("global tensor", nd, data.ndim)
    info = GlobalInfo(placement_, nd)
    out = _make_global(np.array(_slice_global(data, placement_, nd)), data.shape, info)
    out._requires_grad = value._requires_grad
    return out


# --------------------------------------------------------------------------- eager global ops

_LOCAL_SHAPE_PARAMS = ("shape", "sizes")


def _describe(args: Sequence[Tensor]) -> str:
    parts = []
    for i, a in enumerate(args):
        if is_global(a):
            parts.append(f"operand #{i}: global, {_info(a).describe()}")
        else:
            parts.append(f"operand #{i}: local tensor of shape {list(a.shape)}")
    return "; ".join(parts)


def global_bind(prim: Any, args: Sequence[Tensor], params: dict) -> Tensor:
    """Run primitive `prim` on global tensors: choose the SBP signature, box, compute shards."""
    from flow.core.autograd import record
    from flow.core.errors import strip_op_prefix, op_error

    glob = next((a for a in args if is_global(a)), None)
    if glob is not None and any(_is_constant(a) for a in args):
        pl0 = _info(glob).placement
        args = [_broadcast_constant(a, pl0) if _is_constant(a) else a for a in args]
    if any(not is_global(a) for a in args):
        raise op_error(
            prim.name,
            f"expected all operands to be global tensors (convert local ones with "
            f".to_global(placement, sbp)), got {_describe(args)}",
        )
    infos = [_info(a) for a in args]
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
    expected = _dtypes.from_ir(ty.element_type).np_dtype
    if not _member(pl):
        return record(prim.name, prim.vjp, args, params,
                      _make_global(_empty(out_shape, expected), out_shape, info))  # fmt: skip
    shards = [
        _box_same_placement(a._data, a.shape, pl, i.sbp, want) if i.sbp != want else a._data
        for a, i, want in zip(args, infos, sig.inputs)
    ]
    local_out = local_shape(out_shape, pl.hierarchy, out_nd, _coord(pl))
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
    return record(prim.name, prim.vjp, args, params, _make_global(out, out_shape, info))


# --------------------------------------------------------------------------- autograd
#
# VJP rules build constants (`full`, `iota`) with no tensor operand. While the rule of
# a node over global tensors runs, `creating_like` makes such creation ops produce
# global, broadcast (`B`) tensors on that node's placement, so the backward pass stays
# global. A gradient reaching a global leaf is boxed to the leaf's placement and SBP
# (`grad_to_leaf`): e.g. data parallelism's partial-sum weight gradient becomes `B`.

_CREATION = threading.local()


def creation_placement() -> placement | None:
    """The placement creation ops currently produce broadcast tensors on (None: local)."""
    return getattr(_CREATION, "placement", None)


@contextlib.contextmanager
def creating_like(*tensors: Any) -> Iterator[None]:
    """Within: creation ops make `B` tensors on the placement of the first global tensor
    in `tensors` (unchanged when none is global)."""
    pl = next((_info(t).placement for t in tensors if is_global(t)), None)
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
    from flow.core.errors import strip_op_prefix, op_error

    if creation_placement() is not None:
        return global_create(prim, params)
    try:
        ty = prim.op.infer([], **prim.to_ir(params))
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err))) from None
    expected = _dtypes.from_ir(ty.element_type).np_dtype
    out = Tensor._eager(np.asarray(prim.impl(**params)).astype(expected, copy=False))
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
    if all(_CONSTANTS.get(id(a)) is a for a in args):
        mark_constant(out, drawn=any(_DRAWN.get(id(a)) is a for a in args))


def _broadcast_constant(t: Tensor, pl: placement) -> Tensor:
    """The local constant `t` as a `B` global tensor on `pl`."""
    if _DRAWN.get(id(t)) is t and env.get_world_size() > 1:
        import zlib

        digest = zlib.crc32(np.ascontiguousarray(t._data).tobytes())
        with _watch("all_gather (random tensor digests)"):
            digests = _mpi().COMM_WORLD.allgather(digest)
        if len(set(digests)) > 1:
            raise ValueError(
                f"a local random tensor of shape {list(t.shape)} differs between ranks and "
                "cannot meet global tensors as a broadcast one: seed every rank the same "
                "(flow.manual_seed), or make it global (placement=, sbp=)"
            )
        _DRAWN.pop(id(t), None)  # checked once
    info = GlobalInfo(pl, (Sbp("B"),) * len(pl.hierarchy))
    local = t._data if _member(pl) else _empty(t.shape, t._data.dtype)
    return _make_global(local, t.shape, info)


def global_create(prim: Any, params: dict) -> Tensor:
    """Run creation primitive `prim` as a global `B` tensor on `creation_placement()`."""
    pl = creation_placement()
    assert pl is not None
    ty = prim.op.infer([], **prim.to_ir(params))
    shape = tuple(ty.get_shape())
    dtype = _dtypes.from_ir(ty.element_type).np_dtype
    info = GlobalInfo(pl, (Sbp("B"),) * len(pl.hierarchy))
    if not _member(pl):
        return _make_global(_empty(shape, dtype), shape, info)
    out = np.array(prim.impl(**params), dtype=dtype)  # a writable copy, 0-d kept 0-d
    return _make_global(out, shape, info)


def grad_to_leaf(g: Tensor, leaf: Tensor) -> Tensor:
    """The gradient `g` of `leaf` in the leaf's distribution (a local leaf keeps `g`)."""
    if not is_global(leaf) or g._trace is not None:
        return g  # inside flow.jit the program's SBP inference distributes the gradient
    if not is_global(g):
        raise ValueError(
            f"backward: a local gradient of shape {list(g.shape)} reached the global tensor "
            f"({_info(leaf).describe()})"
        )
    info = _info(leaf)
    if _info(g) == info:
        return g
    return to_global(g, info.placement, info.sbp)
