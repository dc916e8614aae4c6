"""MPI collectives on numpy arrays: the one implementation behind every collective flow runs.

Two callers share it. Compiled programs call the ``comm`` module's imports
(:mod:`flow.targets.comm_module`), which map their buffers to arrays and run the *core*
functions below on the group's communicator. Eager code (global tensors' boxing) calls the
*eager API*: numpy arrays in and out, a group named by its world ranks (None: all ranks)::

    all_reduce(x, group, op="sum")             every member's x reduced; shaped like x
    reduce_scatter(x, group, dim=0, op="sum")  reduced, then this member's balanced piece along dim
    all_gather(x, group, dim=0)                the members' x concatenated along dim (any sizes)
    all_to_all(x, group, split_dim, concat_dim)  x cut into balanced pieces along split_dim (piece
                                               j to member j), the received pieces concatenated
                                               along concat_dim in member order
    broadcast(x, root, group=None)             root's x on every member (x ignored elsewhere)
    all_gather_object(obj, group=None)         every member's Python object, in member order
    send(x, peer, tag=0) -> Pending            a copy of x to world rank peer; .wait() delivers
    recv(peer, tag=0)                          the array world rank peer sent with that tag

Ranks are world ranks; a group's members are its ranks in the order given, and its
communicator is made once and shared with compiled programs that name the same ranks
(:func:`flow.targets.groups.communicator`). Splits are balanced, as OneFlow's: ``n // k`` each,
one more for the first ``n % k`` members. Every eager call is bounded by the watchdog
(:mod:`flow.targets.faults`) under ``name`` (by default the function's name), in the group
:data:`GROUP_LABEL` (or the world). Data movement works on bytes (any dtype); reductions take
float and integer arrays, f16 and bf16 accumulating in f32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from . import faults, groups
from .mpi import mpi

__all__ = [
    "GROUP_LABEL", "Pending", "all_gather", "all_gather_object", "all_gather_rows", "all_reduce",
    "all_to_all", "balanced", "broadcast", "exchange_bytes", "offsets", "recv", "reduce",
    "reduce_scatter", "reduce_scatter_rows", "send",
]  # fmt: skip

GROUP_LABEL = "global tensors"
"""What the watchdog calls a group of eager collectives (one named by its ranks)."""

Group = Sequence[int] | None

# --------------------------------------------------------------------------------------------
# The core: one communicator, arrays in place. No watchdog here: callers bound the whole call.


def balanced(n: int, parts: int) -> list[int]:
    """OneFlow's balanced split: ``n // parts`` each, one more for the first ``n % parts``."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def offsets(counts: Sequence[int]) -> list[int]:
    """Where each of consecutive pieces of ``counts`` starts."""
    return np.concatenate([[0], np.cumsum(counts[:-1], dtype=np.int64)]).tolist()


_REDUCE_OPS = ("sum", "max", "min", "prod")
_WIDEN = {np.dtype(np.float16): np.dtype(np.float32)}  # plus bfloat16, below


def _mpi_op(op: str) -> Any:
    MPI = mpi()
    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
    if op not in ops:
        raise ValueError(f"unknown reduction {op!r}; expected one of {', '.join(_REDUCE_OPS)}")
    return ops[op]


def _wide(dt: np.dtype) -> np.dtype | None:
    """The type to reduce in for element types MPI has no arithmetic for (f16, bf16)."""
    if dt in _WIDEN:
        return _WIDEN[dt]
    if dt.name == "bfloat16":
        return np.dtype(np.float32)
    if dt.kind not in "fiu":
        raise TypeError(f"collective reductions support float and integer tensors, not {dt}")
    return None


def reduce(comm: Any, src: np.ndarray, dst: np.ndarray, op: str, *, inplace: bool = False) -> None:
    """``dst`` = the reduction ``op`` of every member's ``src`` (``inplace``: ``dst`` is
    ``src``'s memory)."""
    wide = _wide(src.dtype)
    if wide is not None:
        acc = src.astype(wide)
        comm.Allreduce(mpi().IN_PLACE, acc, op=_mpi_op(op))
        dst[...] = acc.astype(src.dtype)
    elif inplace:
        comm.Allreduce(mpi().IN_PLACE, dst, op=_mpi_op(op))
    else:
        comm.Allreduce(src, dst, op=_mpi_op(op))


def reduce_scatter_rows(comm: Any, src: np.ndarray, dst: np.ndarray, op: str) -> None:
    """``dst`` = this member's balanced block of dim-0 rows of the reduction of ``src``."""
    if src.ndim == 0:
        raise ValueError("collectives along dim 0 need a ranked tensor, got a scalar")
    row = prod(src.shape[1:])
    elems = [r * row for r in balanced(src.shape[0], comm.size)]
    wide = _wide(src.dtype)
    a, out = (src.astype(wide), np.empty(dst.shape, wide)) if wide is not None else (src, dst)
    if len(set(elems)) == 1:
        comm.Reduce_scatter_block(a, out, op=_mpi_op(op))
    else:
        comm.Reduce_scatter(a, out, recvcounts=elems, op=_mpi_op(op))
    if wide is not None:
        dst[...] = out.astype(dst.dtype)


def all_gather_rows(
    comm: Any, data: np.ndarray, rows: int, row_bytes: int, alloc: Callable[[int], np.ndarray]
) -> list[int]:
    """Concatenate every member's ``rows`` dim-0 rows of ``row_bytes`` bytes (``data``: flat
    bytes) into ``alloc(total rows)`` (flat bytes); returns each member's number of rows."""
    mine = np.array([rows, row_bytes], np.int64)
    every = np.empty((comm.size, 2), np.int64)
    comm.Allgather(mine, every)
    if (every[:, 1] != row_bytes).any():
        raise ValueError(
            f"all_gather: the trailing dimensions differ between ranks (bytes per dim-0 row: "
            f"{every[:, 1].tolist()}); only dim 0 may differ"
        )
    counts = every[:, 0].tolist()
    out = alloc(sum(counts))
    if len(set(counts)) == 1:
        comm.Allgather(data, out)
    else:
        nbytes = [r * row_bytes for r in counts]
        comm.Allgatherv(data, [out, nbytes, offsets(nbytes), mpi().BYTE])
    return counts


def exchange_bytes(
    comm: Any, data: np.ndarray, send: Sequence[int], recv: Sequence[int], out: np.ndarray
) -> None:
    """All-to-all on flat bytes: ``send[j]`` consecutive bytes of ``data`` to member ``j``,
    ``recv[j]`` bytes from member ``j`` into ``out``, in member order."""
    if len(set(send) | set(recv)) == 1:
        comm.Alltoall(data, out)
    else:
        byte = mpi().BYTE
        comm.Alltoallv(
            [data, list(send), offsets(send), byte], [out, list(recv), offsets(recv), byte]
        )


# --------------------------------------------------------------------------------------------
# The eager API.


def _bytes(a: np.ndarray) -> np.ndarray:
    """A C-contiguous array's memory as flat bytes (a view)."""
    return a.reshape(-1).view(np.uint8)


def _resolve(group: Group) -> tuple[Any, faults.Group]:
    """The communicator and the watchdog's group of an eager call's ``group``."""
    if group is None:
        return groups.world(), groups.world_group()
    ranks = tuple(int(r) for r in group)
    return groups.communicator(ranks, GROUP_LABEL), faults.group(GROUP_LABEL, ranks)


def _contiguous(x: Any) -> np.ndarray:
    """``x`` as a C-contiguous array of its own shape (0-d stays 0-d)."""
    return np.ascontiguousarray(x).reshape(np.shape(x))


def _dim(x: np.ndarray, dim: int, what: str) -> int:
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise ValueError(f"{what}: dim {dim} is out of range for an array of shape {list(x.shape)}")
    return dim % x.ndim


def all_reduce(
    x: Any, group: Group = None, op: str = "sum", *, name: str = "all_reduce"
) -> np.ndarray:
    """Every member's ``x`` reduced with ``op`` (sum, max, min, prod): a new array like ``x``."""
    comm, grp = _resolve(group)
    send = _contiguous(x)
    out = np.empty_like(send)
    with faults.watch(name, grp) as call:
        call.nbytes = send.nbytes
        reduce(comm, send, out, op)
    return out


def reduce_scatter(
    x: Any, group: Group, dim: int = 0, op: str = "sum", *, name: str = "reduce_scatter"
) -> np.ndarray:
    """Every member's ``x`` (same shape everywhere) reduced, then this member's balanced piece
    along ``dim``."""
    comm, grp = _resolve(group)
    x = np.asarray(x)
    dim = _dim(x, dim, "reduce_scatter")
    moved = np.ascontiguousarray(np.moveaxis(x, dim, 0))
    rows = balanced(moved.shape[0], comm.size)
    out = np.empty((rows[comm.rank], *moved.shape[1:]), x.dtype)
    with faults.watch(name, grp) as call:
        call.nbytes = moved.nbytes
        reduce_scatter_rows(comm, moved, out, op)
    return np.moveaxis(out, 0, dim)


def all_gather(x: Any, group: Group, dim: int = 0, *, name: str = "all_gather") -> np.ndarray:
    """The members' ``x`` concatenated along ``dim`` in member order; their sizes along ``dim``
    may differ, the other dimensions may not."""
    comm, grp = _resolve(group)
    x = np.asarray(x)
    dim = _dim(x, dim, "all_gather")
    moved = np.ascontiguousarray(np.moveaxis(x, dim, 0))
    row = prod(moved.shape[1:]) * moved.dtype.itemsize
    made: list[np.ndarray] = []

    def alloc(total: int) -> np.ndarray:
        made.append(np.empty((total, *moved.shape[1:]), moved.dtype))
        return _bytes(made[0])

    with faults.watch(name, grp) as call:
        call.nbytes = moved.nbytes
        all_gather_rows(comm, _bytes(moved), moved.shape[0], row, alloc)
    return np.moveaxis(made[0], 0, dim)


def all_to_all(
    x: Any, group: Group, split_dim: int, concat_dim: int, *, name: str = "all_to_all"
) -> np.ndarray:
    """Cut ``x`` into balanced pieces along ``split_dim`` (piece ``j`` to member ``j``) and
    concatenate the pieces received along ``concat_dim``, in member order (OneFlow's
    S(concat_dim) -> S(split_dim)). The members' sizes along ``concat_dim`` may differ."""
    comm, grp = _resolve(group)
    x = np.asarray(x)
    s, c = _dim(x, split_dim, "all_to_all"), _dim(x, concat_dim, "all_to_all")
    if s == c:
        raise ValueError(f"all_to_all: split_dim and concat_dim must differ, both are {s}")
    perm = [c, s, *(d for d in range(x.ndim) if d not in (c, s))]
    xt = np.ascontiguousarray(x.transpose(perm))  # [concat, split, rest...]
    k, me = comm.size, comm.rank
    mine_c, rest = xt.shape[0], xt.shape[2:]
    pieces = balanced(xt.shape[1], k)
    unit = prod(rest) * x.dtype.itemsize  # bytes per (concat, split) element pair
    with faults.watch(name, grp) as call:
        call.nbytes = xt.nbytes
        every_c = np.empty(k, np.int64)
        comm.Allgather(np.array([mine_c], np.int64), every_c)
        starts = offsets(pieces)
        data = np.concatenate([_bytes(np.ascontiguousarray(xt[:, a : a + p]))
                               for a, p in zip(starts, pieces)])  # fmt: skip
        out = np.empty((int(every_c.sum()), pieces[me], *rest), x.dtype)
        send = [mine_c * p * unit for p in pieces]
        recv = [int(cj) * pieces[me] * unit for cj in every_c]
        exchange_bytes(comm, data, send, recv, _bytes(out))
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return out.transpose(inverse)


def broadcast(x: Any, root: int, group: Group = None, *, name: str = "broadcast") -> np.ndarray:
    """World rank ``root``'s array on every member of ``group`` (``root`` must be one; the
    others' ``x`` is ignored and may be None). The root gets its array back (contiguous)."""
    comm, grp = _resolve(group)
    if root not in grp.ranks:
        raise ValueError(f"broadcast: root {root} is not a member of the group {list(grp.ranks)}")
    at = grp.ranks.index(root)
    with faults.watch(name, grp) as call:
        a = _contiguous(x) if comm.rank == at else None
        shape, dtype = comm.bcast((a.shape, a.dtype) if a is not None else None, root=at)
        out = a if a is not None else np.empty(shape, dtype)
        call.nbytes = out.nbytes
        comm.Bcast(_bytes(out), root=at)
    return out


def all_gather_object(obj: Any, group: Group = None, *, name: str = "all_gather") -> list:
    """Every member's (picklable) ``obj``, in member order."""
    comm, grp = _resolve(group)
    with faults.watch(name, grp):
        return comm.allgather(obj)


class Pending:
    """A send in flight (:func:`send`): ``wait()`` returns once it is delivered, bounded by
    the watchdog like a collective."""

    __slots__ = ("name", "peer", "request")

    def __init__(self, request: Any, peer: int, name: str):
        self.request, self.peer, self.name = request, peer, name

    def wait(self) -> None:
        with faults.watch(self.name, faults.group(faults.WORLD, (self.peer,)), p2p=True):
            self.request.wait()


def send(x: Any, peer: int, *, tag: int = 0, name: str = "send") -> Pending:
    """Start sending a copy of ``x`` to world rank ``peer`` (any shape and dtype: ``recv``
    learns them); messages between two ranks with one tag arrive in order."""
    return Pending(groups.world().isend(np.array(x), dest=peer, tag=tag), peer, name)


def recv(peer: int, *, tag: int = 0, name: str = "recv") -> np.ndarray:
    """The array world rank ``peer`` sends with ``tag`` (waits for it, bounded)."""
    with faults.watch(name, faults.group(faults.WORLD, (peer,)), p2p=True):
        return groups.world().recv(source=peer, tag=tag)
