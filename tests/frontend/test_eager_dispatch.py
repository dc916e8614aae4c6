"""Eager mode keeps each primitive's inferred result dtype per operand dtypes, shapes and
params (no xDSL types built per op), yet accepts, rejects and types results exactly as the
dialect op's `infer` does, with the same messages every time."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow import primitives as P
from flow.core import dtypes
from flow.primitives.registry import bind


def test_a_rejected_op_raises_the_same_message_before_and_after_accepted_ones():
    a, b = flow.ones(2, 3), flow.ones(3, 2)
    messages = []
    for _ in range(2):
        with pytest.raises(ValueError) as err:
            bind(P.matmul, a, a)
        messages.append(str(err.value))
        assert bind(P.matmul, a, b).shape == (2, 2)
    assert messages[0] == messages[1]
    assert "matmul" in messages[0] and "test_eager_dispatch.py" in messages[0]


def test_results_typed_per_params_and_operand_dtypes():
    x = flow.tensor([1.5, -2.5])
    for dt in (flow.int32, flow.float64, flow.int32, flow.bool, flow.float16):
        y = bind(P.cast, x, dtype=dt)
        assert y.dtype is dt and y.numpy().dtype == dt.np_dtype
    for dt in (np.float32, np.float64, np.int64, np.float32):
        t = flow.tensor(np.ones(3, dt))
        assert (t + t).numpy().dtype == dt and (t + t).dtype is dtypes.as_dtype(dt)


def test_unhashable_params_are_inferred_each_time():
    for arr in (np.arange(4.0), np.arange(6, dtype=np.int32).reshape(2, 3)):
        t = bind(P.constant, array=arr)
        assert t.dtype is dtypes.as_dtype(arr.dtype) and t.shape == arr.shape
        np.testing.assert_array_equal(t.numpy(), arr)


def test_as_dtype_of_numpy_dtypes_and_other_spellings():
    assert dtypes.as_dtype(np.dtype("float32")) is flow.float32
    assert dtypes.as_dtype(np.dtype(">f4")) is flow.float32
    assert dtypes.as_dtype(np.float64) is flow.float64
    assert dtypes.as_dtype(float) is flow.float32 and dtypes.as_dtype("double") is flow.float64
    with pytest.raises(TypeError, match="unsupported dtype"):
        dtypes.as_dtype(np.dtype("complex64"))
    with pytest.raises(TypeError, match="unsupported dtype"):
        dtypes.as_dtype(np.dtype("complex64"))  # not remembered as anything
