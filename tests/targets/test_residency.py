"""Results passed back as arguments stay in their device buffers; results never alias the
caller's arrays; optional compile flags fall back when IREE rejects a program."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from call_programs import SCALE, private_cache_dir  # noqa: F401 -- the fixture

from flow.targets import TARGETS, available, compile_mlir, load, runtime
from flow.targets.table import CPU_FLAG_SETS

PROGRAM = SCALE + """\
func.func @keep(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %s = tensor.extract_slice %b[1] [2] [1] : tensor<4xf32> to tensor<2xf32>
  return %a, %s : tensor<4xf32>, tensor<2xf32>
}
"""

# A batched matmul: the cpu target's optional inner-tiled lowering rejects it in IREE 3.13.
BATCH_MATMUL = """\
func.func @bmm(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32>)
      outs(%f : tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %r : tensor<2x3x5xf32>
}
"""


@pytest.fixture(scope="module")
def vmfbs() -> dict[str, bytes]:
    return {name: compile_mlir(PROGRAM, name) for name in ("cpu", "vulkan")}


def _targets() -> list[str]:
    return [name for name in ("cpu", "vulkan") if name in available()]


@pytest.mark.parametrize("name", ["cpu", "vulkan"])
def test_result_passed_back_is_not_uploaded(vmfbs: dict[str, bytes], name: str) -> None:
    if name not in _targets():
        pytest.skip(f"no {TARGETS[name].driver} device on this machine")
    scale = load(vmfbs[name], name)["scale"]
    x = np.arange(4, dtype=np.float32)
    runtime.reset_transfer_stats()
    (y,) = scale(x)
    (z,) = scale(y)
    stats = runtime.transfer_stats()
    assert stats.calls == 2 and stats.uploads == 1 and stats.uploaded_bytes == 16
    assert stats.resident_args == 1 and stats.resident_bytes == 16
    np.testing.assert_array_equal(z, x * 4)
    np.testing.assert_array_equal(y, x * 2)  # the earlier result is unchanged
    if name != "cpu":  # read back through staging buffers: a copy that must not be written
        assert stats.read_backs == 2 and not y.flags.writeable


def test_cpu_writes_into_a_result_are_seen_by_the_next_call(vmfbs: dict[str, bytes]) -> None:
    scale = load(vmfbs["cpu"], "cpu")["scale"]
    (y,) = scale(np.ones(4, np.float32))
    y[0] = 10.0  # the array maps the device buffer: the next call reads the new value
    (z,) = scale(y)
    np.testing.assert_array_equal(z, [20.0, 4.0, 4.0, 4.0])


def test_views_and_copies_of_results_are_uploaded(vmfbs: dict[str, bytes]) -> None:
    scale = load(vmfbs["cpu"], "cpu")["scale"]
    (y,) = scale(np.ones(4, np.float32))
    runtime.reset_transfer_stats()
    scale(y.copy())
    scale(y[::-1])
    assert runtime.transfer_stats().uploads == 2


def test_results_never_alias_resident_arguments(vmfbs: dict[str, bytes]) -> None:
    module = load(vmfbs["cpu"], "cpu")
    (y,) = module["scale"](np.arange(4, dtype=np.float32))
    same, part = module["keep"](y, y)  # IREE returns the argument's buffer (and a slice of it)
    same[0] = part[0] = -1.0
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0, 6.0])


def test_optional_flags_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # the cpu target with the inner-tiled set's optional flag, whatever this host's family
    inner = CPU_FLAG_SETS["global-dt-inner"]
    target = replace(TARGETS["cpu"], optional_flags=inner.optional)
    assert target.optional_flags
    vmfb = compile_mlir(BATCH_MATMUL, target, use_cache=False)
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((2, 4, 5)).astype(np.float32)
    (out,) = load(vmfb, "cpu")["bmm"](a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    assert not list(tmp_path.glob("flow-cpu-failed-*"))  # the rejected attempt is no failure
