"""The pass registry, named pipelines, `run_pipeline` errors and the IREE hand-off checks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import FloatAttr, TensorType, f32
from xdsl.passes import PassPipeline

import flow.dialect as fd
from flow.dialect import DistAttr, PlacementAttr, SbpAttr, make_context
from flow.lowering import (
    PIPELINES,
    HandoffError,
    PipelineError,
    UnknownPassError,
    expand_pipeline,
    get_all_passes,
    run_pipeline,
    to_iree_text,
)


def _mlp():
    def build(b, x, w, bias):
        y = b(fd.MatmulOp, x, w)
        y = b(fd.AddOp, y, b(fd.BroadcastInDimOp, bias, dims=[1], shape=[8, 4]))
        b(fd.ExpOp, y)  # dead
        return [b(fd.MaximumOp, y, b(fd.FullOp, value=FloatAttr(0.0, f32), shape=[8, 4]))]

    return module(function("mlp", [tensor(f32, 8, 16), tensor(f32, 16, 4), tensor(f32, 4)], build))


def _global_module():
    dist = DistAttr(PlacementAttr.get("cpu", [0, 1]), SbpAttr.get(["S(0)"]))
    ty = TensorType(f32, [8, 4], dist)
    return module(function("g", [ty], lambda b, x: [b(fd.ExpOp, x, encoding=dist)]))


def test_registry_lists_passes_and_pipelines_without_importing_them():
    code = (
        "import sys, flow.lowering as l; p = l.get_all_passes(); "
        "assert 'flow.lowering.lower_to_linalg' not in sys.modules; "
        "print(sorted(p))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for name in ("flow-lower-to-linalg", "flow-to-iree-input", "dce"):
        assert name in out.stdout


def test_every_pass_factory_gives_a_pass_named_like_its_key():
    for name, factory in get_all_passes().items():
        assert factory().name == name


def test_pipelines_expand_to_registered_passes():
    passes = get_all_passes()
    for name, steps in PIPELINES.items():
        assert steps, name
        expanded = expand_pipeline(name)
        assert all(s.name in passes and s.name not in PIPELINES for s in expanded)
    assert [s.name for s in expand_pipeline("flow-to-iree-input")] == [
        step.split("{")[0] for step in PIPELINES["flow-to-iree-input"]
    ]


def test_pipeline_is_a_pass_for_xdsl_pipelines_too():
    m = _mlp()
    PassPipeline.parse_spec(get_all_passes(), "flow-to-iree-input").apply(make_context(), m)
    assert not [op for op in m.walk() if op.name.startswith("flow.")]


def test_run_pipeline_lowers_everything_and_removes_dead_ops():
    m = run_pipeline(_mlp(), "flow-to-iree-input", verify=True)
    names = [op.name for op in m.walk()]
    assert not [n for n in names if n.startswith("flow.")]
    assert "math.exp" not in names  # the dead flow.exp went before lowering
    text = to_iree_text(m)
    assert text.startswith('"builtin.module"()')  # generic form
    assert "#flow" not in text


def test_unknown_pass_lists_the_registered_ones():
    with pytest.raises(UnknownPassError) as info:
        run_pipeline(_mlp(), "dce,no-such-pass")
    msg = str(info.value)
    assert "'no-such-pass'" in msg
    assert "flow-lower-to-linalg" in msg and "flow-to-iree-input" in msg


def test_malformed_pipeline_spec_is_a_value_error():
    with pytest.raises(ValueError, match="invalid pass pipeline"):
        run_pipeline(_mlp(), "dce{")


def test_failing_pass_is_named_with_a_repro(tmp_path):
    m = _global_module()
    with pytest.raises(PipelineError) as info:
        run_pipeline(m, "flow-to-iree-input", source="model.py")
    err = info.value
    assert err.pass_name == "flow-lower-to-linalg"
    msg = str(err)
    assert "pass 'flow-lower-to-linalg' failed (model.py)" in msg
    assert "global tensors must be partitioned first (flow-partition)" in msg
    assert (
        err.repro and err.repro.startswith("flow-opt ") and "-p 'flow-lower-to-linalg'" in err.repro
    )
    # The module was not touched, and the repro file reproduces the failure.
    assert any(op.name == "flow.exp" for op in m.walk())
    path = err.repro.split()[1]
    proc = subprocess.run([sys.executable, "-m", "flow.tools.opt", path, "-p", "flow-lower-to-linalg"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    os.remove(path)
    assert proc.returncode == 1
    assert "global tensors must be partitioned first" in proc.stderr


def test_handoff_refuses_flow_ops():
    with pytest.raises(
        HandoffError, match=r"flow ops or attributes remain \(flow.add, flow.broadcast_in_dim"
    ):
        to_iree_text(_mlp())


def test_handoff_refuses_flow_attributes():
    def build(b, x):
        return [x]

    dist = DistAttr(PlacementAttr.get("cpu", [0, 1]), SbpAttr.get(["B"]))
    m = module(function("g", [TensorType(f32, [4], dist)], build))
    with pytest.raises(HandoffError, match="a flow attribute or type remains"):
        to_iree_text(m)


def test_lowering_keeps_op_locations():
    from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

    m = _mlp()
    loc = FileLineColLoc(StringAttr("model.py"), IntAttr(12), IntAttr(5))
    for op in m.walk():
        if isinstance(op, fd.MatmulOp):
            op.location = loc
    run_pipeline(m, "flow-lower-to-linalg")
    generics = [op for op in m.walk() if op.name == "linalg.generic"]
    assert any(op.location == loc for op in generics)
    assert 'loc("model.py":12:5)' in to_iree_text(m, debuginfo=True)


def test_lowering_error_names_the_source_location():
    from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr
    from xdsl.utils.exceptions import PassFailedException

    from flow.lowering.lower_to_linalg import lower_module

    dist = DistAttr(PlacementAttr.get("cpu", [0, 1]), SbpAttr.get(["B"]))
    loc = FileLineColLoc(StringAttr("model.py"), IntAttr(7), IntAttr(3))

    def build(b, x):
        y = b(fd.FullOp, value=FloatAttr(1.0, f32), shape=[4], encoding=dist)
        y.owner.location = loc
        return [x]

    m = module(function("g", [tensor(f32, 4)], build))
    with pytest.raises(PassFailedException, match=r"^model.py:7:3: 'flow.full' op result #0"):
        lower_module(m)


def test_handoff_refuses_flow_op_attributes():
    from xdsl.dialects.builtin import ModuleOp, StringAttr

    m = ModuleOp([])
    m.attributes["flow.comm_groups"] = StringAttr("[[0, 1]]")
    with pytest.raises(HandoffError, match="attribute flow.comm_groups on builtin.module"):
        to_iree_text(m)
