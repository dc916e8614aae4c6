"""What the vulkan target runs and what it refuses, op by op.

Every public op's sample on the vulkan target (and on the target named by `FLOW_TEST_TARGET`)
is compared with eager in test_op_samples.py; the samples and their batches are shared with
it (op_samples.py).

What a Vulkan architecture cannot run is refused before IREE sees it (flow.targets.vulkan): on
lavapipe flow compiles for its own architecture (`llvmpipe`), which runs every op, float64
included; the portable default architecture refuses a known set of ops, checked here without
a device.
"""

from __future__ import annotations

import numpy as np
import pytest
from op_samples import CASES, NO_VULKAN, SAMPLES

import flow
from flow.lowering import run_pipeline, to_iree_text
from flow.targets import UnsupportedError, available, compile_mlir, get_target
from flow.targets.vulkan import DEFAULT_ARCH, check_supported
from flow.tools import opdocs

needs_vulkan = pytest.mark.skipif("vulkan" not in available(), reason=NO_VULKAN)


@needs_vulkan
def test_float64_runs_on_lavapipe_except_exp_and_log():
    """lavapipe has 64-bit floats, and flow compiles for its architecture: float64 stays;
    Vulkan's exp/log have no 64-bit versions, which is refused before compiling."""
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    w = np.linspace(0, 2, 20).reshape(4, 5)

    def f(a, b):
        return flow.sqrt(a * a + 1) @ b, (a * 1e-9).sum(1), flow.relu(a).max(1).values

    got = flow.jit(f, target="vulkan")(x, w)
    want = f(flow.tensor(x), flow.tensor(w))
    for g, e in zip(got, want):
        assert g.dtype is flow.float64
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-20)
    with pytest.raises(UnsupportedError) as info:
        flow.jit(lambda a: flow.softmax(a, 1), target="vulkan")(x)
    msg = str(info.value)
    assert "target 'vulkan' (architecture llvmpipe) cannot run this program: float64 exp" in msg
    assert "Vulkan's math functions have no 64-bit versions" in msg
    assert "Dtypes it supports: float64 (no exp/log/tanh/erf), float32, float16" in msg


# ----------------------------------------------------------------------- refusals


def _iree_input(name: str) -> str:
    call, specs = SAMPLES[name]
    arrays = opdocs._arrays(specs, np.random.default_rng(0))
    lowered = flow.jit(lambda *ts: call(*ts)).lower(*arrays)
    return to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))


# What the portable architecture refuses, and why. Measured on lavapipe with the check off:
# these ops gave wrong bools or failed to compile, and every other op matched eager.
PORTABLE_REFUSES = {
    "bool arguments and results": {
        "eq", "ge", "gt", "isfinite", "isinf", "isnan", "le", "logical_and", "logical_not",
        "logical_or", "logical_xor", "lt", "masked_fill", "ne", "scaled_dot_product_attention",
        "where"},
    "int8": {"all", "any"},
    "int64 division and remainder": {"normal", "randint", "randint_like", "randn", "randn_like"},
}  # fmt: skip


def test_portable_vulkan_architecture_refuses_what_it_cannot_run():
    """No device needed: the check runs before IREE, on the IR the target would compile."""
    vulkan = get_target("vulkan")
    refused: dict[str, set[str]] = {}
    for name, _ in CASES:
        try:
            check_supported(vulkan, vulkan.device_flags, _iree_input(name))
        except UnsupportedError as err:
            msg = str(err)
            assert err.target == "vulkan"
            assert f"target 'vulkan' (architecture {DEFAULT_ARCH}) cannot run this program" in msg
            assert "Dtypes it supports: float32, int32, int64, bfloat16" in msg
            assert "FLOW_VULKAN_TARGET=<arch>" in msg and "targets usable here: cpu" in msg
            what = next(w for w in PORTABLE_REFUSES if msg.split("program: ")[1].startswith(w))
            refused.setdefault(what, set()).add(name)
    assert refused == PORTABLE_REFUSES


# float64 samples on an architecture with 64-bit floats (lavapipe's): refused where Vulkan's
# math has no 64-bit version (measured with the check off: these, and only these, failed to
# compile; the other 155 samples matched eager to 1e-6). The frontend refuses a few more
# float64 functions in compiled code on every target (FRONTEND_F64).
F64_REFUSED = {
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "cosh",
    "cross_entropy",
    "elu",
    "exp",
    "expm1",
    "gelu",
    "kl_div",
    "log",
    "log10",
    "log1p",
    "log2",
    "log_softmax",
    "logsigmoid",
    "logsumexp",
    "mish",
    "pow",
    "randn_like",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "sinh",
    "softmax",
    "softmin",
    "softplus",
    "tanh",
    "tanhshrink",
}
FRONTEND_F64 = {"acos", "arccos", "arcsin", "arctan", "arctan2", "asin", "atan", "atan2", "cos",
                "erf", "fmod", "remainder", "sin", "tan"}  # fmt: skip


def test_float64_ops_refused_on_an_architecture_with_64_bit_floats():
    vulkan = get_target("vulkan")
    flags = [*vulkan.device_flags, "--iree-vulkan-target=llvmpipe"]
    refused, frontend = set(), set()
    for name, arrays in CASES:
        call = SAMPLES[name][0]
        arrays = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
        try:
            lowered = flow.jit(lambda *ts, call=call: call(*ts)).lower(*arrays)
        except NotImplementedError as err:
            assert "float64 is not supported in compiled code" in str(err)
            frontend.add(name)
            continue
        text = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))
        try:
            check_supported(vulkan, flags, text)
        except UnsupportedError as err:
            assert "(architecture llvmpipe) cannot run this program: float64 exp" in str(err)
            refused.add(name)
    assert (refused, frontend) == (F64_REFUSED, FRONTEND_F64)


F64_PROGRAM = """\
func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
  %e = tensor.empty() : tensor<4xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<4xf64>) outs(%e : tensor<4xf64>) {
  ^bb0(%x: f64, %o: f64):
    %s = arith.addf %x, %x : f64
    linalg.yield %s : f64
  } -> tensor<4xf64>
  return %r : tensor<4xf64>
}
"""


def test_float64_on_the_portable_vulkan_architecture_is_refused_before_compiling():
    with pytest.raises(UnsupportedError) as info:
        compile_mlir(F64_PROGRAM, "vulkan", use_cache=False)
    msg = str(info.value)
    assert "target 'vulkan' (architecture vp_android_baseline_2022)" in msg
    assert (
        "float64 (no 64-bit floats; first at IR line 1: func.func @main(%a: tensor<4xf64>)" in msg
    )
    assert "Dtypes it supports: float32, int32, int64, bfloat16" in msg
    assert "targets usable here: " in msg
    # an architecture with 64-bit floats compiles it
    flags = ["--iree-vulkan-target=llvmpipe", "--iree-input-demote-f64-to-f32=false"]
    assert compile_mlir(F64_PROGRAM, "vulkan", flags)


def test_unknown_vulkan_architecture_is_refused_before_it_reaches_iree():
    """IREE 3.13 crashes the process on an unknown --iree-vulkan-target."""
    with pytest.raises(UnsupportedError, match="unknown Vulkan architecture 'gtx9000'.*llvmpipe"):
        compile_mlir(F64_PROGRAM, "vulkan", ["--iree-vulkan-target=gtx9000"], use_cache=False)


@needs_vulkan
def test_flow_jit_float64_on_the_portable_architecture_names_target_and_fix(monkeypatch):
    monkeypatch.setenv("FLOW_VULKAN_TARGET", DEFAULT_ARCH)
    x = flow.tensor(np.ones((2, 3), np.float32)).to("vulkan")
    with pytest.raises(UnsupportedError, match=r"float64 \(no 64-bit floats.*llvmpipe"):
        flow.jit(lambda a: a.to(flow.float64) * 2)(x)
    assert flow.jit(lambda a: a * 2)(x).numpy().tolist() == [[2.0] * 3] * 2


def test_unknown_flow_vulkan_target_lists_the_known_ones(monkeypatch):
    from flow.targets import execution_target

    monkeypatch.setenv("FLOW_VULKAN_TARGET", "gtx9000")
    with pytest.raises(UnsupportedError, match="FLOW_VULKAN_TARGET='gtx9000'.*rdna3"):
        execution_target("vulkan")
