"""Start an SPMD run: ``python -m flow.distributed.launch --nproc-per-node N script.py [args]``.

Runs ``mpiexec -n N`` from the ``mpich`` Python package, every rank running ``script.py`` with
``flow.env`` initialised first, so that an exception on one rank aborts them all. The
environment is passed through; when ranks are at least as many as the cores, ``FLOW_CPU_DRIVER``
is set to ``local-sync`` (unless already set) so ranks do not compete with each other's
``local-task`` worker threads. The exit code is the largest of the ranks'.

Each rank runs under a supervisor (``flow.targets.faults``) that records on the run's board
(a file in a run directory made here, ``FLOW_RUN_DIR``) how its process ended. A rank that ends
before the others (an exit code, a signal, ``os._exit``) is reported as it happens, with its
code, and the ranks left are stopped; a failed run ends with a line on how each rank ended.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

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
    """The mpiexec command line that runs ``script`` on ``nproc`` ranks, each under its
    supervisor (standard library only, in isolated mode: it starts in milliseconds)."""
    from flow.targets import faults

    bootstrap = "import sys; from flow.distributed.launch import _run_rank; sys.exit(_run_rank())"
    supervisor = [sys.executable, "-I", "-S", os.path.abspath(faults.__file__)]
    rank = [sys.executable, "-c", bootstrap, script, *args]
    return [find_mpiexec(), "-n", str(nproc), *supervisor, *rank]


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
    nproc: int,
    script: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    prog: str = "python -m flow.distributed.launch",
) -> int:
    """Run ``script`` with ``args`` on ``nproc`` ranks and return the largest exit code
    (non-zero whenever a rank ended before the others and the run was stopped); ``prog``
    prefixes the launcher's reports on stderr."""
    from flow.targets import faults

    if nproc < 1:
        raise ValueError(f"the number of processes must be at least 1, got {nproc}")
    if not os.path.isfile(script):
        raise FileNotFoundError(f"script not found: {script}")
    run_dir = tempfile.mkdtemp(prefix="flow-run-")
    try:
        board = faults.Board.create(run_dir, nproc)
        ranks_env = {**launch_env(nproc, env), faults.RUN_DIR_ENV: run_dir}
        proc = subprocess.Popen(launch_command(nproc, script, args), env=ranks_env)
        try:
            with _forward_sigterm(proc):
                return _Monitor(proc, board, prog).run()
        except KeyboardInterrupt:
            # mpiexec forwards the signal to every rank and cleans them up.
            proc.send_signal(signal.SIGINT)
            try:
                return proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.terminate()
                return proc.wait()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def _forward_sigterm(proc: subprocess.Popen) -> Iterator[None]:
    """While the run lasts, SIGTERM to the launcher goes to mpiexec, which stops its ranks
    (so killing the launcher leaves no rank behind); outside the main thread, nothing."""
    try:
        previous = signal.signal(signal.SIGTERM, lambda sig, _frame: proc.send_signal(sig))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Monitor:
    """Watches mpiexec and the board: reports the first rank that ends before the others,
    stops the rest if mpiexec does not within ``GRACE_S``, and sums up a failed run."""

    POLL_S = 0.1
    GRACE_S = 3.0

    def __init__(self, proc: subprocess.Popen, board: Any, prog: str):
        from flow.targets import faults

        self.proc, self.board, self.prog, self.faults = proc, board, prog, faults
        self.fault: int | None = None  # the rank reported as ending the run
        self.stop_at: float | None = None

    def say(self, text: str) -> None:
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    def run(self) -> int:
        stopped = 0
        while True:
            try:
                rc = self.proc.wait(timeout=self.POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.fault is None:
                self._check()
            elif self.stop_at is not None and time.monotonic() > self.stop_at:
                stopped += 1
                self._stop(signal.SIGTERM if stopped == 1 else signal.SIGKILL)
                self.stop_at = time.monotonic() + self.GRACE_S
        if self.fault is None:
            self._check(final=True)
        code = self.exit_code(rc)
        if code != 0:
            self.say(f"the run failed (exit code {code}): {self._summary()}")
        return code

    def _events(self) -> list[tuple[int, int, bool]]:
        """(time, rank, abnormal) for each rank that aborted or whose process ended. An exit
        with code 0 is normal even without finishing the script (``os._exit(0)`` to skip
        teardown): a peer left waiting for it says so, and aborts the run."""
        b, f = self.board, self.faults
        out = []
        for r in range(b.size):
            state = b.word(r, f._STATE)
            if state == f.ABORTING:
                out.append((b.word(r, f._TIME), r, True))
            elif b.word(r, f._ENDED):
                status = b.word(r, f._END_STATUS)
                out.append((b.word(r, f._END_TIME), r, status != 0))
        return sorted(out)

    def exit_code(self, rc: int) -> int:
        """The run's exit code: the reported rank's (128 + N for signal N), else mpiexec's."""
        b, f, r = self.board, self.faults, self.fault
        if r is None:
            return rc
        if b.word(r, f._STATE) == f.ABORTING:
            return b.word(r, f._CODE) or 1
        status = b.word(r, f._END_STATUS) if b.word(r, f._ENDED) else rc
        return 128 - status if status < 0 else (status or rc or 1)

    def _check(self, final: bool = False) -> None:
        for _, r, abnormal in self._events():
            if not abnormal:
                continue
            self.fault = r
            if not final:
                ending = self.board.ending(r, ago=False)
                self.say(f"rank {r} {ending}; stopping the other ranks")
                self.stop_at = time.monotonic() + self.GRACE_S
            return

    def _stop(self, sig: int) -> None:
        """Signal mpiexec (which signals its ranks) and every rank process still running."""
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass
        for r in range(self.board.size):
            pid = self.board.word(r, self.faults._PID)
            if pid > 0 and not self.board.word(r, self.faults._ENDED):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def _summary(self) -> str:
        """How each rank ended, in rank order, with the reason a rank gave for aborting."""
        parts = []
        for r in range(self.board.size):
            ending = self.board.ending(r, ago=False) or "was stopped with the run"
            why = self.faults.reason(os.path.dirname(self.board.path), r)
            parts.append(f"rank {r} {ending}" + (f" ({why})" if why else ""))
        return "; ".join(parts)


def _run_rank() -> int:
    """The body of every rank: ``argv`` is ``[-c, script, args...]``."""
    script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    from flow.distributed import env  # initialises MPI and installs the abort-on-exception hook
    from flow.targets import faults

    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            faults.finished(0, how=1)  # a peer waiting for this rank is told at once
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        env.abort(code, f"sys.exit({exc.code!r})")  # other ranks may be waiting for this one
    except BaseException as exc:  # noqa: BLE001 -- reported like Python would, then all abort
        tb = exc.__traceback__
        target = os.path.abspath(script)
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
            tb = tb.tb_next  # the traceback starts at the script, as with `python script.py`
        sys.excepthook(type(exc), exc, tb or exc.__traceback__)
        return 1
    faults.finished(0, how=0)
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
        return launch(ns.nproc_per_node, ns.command[0], ns.command[1:], prog=parser.prog)
    except (LauncherNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
