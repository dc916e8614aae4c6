"""flow.profiler under `flow-run -n 2`: each rank records its own spans and the export is one
Chrome trace with a process track per rank, each holding the compiled step's calls and its
collectives with their group, bytes and wait (rank_profiler.py is the script)."""

from __future__ import annotations

import re
import sys

from conftest import HERE, run_command
from test_examples_profile import check_chrome_trace


def test_two_ranks_write_one_merged_trace(tmp_path):
    path = tmp_path / "trace.json"
    cmd = [sys.executable, "-m", "flow.tools.run", "-n", "2", str(HERE / "rank_profiler.py"),
           str(path)]  # fmt: skip
    run = run_command(cmd, timeout=180)
    assert run.returncode == 0, run.describe()
    assert sorted(re.findall(r"rank \d: profiled", run.stdout)) == \
        ["rank 0: profiled", "rank 1: profiled"], run.describe()  # fmt: skip
    trace = check_chrome_trace(path)
    names = {e["pid"]: e["args"]["name"] for e in trace
             if e["ph"] == "M" and e["name"] == "process_name"}  # fmt: skip
    assert names == {0: "rank 0", 1: "rank 1"}
    for rank in (0, 1):
        spans = [e for e in trace if e["ph"] == "X" and e["pid"] == rank]
        calls = [e for e in spans if e["cat"] == "call"]
        steps = [e for e in spans if e["cat"] == "graph"]
        assert len(calls) == len(steps) == 3, spans
        coll = [e for e in spans if e["cat"] == "collective"]
        in_calls = [c for c in coll if any(k["ts"] <= c["ts"] <= k["ts"] + k["dur"]
                                           for k in calls)]  # fmt: skip
        assert in_calls, coll  # the compiled step's own all-reduces
        for c in in_calls:
            assert c["args"]["group"] == [0, 1] and c["args"]["bytes"] > 0, c
            assert c["args"]["wait_us"] >= 0, c
        reduced = [c for c in in_calls if c["name"].startswith("all_reduce")]
        assert sum(c["args"]["bytes"] for c in reduced) > 0
    # the two ranks' spans of one collective are matched by their number on the group
    seqs = [{(e["args"]["label"], e["args"]["seq"]) for e in trace
             if e.get("cat") == "collective" and e["pid"] == r} for r in (0, 1)]  # fmt: skip
    assert seqs[0] == seqs[1]
