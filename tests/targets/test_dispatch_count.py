"""flow.targets.dispatch_count: the dispatches of a compiled module, read from its vmfb.

Each count is checked against an independent one: the same program compiled by the
`iree-compile` binary with the same flags, stopped after the flow phase
(`--compile-to=flow`), where every dispatch is a `flow.executable.export` after IREE has
deduplicated identical ones.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess

import numpy as np
import pytest

import flow
from flow.lowering import run_pipeline, to_iree_text
from flow.targets import compile_flags, compile_mlir, dispatch_count


def _iree_compile() -> str:
    spec = importlib.util.find_spec("iree.compiler")
    return os.path.join(spec.submodule_search_locations[0], "_mlir_libs", "iree-compile")


def _counts(fn, *args) -> tuple[int, int]:
    """(dispatch_count of the compiled module, exports in IREE's flow-phase IR) for `fn`."""
    text = to_iree_text(run_pipeline(flow.jit(fn).lower(*args).module, "flow-to-iree-input"))
    vmfb = compile_mlir(text, "cpu", use_cache=False)
    done = subprocess.run(
        [_iree_compile(), "-", *compile_flags("cpu"), "--compile-to=flow"],
        input=text, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dispatch_count(vmfb), done.stdout.count("flow.executable.export")


def _rand(*shape: int) -> flow.Tensor:
    return flow.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def test_one_elementwise_op_is_one_dispatch():
    assert _counts(flow.exp, _rand(8, 16)) == (1, 1)


def test_matmul_and_a_reduction_of_its_result_are_more_dispatches():
    def fn(x, w):
        y = x @ w
        return y - y.max(dim=1, keepdim=True)[0]

    count, reference = _counts(fn, _rand(8, 32), _rand(32, 16))
    assert count > 1
    assert count == reference


def test_identical_dispatches_count_once():
    # Two launches of one deduplicated entry point: the count is of entry points.
    count, reference = _counts(lambda a, b: (flow.exp(a), flow.exp(b)), _rand(8), _rand(8))
    assert count == reference == 1


def test_a_module_without_dispatches_has_none():
    # Returning an argument unchanged needs no kernel.
    assert _counts(lambda a: a, _rand(4)) == (0, 0)


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match="not an IREE VM module"):
        dispatch_count(b"not a module at all, just bytes")
    with pytest.raises(TypeError, match="expects the vmfb as bytes, got str"):
        dispatch_count("module.vmfb")
