"""MPI for flow's collectives: imported, and initialised, on first use; the launcher's variables.

mpi4py is imported lazily: a process started without a launcher never loads it. When the
process was started by an MPI launcher, IREE would try to load its own libmpi at device
creation and fail; :func:`prepare_iree_for_mpi` initialises MPI first and then hides the
launcher variables IREE looks for. Standard library only, so that the watchdog
(:mod:`flow.targets.faults`) and the collectives can both import it.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["IREE_MPI_VARS", "LAUNCHER_VARS", "mpi", "mpi_launched", "prepare_iree_for_mpi"]

LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
"""Set by MPI launchers (MPICH/Intel MPI hydra, Open MPI, PMIx); read once, at import."""

IREE_MPI_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPIEXEC_HOSTNAME")
"""What IREE's device creation checks to decide to load libmpi (iree/hal/utils/libmpi.c)."""

_LAUNCHED = any(v in os.environ for v in LAUNCHER_VARS)
_MPI: Any = None


def mpi_launched() -> bool:
    """Whether this process was started by an MPI launcher (``mpiexec``, ``flow-run -n``)."""
    return _LAUNCHED


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
    for var in IREE_MPI_VARS:
        os.environ.pop(var, None)
