"""Every primitive, eager and through `flow.jit` on cpu, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from checks import check as _check
from checks import data as _data

import flow

F32 = np.float32


UNARY = [
    ("neg", flow.neg, np.negative, False),
    ("abs", flow.abs, np.abs, False),
    ("exp", flow.exp, np.exp, False),
    ("log", flow.log, np.log, True),
    ("sqrt", flow.sqrt, np.sqrt, True),
    ("rsqrt", flow.rsqrt, lambda x: 1 / np.sqrt(x), True),
    ("tanh", flow.tanh, np.tanh, False),
]


@pytest.mark.parametrize("name,op,ref,positive", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float(rng, name, op, ref, positive):
    x = _data(rng, (3, 5), positive=positive)
    _check(op, lambda a: ref(a).astype(F32), x)


@pytest.mark.parametrize("name,op,ref", [("neg", flow.neg, np.negative), ("abs", flow.abs, np.abs)])
def test_unary_int(rng, name, op, ref):
    x = _data(rng, (7,), np.int32)
    _check(op, ref, x)


BINARY = [
    ("add", flow.add, np.add),
    ("sub", flow.sub, np.subtract),
    ("mul", flow.mul, np.multiply),
    ("div", flow.div, np.divide),
    ("maximum", flow.maximum, np.maximum),
    ("minimum", flow.minimum, np.minimum),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("name,op,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary(rng, name, op, ref, dtype):
    a, b = _data(rng, (4, 3), dtype), _data(rng, (4, 3), dtype)
    if name == "div":
        b = np.where(b == 0, 1, b).astype(dtype)
        out_dtype = np.float64 if dtype == np.float64 else F32

        def ref(x, y):
            return np.divide(x, y).astype(out_dtype)

    _check(op, ref, a, b)


def test_pow(rng):
    a, b = _data(rng, (6,), positive=True), _data(rng, (6,))
    _check(flow.pow, np.power, a, b)


def test_broadcasting_and_scalars(rng):
    a, b = _data(rng, (2, 1, 4)), _data(rng, (3, 1))
    _check(lambda x, y: x * y + 2.0 - y / 4, lambda x, y: x * y + F32(2.0) - y / F32(4), a, b)


def test_nan_propagation():
    a = np.array([1.0, np.nan, 3.0], F32)
    b = np.array([np.nan, 2.0, 1.0], F32)
    _check(flow.maximum, np.maximum, a, b)
    _check(flow.minimum, np.minimum, a, b)


@pytest.mark.parametrize("cmp,ref", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                     ("le", np.less_equal), ("gt", np.greater),
                                     ("ge", np.greater_equal)])  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_compare(rng, cmp, ref, dtype):
    a = _data(rng, (5, 4), dtype)
    b = a.copy()
    b[::2] = _data(rng, (3, 4), dtype)
    _check(getattr(flow, cmp), ref, a, b)


def test_select(rng):
    c, a, b = _data(rng, (3, 4), np.bool_), _data(rng, (3, 4)), _data(rng, (4,))
    _check(flow.where, np.where, c, a, b)


CASTS = [(np.float32, np.int32), (np.float32, np.float64), (np.float64, np.float32),
         (np.int32, np.float32), (np.int64, np.int32), (np.int32, np.int64),
         (np.bool_, np.float32), (np.float32, np.bool_), (np.int32, np.bool_),
         (np.float32, np.float16), (np.bool_, np.int32)]  # fmt: skip


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{np.dtype(s)}-{np.dtype(d)}" for s, d in CASTS])
def test_cast(rng, src, dst):
    x = _data(rng, (9,), src) * (3 if np.dtype(src).kind == "f" else 1)
    if np.dtype(src).kind != "b":
        x[0] = 0
    ref = (lambda a: a != 0) if dst == np.bool_ else (lambda a: a.astype(dst))
    _check(lambda a: a.to(flow.core.dtypes.as_dtype(dst)), ref, x, rtol=1e-3)


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((2, 3, 4), (4, 5)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
    ],
)
def test_matmul(rng, sa, sb):
    _check(flow.matmul, np.matmul, _data(rng, sa), _data(rng, sb), rtol=1e-4, atol=1e-5)


def test_matmul_int(rng):
    _check(flow.matmul, np.matmul, _data(rng, (3, 4), np.int32), _data(rng, (4, 2), np.int32))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 2), False),
                                         (-1, False)])  # fmt: skip
@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("amax", np.max), ("amin", np.min),
                                      ("prod", np.prod), ("mean", np.mean)])  # fmt: skip
def test_reduce(rng, name, ref, dim, keepdim):
    x = _data(rng, (3, 4, 2))
    axis = dim if not isinstance(dim, tuple) else tuple(dim)
    _check(
        lambda a: getattr(flow, name)(a, dim, keepdim),
        lambda a: np.asarray(ref(a, axis=axis, keepdims=keepdim), F32),
        x,
        rtol=1e-5,
    )


def test_reduce_int_sum_promotes_to_int64(rng):
    x = _data(rng, (4, 5), np.int32)
    _check(lambda a: flow.sum(a, 1), lambda a: a.sum(1, dtype=np.int64), x)


def test_reshape_transpose(rng):
    x = _data(rng, (2, 3, 4))
    _check(lambda a: a.reshape(4, -1), lambda a: a.reshape(4, -1), x)
    _check(lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), x)
    _check(lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), x)
    _check(lambda a: a.reshape(24), lambda a: a.reshape(24), x)
    _check(
        lambda a: flow.reshape(a[None] if False else a, 1, 24, 1).squeeze(),
        lambda a: a.reshape(24),
        x,
    )
    _check(lambda a: a.flatten(1).unsqueeze(0), lambda a: a.reshape(1, 2, 12), x)


def test_reshape_to_scalar(rng):
    x = _data(rng, (1, 1))
    _check(lambda a: a.reshape(()), lambda a: a.reshape(()), x)
    _check(lambda a: a.reshape(()).reshape(1, 1, 1), lambda a: a.reshape(1, 1, 1), x)


def test_broadcast_in_dim(rng):
    x = _data(rng, (3, 1))
    _check(lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), x)
    _check(lambda a: flow.broadcast_to(a, (3, 5)), lambda a: np.broadcast_to(a, (3, 5)), x)


def test_full_and_constants():
    def f(a):
        return a + flow.ones(2, 3) * 3 + flow.full((2, 3), 0.5)

    _check(f, lambda a: a + F32(3.5), np.zeros((2, 3), F32))


def test_captured_tensor_is_argument_not_constant(rng):
    w = flow.tensor(_data(rng, (4, 4)))

    @flow.jit
    def f(x):
        return x @ w

    x = _data(rng, (2, 4))
    text = f.lower(x).as_text()
    assert "flow.constant" not in text and "tensor<4x4xf32>" in text.splitlines()[1]
    np.testing.assert_allclose(f(x).numpy(), x @ w.numpy(), rtol=1e-5)
