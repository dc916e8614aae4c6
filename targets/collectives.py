"""Collectives for compiled programs: an IREE runtime module named ``comm`` written in Python.

IREE's CPU drivers have no collective channels, so a per-rank program calls collectives as
imports of this module, and each import runs the MPI collective (mpi4py) on the mapped buffers.
Programs flow runs on a GPU or Vulkan device use it too: operands are copied to host memory
through a staging buffer, and results are host memory the device reads (`_Buffers`)::

    func.func private @comm.all_reduce_sum.4x8xf32(tensor<4x8xf32>, i32) -> tensor<4x8xf32>
    %y = func.call @comm.all_reduce_sum.4x8xf32(%x, %group) : (tensor<4x8xf32>, i32) -> ...

``flow.targets.load(vmfb, target)`` links this module in when the program imports from it.

Import names are ``comm.<collective>`` optionally followed by ``.<suffix>``: an MLIR module
declares a symbol once, so a program that calls a collective on several tensor types gives each
declaration its own suffix. :func:`import_name` and :func:`declare` derive it from the types;
the runtime ignores it. (Operands may also be ``!hal.buffer_view``, with ``hal.tensor.export``
and ``hal.tensor.import`` around the call: one declaration then serves every type.) Where the
program uses a result, IREE checks its shape and type against the declaration.

The ABI (every import is synchronous; ``group`` is an i32 id, 0 = all ranks, others from
:func:`register_group` / :func:`register_mesh`; ranks named in arguments are ranks *within* the
group; "dim 0" is the leading dimension, other dimensions are the caller's transposes):

==================================  =====================================================
``all_reduce_{op}(x, group)``       ``op`` in sum, max, min, prod; result shaped like ``x``
``all_reduce_{op}_inplace(x, g)``   same, reduced into ``x``'s buffer: only when ``x`` is
                                    dead after the call (not a function argument, not a
                                    constant, no later use); otherwise use the above
``all_gather(x, group)``            concatenation of every rank's ``x`` along dim 0, in group
                                    rank order; dim 0 may differ between ranks
``reduce_scatter_{op}(x, group)``   reduce, then split along dim 0: rank ``r`` keeps block ``r``
                                    of the balanced split (``n // G`` rows, one more for the
                                    first ``n % G`` ranks); ``x`` has the same shape on all ranks
``all_to_all(x, group)``            split ``x`` along dim 0 (balanced split, block ``j`` to rank
                                    ``j``), concatenate the received blocks along dim 0 in
                                    source rank order
``broadcast(x, root, group)``       the root's ``x`` on every rank; elsewhere ``x`` only gives
                                    the shape and element type
``send(x, peer, tag, after, g)``    returns an i32 token at once: ``x`` is copied and sent
                                    in the background, so two ranks may both send first;
                                    messages between two ranks with one tag arrive in order
``recv(like, peer, tag, after, g)`` a tensor shaped like ``like`` (contents ignored), and a
                                    token
``fence(x, after)``                  returns a token once ``x`` is computed (no data moves):
                                    ties compute into the chain of sends and receives
``barrier(group)``                  no tensor, no result
==================================  =====================================================

``after`` is the token of the previous send, receive or fence (any i32 for the first): the chain
makes the program's point-to-point calls data-dependent, so the compiler keeps them in
program order (it may otherwise hoist a receive, which waits, above a send that a peer
needs first). The token returned is ``after + 1``.

Every call that waits for peers is bounded (:mod:`flow.targets.faults`, as flow's eager
collectives are): past ``FLOW_COLLECTIVE_TIMEOUT`` seconds (default 300), or at once when a
member of the group has ended, the rank names the collective, its group and the ranks that
did not arrive, and aborts every rank instead of hanging.

Results live in fresh buffers (never aliasing an operand), except the ``_inplace`` variants.
Element types: f16, bf16, f32, f64 and 8- to 64-bit integers; data movement works on bytes
(any type), reductions of f16/bf16 accumulate in f32.

MPI is imported lazily. When the process was started by an MPI launcher, IREE would try to
load its own libmpi at device creation and fail; :func:`prepare_iree_for_mpi` initialises MPI
first and then hides the launcher variables IREE looks for.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import iree.runtime as rt
import numpy as np

from . import faults

__all__ = [
    "COLLECTIVES",
    "DEFAULT_TIMEOUT",
    "MODULE_NAME",
    "TIMEOUT_ENV",
    "WORLD",
    "Collective",
    "collective_timeout",
    "create_module",
    "declare",
    "group_ranks",
    "import_name",
    "imported_collectives",
    "mpi",
    "mpi_launched",
    "prepare_iree_for_mpi",
    "program_groups",
    "register_group",
    "register_mesh",
    "wait_sends",
]

MODULE_NAME = "comm"
WORLD = 0  # group id of all ranks

# Set by MPI launchers (MPICH/Intel MPI hydra, Open MPI, PMIx). Read once, at import: the ones
# IREE auto-detects are removed again by prepare_iree_for_mpi().
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
# What IREE's device creation checks to decide to load libmpi (iree/hal/utils/libmpi.c).
_IREE_MPI_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPIEXEC_HOSTNAME")
_LAUNCHED = any(v in os.environ for v in _LAUNCHER_VARS)


def mpi_launched() -> bool:
    """Whether this process was started by an MPI launcher (``mpiexec``, ``flow-run -n``)."""
    return _LAUNCHED


_MPI: Any = None


def mpi() -> Any:
    """The ``mpi4py.MPI`` module (imported, and MPI initialised, on first use)."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as err:
            raise ImportError(
                f"collectives need mpi4py and an MPI library ({err}); "
                "install them with: pip install mpi4py mpich"
            ) from None
        _MPI = MPI
    return _MPI


def prepare_iree_for_mpi() -> None:
    """Call before creating any IREE device. Under an MPI launcher: initialise MPI (it needs
    the launcher's variables), then remove those that make IREE load its own libmpi (which
    fails with the mpich wheel). Does nothing without a launcher; safe to call repeatedly."""
    if not _LAUNCHED:
        return
    mpi()
    for var in _IREE_MPI_VARS:
        os.environ.pop(var, None)


# ---------------------------------------------------------------------------------------------
# Groups: id -> communicator (None on ranks outside the group).

_groups: list[Any] = []
_infos: list[faults.Group | None] = []  # what the watchdog calls each group


def _comms() -> list[Any]:
    if not _groups:
        world = mpi().COMM_WORLD
        _groups.append(world)
        _infos.append(faults.group(faults.WORLD, range(world.size)))
    return _groups


def _world_group() -> faults.Group:
    _comms()
    info = _infos[WORLD]
    assert info is not None
    return info


def _add_group(comm: Any, label: str = "", ranks: Sequence[int] | None = None) -> int:
    """A new group id for ``comm`` over world ``ranks`` (``label`` defaults to ``group <id>``)."""
    comms = _comms()
    member = comm != mpi().COMM_NULL
    comms.append(comm if member else None)
    gid = len(comms) - 1
    _infos.append(faults.group(label or f"group {gid}", ranks) if member and ranks else None)
    return gid


def _group_info(group: int) -> faults.Group | None:
    """The watchdog's name and world ranks of a group id (None on a rank outside it)."""
    _comm(group)
    return _infos[group]


def register_group(ranks: Sequence[int]) -> int:
    """A group id for the collectives of compiled programs over ``ranks`` (world ranks, in the
    order that defines group ranks). Collective over all ranks: every rank calls it, in the same
    order of calls, either with the same ``ranks`` or with disjoint groups (each rank passing
    the group it belongs to). Ids are then equal on all ranks; on a rank outside ``ranks`` the
    id exists but cannot be used."""
    world = _comms()[WORLD]
    ranks = [int(r) for r in ranks]
    if len(set(ranks)) != len(ranks) or not all(0 <= r < world.size for r in ranks):
        raise ValueError(f"register_group: ranks {ranks} must be distinct, in [0, {world.size})")
    group = world.Get_group().Incl(ranks)
    try:
        with faults.watch("register_group", _world_group()):
            comm = world.Create(group)
        return _add_group(comm, ranks=ranks)
    finally:
        group.Free()


def register_mesh(mesh: Any) -> tuple[int, ...]:
    """One group id per axis of a device mesh (an array of world ranks, e.g. ``[[0, 1], [2, 3]]``):
    the id of axis ``d`` names the ranks that share this rank's other coordinates, ordered along
    ``d``. For ``[[0, 1], [2, 3]]`` rank 0 gets (column {0, 2}, row {0, 1}). Collective over all
    ranks (same ``mesh`` everywhere); ranks outside the mesh get ids they cannot use."""
    world = _comms()[WORLD]
    grid = np.asarray(mesh, dtype=np.int64)
    flat = sorted(grid.ravel().tolist())
    if grid.ndim == 0 or len(set(flat)) != len(flat) or flat[0] < 0 or flat[-1] >= world.size:
        raise ValueError(
            f"register_mesh: mesh must be an array of distinct ranks in [0, {world.size}), got {mesh}"
        )
    where = np.argwhere(grid == world.rank)
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
        with faults.watch("register_mesh", _world_group()):
            comm = world.Split(color, key)
        ids.append(_add_group(comm, ranks=ranks))
    return tuple(ids)


_by_ranks: dict[tuple[int, ...], int] = {}
"""Groups made for programs' group tables (see program_groups): world ranks -> id."""


def program_groups(groups: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Process-wide ids for a compiled program's group table, whose id ``i + 1`` names the
    world ranks ``groups[i]`` (what flow-lower-collectives records): each group's communicator
    is made on first use and shared by every program that names the same ranks.

    Unlike :func:`register_group`, only a group's members take part in making it
    (``MPI_Comm_create_group``), so each rank can load a program whose table lists just its
    own groups (ranks of different pipeline stages run different programs). Members make
    their groups in one global order (sorted by ranks), so no two can wait on each other."""
    world = _comms()[WORLD]
    wanted = [tuple(int(r) for r in g) for g in groups]
    for g in sorted(set(wanted)):
        if g in _by_ranks:
            continue
        if len(set(g)) != len(g) or not all(0 <= r < world.size for r in g):
            raise ValueError(
                f"program group {list(g)}: ranks must be distinct, in [0, {world.size})"
            )
        if world.rank not in g:
            _by_ranks[g] = _add_group(mpi().COMM_NULL)
            continue
        group = world.Get_group().Incl(list(g))
        info = faults.group("program group", g)
        try:
            with faults.watch("create_group", info):
                comm = world.Create_group(group, tag=zlib.crc32(repr(g).encode()) % 32768)
        finally:
            group.Free()
        _by_ranks[g] = _add_group(comm, "program group", g)
    return tuple(_by_ranks[g] for g in wanted)


def group_ranks(group: int) -> tuple[int, ...] | None:
    """The world ranks of a group, in group order; None on a rank outside it."""
    comm = _comm(group)
    if comm is None:
        return None
    world_group, own = _comms()[WORLD].Get_group(), comm.Get_group()
    try:
        return tuple(own.Translate_ranks(list(range(comm.size)), world_group))
    finally:
        world_group.Free()
        own.Free()


def _comm(group: int) -> Any:
    comms = _comms()
    if not 0 <= group < len(comms):
        raise ValueError(
            f"unknown collective group id {group}; ids 0..{len(comms) - 1} are registered "
            "(0 = all ranks; others come from register_group / register_mesh)"
        )
    return comms[group]


def _member(group: int) -> Any:
    comm = _comm(group)
    if comm is None:
        raise ValueError(f"this rank ({mpi().COMM_WORLD.rank}) is not in collective group {group}")
    return comm


# ---------------------------------------------------------------------------------------------
# Buffers.


class _Buffers:
    """Maps argument buffer views to numpy and allocates result buffer views on one device.

    On a CPU device every buffer is host memory: arguments are mapped, results are
    device-local host-visible buffers. On a GPU or Vulkan device (``host_memory=False``)
    arguments the host cannot map are copied out through a staging buffer, and results are
    host memory the device reads (``HOST_LOCAL | DEVICE_VISIBLE``): MPI works on host memory
    and the program reads the result where it lies.
    """

    def __init__(self, device: rt.HalDevice, host_memory: bool = True):
        self._device = device
        self._allocator = device.allocator
        self.host_memory = host_memory

    @staticmethod
    def view(ref: rt.VmRef) -> rt.HalBufferView:
        return ref.deref(rt.HalBufferView)

    def array(self, bv: rt.HalBufferView, dtype: np.dtype | None = None) -> np.ndarray:
        """The buffer as a numpy array (typed, or flat bytes when dtype is None): without a copy
        where the host can map it, else a copy (see `writable`)."""
        shape = list(bv.shape)
        if dtype is None:
            dtype, shape = np.dtype(np.uint8), [bv.byte_length]
        if bv.byte_length == 0:
            return np.empty(shape, dtype)
        if self.host_memory or self.writable(bv):
            return bv.map().asarray(shape, dtype)
        return self._download(bv).map().asarray(shape, dtype).copy()

    def writable(self, bv: rt.HalBufferView) -> bool:
        """Whether `array(bv)` maps the buffer itself (so writes to the array land in it)."""
        if self.host_memory:
            return True
        buf = bv.get_buffer()
        mappable = int(rt.BufferUsage.MAPPING_SCOPED)
        return bool(buf.memory_type() & int(rt.MemoryType.HOST_VISIBLE)) and (
            buf.allowed_usage() & mappable == mappable
        )

    def _download(self, bv: rt.HalBufferView) -> rt.HalBuffer:
        src = bv.get_buffer()
        host = self._allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=src.byte_length(),
        )
        sem = self._device.create_semaphore(0)
        self._device.queue_copy(
            src,
            host,
            wait_semaphores=rt.HalFence.create_at(sem, 0),
            signal_semaphores=rt.HalFence.create_at(sem, 1),
        )
        rt.HalFence.create_at(sem, 1).wait()
        return host

    def new(self, shape: Sequence[int], element_type: int, nbytes: int) -> rt.HalBufferView:
        """A result buffer view. Large ones get transparent huge pages before the first touch:
        a fresh 64 MiB buffer otherwise costs ~16k page faults, which made a compiled
        all_reduce ~1.6x slower than mpi4py on numpy arrays (numpy asks for huge pages)."""
        memory = (
            rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE
            if self.host_memory
            else rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE
        )
        buf = self._allocator.allocate_buffer(
            memory_type=int(memory),
            allowed_usage=int(rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING),
            allocation_size=nbytes,
        )
        if nbytes >= _HUGE_PAGE_MIN_BYTES:
            _advise_huge_pages(buf.map().asarray([nbytes], np.dtype(np.uint8)).ctypes.data, nbytes)
        return rt.HalBufferView(buf, list(shape), element_type)


_HUGE_PAGE = 2 << 20
_HUGE_PAGE_MIN_BYTES = 4 << 20  # numpy's threshold for the same advice
_MADV_HUGEPAGE = 14
_madvise: Any = None


def _advise_huge_pages(address: int, nbytes: int) -> None:
    """madvise(MADV_HUGEPAGE) on the whole huge pages inside a range (Linux; else nothing)."""
    global _madvise
    if _madvise is None:
        try:
            import ctypes

            fn = ctypes.CDLL(None).madvise
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
            _madvise = fn if sys.platform.startswith("linux") else False
        except (OSError, AttributeError):
            _madvise = False
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    if _madvise and end > start:
        _madvise(start, end - start, _MADV_HUGEPAGE)  # advice only: failure is harmless


_DTYPE_CACHE: dict[int, np.dtype] = {}


def _dtype(bv: rt.HalBufferView) -> np.dtype:
    et = int(bv.element_type)
    dt = _DTYPE_CACHE.get(et)
    if dt is None:
        dt = _DTYPE_CACHE[et] = np.dtype(rt.HalElementType.map_to_dtype(bv.element_type))
    return dt


def _row_bytes(bv: rt.HalBufferView) -> int:
    if not bv.shape:
        raise ValueError("collectives along dim 0 need a ranked tensor, got a scalar")
    return int(np.prod(bv.shape[1:], dtype=np.int64)) * _dtype(bv).itemsize


def _balanced(n: int, parts: int) -> list[int]:
    """OneFlow's balanced split: ``n // parts`` each, one more for the first ``n % parts``."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def _offsets(counts: Sequence[int]) -> list[int]:
    return np.concatenate([[0], np.cumsum(counts[:-1], dtype=np.int64)]).tolist()


# ---------------------------------------------------------------------------------------------
# Reductions.

_REDUCE_OPS = ("sum", "max", "min", "prod")
_WIDEN = {np.dtype(np.float16): np.dtype(np.float32)}  # plus bfloat16, below


def _mpi_op(op: str) -> Any:
    MPI = mpi()
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]


def _wide(dt: np.dtype) -> np.dtype | None:
    """The type to reduce in for element types MPI has no arithmetic for (f16, bf16)."""
    if dt in _WIDEN:
        return _WIDEN[dt]
    if dt.name == "bfloat16":
        return np.dtype(np.float32)
    if dt.kind not in "fiu":
        raise TypeError(f"collective reductions support float and integer tensors, not {dt}")
    return None


def _all_reduce(
    self: _CommModule, op: str, ref: rt.VmRef, group: int, *, inplace: bool = False
) -> Any:
    comm = self.member(group)
    src = self.buffers.view(ref)
    dt = _dtype(src)
    wide = _wide(dt)
    inplace = inplace and self.buffers.writable(src)  # else a device buffer: a new result
    dst = src if inplace else self.buffers.new(src.shape, src.element_type, src.byte_length)
    a, b = self.buffers.array(src, dt), self.buffers.array(dst, dt)
    if wide is not None:
        acc = a.astype(wide)
        comm.Allreduce(mpi().IN_PLACE, acc, op=_mpi_op(op))
        b[...] = acc.astype(dt)
    elif inplace:
        comm.Allreduce(mpi().IN_PLACE, b, op=_mpi_op(op))
    else:
        comm.Allreduce(a, b, op=_mpi_op(op))
    return dst.ref


def _reduce_scatter(self: _CommModule, op: str, ref: rt.VmRef, group: int) -> Any:
    comm = self.member(group)
    src = self.buffers.view(ref)
    dt = _dtype(src)
    wide = _wide(dt)
    rows = _balanced(src.shape[0], comm.size)
    elems = [r * (_row_bytes(src) // dt.itemsize) for r in rows]
    shape = [rows[comm.rank], *src.shape[1:]]
    dst = self.buffers.new(shape, src.element_type, elems[comm.rank] * dt.itemsize)
    a, b = self.buffers.array(src, dt), self.buffers.array(dst, dt)
    if wide is not None:
        a, out = a.astype(wide), np.empty(shape, wide)
    else:
        out = b
    if len(set(elems)) == 1:
        comm.Reduce_scatter_block(a, out, op=_mpi_op(op))
    else:
        comm.Reduce_scatter(a, out, recvcounts=elems, op=_mpi_op(op))
    if wide is not None:
        b[...] = out.astype(dt)
    return dst.ref


# ---------------------------------------------------------------------------------------------
# Data movement (on bytes: any element type).


def _all_gather(self: _CommModule, ref: rt.VmRef, group: int) -> Any:
    comm = self.member(group)
    src = self.buffers.view(ref)
    row = _row_bytes(src)
    mine = np.array([src.shape[0], row], np.int64)
    every = np.empty((comm.size, 2), np.int64)
    comm.Allgather(mine, every)
    if (every[:, 1] != row).any():
        raise ValueError(
            f"all_gather: the trailing dimensions differ between ranks (bytes per dim-0 row: "
            f"{every[:, 1].tolist()}); only dim 0 may differ"
        )
    rows = every[:, 0].tolist()
    dst = self.buffers.new([sum(rows), *src.shape[1:]], src.element_type, sum(rows) * row)
    a, b = self.buffers.array(src), self.buffers.array(dst)
    if len(set(rows)) == 1:
        comm.Allgather(a, b)
    else:
        counts = [r * row for r in rows]
        comm.Allgatherv(a, [b, counts, _offsets(counts), mpi().BYTE])
    return dst.ref


def _all_to_all(self: _CommModule, ref: rt.VmRef, group: int) -> Any:
    comm = self.member(group)
    src = self.buffers.view(ref)
    row = _row_bytes(src)
    send_rows = np.array(_balanced(src.shape[0], comm.size), np.int64)
    recv_rows = np.empty(comm.size, np.int64)
    comm.Alltoall(send_rows, recv_rows)
    total = int(recv_rows.sum())
    dst = self.buffers.new([total, *src.shape[1:]], src.element_type, total * row)
    a, b = self.buffers.array(src), self.buffers.array(dst)
    if len(set(send_rows.tolist()) | set(recv_rows.tolist())) == 1:
        comm.Alltoall(a, b)
    else:
        sc, rc = (send_rows * row).tolist(), (recv_rows * row).tolist()
        comm.Alltoallv([a, sc, _offsets(sc), mpi().BYTE], [b, rc, _offsets(rc), mpi().BYTE])
    return dst.ref


def _broadcast(self: _CommModule, ref: rt.VmRef, root: int, group: int) -> Any:
    comm = self.member(group)
    _check_peer(comm, root, "broadcast root")
    src = self.buffers.view(ref)
    dst = self.buffers.new(src.shape, src.element_type, src.byte_length)
    b = self.buffers.array(dst)
    if comm.rank == root:
        b[...] = self.buffers.array(src)
    comm.Bcast(b, root=root)
    return dst.ref


# Sends in flight: (request, the copy it sends). Completed ones are dropped at the next send;
# the rest are waited for at exit, before MPI is finalised.
_sends: list[tuple[Any, np.ndarray, Any, int]] = []  # (request, data, comm, peer)
_wait_at_exit = False


def _send(self: _CommModule, ref: rt.VmRef, peer: int, tag: int, after: int, group: int) -> int:
    global _wait_at_exit
    comm = self.member(group)
    _check_peer(comm, peer, "send destination")
    data = self.buffers.array(self.buffers.view(ref)).copy()  # IREE may reuse x's memory
    if not _wait_at_exit:
        _wait_at_exit = bool(atexit.register(wait_sends))  # runs before MPI is finalised
    _sends[:] = [s for s in _sends if not s[0].Test()]
    _sends.append((comm.Isend(data, dest=peer, tag=tag), data, comm, peer))
    return after + 1


def wait_sends() -> None:
    """Wait until every send of compiled programs has been delivered (bounded like a
    collective: a peer that never receives does not keep this rank from exiting forever)."""
    if _sends:
        world = _comms()[WORLD].Get_group()
        peers = set()
        for _, _, comm, peer in _sends:
            own = comm.Get_group()
            peers.update(own.Translate_ranks([peer], world))
            own.Free()
        world.Free()
        receivers = faults.group(faults.WORLD, sorted(peers))
        with faults.watch("send (delivery at exit)", receivers, p2p=True):
            mpi().Request.Waitall([s[0] for s in _sends])
        _sends.clear()


def _recv(
    self: _CommModule, ref: rt.VmRef, peer: int, tag: int, after: int, group: int
) -> tuple[Any, int]:
    comm = self.member(group)
    _check_peer(comm, peer, "recv source")
    like = self.buffers.view(ref)
    dst = self.buffers.new(like.shape, like.element_type, like.byte_length)
    comm.Recv(self.buffers.array(dst), source=peer, tag=tag)
    return dst.ref, after + 1


def _fence(self: _CommModule, ref: rt.VmRef, after: int) -> int:
    return after + 1  # the call itself waits for `ref`: the runtime passes it when computed


def _barrier(self: _CommModule, group: int) -> None:
    self.member(group).Barrier()


def _check_peer(comm: Any, rank: int, what: str) -> None:
    if not 0 <= rank < comm.size:
        raise ValueError(f"{what} {rank} is not a rank of the group (size {comm.size})")


# ---------------------------------------------------------------------------------------------
# The module.


@dataclass(frozen=True)
class Collective:
    """One import of the ``comm`` module: its name, the i32 arguments after the tensor (the
    group id last), whether it takes a tensor and returns one (and an ordering token, after
    the tensor), and its implementation."""

    name: str
    int_args: tuple[str, ...]
    takes_tensor: bool
    returns_tensor: bool
    impl: Callable[..., Any]
    returns_token: bool = False

    @property
    def cconv(self) -> str:
        """IREE VM calling convention: ``r`` = buffer view, ``i`` = i32, ``v`` = nothing."""
        args = ("r" if self.takes_tensor else "") + "i" * len(self.int_args)
        results = ("r" if self.returns_tensor else "") + ("i" if self.returns_token else "")
        return f"0{args}_{results or 'v'}"


def _reducer(fn: Callable[..., Any], op: str, **kw: Any) -> Callable[..., Any]:
    """``fn`` with the reduction ``op`` (and keywords) bound, as an import implementation."""

    def impl(self: _CommModule, ref: rt.VmRef, group: int) -> Any:
        return fn(self, op, ref, group, **kw)

    impl.__name__ = f"{fn.__name__.lstrip('_')}_{op}"
    return impl


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        *(
            Collective(f"all_reduce_{op}{sfx}", ("group",), True, True,
                       _reducer(_all_reduce, op, inplace=bool(sfx)))
            for op in _REDUCE_OPS
            for sfx in ("", "_inplace")
        ),
        *(
            Collective(f"reduce_scatter_{op}", ("group",), True, True, _reducer(_reduce_scatter, op))
            for op in _REDUCE_OPS
        ),
        Collective("all_gather", ("group",), True, True, _all_gather),
        Collective("all_to_all", ("group",), True, True, _all_to_all),
        Collective("broadcast", ("root", "group"), True, True, _broadcast),
        Collective("send", ("peer", "tag", "after", "group"), True, False, _send, True),
        Collective("recv", ("peer", "tag", "after", "group"), True, True, _recv, True),
        Collective("fence", ("after",), True, False, _fence, True),
        Collective("barrier", ("group",), False, False, _barrier),
    )
}  # fmt: skip
faults.known_names(COLLECTIVES)


_IMPORT_RE = re.compile(rb"comm\.([A-Za-z_][A-Za-z0-9_$.]*)")


def _mangle(tensor_type: str) -> str:
    """``tensor<2x?xf32>`` -> ``2xDxf32``: a type as symbol characters."""
    inner = tensor_type.strip()
    if inner.startswith("tensor<") and inner.endswith(">"):
        inner = inner[len("tensor<") : -1]
    return re.sub(r"[^A-Za-z0-9_]", "_", inner.replace("?", "D"))


def import_name(name: str, tensor_type: str | None = None, result_type: str | None = None) -> str:
    """The symbol of a collective specialised to its types, e.g. ``comm.all_gather.2x3xf32.4x3xf32``:
    an MLIR module declares each symbol once, so each tensor type needs its own name."""
    if name not in COLLECTIVES:
        raise KeyError(f"no collective {name!r}; known: {', '.join(COLLECTIVES)}")
    parts = [MODULE_NAME, name]
    if tensor_type is not None:
        parts.append(_mangle(tensor_type))
        if result_type is not None and result_type != tensor_type:
            parts.append(_mangle(result_type))
    return ".".join(parts)


def declare(name: str, tensor_type: str | None = None, result_type: str | None = None) -> str:
    """The MLIR declaration of an import, e.g. ``declare("all_gather", "tensor<2x3xf32>",
    "tensor<4x3xf32>")``; ``result_type`` defaults to ``tensor_type``. Call it as
    ``@`` + :func:`import_name` with the same arguments."""
    c = COLLECTIVES.get(name)
    if c is None:
        raise KeyError(f"no collective {name!r}; known: {', '.join(COLLECTIVES)}")
    if c.takes_tensor and tensor_type is None:
        raise ValueError(f"{name} takes a tensor: pass its type")
    args = ([tensor_type] if c.takes_tensor else []) + ["i32"] * len(c.int_args)
    results = ([result_type or tensor_type] if c.returns_tensor else []) + (
        ["i32"] if c.returns_token else []
    )
    result = ""
    if len(results) == 1:
        result = f" -> {results[0]}"
    elif results:
        result = f" -> ({', '.join(results)})"
    symbol = import_name(name, tensor_type if c.takes_tensor else None, result_type)
    return f"func.func private @{symbol}({', '.join(args)}){result}"


def imported_collectives(vmfb: bytes) -> set[str]:
    """The ``comm`` functions a compiled module may import (``all_gather.2x3xf32...``): names
    found in the module whose first part is a collective. Extra names are harmless."""
    if b"comm." not in vmfb:  # the common case, at memory speed even for large modules
        return set()
    found = {m.decode() for m in _IMPORT_RE.findall(vmfb)}
    return {n for n in found if n.split(".", 1)[0] in COLLECTIVES}


# ---------------------------------------------------------------------------------------------
# A deadline: ranks whose programs disagree on their collectives, or a peer that has ended or is
# stuck, would leave the others waiting forever. Every call that waits for peers goes through
# flow.targets.faults (as flow's eager collectives do): past FLOW_COLLECTIVE_TIMEOUT seconds, or
# at once when a member of the group has ended, the rank names the collective, its group and
# the ranks that did not arrive, and aborts every rank.

TIMEOUT_ENV = faults.TIMEOUT_ENV
DEFAULT_TIMEOUT = faults.DEFAULT_TIMEOUT
collective_timeout = faults.collective_timeout


def _watched(impl: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``impl`` (an import taking the group id last) bounded by the watchdog."""
    p2p = name == "recv"

    def watched(module: _CommModule, *args: Any) -> Any:
        try:
            grp = _group_info(module.global_id(int(args[-1])))
        except ValueError:
            return impl(module, *args)  # the call itself reports the unknown group
        if grp is None:
            return impl(module, *args)  # not a member: the call itself reports it
        if p2p:  # only the peer matters: (ref, peer, tag, after, group)
            peer = int(args[1])
            if not 0 <= peer < len(grp.ranks):
                return impl(module, *args)  # the call itself reports it
            grp = faults.group(grp.label, (grp.ranks[peer],))
        call = faults.begin(name, grp, p2p)
        try:
            return impl(module, *args)
        finally:
            faults.end(call)

    watched.__name__ = getattr(impl, "__name__", name)
    return watched


_NEVER_WAIT = ("send", "fence")  # calls that wait for no peer


class _CommModule:
    """Per-context state of the ``comm`` module: buffers, and the program's group table."""

    def __init__(
        self, device: rt.HalDevice, ids: tuple[int, ...] | None = None, host_memory: bool = True
    ):
        self.buffers = _Buffers(device, host_memory)
        self.ids = ids

    def global_id(self, group: int) -> int:
        """The process-wide id of the program's group id ``group`` (0 is all ranks)."""
        if self.ids is None or group == WORLD:
            return group
        if not 0 < group <= len(self.ids):
            raise ValueError(
                f"unknown collective group id {group}; this program has ids 0..{len(self.ids)}"
            )
        return self.ids[group - 1]

    def member(self, group: int) -> Any:
        return _member(self.global_id(group))


def create_module(
    device: rt.HalDevice,
    vmfb: bytes = b"",
    groups: Sequence[Sequence[int]] | None = None,
    *,
    host_memory: bool = True,
) -> tuple[rt.VmModule, rt.PyModuleInterface]:
    """The ``comm`` VM module for a context on ``device`` (``host_memory``: a CPU device, whose
    buffers are mapped; else a GPU or Vulkan device, staged through host memory), exporting every collective plus the specialised names that ``vmfb`` imports; and its
    interface, which must stay alive as long as the context. With ``groups`` (the program's
    group table, see :func:`program_groups`) the program's group ids are its own; without,
    they are the process-wide ids of :func:`register_group` / :func:`register_mesh`."""
    mpi()  # fail now, not at the first call, when mpi4py is missing
    ids = None if groups is None else program_groups(groups)
    iface = rt.PyModuleInterface(MODULE_NAME, lambda _iface: _CommModule(device, ids, host_memory))
    names = {c.name: c for c in COLLECTIVES.values()}
    names.update({n: COLLECTIVES[n.split(".", 1)[0]] for n in imported_collectives(vmfb)})
    for name, c in sorted(names.items()):
        impl = c.impl if c.name in _NEVER_WAIT else _watched(c.impl, c.name)
        iface.export(name, c.cconv, impl)
    return iface.create(), iface
