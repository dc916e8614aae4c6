"""The pipeline-parallel digits example (examples/train_digits_pp.py) runs on 2 ranks: one
epoch of 1F1B training through two stages, then a test accuracy well above chance; its
`--profile` trace has both ranks' steps, the step's trace and compile, and its transfers."""

from __future__ import annotations

import re

import pytest
from conftest import HERE, launch
from test_examples_profile import check_chrome_trace

EXAMPLE = HERE.parent.parent / "examples" / "train_digits_pp.py"


def test_train_digits_pp_runs_on_two_ranks(tmp_path):
    pytest.importorskip("sklearn", reason="the digits data: pip install -e '.[examples]'")
    trace = tmp_path / "pp.json"
    run = launch(2, EXAMPLE, "--epochs", "1", "--profile", str(trace),
                 timeout=180)  # a cold compile cache takes longest
    assert run.returncode == 0, run.describe()
    assert re.search(r"epoch 1: loss \d+\.\d+", run.stdout), run.describe()
    found = re.search(r"test accuracy \(pipeline parallel, 2 ranks\): (\d\.\d+)", run.stdout)
    assert found, run.describe()
    assert float(found.group(1)) > 0.3, run.describe()  # chance is 0.1
    assert not run.left_behind, run.describe()
    events = check_chrome_trace(trace)
    for rank in (0, 1):
        spans = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        graphs = [e for e in spans if e["cat"] == "graph"]
        assert len(graphs) == int(0.8 * 1797) // 64, len(graphs)
        assert {"trace TrainStep", "build TrainStep"} <= {e["name"] for e in spans}
        # each step runs interpreted or compiled, with the stages' transfers inside
        runs = [e for e in spans if e["cat"] in ("call", "interpret")]
        assert len(runs) == len(graphs)
        assert [e for e in spans if e["cat"] == "collective" and e["args"]["bytes"] > 0]
        # this rank's stage and its slots in the schedule; interpreted steps show their slots
        assert graphs[-1]["args"]["stage"] == rank and graphs[-1]["args"]["schedule"] == "1f1b"
        assert graphs[-1]["args"]["slots"].split()[-1] == "U"
        for run in (e for e in runs if e["cat"] == "interpret"):
            slots = [e for e in spans if e["cat"] == "pipeline"
                     and run["ts"] <= e["ts"] <= run["ts"] + run["dur"]]  # fmt: skip
            assert {"forward 0", "backward 0", "update"} <= {e["name"] for e in slots}
