"""Shared oracles for op tests: eager vs an independent reference, and jit vs eager.

`check(fn, ref, *args)` runs `fn` eagerly on flow tensors and compiled with
`flow.jit` on cpu (or on the target named by `FLOW_TEST_TARGET`, e.g. `vulkan`,
which tests/run_all.py adds when a Vulkan device is present, or `cuda`:
benchmarks/gpu_check.sh), and compares both with `ref` (numpy / math on the same
arrays). Outputs may be tensors or tuples/lists of tensors. Failure messages
name the op, the output index, the shapes and dtypes.

On a device target, a program the target refuses for its float64 math (exp/log on
Vulkan) makes the test a skip that gives the target's reason; any other refusal fails.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import flow
from flow.targets import UnsupportedError

TARGET = os.environ.get("FLOW_TEST_TARGET", "").strip() or None
"""Where `check` compiles (None: the cpu)."""


def data(rng, shape, dtype=np.float32, *, positive=False, low=-20, high=20):
    """Random test data: normal floats (|x| + 0.5 when `positive`), ints in [low, high), bools."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
        return (np.abs(x) + 0.5).astype(dtype) if positive else x
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    return rng.integers(low, high, shape).astype(dtype)


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


def _compare(name, what, got, expected, rtol, atol):
    expected = np.asarray(expected)
    assert isinstance(got, flow.Tensor), f"{name}: {what} returned {type(got).__name__}"
    assert tuple(got.shape) == expected.shape, (
        f"{name}: {what} shape {list(got.shape)} != expected {list(expected.shape)}"
    )
    assert got.dtype.np_dtype == expected.dtype, (
        f"{name}: {what} dtype {got.dtype} != expected {expected.dtype}"
    )
    np.testing.assert_allclose(
        np.asarray(got.numpy(), dtype=np.float64) if expected.dtype.kind == "V" else got.numpy(),
        expected, rtol=rtol, atol=atol, err_msg=f"{name}: {what}",
    )  # fmt: skip


def check(fn, ref, *args, rtol=1e-5, atol=1e-6, jit=True, name=None, device_atol=None):
    """`fn` eagerly and compiled both match `ref(*args)` (numpy arrays in, arrays out).

    `device_atol` replaces `atol` for compiled-vs-eager on a device target, where a formula
    amplifies the looser device math (Vulkan's exp and tanh: a few ulp, 3 + 2|x| for exp)."""
    name = name or getattr(fn, "__name__", "fn")
    expected = _leaves(ref(*args))
    eager = _leaves(fn(*(flow.tensor(a) if isinstance(a, np.ndarray) else a for a in args)))
    assert len(eager) == len(expected), f"{name}: {len(eager)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(eager, expected)):
        _compare(name, f"eager output {i}", g, e, rtol, atol)
    if jit:
        try:
            compiled = _leaves(flow.jit(fn, target=TARGET)(*args))
        except UnsupportedError as err:
            if TARGET is None or "float64" not in str(err).split("Dtypes it supports")[0]:
                raise  # only float64 math is a target's documented gap; anything else fails
            pytest.skip(f"{name}: {err}")
        if TARGET is not None and device_atol is not None:
            atol = device_atol
        for i, (g, e) in enumerate(zip(compiled, eager)):
            _compare(name, f"jit output {i} vs eager", g, e.numpy(), rtol, atol)
    return eager
