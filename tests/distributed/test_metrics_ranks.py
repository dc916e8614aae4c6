"""Per-step metrics under `flow-run -n 2` (rank_metrics.py is the script): with FLOW_METRICS
each rank writes its own JSON lines, and a data-parallel step's all-reduce bytes equal its
gradients' bytes (plus the loss's partial sum, one f32), every step after the first. The
step's other collectives are the runtime's own agreements (small all-gathers of compile
states), counted under their own kinds."""

from __future__ import annotations

import json
import os
import re
import sys

from conftest import HERE, run_command


def test_data_parallel_step_all_reduces_its_gradient_bytes(tmp_path):
    path = tmp_path / "steps.jsonl"
    cmd = [sys.executable, "-m", "flow.tools.run", "-n", "2", str(HERE / "rank_metrics.py")]
    run = run_command(cmd, timeout=180, env={**os.environ, "FLOW_METRICS": str(path)})
    assert run.returncode == 0, run.describe()
    grads = {int(r): int(b) for r, b in re.findall(r"rank (\d): grads (\d+)", run.stdout)}
    assert sorted(grads) == [0, 1] and grads[0] == grads[1] == (8 * 16 + 16 + 16 * 4 + 4) * 4
    assert not path.exists()  # two ranks: one file per rank
    for rank in (0, 1):
        steps = [json.loads(line) for line in
                 (tmp_path / f"steps.rank{rank}.jsonl").read_text().splitlines()]  # fmt: skip
        assert [s["kind"] for s in steps] == ["graph"] * 4, steps
        for s in steps[1:]:  # the first step may also move the initial state
            assert s["bytes"].get("all_reduce_sum") == grads[rank] + 4, s
            assert s["collectives"]["all_reduce_sum"] == 4 + 1, s  # 4 gradients, the loss
            assert s["calls"] == 1 and s["compiles"] == 0, s
            assert s["comm_ms"] > 0 and s["step_ms"] >= s["compute_ms"] + s["comm_ms"] * 0.99
            assert s["device_peak_bytes"] > 0 and s["host_rss_peak_bytes"] > 2**20
    assert re.search(r"ms/step .*sent .*all_reduce_sum", run.stdout), run.describe()
