"""flow's collectives over MPI, for compiled programs and for eager code: one implementation.

Compiled per-rank programs call collectives as imports of the ``comm`` runtime module, e.g.
``func.call @comm.all_reduce_sum.4x8xf32(%x, %token, %group)``; ``flow.targets.load(vmfb, target)``
links that module in when the program imports from it. Eager code (global tensors' boxing)
calls the same collectives on numpy arrays, over a group of world ranks::

    y = collectives.all_reduce(x, (0, 1))            # sum over ranks 0 and 1
    y = collectives.all_gather(x, (0, 1), dim=1)

Both share the communicators (one per group of ranks) and the bound on every wait: past
``FLOW_COLLECTIVE_TIMEOUT`` seconds (default 300), or at once when a member of the group has
ended, the rank names the collective, its group and the ranks that did not arrive, and aborts
every rank instead of hanging (:mod:`flow.targets.faults`).

The pieces, each in its own module (this one re-exports their public names):

* :mod:`.comm_abi`: the ``comm`` imports' names, signatures and meaning (the ABI);
* :mod:`.comm_module`: the ``comm`` VM module that implements them (:func:`create_module`);
* :mod:`.array_collectives`: the MPI collectives on numpy arrays, and the eager API;
* :mod:`.groups`: the communicators, by id (compiled programs) and by ranks (eager code);
* :mod:`.mpi`: MPI itself, imported on first use, and the launcher's environment.

MPI is imported lazily. When the process was started by an MPI launcher, IREE would try to
load its own libmpi at device creation and fail; :func:`prepare_iree_for_mpi` initialises MPI
first and then hides the launcher variables IREE looks for.
"""

from __future__ import annotations

from .array_collectives import (
    GROUP_LABEL,
    Pending,
    all_gather,
    all_gather_object,
    all_reduce,
    all_to_all,
    broadcast,
    recv,
    reduce_scatter,
    send,
)
from .buffers import Buffers as _Buffers  # noqa: F401 (its old name, which tests use)
from .comm_abi import MODULE_NAME, WORLD, declare, import_name, imported_collectives
from .comm_module import COLLECTIVES, Collective, create_module, wait_sends
from .groups import group_ranks, program_groups, register_group, register_mesh
from .mpi import LAUNCHER_VARS as _LAUNCHER_VARS  # noqa: F401 (read by a launcher test)
from .mpi import DEFAULT_TIMEOUT, TIMEOUT_ENV, collective_timeout, mpi, mpi_launched
from .mpi import prepare_iree_for_mpi

__all__ = [
    "COLLECTIVES", "DEFAULT_TIMEOUT", "GROUP_LABEL", "MODULE_NAME", "TIMEOUT_ENV", "WORLD",
    "Collective", "Pending", "all_gather", "all_gather_object", "all_reduce", "all_to_all",
    "broadcast", "collective_timeout", "create_module", "declare", "group_ranks", "import_name",
    "imported_collectives", "mpi", "mpi_launched", "prepare_iree_for_mpi", "program_groups",
    "recv", "reduce_scatter", "register_group", "register_mesh", "send", "wait_sends",
]  # fmt: skip

