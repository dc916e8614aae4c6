"""flow.targets.collectives' eager API (numpy arrays over a group of ranks) under 2 and 3 ranks,
against numpy (rank_array_collectives.py), and its bound on a peer that does not arrive."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from flow.targets import array_collectives as ac

SCRIPT = Path(__file__).resolve().parent / "rank_array_collectives.py"


def _launch(nproc: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`flow-run -n N` of the rank script, its whole session killed on timeout."""
    from flow.distributed.launch import LauncherNotFoundError, find_mpiexec

    try:
        find_mpiexec()
    except LauncherNotFoundError:
        pytest.skip("no mpiexec (pip install mpi4py mpich)")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("no mpi4py (pip install mpi4py mpich)")
    cmd = [sys.executable, "-m", "flow.tools.run", "-n", str(nproc), str(SCRIPT), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the ranks did not finish in {timeout} s\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("nproc", [2, 3])
def test_eager_collectives_match_numpy(nproc):
    run = _launch(nproc)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    found = re.findall(r"rank (\d+): (\d+) checks passed", run.stdout)
    assert sorted(int(r) for r, _ in found) == list(range(nproc)), run.stdout + run.stderr
    assert all(int(n) > 30 for _, n in found), run.stdout  # ranks outside a subgroup check less


def test_an_eager_collective_waits_boundedly_and_names_the_missing_rank():
    run = _launch(2, "hang", timeout=60)
    assert run.returncode != 0, f"{run.stdout}\n{run.stderr}"
    assert "was not stopped" not in run.stdout, run.stdout
    assert re.search(
        r"flow: rank 0 waited 3 s in the collective 'all_reduce' #3 \(global tensors: ranks "
        r"\[0, 1\]\); ranks not arrived: \[1\] \(rank 1: running, not in a collective; it has "
        r"entered 2 of this group's collectives\)",  # #1 made the communicator
        run.stderr,
    ), run.stderr


@pytest.mark.parametrize(
    "n, parts, want", [(5, 2, [3, 2]), (4, 4, [1, 1, 1, 1]), (2, 3, [1, 1, 0]), (0, 2, [0, 0])]
)
def test_balanced_split_is_oneflows(n, parts, want):
    assert ac.balanced(n, parts) == want
    assert sum(want) == n
    assert ac.offsets(want) == [sum(want[:i]) for i in range(parts)]
