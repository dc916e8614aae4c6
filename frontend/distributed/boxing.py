"""Eager boxing: changing the SBP or the placement of a global tensor's shards with MPI.

This module is the one place eager global tensors decide and run collectives. OneFlow's table,
per mesh axis, within the axis groups of `rank_groups` (one MPI sub-communicator per group, its
ranks ordered by their coordinate): P→B all-reduce, P→S reduce-scatter, S→B all-gather,
S(i)→S(j) all-to-all, B→S local slice, B→P the group's first rank keeps the value and the
others hold zeros, S→P through B. Splits are balanced (`balanced_split`), uneven ones included.
An N-d transition is done axis by axis where each step is valid on its own; otherwise through
the all-`B` value (innermost axis first, then outermost first to the target). A placement
change gathers to `B`, sends the value to the new ranks, then slices. The world collectives
the global tensors need besides boxing (`world_allgather`, `world_bcast`) are here too.

Every blocking call is bounded by `flow.targets.faults`. Without a launcher the world is one
process and MPI is never imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flow.dialect.attrs import Sbp
from flow.dialect.distributed import balanced_offset, balanced_split, local_shape, rank_groups
from flow.distributed import env
from flow.distributed.placement import GlobalInfo, NdSbp, coord, empty_shard, member, placement

__all__ = ["box", "change_placement", "slice_to", "world_allgather", "world_bcast"]

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
    me = env.get_rank()
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
    i = coord(pl)[axis]
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
    outer = coord(pl)[:axis]
    return local_shape(shape, pl.hierarchy[:axis], nd[:axis], outer)


def _direct_ok(cur: NdSbp, axis: int, src: Sbp, dst: Sbp) -> bool:
    """Whether one axis can change on its own: no inner axis splits a dim it touches."""
    dims = {s.dim for s in (src, dst) if s.kind == "S"}
    return not any(s.kind == "S" and s.dim in dims for s in cur[axis + 1 :])


def box(x: np.ndarray, shape: Sequence[int], pl: placement, src: NdSbp, dst: NdSbp) -> np.ndarray:
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


def slice_to(value: np.ndarray, pl: placement, nd: NdSbp) -> np.ndarray:
    """This rank's shard of the global `value` under `nd` (B→S slices, B→P zeros)."""
    if not member(pl):
        return empty_shard(value.shape, value.dtype)
    x = value
    for a, (k, s, i) in enumerate(zip(pl.hierarchy, nd, coord(pl))):
        del a
        if s.kind == "S":
            x = _local_slice(x, s.dim, k, i)
        elif s.kind == "P" and i != 0:
            x = np.zeros_like(x)
    return x


def change_placement(x: np.ndarray, shape: Sequence[int], dtype: np.dtype, src: GlobalInfo,
                     dst: GlobalInfo) -> np.ndarray:  # fmt: skip
    """Move a tensor to another placement: gather to B, send/recv the value, slice."""
    src_ranks, dst_ranks = src.placement.attr.rank_list, dst.placement.attr.rank_list
    me = env.get_rank()
    value = None
    if me in src_ranks:
        value = box(x, shape, src.placement, src.sbp, (Sbp("B"),) * len(src.sbp))
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
        return empty_shard(shape, dtype)
    return slice_to(value, dst.placement, dst.sbp)


# --------------------------------------------------------------------------- world collectives


def world_allgather(obj: Any, name: str) -> list:
    """Every rank's `obj`, by rank (collective over the world); `name` labels the call."""
    if env.get_world_size() == 1:
        return [obj]
    with _watch(name):
        return _mpi().COMM_WORLD.allgather(obj)


def world_bcast(obj: Any, root: int, name: str = "broadcast") -> Any:
    """Rank `root`'s `obj` on every rank (collective over the world)."""
    with _watch(name):
        return _mpi().COMM_WORLD.bcast(obj, root=root)
