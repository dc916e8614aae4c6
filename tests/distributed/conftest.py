"""Helpers for the multi-process tests: launch ranks with a timeout (never a hang, never a process
left behind), and the compiled collective program (see collective_programs.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _mpi_available() -> bool:
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError:
        return False
    return importlib.util.find_spec("mpi4py") is not None


if not _mpi_available():  # without mpi4py and mpich (pip install mpi4py mpich) nothing here runs
    collect_ignore_glob = ["test_*.py"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    left_behind: bool  # processes of the run were still alive after the launcher exited

    def describe(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def checks_passed(self, nproc: int) -> int:
        """The number of checks each rank reported (`rank R: N checks passed`, rank_checks.py):
        the run exited 0, and every one of its `nproc` ranks reported the same number."""
        assert self.returncode == 0, self.describe()
        found = re.findall(r"rank (\d+): (\d+) checks passed", self.stdout)
        assert sorted(int(r) for r, _ in found) == list(range(nproc)), self.describe()
        counts = {int(n) for _, n in found}
        assert len(counts) == 1, self.describe()
        return counts.pop()


def run_command(cmd: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd`` in its own session; on timeout kill the whole session and fail the test."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        _kill_session(proc.pid)
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout}s\n{out}\n{err}")
    seconds = time.monotonic() - start
    left_behind = _kill_session(proc.pid)
    return Run(proc.returncode, out, err, seconds, left_behind)


def _kill_session(pid: int) -> bool:
    """Kill what is left of a run's session (its ranks and mpiexec's helpers share it); whether
    anything was left, after a short grace period for processes already exiting."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return False
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def launch(nproc: int, script: str | Path, *args: str, timeout: float = 60.0,
           env: dict[str, str] | None = None) -> Run:  # fmt: skip
    """``python -m flow.distributed.launch --nproc-per-node N script args`` (`env`: variables
    set for the run, over this process's)."""
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc-per-node", str(nproc)]
    return run_command([*cmd, str(script), *args], timeout=timeout, env=env)


@pytest.fixture(scope="session")
def collective_vmfb(tmp_path_factory):
    """Compile the collective program once per world size; returns a function world -> path."""
    from collective_programs import collective_program

    from flow.targets import compile_mlir

    out = tmp_path_factory.mktemp("collectives")
    paths: dict[int, Path] = {}

    def get(world: int) -> Path:
        if world not in paths:
            path = out / f"collectives_{world}.vmfb"
            path.write_bytes(compile_mlir(collective_program(world), "cpu"))
            paths[world] = path
        return paths[world]

    return get
