"""A rank that fails takes every rank down quickly, with its traceback: never a hang."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import HERE, launch


@pytest.mark.parametrize("where", ["barrier", "recv", "collective", "callback"])
def test_failing_rank_aborts_all(where):
    # The bound: every rank exits within 30 s (the launch fails the test past it).
    run = launch(2, HERE / "rank_fault.py", where, timeout=30)
    assert run.returncode != 0, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert "[rank 1] Traceback (most recent call last):" in run.stderr, run.describe()
    if where == "callback":
        assert "unknown collective group id 99" in run.stderr, run.describe()
    else:
        assert 'rank_fault.py", line' in run.stderr, run.describe()
        assert "[rank 1] ValueError: deliberate failure on rank 1" in run.stderr, run.describe()


def test_collective_deadline_aborts_a_stuck_program():
    # Rank 1 never joins the collective and raises nothing: the deadline, not a hang.
    run = launch(2, HERE / "rank_fault.py", "stuck", timeout=30)
    assert run.returncode != 0, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert "flow: rank 0 waited 2 s in the collective 'all_reduce_sum'" in run.stderr, (
        run.describe()
    )
    assert "FLOW_COLLECTIVE_TIMEOUT" in run.stderr, run.describe()


# A rank that ends while rank 0 waits in flow.env.barrier(). FLOW_COLLECTIVE_TIMEOUT keeps its
# default (300 s): the launch's 60 s is a hang guard, so an exit here is the dead-rank notice.
# (A rank killed by a signal takes the same path; its record is checked below, without MPI.)
@pytest.mark.parametrize(
    "where, ending, code",
    [
        ("exit3", "rank 1 exited with code 3 without finishing its script", 3),
        ("sysexit0", "rank 1 finished (sys.exit, exit code 0)", 1),
    ],
)
def test_a_rank_that_ends_is_named_and_the_run_stops(where, ending, code):
    run = launch(2, HERE / "rank_fault.py", where, timeout=60)
    assert run.returncode == code, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert ending in run.stderr, run.describe()
    assert f"the run failed (exit code {code})" in run.stderr, run.describe()
    if where == "sysexit0":  # rank 1 waits in MPI's finalisation: rank 0 must notice, not hang
        assert re.search(
            r"flow: rank 0 is waiting in the collective 'barrier' #\d+ \(world: ranks \[0, 1\]\);"
            r" ranks not arrived: \[1\], and they never will: rank 1 finished \(sys.exit",
            run.stderr,
        ), run.describe()


def test_eager_collective_deadline_names_the_ranks_not_arrived():
    run = launch(2, HERE / "rank_fault.py", "hang", timeout=60)
    assert run.returncode == 1, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert re.search(
        r"flow: rank 0 waited 3 s in the collective 'all_reduce' #\d+ \(global tensors: ranks "
        r"\[0, 1\]\); ranks not arrived: \[1\] \(rank 1: running, not in a collective",
        run.stderr,
    ), run.describe()
    assert "rank 0 aborted the run with exit code 1" in run.stderr, run.describe()


@pytest.mark.parametrize(
    "code, status", [("import os; os._exit(3)", 3), ("import os; os.kill(os.getpid(), 9)", -9)]
)
def test_supervisor_records_how_a_rank_ended(tmp_path, code, status):
    from flow.targets import faults

    board = faults.Board.create(str(tmp_path), 2)
    env = {**os.environ, faults.RUN_DIR_ENV: str(tmp_path), "PMI_RANK": "1", "PMI_SIZE": "2"}
    cmd = [sys.executable, "-I", "-S", faults.__file__, sys.executable, "-c", code]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == status, out.stderr  # the supervisor ends as its rank did
    assert board.word(1, faults._ENDED) == 1 and board.word(1, faults._END_STATUS) == status
    assert board.word(0, faults._ENDED) == 0
    expected = "was killed by SIGKILL" if status < 0 else "exited with code 3 without finishing"
    assert expected in board.ending(1)


def test_reports_name_the_ranks_not_arrived_and_where_they_are(tmp_path, monkeypatch):
    # Rank 0's view of a 3-rank board, without MPI: rank 1 reached the same barrier, rank 2 is
    # in another collective, then finishes its script.
    from flow.targets import faults, peers

    state = faults._State()
    monkeypatch.setattr(faults, "_state", state)
    board = faults.Board.create(str(tmp_path), 3)
    state.board, state.rank = board, 0
    world = faults.group(faults.WORLD, (0, 1, 2))
    for rank, entered in ((0, 2), (1, 2), (2, 1)):
        board.set(rank, board.table_index(rank, world.key), entered)
    board.set(2, faults._IN, 1)
    board.set(2, faults._NAME, faults._name_crc("all_gather"))
    board.set(2, faults._KEY, faults.group("global tensors", (1, 2)).key)
    call = faults.Call("barrier", world, 2, 0.0, None)
    assert peers.not_arrived(call) == [2]
    message = peers.timeout_message(call, 5.0)
    assert "waited 5 s in the collective 'barrier' #2 (world: ranks [0, 1, 2])" in message
    assert (
        "ranks not arrived: [2] (rank 2: waiting in 'all_gather' (global tensors: ranks [1, 2]); "
        "it has entered 1 of this group's collectives)"
    ) in message
    assert faults._gone_members(call) == []  # rank 2 still runs
    board.set(2, faults._IN, 0)
    board.set_state(2, faults.FINISHED, 0, how=0)
    assert faults._gone_members(call) == [2]
    assert "rank 2 finished (the end of its script, exit code 0)" in peers.gone_message(call, [2])
