"""Eager boxing: changing the SBP or the placement of a global tensor's shards with MPI.

This module is the one place eager global tensors decide and run collectives. Which collective
turns one SBP entry into another along one mesh axis is the boxing table's answer
(`flow.dialect.sbp.boxing_steps`, which the compiled lowering reads too): P→B all-reduce,
P→S reduce-scatter, S→B all-gather, S(i)→S(j) all-to-all, B→S local slice, B→P the group's
first rank keeps the value and the others hold zeros, S→P through B. Each runs within this
rank's group of the axis (`rank_groups`: its ranks ordered by their coordinate), through
`flow.targets.collectives`, the one MPI implementation (communicators shared with compiled
programs). Splits are balanced, uneven ones included. An N-d transition is done axis by axis
where each step is valid on its own; otherwise through the all-`B` value (innermost axis first,
then outermost first to the target). A placement change gathers to `B`, sends the value to the
new ranks, then slices. The world collectives the global tensors need besides boxing
(`world_allgather`, `world_bcast`) are here too.

Every blocking call is bounded by `flow.targets.faults` (in the collectives). Without a
launcher the world is one process and MPI is never imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flow.dialect.semantics import Sbp
from flow.distributed import env
from flow.distributed.placement import GlobalInfo, NdSbp, coord, empty_shard, member, placement

__all__ = ["box", "change_placement", "from_first_replicas", "slice_to", "world_allgather",
           "world_bcast"]

_PLACEMENT_TAG = 7001
"""The message tag of a placement change's sends."""


def _collectives() -> Any:
    """`flow.targets.collectives`, imported on first use (a world of one never needs it)."""
    from flow.targets import collectives

    return collectives


def _axis_group(pl: placement, axis: int) -> tuple[int, ...]:
    from flow.dialect.distributed import rank_groups

    me = env.get_rank()
    for g in rank_groups(pl.attr, axis):
        if me in g:
            return g
    raise AssertionError("rank not in placement")


# --------------------------------------------------------------------------- per-axis boxing


def _local_slice(x: np.ndarray, dim: int, k: int, i: int) -> np.ndarray:
    from flow.dialect.distributed import balanced_offset

    n = x.shape[dim]
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(balanced_offset(n, k, i), balanced_offset(n, k, i + 1))
    return x[tuple(idx)]


def _axis_box(x: np.ndarray, pl: placement, axis: int, src: Sbp, dst: Sbp) -> np.ndarray:
    """Box this rank's shard along one mesh axis: the steps of the boxing table
    (`flow.dialect.sbp.boxing_steps`), each a collective within this rank's group of the axis."""
    from flow.dialect.sbp import boxing_steps

    k = pl.hierarchy[axis]
    if src == dst or k == 1:
        return x
    i = coord(pl)[axis]
    group = _axis_group(pl, axis)
    for step in boxing_steps(src, dst):
        p = step.params
        match step.collective:
            case "all_reduce":
                x = _collectives().all_reduce(x, group, step.reduce)
            case "reduce_scatter":
                x = _collectives().reduce_scatter(x, group, p["dim"], step.reduce)
            case "all_gather":
                x = _collectives().all_gather(x, group, p["dim"])
            case "all_to_all":
                x = _collectives().all_to_all(
                    x, group, split_dim=p["split_dim"], concat_dim=p["concat_dim"]
                )
            case "local_slice":
                x = _local_slice(x, p["dim"], k, i)
            case "local_partial":
                x = x if i == 0 else np.zeros_like(x)
            case other:
                raise NotImplementedError(
                    f"eager boxing {src} -> {dst}: the boxing table asks for the collective "
                    f"{other!r}, which eager global tensors do not run (they run all_reduce, "
                    "reduce_scatter, all_gather, all_to_all, local_slice and local_partial)"
                )
    return x


def _direct_ok(cur: NdSbp, axis: int, src: Sbp, dst: Sbp) -> bool:
    """Whether one axis can change on its own: no inner axis splits a dim it touches."""
    dims = {s.dim for s in (src, dst) if s.kind == "S"}
    return not any(s.kind == "S" and s.dim in dims for s in cur[axis + 1 :])


def box(x: np.ndarray, pl: placement, src: NdSbp, dst: NdSbp) -> np.ndarray:
    """Box this rank's shard from `src` to `dst` on one placement (members only)."""
    cur = list(src)
    while tuple(cur) != tuple(dst):
        for a in range(len(cur)):
            if cur[a] != dst[a] and _direct_ok(tuple(cur), a, cur[a], dst[a]):
                x = _axis_box(x, pl, a, cur[a], dst[a])
                cur[a] = dst[a]
                break
        else:  # through the replicated value: innermost axis first, then outermost first
            for a in reversed(range(len(cur))):
                x = _axis_box(x, pl, a, cur[a], Sbp("B"))
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


def from_first_replicas(x: np.ndarray, pl: placement, nd: NdSbp) -> np.ndarray:
    """This rank's local `x` as its piece of a global tensor: along each `B` axis every rank
    takes the data of the first rank of its group (coordinate 0), OneFlow's rule for making
    a local tensor global, so the replicas agree even where the local tensors differ."""
    for a, (k, s) in enumerate(zip(pl.hierarchy, nd)):
        if s.kind == "B" and k > 1:
            group = _axis_group(pl, a)
            x = _collectives().broadcast(x, group[0], group, name="to_global (broadcast axis)")
    return x


def change_placement(x: np.ndarray, shape: Sequence[int], dtype: np.dtype, src: GlobalInfo,
                     dst: GlobalInfo) -> np.ndarray:  # fmt: skip
    """Move a tensor to another placement: gather to B, send/recv the value, slice."""
    src_ranks, dst_ranks = src.placement.attr.rank_list, dst.placement.attr.rank_list
    me = env.get_rank()
    value = None
    if me in src_ranks:
        value = box(x, src.placement, src.sbp, (Sbp("B"),) * len(src.sbp))
    pending = []
    for j, r in enumerate(r for r in dst_ranks if r not in src_ranks):
        sender = src_ranks[j % len(src_ranks)]
        if me == sender:
            pending.append(_collectives().send(value, r, tag=_PLACEMENT_TAG))
        if me == r:
            value = _collectives().recv(sender, tag=_PLACEMENT_TAG)
    for p in pending:
        p.wait()
    if me not in dst_ranks:
        return empty_shard(shape, dtype)
    return slice_to(value, dst.placement, dst.sbp)


# --------------------------------------------------------------------------- world collectives


def world_allgather(obj: Any, name: str) -> list:
    """Every rank's `obj`, by rank (collective over the world); `name` labels the call."""
    if env.get_world_size() == 1:
        return [obj]
    return _collectives().all_gather_object(obj, None, name=name)


def world_bcast(x: np.ndarray, root: int, name: str = "broadcast") -> np.ndarray:
    """Rank `root`'s array `x` on every rank (collective over the world; `x` is ignored
    elsewhere)."""
    return _collectives().broadcast(x, root, None, name=name)
