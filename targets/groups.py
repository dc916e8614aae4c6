"""Communicators of flow's collectives: one per group of world ranks, made once, shared.

Two kinds of names lead to a communicator. Compiled programs name groups by integer id
(0 = all ranks): process-wide ids come from :func:`register_group` / :func:`register_mesh`,
and a program's own group table is mapped to ids by :func:`program_groups`. Eager collectives
name a group by its world ranks (:func:`communicator`). Both end in one cache keyed by the
world ranks, so an eager all-reduce over ranks (0, 1) and a compiled program's group [0, 1] use
the same communicator; making one is collective over its members only.

Every creation is bounded by the watchdog (:mod:`flow.targets.faults`), like every collective.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import faults
from .mpi import mpi
from .mpi import world as _world

__all__ = [
    "PROGRAM_GROUP", "WORLD", "by_id", "communicator", "group_ranks", "info", "member",
    "program_groups", "register_group", "register_mesh", "world", "world_group",
]  # fmt: skip

WORLD = 0
"""The group id of all ranks."""

PROGRAM_GROUP = "program group"
"""What the watchdog calls the groups of compiled programs' group tables."""

_groups: list[Any] = []
"""Group id -> communicator (None on ranks outside the group)."""
_infos: list[faults.Group | None] = []
"""Group id -> what the watchdog calls the group (None on ranks outside it)."""
_by_ranks: dict[tuple[int, ...], int] = {}
"""Groups made for programs' group tables (see program_groups): world ranks -> id."""
_communicators: dict[tuple[int, ...], Any] = {}
"""Communicators made by `communicator`: world ranks (in group order) -> communicator."""


def _comms() -> list[Any]:
    if not _groups:
        comm = _world()
        _groups.append(comm)
        _infos.append(faults.group(faults.WORLD, range(comm.size)))
    return _groups


def world() -> Any:
    """The communicator of all ranks (``MPI.COMM_WORLD``, or the world formed from OneFlow's
    launcher variables: ``flow.targets.mpi.world``)."""
    return _comms()[WORLD]


def world_group() -> faults.Group:
    """What the watchdog calls the group of all ranks."""
    _comms()
    group = _infos[WORLD]
    assert group is not None
    return group


def _add_group(comm: Any, label: str = "", ranks: Sequence[int] | None = None) -> int:
    """A new group id for ``comm`` over world ``ranks`` (``label`` defaults to ``group <id>``)."""
    comms = _comms()
    is_member = comm is not None and comm != mpi().COMM_NULL
    comms.append(comm if is_member else None)
    gid = len(comms) - 1
    _infos.append(faults.group(label or f"group {gid}", ranks) if is_member and ranks else None)
    return gid


def _check_ranks(ranks: Sequence[int], what: str) -> tuple[int, ...]:
    size = world().size
    out = tuple(int(r) for r in ranks)
    if len(set(out)) != len(out) or not all(0 <= r < size for r in out):
        raise ValueError(f"{what}: ranks {list(out)} must be distinct, in [0, {size})")
    return out


def communicator(ranks: Sequence[int], label: str = PROGRAM_GROUP) -> Any:
    """The communicator over world ``ranks`` (its group ranks in that order), for a member of
    the group: made on first use by the members only (``MPI_Comm_create_group``, which every
    member calls in the same order of creations) and then cached. ``label`` names the group in
    the watchdog's report should the creation hang."""
    key = _check_ranks(ranks, "collective group")
    comm = _communicators.get(key)
    if comm is not None:
        return comm
    w = world()
    if w.rank not in key:
        raise ValueError(f"this rank ({w.rank}) is not in the collective group {list(key)}")
    group = w.Get_group().Incl(list(key))
    try:
        with faults.watch("create_group", faults.group(label, key)):
            comm = w.Create_group(group, tag=zlib.crc32(repr(key).encode()) % 32768)
    finally:
        group.Free()
    _communicators[key] = comm
    return comm


def register_group(ranks: Sequence[int]) -> int:
    """A group id for the collectives of compiled programs over ``ranks`` (world ranks, in the
    order that defines group ranks). Collective over all ranks: every rank calls it, in the same
    order of calls, either with the same ``ranks`` or with disjoint groups (each rank passing
    the group it belongs to). Ids are then equal on all ranks; on a rank outside ``ranks`` the
    id exists but cannot be used."""
    w = world()
    ranks = [int(r) for r in ranks]
    if len(set(ranks)) != len(ranks) or not all(0 <= r < w.size for r in ranks):
        raise ValueError(f"register_group: ranks {ranks} must be distinct, in [0, {w.size})")
    group = w.Get_group().Incl(ranks)
    try:
        with faults.watch("register_group", world_group()):
            comm = w.Create(group)
        return _add_group(comm, ranks=ranks)
    finally:
        group.Free()


def register_mesh(mesh: Any) -> tuple[int, ...]:
    """One group id per axis of a device mesh (an array of world ranks, e.g. ``[[0, 1], [2, 3]]``):
    the id of axis ``d`` names the ranks that share this rank's other coordinates, ordered along
    ``d``. For ``[[0, 1], [2, 3]]`` rank 0 gets (column {0, 2}, row {0, 1}). Collective over all
    ranks (same ``mesh`` everywhere); ranks outside the mesh get ids they cannot use."""
    w = world()
    grid = np.asarray(mesh, dtype=np.int64)
    flat = sorted(grid.ravel().tolist())
    if grid.ndim == 0 or len(set(flat)) != len(flat) or flat[0] < 0 or flat[-1] >= w.size:
        raise ValueError(
            f"register_mesh: mesh must be an array of distinct ranks in [0, {w.size}), got {mesh}"
        )
    where = np.argwhere(grid == w.rank)
    ids = []
    for axis in range(grid.ndim):
        ranks: list[int] | None = None
        if len(where):
            coord = where[0]
            rest = np.delete(coord, axis)
            color = int(np.ravel_multi_index(rest, np.delete(grid.shape, axis))) if rest.size else 0
            key = int(coord[axis])
            line = [slice(None) if d == axis else int(c) for d, c in enumerate(coord)]
            ranks = grid[tuple(line)].tolist()
        else:
            color, key = mpi().UNDEFINED, 0
        with faults.watch("register_mesh", world_group()):
            comm = w.Split(color, key)
        ids.append(_add_group(comm, ranks=ranks))
    return tuple(ids)


def program_groups(groups: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Process-wide ids for a compiled program's group table, whose id ``i + 1`` names the
    world ranks ``groups[i]`` (what flow-lower-collectives records): each group's communicator
    is made on first use and shared by every program (and eager collective) that names the
    same ranks.

    Unlike :func:`register_group`, only a group's members take part in making it
    (``MPI_Comm_create_group``), so each rank can load a program whose table lists just its
    own groups (ranks of different pipeline stages run different programs). Members make
    their groups in one global order (sorted by ranks), so no two can wait on each other."""
    size = world().size
    wanted = [tuple(int(r) for r in g) for g in groups]
    for g in sorted(set(wanted)):
        if g in _by_ranks:
            continue
        if len(set(g)) != len(g) or not all(0 <= r < size for r in g):
            raise ValueError(f"program group {list(g)}: ranks must be distinct, in [0, {size})")
        if world().rank not in g:
            _by_ranks[g] = _add_group(None)
            continue
        _by_ranks[g] = _add_group(communicator(g, PROGRAM_GROUP), PROGRAM_GROUP, g)
    return tuple(_by_ranks[g] for g in wanted)


def by_id(group: int) -> Any:
    """The communicator of group id ``group`` (None on a rank outside it)."""
    comms = _comms()
    if not 0 <= group < len(comms):
        raise ValueError(
            f"unknown collective group id {group}; ids 0..{len(comms) - 1} are registered "
            "(0 = all ranks; others come from register_group / register_mesh)"
        )
    return comms[group]


def member(group: int) -> Any:
    """The communicator of group id ``group``; raises on a rank outside it."""
    comm = by_id(group)
    if comm is None:
        raise ValueError(f"this rank ({world().rank}) is not in collective group {group}")
    return comm


def info(group: int) -> faults.Group | None:
    """The watchdog's name and world ranks of a group id (None on a rank outside it)."""
    by_id(group)
    return _infos[group]


def group_ranks(group: int) -> tuple[int, ...] | None:
    """The world ranks of a group, in group order; None on a rank outside it."""
    comm = by_id(group)
    if comm is None:
        return None
    world_grp, own = world().Get_group(), comm.Get_group()
    try:
        return tuple(own.Translate_ranks(list(range(comm.size)), world_grp))
    finally:
        world_grp.Free()
        own.Free()
