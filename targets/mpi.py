"""MPI for flow's collectives: imported, and initialised, on first use; the world communicator.

mpi4py is imported lazily: a process started without a launcher never loads it. When the
process was started by an MPI launcher, IREE would try to load its own libmpi at device
creation and fail; :func:`prepare_iree_for_mpi` initialises MPI first and then hides the
launcher variables IREE looks for. A process started by another launcher, with OneFlow's
variables (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``), joins the others in one
world (:mod:`flow.targets.rendezvous`); under ``mpiexec``, mpiexec's world wins. :func:`world` is
the communicator of all ranks either way. Standard library only, so that the watchdog
(:mod:`flow.targets.faults`) and the collectives can both import it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

from . import rendezvous

TIMEOUT_ENV = "FLOW_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0


def collective_timeout() -> float:
    """Seconds a collective, or the forming of a world, may wait for its peers (0: no
    bound); the faults watchdog and the launcher-variable world share this bound."""
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: expected a number of seconds") from None
    return max(value, 0.0)

__all__ = [
    "IREE_MPI_VARS", "LAUNCHER_VARS", "LauncherNotFoundError", "env_world", "find_mpiexec", "mpi",
    "mpi_launched", "prepare_iree_for_mpi", "world",
]  # fmt: skip

LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
"""Set by MPI launchers (MPICH/Intel MPI hydra, Open MPI, PMIx); read once, at import."""

IREE_MPI_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPIEXEC_HOSTNAME")
"""What IREE's device creation checks to decide to load libmpi (iree/hal/utils/libmpi.c)."""

_LAUNCHED = any(v in os.environ for v in LAUNCHER_VARS)
_MPI: Any = None
_WORLD: Any = None
_ENV_WORLD: rendezvous.EnvWorld | None = None
_ENV_READ = False


class LauncherNotFoundError(RuntimeError):
    """No ``mpiexec`` of the ``mpich`` package was found."""


def find_mpiexec() -> str:
    """The ``mpiexec`` installed by the ``mpich`` wheel: from the package's file list, else next
    to the Python executable or in the scripts directory."""
    candidates: list[Path] = []
    try:
        files = metadata.files("mpich") or []
        candidates += [Path(f.locate()) for f in files if Path(str(f)).name == "mpiexec"]
    except metadata.PackageNotFoundError:
        pass
    candidates += [
        Path(sys.executable).parent / "mpiexec",
        Path(sysconfig.get_path("scripts")) / "mpiexec",
    ]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise LauncherNotFoundError(
        "mpiexec not found: looked in the mpich package and next to "
        f"{sys.executable}. Install the MPI launcher with: pip install mpich mpi4py"
    )


def env_world() -> rendezvous.EnvWorld | None:
    """The world OneFlow's launcher variables describe, for a process no MPI launcher started
    (None under ``mpiexec``, and for a world of one); raises ``rendezvous.WorldError`` when they
    are inconsistent."""
    global _ENV_WORLD, _ENV_READ
    if not _ENV_READ:
        _ENV_WORLD = None if _LAUNCHED else rendezvous.from_environ()
        _ENV_READ = True
    return _ENV_WORLD


def mpi_launched() -> bool:
    """Whether this process is one rank of several: started by an MPI launcher (``mpiexec``,
    ``flow-run -n``), or by another with OneFlow's launcher variables."""
    return _LAUNCHED or env_world() is not None


def mpi() -> Any:
    """The ``mpi4py.MPI`` module (imported, and MPI initialised, on first use)."""
    global _MPI
    if _MPI is None:
        spec = env_world()
        try:
            import mpi4py  # noqa: F401 -- fails here, before a process manager is started
        except ImportError as err:
            raise ImportError(
                f"collectives need mpi4py and an MPI library ({err}); "
                "install them with: pip install mpi4py mpich"
            ) from None
        if spec is not None:
            rendezvous.start_process_manager(find_mpiexec(), collective_timeout())
        from mpi4py import MPI

        if spec is not None:
            for var in rendezvous.PMI_VARS:  # read at initialisation; children must not see them
                os.environ.pop(var, None)
        _MPI = MPI
    return _MPI


def world() -> Any:
    """The communicator of all ranks: ``MPI.COMM_WORLD`` under ``mpiexec`` (and for a world of
    one), else the world formed from OneFlow's launcher variables (on first use)."""
    global _WORLD
    if _WORLD is None:
        MPI = mpi()
        spec = env_world()
        if spec is None:
            _WORLD = MPI.COMM_WORLD
        else:
            _WORLD = rendezvous.form_world(MPI, spec, collective_timeout())
    return _WORLD


def prepare_iree_for_mpi() -> None:
    """Call before creating any IREE device. Under a launcher: initialise MPI and form the
    world (MPI needs the launcher's variables), then remove those that make IREE load its own
    libmpi (which fails with the mpich wheel). Does nothing without a launcher; safe to call
    repeatedly."""
    if not mpi_launched():
        return
    world()
    for var in IREE_MPI_VARS:
        os.environ.pop(var, None)
