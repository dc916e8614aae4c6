"""flow.profiler on one process: a jit function and an nn.Graph step under a profile, the
exported Chrome trace (loaded back as JSON), key_averages against the calls made, the
schedule's wait / warm-up / active steps, and nothing recorded or called while off."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.core import profiling
from flow.targets import events


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A compile cache of the test's own, so the first call lowers and compiles."""
    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FLOW_BLAS", "none")  # no calibration runs inside the profile
    from flow.targets import cache

    cache.clear_memory()


def _load(prof, tmp_path) -> list[dict]:
    path = tmp_path / "trace.json"
    assert prof.export_chrome_trace(str(path)) == str(path)
    trace = json.loads(path.read_text())
    assert set(trace) >= {"traceEvents"}
    return trace["traceEvents"]


def _spans(trace: list[dict]) -> list[dict]:
    xs = [e for e in trace if e["ph"] == "X"]
    for e in xs:
        assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int), e
    return xs


def _within(child: dict, parent: dict) -> bool:
    eps = 0.01  # the export rounds to ns
    return (parent["ts"] - eps <= child["ts"]
            and child["ts"] + child["dur"] <= parent["ts"] + parent["dur"] + eps)  # fmt: skip


def test_a_jit_function_under_the_profiler(tmp_path, fresh_cache):
    def scale(a, b):
        return flow.relu(a @ b) * 2.0 + 1.0

    f = flow.jit(scale, sync_compile=True)
    x, y = flow.ones(16, 8), flow.ones(8, 4)
    with flow.profiler.profile(record_shapes=True) as prof:
        for _ in range(4):
            out = f(x, y)
        with flow.profiler.record_function("eager part"):
            z = x + 1.0
    np.testing.assert_allclose(out.numpy(), 17.0)
    np.testing.assert_allclose(z.numpy(), 2.0)
    trace = _load(prof, tmp_path)
    xs = _spans(trace)
    names = {e["name"] for e in xs}
    assert {"jit scale", "trace scale", "build scale", "iree.compile", "iree.load",
            "call scale", "eager part", "to_iree_text"} <= names, names  # fmt: skip
    passes = [e for e in xs if e["cat"] == "pass"]
    assert {"flow-lower-to-linalg", "flow-fuse-elementwise"} <= {e["name"] for e in passes}
    build = next(e for e in xs if e["name"] == "build scale")
    pipeline = next(e for e in xs if e["cat"] == "lower" and e["name"].startswith("pipeline"))
    compile_ = next(e for e in xs if e["name"] == "iree.compile")
    assert _within(pipeline, build) and _within(compile_, build)
    assert all(_within(p, pipeline) for p in passes)
    assert compile_["args"]["target"] == "cpu" and compile_["args"]["cache"] == "miss"
    jits = sorted((e for e in xs if e["name"] == "jit scale"), key=lambda e: e["ts"])
    calls = sorted((e for e in xs if e["name"] == "call scale"), key=lambda e: e["ts"])
    assert len(jits) == len(calls) == 4
    assert all(_within(c, j) for c, j in zip(calls, jits))
    assert _within(next(e for e in xs if e["name"] == "trace scale"), jits[0])
    assert calls[0]["args"]["shapes"] == [[16, 8], [8, 4]]
    add = next(e for e in xs if e["cat"] == "eager" and e["name"] == "add")
    assert _within(add, next(e for e in xs if e["name"] == "eager part"))
    meta = [e for e in trace if e["ph"] == "M"]
    assert {"process_name", "thread_name"} <= {e["name"] for e in meta}

    rows = {r.key: r for r in prof.key_averages()}
    assert rows["call scale"].count == 4 and rows["jit scale"].count == 4
    assert rows["trace scale"].count == 1 and rows["iree.compile"].count == 1
    r = rows["jit scale"]
    assert r.cpu_time_min <= r.cpu_time <= r.cpu_time_max
    assert 0 <= r.self_cpu_time_total <= r.cpu_time_total
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "jit scale" in table and "# of Calls" in table
    assert len([line for line in table.splitlines() if line.endswith(("jit", "call", "build",
                                                                      "lower", "compile",
                                                                      "pass", "trace", "user",
                                                                      "eager", "load"))]) == 5


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__(sync_compile=True)
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


def test_an_nn_graph_step_and_the_schedule(tmp_path, fresh_cache):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    step = _Step(model, flow.optim.SGD(model.parameters(), lr=0.1))
    x, y = flow.ones(6, 4), flow.zeros(6, 1)
    ready = []
    sched = flow.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with flow.profiler.profile(schedule=sched, on_trace_ready=ready.append) as prof:
        for _ in range(7):
            step(x, y)
            prof.step()
    assert ready == [prof]
    xs = _spans(_load(prof, tmp_path))
    steps = sorted((e for e in xs if e["cat"] == "step"), key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    graphs = sorted((e for e in xs if e["name"] == "nn.Graph _Step"), key=lambda e: e["ts"])
    assert [e["args"]["step"] for e in graphs] == [2, 3, 4]  # none of the wait / warm-up steps
    assert all(any(_within(g, s) for s in steps) for g in graphs)
    calls = [e for e in xs if e["cat"] == "call"]
    assert len(calls) == 3 and all(any(_within(c, g) for g in graphs) for c in calls)
    # the first step (trace, compile) was a wait step: not recorded
    assert not [e for e in xs if e["cat"] in ("trace", "compile", "build")]
    assert profiling.ACTIVE is None and events.ACTIVE is None


def test_schedule_actions():
    A = flow.profiler.ProfilerAction
    s = flow.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    got = [s(i) for i in range(10)]
    assert got == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                   A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE]  # fmt: skip
    with pytest.raises(ValueError, match="active > 0"):
        flow.profiler.schedule(wait=0, warmup=0, active=0)


def test_off_records_nothing_and_calls_no_hook(monkeypatch, tmp_path):
    calls = []
    real_add, real_span = events.Recorder.add, events.Recorder.span
    monkeypatch.setattr(events.Recorder, "add", lambda *a, **k: (calls.append(a[1]),
                                                                   real_add(*a, **k)))
    monkeypatch.setattr(events.Recorder, "span", lambda *a, **k: (calls.append(a[1]),
                                                                    real_span(*a, **k))[1])
    f = flow.jit(lambda a: a * 3.0, sync_compile=True)

    @flow.profiler.record_function("decorated")
    def work():
        return f(flow.ones(3)) + flow.ones(3)

    work()
    assert calls == [] and profiling.ACTIVE is None and events.ACTIVE is None
    # a schedule that never records: the recorder is never filled
    never = flow.profiler.schedule(wait=5, warmup=0, active=1, repeat=1)
    with flow.profiler.profile(schedule=never) as prof:
        for _ in range(3):
            work()
            prof.step()
    assert calls == [] and prof.events() == []
    with flow.profiler.profile() as prof:
        work()
    assert "decorated" in calls and {e["name"] for e in prof.events()} >= {"decorated"}


def test_iree_dispatches_replay_a_cpu_program(tmp_path, fresh_cache):
    f = flow.jit(lambda a, b: flow.relu(a @ b) + 1.0, sync_compile=True)
    x = flow.ones(32, 32)
    f(x, x)
    with flow.profiler.profile(iree_dispatches=True) as prof:
        f(x, x)
    xs = _spans(_load(prof, tmp_path))
    found = [e for e in xs if e["cat"] == "iree_dispatch"]
    assert found and all(e["args"]["replayed"] for e in found), prof.dispatch_notes
    assert all("_dispatch_" in e["name"] for e in found)
    call = next(e for e in xs if e["cat"] == "call")
    assert all(e["tid"] != call["tid"] for e in found)  # a track of their own


def test_iree_dispatches_replay_takes_0d_arguments(tmp_path, fresh_cache):
    # A training step passes its learning rate and step count as 0-d tensors; the replay tool
    # must get them as scalars, not as shape [1] (which its signature check rejects).
    f = flow.jit(lambda a, s, n: a * s + n.to(flow.float32), sync_compile=True)
    args = flow.ones(16, 16), flow.tensor(0.5), flow.tensor(3)
    f(*args)
    with flow.profiler.profile(iree_dispatches=True) as prof:
        f(*args)
    assert prof.dispatch_notes == []
    found = [e for e in _spans(_load(prof, tmp_path)) if e["cat"] == "iree_dispatch"]
    assert found and all(e["args"]["replayed"] for e in found)
