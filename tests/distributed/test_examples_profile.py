"""`--profile` of the digits examples under two ranks: the data-parallel example (eager global
tensors) writes one Chrome trace with a process track per rank, each with its steps, its
eager ops and the all-reduces of the gradients with their bytes and wait. (The pipeline
example's trace is checked with its own run, test_examples_pp.py.)"""

from __future__ import annotations

import json

import pytest
from conftest import HERE, launch

EXAMPLES = HERE.parent.parent / "examples"


def check_chrome_trace(path) -> list[dict]:
    """The trace's events, after checking the Chrome trace format's rules that Perfetto's
    importer needs: complete events with numeric ts / dur / pid / tid, metadata events that
    name the processes and threads."""
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"], e
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["cat"], e
            json.dumps(e["args"])
        else:
            assert e["name"] in ("process_name", "process_sort_index", "thread_name",
                                 "thread_sort_index"), e  # fmt: skip
    return events


def test_train_digits_dp_profile_has_both_ranks(tmp_path):
    pytest.importorskip("sklearn", reason="the digits data: pip install -e '.[examples]'")
    path = tmp_path / "dp.json"
    run = launch(2, EXAMPLES / "train_digits_dp.py", "--epochs", "1", "--profile", str(path),
                 timeout=180)  # fmt: skip
    assert run.returncode == 0, run.describe()
    assert f"profile: {path}" in run.stdout, run.describe()
    events = check_chrome_trace(path)
    ranks = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert ranks == {0: "rank 0", 1: "rank 1"}
    for rank in (0, 1):
        spans = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        steps = [e for e in spans if e["cat"] == "step"]
        assert len(steps) == int(0.8 * 1797) // 64, len(steps)  # one epoch's batches
        assert any(e["cat"] == "eager" and e["name"] == "matmul" for e in spans)
        reduces = [e for e in spans if e["cat"] == "collective" and e["name"] == "all_reduce"]
        assert reduces and all(e["args"]["bytes"] > 0 and e["args"]["group"] == [0, 1]
                               and e["args"]["wait_us"] >= 0 for e in reduces)  # fmt: skip
