"""Process environment of an SPMD run (``flow.env``), as in OneFlow: this rank, the world size,
the rank on this node, the number of nodes.

A process started without a launcher is rank 0 of a world of size 1, and MPI is never imported.
Under ``mpiexec`` (``flow-run -n N``) MPI is initialised when this module is imported, IREE's own
MPI detection is disabled, and an uncaught exception on any rank prints its traceback and aborts
every rank, so a failure never leaves the others waiting in a collective. Processes started by
another launcher (``python -m flow.distributed.launch``, OneFlow's, torchrun, Slurm, Kubernetes)
with OneFlow's variables ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK`` (and
``LOCAL_RANK``) form one world here, at import (``flow.targets.rendezvous``); ``WORLD_SIZE=1`` or
no ``WORLD_SIZE`` is a world of one, and under ``mpiexec`` mpiexec's world wins. Every collective
is bounded (``flow.targets.faults``): a rank that waits longer than ``FLOW_COLLECTIVE_TIMEOUT``
seconds, or for a rank that has ended, names the collective and the ranks that did not arrive,
and aborts every rank.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
import traceback
from types import TracebackType
from typing import Any

__all__ = [
    "abort",
    "barrier",
    "get_local_rank",
    "get_node_size",
    "get_rank",
    "get_world_size",
    "is_distributed",
    "prepare_iree_for_mpi",
]

# The launcher variables of flow.targets.collectives (a test checks they agree), repeated here so
# that `import flow` loads neither the targets nor MPI when no launcher started the process.
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
_MPI_LAUNCHED = any(v in os.environ for v in _LAUNCHER_VARS)


def _env_world_asked() -> bool:
    """Whether OneFlow's launcher variables ask for a world of several processes (read only when
    ``WORLD_SIZE`` or ``RANK`` is set, so that ``import flow`` loads nothing more otherwise)."""
    if _MPI_LAUNCHED or not ({"WORLD_SIZE", "RANK"} & os.environ.keys()):
        return False
    from flow.targets import mpi, rendezvous

    try:
        return mpi.env_world() is not None
    except rendezvous.WorldError as err:
        raise SystemExit(f"flow: {err}") from None


_LAUNCHED = _MPI_LAUNCHED or _env_world_asked()

_rank, _world_size, _local_rank, _node_size = 0, 1, 0, 1


def _world() -> Any:
    from flow.targets.mpi import world

    return world()


def is_distributed() -> bool:
    """Whether this process is one rank of several: started by an MPI launcher, or by another
    with OneFlow's launcher variables (``WORLD_SIZE`` > 1)."""
    return _LAUNCHED


def get_rank() -> int:
    """This process's rank in the world (0 without a launcher)."""
    return _rank


def get_world_size() -> int:
    """The number of processes (1 without a launcher)."""
    return _world_size


def get_local_rank() -> int:
    """This process's rank among the processes on its node."""
    return _local_rank


def get_node_size() -> int:
    """The number of nodes (machines) the ranks run on."""
    return _node_size


def barrier() -> None:
    """Wait until every rank reaches the barrier (nothing to wait for without a launcher).
    Bounded like every collective (``FLOW_COLLECTIVE_TIMEOUT``; a rank that has ended is
    noticed at once)."""
    if _LAUNCHED:
        from flow.targets import faults

        with faults.watch("barrier", faults.group(faults.WORLD, range(_world_size))):
            _world().Barrier()


def prepare_iree_for_mpi() -> None:
    """Call before creating an IREE device yourself (``flow.targets`` does it for its own):
    keeps IREE from trying, and failing, to load its own MPI library under a launcher."""
    from flow.targets.collectives import prepare_iree_for_mpi as prepare

    prepare()


def abort(code: int = 1, reason: str = "") -> None:
    """Flush output and end every rank with exit code ``code`` (this process only, without a
    launcher); the launcher names this rank, and ``reason``'s last line, as ending the run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- a closed stream must not keep the others alive
            pass
    if _LAUNCHED:
        from flow.targets import faults

        faults.aborting(code, reason)
        time.sleep(0.1)  # let mpiexec forward this rank's last output before it stops them all
        from flow.targets import mpi

        if mpi.env_world() is not None:
            # No mpiexec stops the others: MPI_Abort would only have this process's own process
            # manager kill it. Peers see it gone (run board, MPI) or time out.
            os._exit(code)
        _world().Abort(code)
    raise SystemExit(code)


def _abort_on_uncaught(
    etype: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """sys.excepthook under a launcher: the rank's traceback, then abort all ranks."""
    rank = f"[rank {_rank}] " if _world_size > 1 else ""
    text = "".join(traceback.format_exception(etype, value, tb))
    sys.stderr.write("".join(f"{rank}{line}\n" for line in text.rstrip("\n").split("\n")))
    abort(1, text)


def _attach_board(world: Any) -> str | None:
    """Join the run's record of arrivals and endings (flow.targets.faults): the launcher's
    (``FLOW_RUN_DIR``), or, under a plain ``mpiexec``, one that rank 0 makes for the run
    (returned: rank 0 removes it once every rank has mapped it)."""
    from flow.targets import faults, mpi

    run_dir = os.environ.get(faults.RUN_DIR_ENV)
    if run_dir and world.allreduce(faults.foreign_board(run_dir, world.rank, world.size),
                                   op=mpi.mpi().LOR):  # fmt: skip
        run_dir = None  # an enclosing run's, inherited by a launch inside one of its ranks
    made = None
    if not run_dir:
        if world.rank == 0:
            made = tempfile.mkdtemp(prefix="flow-run-")
            faults.Board.create(made, world.size)
        run_dir = world.bcast(made, root=0)
    faults.attach(run_dir, world.rank, world.size)
    atexit.register(faults.finished)  # before MPI's finalisation: no more collectives
    return made


def _init() -> None:
    global _rank, _world_size, _local_rank, _node_size
    from flow.targets import mpi, rendezvous

    try:
        prepare_iree_for_mpi()  # forms the world of OneFlow's launcher variables
    except rendezvous.WorldError as err:
        raise SystemExit(f"flow: {err}") from None
    MPI: Any = mpi.mpi()
    world = mpi.world()
    _rank, _world_size = world.rank, world.size
    spec = mpi.env_world()
    made = _attach_board(world)
    from flow.targets import faults

    with faults.watch("init", faults.group(faults.WORLD, range(_world_size))):
        node = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.rank)
        if spec is not None and spec.local_rank is not None:
            _local_rank = spec.local_rank  # the launcher's word: it knows the nodes
        else:
            _local_rank = node.rank
        _node_size = world.allreduce(1 if _local_rank == 0 else 0)
    node.Free()
    if made:  # every rank has mapped the board: the mapping outlives the file
        shutil.rmtree(made, ignore_errors=True)
    from flow.targets.runtime import set_local_rank

    set_local_rank(_local_rank)  # ranks of a node spread over its GPUs
    sys.excepthook = _abort_on_uncaught


if _LAUNCHED:
    _init()
