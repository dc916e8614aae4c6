"""The ``comm`` runtime module: an IREE VM module written in Python whose imports run MPI.

A per-rank program calls collectives as imports of ``comm`` (the ABI:
:mod:`flow.targets.comm_abi`); each import maps its buffers to numpy (:mod:`.buffers`) and runs
the collective of :mod:`.array_collectives` on the group's communicator (:mod:`.groups`).
Programs flow runs on a GPU or Vulkan device use it too: operands are copied to host memory
through a staging buffer, and results are host memory the device reads.
``flow.targets.load(vmfb, target)`` links this module in when the program imports from it.

A deadline: ranks whose programs disagree on their collectives, or a peer that has ended or is
stuck, would leave the others waiting forever. Every import that waits for peers goes through
:mod:`flow.targets.faults` (as flow's eager collectives do): past ``FLOW_COLLECTIVE_TIMEOUT``
seconds (default 300), or at once when a member of the group has ended, the rank names the
collective, its group and the ranks that did not arrive, and aborts every rank.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import iree.runtime as rt
import numpy as np

from . import array_collectives as ac
from . import faults
from . import groups as communicators
from .buffers import Buffers, dtype_of, row_bytes
from .comm_abi import MODULE_NAME, REDUCE_OPS, SIGNATURES, WORLD, Signature, imported_collectives
from .mpi import mpi

__all__ = ["COLLECTIVES", "Collective", "create_module", "wait_sends"]


class _CommModule:
    """Per-context state of the ``comm`` module: buffers, and the program's group table."""

    def __init__(
        self, device: rt.HalDevice, ids: tuple[int, ...] | None = None, host_memory: bool = True
    ):
        self.buffers = Buffers(device, host_memory)
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
        return communicators.member(self.global_id(group))


# ---------------------------------------------------------------------------------------------
# Reductions.


def _all_reduce(
    self: _CommModule, op: str, ref: rt.VmRef, after: int, group: int, *, inplace: bool = False
) -> tuple[Any, int]:
    comm = self.member(group)
    src = self.buffers.view(ref)
    dt = dtype_of(src)
    inplace = inplace and self.buffers.writable(src)  # else a device buffer: a new result
    dst = src if inplace else self.buffers.new(src.shape, src.element_type, src.byte_length)
    a, b = self.buffers.array(src, dt), self.buffers.array(dst, dt)
    ac.reduce(comm, a, b, op, inplace=inplace)
    return dst.ref, after + 1


def _reduce_scatter(
    self: _CommModule, op: str, ref: rt.VmRef, after: int, group: int
) -> tuple[Any, int]:
    comm = self.member(group)
    src = self.buffers.view(ref)
    dt = dtype_of(src)
    row_bytes(src)  # a scalar has no dim 0: says so
    rows = ac.balanced(src.shape[0], comm.size)
    shape = [rows[comm.rank], *src.shape[1:]]
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    dst = self.buffers.new(shape, src.element_type, nbytes)
    ac.reduce_scatter_rows(comm, self.buffers.array(src, dt), self.buffers.array(dst, dt), op)
    return dst.ref, after + 1


# ---------------------------------------------------------------------------------------------
# Data movement (on bytes: any element type).


def _all_gather(self: _CommModule, ref: rt.VmRef, after: int, group: int) -> tuple[Any, int]:
    comm = self.member(group)
    src = self.buffers.view(ref)
    row = row_bytes(src)
    made: list[rt.HalBufferView] = []

    def alloc(total: int) -> np.ndarray:
        made.append(self.buffers.new([total, *src.shape[1:]], src.element_type, total * row))
        return self.buffers.array(made[0])

    ac.all_gather_rows(comm, self.buffers.array(src), src.shape[0], row, alloc)
    return made[0].ref, after + 1


def _all_to_all(self: _CommModule, ref: rt.VmRef, after: int, group: int) -> tuple[Any, int]:
    comm = self.member(group)
    src = self.buffers.view(ref)
    row = row_bytes(src)
    send_rows = np.array(ac.balanced(src.shape[0], comm.size), np.int64)
    recv_rows = np.empty(comm.size, np.int64)
    comm.Alltoall(send_rows, recv_rows)
    total = int(recv_rows.sum())
    dst = self.buffers.new([total, *src.shape[1:]], src.element_type, total * row)
    send, recv = (send_rows * row).tolist(), (recv_rows * row).tolist()
    ac.exchange_bytes(comm, self.buffers.array(src), send, recv, self.buffers.array(dst))
    return dst.ref, after + 1


def _broadcast(
    self: _CommModule, ref: rt.VmRef, root: int, after: int, group: int
) -> tuple[Any, int]:
    comm = self.member(group)
    _check_peer(comm, root, "broadcast root")
    src = self.buffers.view(ref)
    dst = self.buffers.new(src.shape, src.element_type, src.byte_length)
    b = self.buffers.array(dst)
    if comm.rank == root:
        b[...] = self.buffers.array(src)
    comm.Bcast(b, root=root)
    return dst.ref, after + 1


# Sends in flight: (request, the copy it sends, communicator, peer). Completed ones are dropped
# at the next send; the rest are waited for at exit, before MPI is finalised.
_sends: list[tuple[Any, np.ndarray, Any, int]] = []
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
        world = communicators.world().Get_group()
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


def _barrier(self: _CommModule, after: int, group: int) -> int:
    self.member(group).Barrier()
    return after + 1


def _check_peer(comm: Any, rank: int, what: str) -> None:
    if not 0 <= rank < comm.size:
        raise ValueError(f"{what} {rank} is not a rank of the group (size {comm.size})")


# ---------------------------------------------------------------------------------------------
# The module.


@dataclass(frozen=True)
class Collective(Signature):
    """One import of the ``comm`` module (its :class:`~flow.targets.comm_abi.Signature`) and its
    implementation."""

    impl: Callable[..., Any] = field(kw_only=True)


def _reducer(fn: Callable[..., Any], op: str, **kw: Any) -> Callable[..., Any]:
    """``fn`` with the reduction ``op`` (and keywords) bound, as an import implementation."""

    def impl(self: _CommModule, ref: rt.VmRef, after: int, group: int) -> tuple[Any, int]:
        return fn(self, op, ref, after, group, **kw)

    impl.__name__ = f"{fn.__name__.lstrip('_')}_{op}"
    return impl


_IMPLS: dict[str, Callable[..., Any]] = {
    **{f"all_reduce_{op}{sfx}": _reducer(_all_reduce, op, inplace=bool(sfx))
       for op in REDUCE_OPS for sfx in ("", "_inplace")},
    **{f"reduce_scatter_{op}": _reducer(_reduce_scatter, op) for op in REDUCE_OPS},
    "all_gather": _all_gather, "all_to_all": _all_to_all, "broadcast": _broadcast,
    "send": _send, "recv": _recv, "fence": _fence, "barrier": _barrier,
}  # fmt: skip

COLLECTIVES: dict[str, Collective] = {
    name: Collective(**vars(sig), impl=_IMPLS[name]) for name, sig in SIGNATURES.items()
}
"""Every import of the ``comm`` module with its implementation (ABI order)."""
faults.known_names(COLLECTIVES)


def _watched(impl: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``impl`` (an import taking the group id last) bounded by the watchdog."""
    p2p = name == "recv"

    def watched(module: _CommModule, *args: Any) -> Any:
        try:
            grp = communicators.info(module.global_id(int(args[-1])))
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
        if call.t0 and isinstance(args[0], rt.VmRef):  # a profile records: the payload
            call.nbytes = module.buffers.view(args[0]).byte_length
        try:
            return impl(module, *args)
        finally:
            faults.end(call)

    watched.__name__ = getattr(impl, "__name__", name)
    return watched


_NEVER_WAIT = ("send", "fence")  # calls that wait for no peer


def create_module(
    device: rt.HalDevice,
    vmfb: bytes = b"",
    groups: Sequence[Sequence[int]] | None = None,
    *,
    host_memory: bool = True,
) -> tuple[rt.VmModule, rt.PyModuleInterface]:
    """The ``comm`` VM module for a context on ``device`` (``host_memory``: a CPU device, whose
    buffers are mapped; else a GPU or Vulkan device, staged through host memory), exporting
    every collective plus the specialised names that ``vmfb`` imports; and its interface,
    which must stay alive as long as the context. With ``groups`` (the program's group
    table, see :func:`~flow.targets.groups.program_groups`) the program's group ids are its
    own; without, they are the process-wide ids of ``register_group`` / ``register_mesh``."""
    mpi()  # fail now, not at the first call, when mpi4py is missing
    ids = None if groups is None else communicators.program_groups(groups)
    iface = rt.PyModuleInterface(MODULE_NAME, lambda _iface: _CommModule(device, ids, host_memory))
    names = {c.name: c for c in COLLECTIVES.values()}
    names.update({n: COLLECTIVES[n.split(".", 1)[0]] for n in imported_collectives(vmfb)})
    for name, c in sorted(names.items()):
        impl = c.impl if c.name in _NEVER_WAIT else _watched(c.impl, c.name)
        iface.export(name, c.cconv, impl)
    return iface.create(), iface
