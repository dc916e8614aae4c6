"""Start an SPMD run: ``python -m flow.distributed.launch --nproc-per-node N script.py [args]``.

Runs ``mpiexec -n N`` from the ``mpich`` Python package, every rank running ``script.py`` with
``flow.env`` initialised first, so that an exception on one rank aborts them all. The
environment is passed through; when ranks are at least as many as the cores, ``FLOW_CPU_DRIVER``
is set to ``local-sync`` (unless already set) so ranks do not compete with each other's
``local-task`` worker threads. The exit code is the largest of the ranks'.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

__all__ = ["LauncherNotFoundError", "find_mpiexec", "launch", "launch_command", "main"]

# Variables of an enclosing MPI launch: a nested mpiexec must not inherit them.
_INHERITED_MPI_VARS = ("PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID", "PMI_HOSTNAME",
                       "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPIEXEC_HOSTNAME", "PMIX_RANK",
                       "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")  # fmt: skip


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


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def launch_command(nproc: int, script: str, args: Sequence[str]) -> list[str]:
    """The mpiexec command line that runs ``script`` on ``nproc`` ranks."""
    bootstrap = "import sys; from flow.distributed.launch import _run_rank; sys.exit(_run_rank())"
    return [find_mpiexec(), "-n", str(nproc), sys.executable, "-c", bootstrap, script, *args]


def launch_env(nproc: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the ranks get: ours, without an enclosing launch's MPI variables, with
    ``FLOW_CPU_DRIVER=local-sync`` when ranks would oversubscribe the cores."""
    out = {k: v for k, v in (os.environ if env is None else env).items()}
    for var in _INHERITED_MPI_VARS:
        out.pop(var, None)
    if nproc >= _cpu_count() and not out.get("FLOW_CPU_DRIVER"):
        out["FLOW_CPU_DRIVER"] = "local-sync"
    return out


def launch(
    nproc: int, script: str, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> int:
    """Run ``script`` with ``args`` on ``nproc`` ranks and return the largest exit code."""
    if nproc < 1:
        raise ValueError(f"the number of processes must be at least 1, got {nproc}")
    if not os.path.isfile(script):
        raise FileNotFoundError(f"script not found: {script}")
    proc = subprocess.Popen(launch_command(nproc, script, args), env=launch_env(nproc, env))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # mpiexec forwards the signal to every rank and cleans them up.
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            return proc.wait()


def _run_rank() -> int:
    """The body of every rank: ``argv`` is ``[-c, script, args...]``."""
    script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    from flow import env  # initialises MPI and installs the abort-on-exception hook

    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        env.abort(code)  # other ranks may be waiting for this one
    except BaseException as exc:  # noqa: BLE001 -- reported like Python would, then all abort
        tb = exc.__traceback__
        target = os.path.abspath(script)
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
            tb = tb.tb_next  # the traceback starts at the script, as with `python script.py`
        sys.excepthook(type(exc), exc, tb or exc.__traceback__)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flow.distributed.launch", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--nproc-per-node", "--nproc_per_node", type=int, default=1, metavar="N",
        help="number of processes (ranks) to start",
    )  # fmt: skip
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="script.py [args]",
        help="the Python script every rank runs, and its arguments",
    )  # fmt: skip
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.error("missing the script to run")
    try:
        return launch(ns.nproc_per_node, ns.command[0], ns.command[1:])
    except (LauncherNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
