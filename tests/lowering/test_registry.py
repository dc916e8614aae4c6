"""The registry's named pipelines with options (the per-rank ones), its knobs, and that the
registry knows passes by module path: no lowering module imports another in a cycle."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from flow.lowering import PIPELINES, PipelinePass, expand_pipeline, get_all_passes

LOWERING = Path(__file__).resolve().parents[2] / "lowering"


def _names(spec: str) -> list[str]:
    return [str(s) for s in expand_pipeline(spec)]


def test_every_step_option_is_an_option_of_its_pipeline():
    for name, steps in PIPELINES.items():
        cls = get_all_passes()[name]()
        assert issubclass(cls, PipelinePass), name
        options = {f.name for f in dataclasses.fields(cls)}
        used = {m for step in steps for m in re.findall(r"\$(\w+)", step)}
        assert used <= options, f"{name}: steps use {used - options}, options are {options}"


def test_options_fill_the_steps_of_a_per_rank_pipeline(monkeypatch):
    monkeypatch.delenv("FLOW_COMM_PLAN", raising=False)
    assert _names("flow-partition-to-iree-input{rank=3}") == [
        "flow-partition{rank=3}", "flow-pipeline-schedule{rank=3}",
        "flow-lower-collectives{rank=3}", *_names("flow-to-iree-input"),
    ]  # fmt: skip
    # An option passed down to a nested pipeline's step; by default no product calls BLAS.
    assert 'flow-gemm-to-blas{policy="auto"}' in _names("flow-partition-to-iree-input{rank=3 "
                                                        "blas=auto}")  # fmt: skip
    assert 'flow-gemm-to-blas{policy="none"}' in _names("flow-to-iree-input")
    native = _names("flow-partition-to-iree-input-native{rank=1}")
    assert native[:3] == ["flow-channel-table", "flow-partition{rank=1}",
                          "flow-pipeline-schedule{rank=1}"]  # fmt: skip
    assert "flow-lower-collectives-native{rank=1}" in native
    # Without the option, its default (-1: the one program of every rank).
    assert _names("flow-partition-to-iree-input")[0] == "flow-partition{rank=-1}"


@pytest.mark.parametrize(("value", "runs"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_comm_plan_step_runs_when_its_knob_says(monkeypatch, value, runs):
    monkeypatch.setenv("FLOW_COMM_PLAN", value)
    steps = _names("flow-partition-to-iree-input{rank=0}")
    assert ("flow-print-comm-plan{rank=0}" in steps) == runs
    # A pass named explicitly always runs.
    assert _names("flow-print-comm-plan{rank=0}") == ["flow-print-comm-plan{rank=0}"]


def test_a_bad_pipeline_option_names_the_pipeline_and_its_options():
    with pytest.raises(ValueError, match=r"pipeline 'flow-partition-to-iree-input': .*\"rnk\""):
        expand_pipeline("flow-partition-to-iree-input{rnk=0}")
    with pytest.raises(ValueError, match="pipeline 'flow-partition-to-iree-input': .*int"):
        expand_pipeline("flow-partition-to-iree-input{rank=zero}")
    with pytest.raises(ValueError, match=r"pipeline 'flow-to-iree-input': .*\"rank\".*\"blas\""):
        expand_pipeline("flow-to-iree-input{rank=0}")


def test_each_flow_pass_lives_in_its_own_file_named_after_it():
    for name, factory in get_all_passes().items():
        cls = factory()
        if cls.__module__ == "flow.lowering._registry" or not name.startswith("flow-"):
            continue  # the pipelines without options (the registry makes them), xDSL's passes
        module = cls.__module__.rsplit(".", 1)[1]
        stem = name.removeprefix("flow-").replace("-", "_")
        assert module in (stem, stem.removesuffix("_native")), f"{name} is defined in {module}.py"


def _imports(path: Path) -> set[str]:
    """The lowering modules `path` imports, function-local imports included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                out |= {mod} if mod else {a.name for a in node.names}
            elif mod.startswith("flow.lowering."):
                out.add(mod.split(".")[2])
    return {m for m in out if (LOWERING / f"{m}.py").exists()}


def test_no_import_cycle_in_lowering():
    graph = {p.stem: _imports(p) for p in LOWERING.glob("*.py")}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
