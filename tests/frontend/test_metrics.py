"""Per-step metrics (flow.profiler.enable_metrics): steps end at each nn.Graph call or, in
eager training, at each optimizer.step(); FLOW_METRICS writes JSON lines or CSV rows; a
profile recording at the same time sees every span too."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

import flow
import flow.nn as nn


@pytest.fixture
def metrics():
    m = flow.profiler.enable_metrics()
    yield m
    flow.profiler.disable_metrics()


def _model():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def test_eager_steps_end_at_the_optimizer_and_split_their_time(metrics):
    model = _model()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    x, y = flow.randn(5, 6), flow.randint(0, 3, (5,))
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    assert [s["kind"] for s in metrics.steps] == ["eager"] * 3
    for s in metrics.steps:
        assert s["calls"] == 0 and s["compute_ms"] > 0 and s["comm_ms"] == 0
        assert s["step_ms"] == pytest.approx(s["compute_ms"] + s["host_ms"], rel=1e-6)
    total = metrics.summary()
    assert total["steps"] == 3
    assert total["step_ms"] == pytest.approx(sum(s["step_ms"] for s in metrics.steps))
    line = flow.profiler.format_summary(total)
    assert line.startswith("3 steps, ") and "ms/step" in line and "RSS peak" in line


def test_graph_steps_count_calls_and_compiles_and_share_spans_with_a_profile(metrics):
    model = _model()
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__(sync_compile=True)
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            return loss

    step = Step()
    x = flow.tensor(np.linspace(-1, 1, 42, dtype=np.float32).reshape(7, 6))
    y = flow.tensor(np.arange(7) % 3)
    step(x, y)
    with flow.profiler.profile() as prof:
        step(x, y)
        step(x, y)
    step(x, y)
    kinds = [s["kind"] for s in metrics.steps]
    assert kinds == ["graph"] * 4, metrics.steps  # the traced optimizer.step is not a step
    first, *steady = metrics.steps
    assert first["compiles"] + first["cache_hits"] >= 1
    for s in steady:
        assert s["calls"] == 1 and s["compiles"] == 0 and s["compute_ms"] > 0, s
        assert s["device_peak_bytes"] > 0
    graph_spans = [e for e in prof.events() if e["cat"] == "graph"]
    assert len(graph_spans) == 2  # the profile saw its two steps, with metrics on


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_flow_metrics_writes_one_record_per_step(tmp_path, suffix):
    path = tmp_path / f"steps{suffix}"
    code = ("import flow, flow.nn as nn\n"
            "m = nn.Linear(4, 2); opt = flow.optim.SGD(m.parameters(), lr=0.1)\n"
            "for _ in range(3):\n"
            "    opt.zero_grad(); m(flow.randn(3, 4)).sum().backward(); opt.step()\n")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={"FLOW_METRICS": str(path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    if suffix == ".csv":
        rows = list(csv.DictReader(path.open()))
        assert [r["step"] for r in rows] == ["0", "1", "2"] and rows[0]["kind"] == "eager"
        assert json.loads(rows[0]["bytes"]) == {} and float(rows[0]["step_ms"]) > 0
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert [r["step"] for r in rows] == [0, 1, 2] and all(r["kind"] == "eager" for r in rows)
