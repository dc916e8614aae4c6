"""Integer `//`, `%` and `fmod` in compiled code give numpy's answers where C's are undefined.

A zero divisor gives 0 and INT_MIN // -1 wraps to INT_MIN (numpy); a bare `arith.divsi`
raises SIGFPE on x86 or returns garbage. Every pair of edge values (0, ±1, ±2, ±3, ±7,
INT_MIN, INT_MIN + 1, INT_MAX, INT_MAX - 1) for each integer dtype runs through one compiled
program (fused elementwise code), one `flow-compile` + `flow-run` module (unfused ops), and
the vulkan target where a device is present, each against numpy and eager.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import flow

DTYPES = (np.int8, np.int32, np.int64)


def _edges(dt) -> np.ndarray:
    info = np.iinfo(dt)
    small = [0, 1, -1, 2, -2, 3, -3, 7, -7]
    return np.array([*small, info.min, info.min + 1, info.max, info.max - 1], dt)


def _pairs(dt) -> tuple[np.ndarray, np.ndarray]:
    """Every (dividend, divisor) pair of edge values."""
    e = _edges(dt)
    a, b = np.meshgrid(e, e, indexing="ij")
    return a.ravel(), b.ravel()


def _numpy(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    with np.errstate(divide="ignore", over="ignore"):
        zero = np.zeros_like(b)
        return [a // b, a % b, np.fmod(a, b), a // zero, a % zero]


def _ops(a, b):
    return [a // b, a % b, flow.fmod(a, b), a // 0, a % 0]


def _program(*xs):
    return [r for a, b in zip(xs[::2], xs[1::2]) for r in _ops(a, b)]


NAMES = ("a // b", "a % b", "fmod(a, b)", "a // 0", "a % 0")


def _inputs() -> list[np.ndarray]:
    return [x for dt in DTYPES for x in _pairs(dt)]


def _check(got, inputs, where: str) -> None:
    want = [w for a, b in zip(inputs[::2], inputs[1::2]) for w in _numpy(a, b)]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        dt, name = DTYPES[i // len(NAMES)], NAMES[i % len(NAMES)]
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{where} {name} {dt.__name__}: dtype {g.dtype}"
        bad = np.flatnonzero(g != w)
        a, b = inputs[2 * (i // len(NAMES))], inputs[2 * (i // len(NAMES)) + 1]
        assert bad.size == 0, (
            f"{where} {name} {dt.__name__}: {bad.size} wrong, e.g. a={a[bad[0]]} b={b[bad[0]]}: "
            f"got {g[bad[0]]}, numpy {w[bad[0]]}"
        )


@pytest.fixture(scope="module")
def inputs() -> list[np.ndarray]:
    return _inputs()


def test_eager_matches_numpy(inputs):
    with np.errstate(divide="ignore", over="ignore"):
        got = _program(*(flow.tensor(x) for x in inputs))
    _check([t.numpy() for t in got], inputs, "eager")


def test_compiled_matches_numpy(inputs):
    got = flow.jit(_program)(*(flow.tensor(x) for x in inputs))
    _check([t.numpy() for t in got], inputs, "flow.jit")


def test_true_division_of_integers_matches_eager():
    a, b = _pairs(np.int32)
    ta, tb = flow.tensor(a), flow.tensor(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = (ta / tb).numpy()
    got = flow.jit(lambda x, y: x / y)(ta, tb).numpy()
    np.testing.assert_array_equal(got, want)


MODULE = """\
func.func @divrem(%a: tensor<{n}xi32>, %b: tensor<{n}xi32>) -> (tensor<{n}xi32>, tensor<{n}xi32>) {{
  %q = flow.div %a, %b : tensor<{n}xi32>
  %r = flow.rem %a, %b : tensor<{n}xi32>
  return %q, %r : tensor<{n}xi32>, tensor<{n}xi32>
}}
"""


def test_flow_compile_and_run_do_not_trap(tmp_path):
    """Unfused `flow.div` / `flow.rem` through the command-line tools, in a subprocess: the
    process exits 0 and prints C's truncating quotient and remainder, 0 for a zero divisor."""
    a, b = _pairs(np.int32)
    src = tmp_path / "divrem.mlir"
    src.write_text(MODULE.format(n=a.size))
    vmfb = tmp_path / "divrem.vmfb"
    res = subprocess.run([sys.executable, "-m", "flow.tools.compile", src, "-o", vmfb],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    outs = [tmp_path / "q.npy", tmp_path / "r.npy"]
    args = [sys.executable, "-m", "flow.tools.run", vmfb, "--function", "divrem"]
    for name, x in (("a", a), ("b", b)):
        np.save(tmp_path / f"{name}.npy", x)
        args += ["--input", tmp_path / f"{name}.npy"]
    for o in outs:
        args += ["--output", o]
    res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stderr}"
    q, r = (np.load(o) for o in outs)
    with np.errstate(divide="ignore", over="ignore"):
        trunc = np.where(b == 0, 0, np.fix(a.astype(np.float64) / np.where(b == 0, 1, b)))
    np.testing.assert_array_equal(q, trunc.astype(np.int64).astype(np.int32))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(r, np.fmod(a, b))


def test_vulkan_matches_numpy(inputs):
    from flow.targets import available

    if "vulkan" not in available():
        pytest.skip("no Vulkan device here (install mesa-vulkan-drivers for lavapipe)")
    got = flow.jit(_program, target="vulkan")(*(flow.tensor(x) for x in inputs))
    _check([t.numpy() for t in got], inputs, "vulkan")
