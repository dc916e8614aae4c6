"""The waiting part of a step's communication under `flow-run -n 2` (rank_waits.py is the
script): when rank 1 reaches a barrier 0.3 s late, rank 0's `wait_ms` holds those 0.3 s and
rank 1's almost nothing, each within its `comm_ms`; on a step where both arrive together,
neither waits long. Compute, communication and host time add up to the step."""

from __future__ import annotations

import re
import sys

from conftest import HERE, run_command

LATE_MS = 300


def test_a_late_rank_shows_as_its_peers_waiting(tmp_path):
    cmd = [sys.executable, "-m", "flow.tools.run", "-n", "2", str(HERE / "rank_waits.py")]
    run = run_command(cmd, timeout=180)
    assert run.returncode == 0, run.describe()
    rows = re.findall(r"rank (\d): step (\d) comm ([\d.]+) wait ([\d.]+) step ([\d.]+) "
                      r"split ([\d.]+)", run.stdout)  # fmt: skip
    got = {(int(r), int(s)): (float(c), float(w)) for r, s, c, w, _, _ in rows}
    assert sorted(got) == [(r, s) for r in (0, 1) for s in (1, 2, 3)], run.describe()
    for *_, step_ms, split_ms in rows:
        assert abs(float(step_ms) - float(split_ms)) <= 0.01 * float(step_ms) + 0.01, rows
    for (rank, step), (comm, wait) in got.items():
        assert 0 <= wait <= comm * 1.001 + 0.01, (rank, step, comm, wait)
        if step < 3 and rank == 0:  # waited for rank 1's sleep (a sleep is never shorter)
            assert LATE_MS * 0.95 <= wait <= comm * 1.001 + 0.01, (rank, step, comm, wait)
        else:  # arrived last, or together: a fraction of the sleep at most
            assert wait < LATE_MS / 3, (rank, step, comm, wait)
    assert re.search(r"comm [\d.]+ of which waiting [\d.]+", run.stdout), run.describe()
