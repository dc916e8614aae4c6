"""Bad arguments get one message naming the op, what it got and what was expected (one
normalizing place, frontend/_args.py), never an error from deep inside Python or numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import flow

X = flow.ones(2, 3)


@pytest.mark.parametrize("arg", ["tpu", 3.5, "cuda0x", None.__class__])
def test_to_names_both_readings_of_a_bad_argument(arg):
    expected = (r"to: .* is neither a device type \(cpu, cuda, rocm, hip, vulkan.*\) "
                r"nor a dtype \(bool, .*float64\)")
    with pytest.raises(TypeError, match=expected):
        X.to(arg)


def test_to_dtype_keyword():
    with pytest.raises(TypeError, match=r"to: dtype= str 'tpu' is not a dtype \(expected one of: "
                                        r"bool, .*float64\)"):  # fmt: skip
        X.to(dtype="tpu")


def test_to_still_takes_devices_dtypes_and_tensors():
    assert X.to("cpu", flow.float64).dtype is flow.float64
    assert X.to(flow.ones(1, dtype=flow.int32)).dtype is flow.int32
    assert X.to("int64").numpy().tolist() == [[1, 1, 1]] * 2


@pytest.mark.parametrize(
    "call, op",
    [
        (lambda d: X.sum(dim=d), "sum"),
        (lambda d: X.mean(d), "mean"),
        (lambda d: X.prod(d), "prod"),
        (lambda d: X.amax(d), "amax"),
        (lambda d: X.amin(d), "amin"),
        (lambda d: X.std(d), "var"),
        (lambda d: flow.logsumexp(X, d), "logsumexp"),
        (lambda d: (X > 0).all(d), "all"),
        (lambda d: (X > 0).any(d), "any"),
        (lambda d: X.squeeze(d), "squeeze"),
        (lambda d: flow.norm(X, dim=d), "norm"),
    ],
)
@pytest.mark.parametrize("dim, shown", [(1.5, "float 1.5"), ([0, 1.0], "list [0, 1.0]"),
                                        ("1", "str '1'"), (True, "bool True")])  # fmt: skip
def test_reduction_dims_must_be_ints(call, op, dim, shown):
    with pytest.raises(TypeError, match=rf"^{op}: dim must be an int or a tuple of ints, "
                                        rf"got {re.escape(shown)}\n  at "):  # fmt: skip
        call(dim)


def test_single_dim_ops_and_valid_dims():
    with pytest.raises(TypeError, match=r"argmax: dim must be an int, got float 1.5"):
        X.argmax(1.5)
    with pytest.raises(TypeError, match=r"^max: dim must be an int, got float 1.5"):
        flow.max(X, 1.5)
    with pytest.raises(TypeError, match=r"^min: dim must be an int, got tuple \(0, 1\)"):
        X.min((0, 1))
    with pytest.raises(IndexError, match=r"sum: dim 2 is out of range for a tensor of rank 2"):
        X.sum(2)
    v = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t = flow.tensor(v)
    np.testing.assert_array_equal(t.sum((0, 1)).numpy(), v.sum((0, 1)))
    np.testing.assert_array_equal(t.sum([np.int64(-1)]).numpy(), v.sum(-1))
    np.testing.assert_array_equal(t.mean(1).numpy(), v.mean(1))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: X.view(3, 2.0), r"reshape: shape must be ints, got float 2.0 at position 1 of "
                                 r"\[3, 2.0\]"),  # fmt: skip
        (lambda: X.reshape(1.5, 4), r"reshape: shape must be ints, got float 1.5 at position 0"),
        (lambda: X.reshape(("a",)), r"reshape: shape must be ints, got str 'a'"),
    ],
)
def test_shapes_must_be_ints(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_negative_sizes_other_than_minus_one():
    with pytest.raises(ValueError, match=r"reshape: shape \[-2, -3\] has a negative size -2"):
        X.reshape(-2, -3)
    assert X.reshape([3, -1]).shape == (3, 2) and X.view(np.int64(6)).shape == (6,)


_BEYOND = [([2**70], 2**70), (2**64, 2**64), ([2**63], 2**63), ([-1, 2**63], 2**63),
           ([[1], [-(2**63) - 1]], -(2**63) - 1)]


@pytest.mark.parametrize("data, shown", _BEYOND)
def test_ints_beyond_int64(data, shown):
    with pytest.raises(OverflowError, match=rf"tensor: the integer {shown} does not fit in "
                                            r"int64 \(range \[-9223372036854775808, "
                                            r"9223372036854775807\]\)"):  # fmt: skip
        flow.tensor(data)


def test_int64_extremes_and_big_floats_still_work():
    assert flow.tensor([-(2**63), 2**63 - 1]).numpy().tolist() == [-(2**63), 2**63 - 1]
    assert flow.tensor([1e19, 2.0], dtype=flow.float64).numpy().tolist() == [1e19, 2.0]


@pytest.mark.parametrize(
    "data, cls, match",
    [
        ([[1, 2], [3]], ValueError, r"tensor: data is ragged: nested sequences must have "
                                    r"equal lengths at each level, got list \[\[1, 2\], "
                                    r"\[3\]\]"),  # fmt: skip
        ([1, "a"], TypeError, r"tensor: cannot hold strings"),
        ([1, None], TypeError, r"tensor: cannot hold NoneType None: data must be numbers"),
        (object(), TypeError, r"tensor: cannot hold object <object"),
        ([1j], TypeError, r"tensor: cannot hold complex numbers .*supported dtypes: bool"),
    ],
)
def test_data_no_dtype_holds(data, cls, match):
    with pytest.raises(cls, match=match):
        flow.tensor(data)


@pytest.mark.parametrize("index, shown", [("tpu", "str 'tpu'"), (1.5, "float 1.5"), (-1, "int -1")])
def test_cuda_index(index, shown):
    with pytest.raises(TypeError, match=rf"cuda: device must be an index >= 0 or a cuda device "
                                        rf"such as 'cuda:1', got {shown}"):  # fmt: skip
        X.cuda(index)


def test_cuda_device_forms_and_type_as():
    from flow.core.args import cuda_device

    got = [cuda_device(None), cuda_device(1), cuda_device("cuda:2")]
    assert got == ["cuda", "cuda:1", "cuda:2"]
    with pytest.raises(TypeError, match=r"type_as: expected a tensor, got int 3"):
        X.type_as(3)
    assert X.type_as(flow.ones(1, dtype=flow.int8)).dtype is flow.int8
