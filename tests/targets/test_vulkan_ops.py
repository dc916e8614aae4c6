"""Every public op of flow, compiled for the vulkan target, gives what the eager (numpy) op gives.

The samples are the ones docs/ops.md is generated from (flow.tools.opdocs: every public op of
`flow` and `flow.nn.functional` on a small input). Compiling one module per op costs ~1 s each
and lavapipe then compiles each dispatch again on the first call, so the ops run in a few
batches: one traced function per batch calls every sample of it (measured cold, all 198 ops:
~4 minutes one by one, under a minute in one module). Random ops are compared too: compiled
code draws the numbers eager code draws from the same seed (frontend/_random.py).

What a Vulkan architecture cannot run is refused before IREE sees it (flow.targets.vulkan): on
lavapipe flow compiles for its own architecture (`llvmpipe`), which runs every op, float64
included; the portable default architecture refuses a known set of ops, checked here without
a device.
"""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow.lowering import run_pipeline, to_iree_text
from flow.targets import UnsupportedError, available, compile_mlir, get_target
from flow.targets.vulkan import DEFAULT_ARCH, check_supported
from flow.tools import opdocs

needs_vulkan = pytest.mark.skipif(
    "vulkan" not in available(),
    reason="no Vulkan device here (Mesa lavapipe: apt-get install mesa-vulkan-drivers libvulkan1)",
)

SAMPLES = opdocs._samples()
OPS = [name for name, _ in opdocs._public_ops() if name in SAMPLES]
BATCHES = 4
SEED = 1234


def _results(out) -> list[np.ndarray]:
    return [t.numpy() for t in (out if isinstance(out, (tuple, list)) else [out])]


def _cases() -> list[tuple[str, list[np.ndarray]]]:
    """(op, sample inputs) for every op whose sample returns tensors (not a Python value)."""
    cases = []
    for name in OPS:
        call, specs = SAMPLES[name]
        arrays = opdocs._arrays(specs, np.random.default_rng(0))
        if isinstance(call(*(flow.tensor(a) for a in arrays)), (flow.Tensor, tuple, list)):
            cases.append((name, arrays))
    return cases


CASES = _cases()


def _batch(i: int) -> list[tuple[str, list[np.ndarray]]]:
    size = -(-len(CASES) // BATCHES)
    return CASES[i * size : (i + 1) * size]


def _eager(cases) -> list[list[np.ndarray]]:
    flow.manual_seed(SEED)
    return [_results(SAMPLES[n][0](*(flow.tensor(a) for a in arrays))) for n, arrays in cases]


def _batched(cases):
    """One function calling every sample of `cases` in order, on the flat list of inputs."""

    def run(*flat):
        out, i = [], 0
        for name, arrays in cases:
            out.append(SAMPLES[name][0](*flat[i : i + len(arrays)]))
            i += len(arrays)
        return out

    return run


def _mismatches(cases, got, want) -> list[str]:
    problems = []
    for (name, _), outs, refs in zip(cases, got, want):
        outs = _results(outs)
        for k, (o, r) in enumerate(zip(outs, refs)):
            where = f"{name} (output {k})"
            if o.dtype != r.dtype or o.shape != r.shape:
                problems.append(f"{where}: {o.dtype}{list(o.shape)} vs eager "
                                f"{r.dtype}{list(r.shape)}")  # fmt: skip
            elif not np.allclose(o.astype(np.float64), r.astype(np.float64), rtol=1e-4,
                                 atol=1e-5, equal_nan=True):  # fmt: skip
                err = np.nanmax(np.abs(o.astype(np.float64) - r.astype(np.float64)))
                problems.append(f"{where}: max |vulkan - eager| = {err:.3g}\n  vulkan {o.ravel()[:6]}"
                                f"\n  eager  {r.ravel()[:6]}")  # fmt: skip
        if len(outs) != len(refs):
            problems.append(f"{name}: {len(outs)} outputs vs eager {len(refs)}")
    return problems


def test_samples_cover_every_public_op_and_batches_cover_every_sample():
    assert len(CASES) > 150
    assert sum(len(_batch(i)) for i in range(BATCHES)) == len(CASES)
    returning_values = set(OPS) - {n for n, _ in CASES}
    assert returning_values <= {"numel", "is_floating_point", "is_nonzero", "is_complex"}


@needs_vulkan
@pytest.mark.parametrize("batch", range(BATCHES),
                         ids=[f"{_batch(i)[0][0]}-{_batch(i)[-1][0]}" for i in range(BATCHES)])  # fmt: skip
def test_public_ops_on_vulkan_match_eager(batch):
    cases = _batch(batch)
    want = _eager(cases)
    flat = [a for _, arrays in cases for a in arrays]
    fn = flow.jit(_batched(cases), target="vulkan")
    flow.manual_seed(SEED)
    got = fn(*flat)
    problems = _mismatches(cases, got, want)
    assert not problems, "\n".join(problems)
    outs = [t for out in got for t in (out if isinstance(out, (tuple, list)) else [out])]
    assert {str(t.device) for t in outs} == {"vulkan:0"}


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
        "logical_or", "logical_xor", "lt", "masked_fill", "ne", "where"},
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
