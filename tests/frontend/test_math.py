"""The math library: elementwise math, statistics, index reductions, sorting, scans, einsum.

Each test compiles one function returning several results, checked eagerly against
numpy / math and compiled against eager (tests/frontend/checks.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from checks import check, data

import flow

F32 = np.float32


def test_float_unary_family(rng):
    x = data(rng, (3, 4))
    u = np.clip(x, -0.9, 0.9)  # in the domain of asin/acos
    p = np.abs(x) + 0.1

    def fn(x, u, p):
        return (flow.sin(x), flow.cos(x), flow.tan(u), flow.asin(u), flow.acos(u), flow.atan(x),
                flow.sinh(x), flow.cosh(x), flow.erf(x), flow.log1p(p), flow.expm1(x),
                flow.log2(p), flow.log10(p), flow.sin(x.T))  # fmt: skip

    def ref(x, u, p):
        erf = np.vectorize(math.erf)(x).astype(F32)
        return (np.sin(x), np.cos(x), np.tan(u), np.arcsin(u), np.arccos(u), np.arctan(x),
                np.sinh(x), np.cosh(x), erf, np.log1p(p), np.expm1(x), np.log2(p),
                np.log10(p), np.sin(x.T))  # fmt: skip

    check(fn, ref, x, u, p, rtol=2e-5, atol=2e-6)


def test_rounding_and_sign(rng):
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 2.7, -2.7, np.nan], F32)

    def fn(x):
        return flow.floor(x), flow.ceil(x), flow.round(x), flow.trunc(x), flow.sign(x)

    def ref(x):
        return np.floor(x), np.ceil(x), np.round(x), np.trunc(x), np.sign(x)

    check(fn, ref, x)
    check(lambda x: flow.round(x, decimals=1), lambda x: np.round(x, 1),
          np.array([1.234, -5.678], F32), rtol=1e-6)  # fmt: skip
    ints = np.array([3, -4], np.int32)  # integer rounding is the identity
    check(lambda x: (flow.floor(x), flow.sign(x)), lambda x: (x, np.sign(x)), ints)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_remainder_fmod_floor_divide(rng, dtype):
    a = data(rng, (5, 4), dtype) * 3
    b = data(rng, (4,), dtype)
    b = np.where(b == 0, 3, b).astype(dtype)

    def fn(a, b):
        return flow.remainder(a, b), flow.fmod(a, b), flow.floor_divide(a, b), a % b, a // b

    def ref(a, b):
        r, f, q = np.remainder(a, b), np.fmod(a, b), np.floor_divide(a, b)
        return r, f, q, r, q

    check(fn, ref, a, b, rtol=1e-5, atol=1e-5)


def test_atan2_reciprocal_square_sigmoid_clamp(rng):
    y, x = data(rng, (6,)), data(rng, (6,))
    big = np.array([-100.0, -20.0, 0.0, 20.0, 100.0], F32)

    def fn(y, x, big):
        return (flow.atan2(y, x), flow.reciprocal(x), flow.square(y), flow.sigmoid(big),
                flow.clamp(y, -0.5, 0.5), flow.clamp(y, min=0.0), y.clamp(max=x))  # fmt: skip

    def ref(y, x, big):
        sig = np.array([1 / (1 + math.exp(-v)) for v in big.astype(np.float64)], F32)
        return (np.arctan2(y, x), 1 / x, y * y, sig, np.clip(y, -0.5, 0.5), np.maximum(y, 0),
                np.minimum(y, x))  # fmt: skip

    check(fn, ref, y, x, big, rtol=1e-5, atol=1e-6)


def test_clamp_needs_a_bound():
    with pytest.raises(ValueError, match="clamp: at least one of 'min' or 'max'"):
        flow.clamp(flow.ones(2))


def test_float_classification():
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0], F32)
    check(lambda x: (flow.isnan(x), flow.isinf(x), flow.isfinite(x)),
          lambda x: (np.isnan(x), np.isinf(x), np.isfinite(x)), x)  # fmt: skip


def test_logical_and_bitwise(rng):
    a, b = data(rng, (7,), np.bool_), data(rng, (7,), np.bool_)
    i, j = data(rng, (7,), np.int32), data(rng, (7,), np.int32)

    def fn(a, b, i, j):
        return (flow.logical_and(a, b), flow.logical_or(a, i), flow.logical_xor(i, j),
                flow.logical_not(i), a & b, a | b, a ^ b, ~a, i & j, i | j, i ^ j, ~i)  # fmt: skip

    def ref(a, b, i, j):
        return (a & b, a | (i != 0), (i != 0) ^ (j != 0), i == 0, a & b, a | b, a ^ b, ~a,
                i & j, i | j, i ^ j, ~i)  # fmt: skip

    check(fn, ref, a, b, i, j)
    with pytest.raises(TypeError, match="bitwise_and: expected integer or bool tensors"):
        flow.bitwise_and(flow.ones(2), flow.ones(2))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), ((0, -1), False)])
def test_statistics(rng, dim, keepdim):
    x = data(rng, (4, 5, 3))

    def fn(x):
        return (flow.var(x, dim, keepdim=keepdim), flow.std(x, dim, keepdim=keepdim),
                flow.var(x, dim, unbiased=False, keepdim=keepdim),
                flow.std(x, dim, correction=0, keepdim=keepdim))  # fmt: skip

    def ref(x):
        return (np.var(x, dim, ddof=1, keepdims=keepdim), np.std(x, dim, ddof=1, keepdims=keepdim),
                np.var(x, dim, keepdims=keepdim), np.std(x, dim, keepdims=keepdim))  # fmt: skip

    check(fn, ref, x, rtol=1e-4, atol=1e-5)


def test_logsumexp_is_stable(rng):
    x = data(rng, (3, 4)) * 50 + np.array([0, 0, 1000, -1000], F32)
    x[1] = -np.inf

    def ref(x):
        x64 = x.astype(np.float64)
        m = np.max(x64, 1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        out0 = np.log(np.exp(x64 - m).sum(1, keepdims=True)) + m
        return out0[:, 0].astype(F32), out0.astype(F32)

    check(lambda x: (flow.logsumexp(x, 1), flow.logsumexp(x, -1, keepdim=True)), ref, x,
          rtol=1e-5)  # fmt: skip


def test_all_any_count_nonzero_norm(rng):
    x = data(rng, (3, 4), np.int32, low=-1, high=2)
    f = data(rng, (3, 4))

    def fn(x, f):
        return (flow.all(x), flow.any(x, 1), flow.all(x, 0, keepdim=True),
                flow.count_nonzero(x), flow.count_nonzero(x, 1), flow.norm(f),
                flow.norm(f, 1, dim=1), flow.norm(f, float("inf"), dim=0), flow.norm(f, 3, 1))  # fmt: skip

    def ref(x, f):
        return (np.all(x), np.any(x, 1), np.all(x, 0, keepdims=True), np.count_nonzero(x),
                np.count_nonzero(x, 1).astype(np.int64), np.linalg.norm(f.ravel()).astype(F32),
                np.abs(f).sum(1), np.abs(f).max(0),
                (np.abs(f.astype(np.float64)) ** 3).sum(1).astype(F32) ** (1 / 3))  # fmt: skip

    check(fn, ref, x, f, rtol=1e-5, atol=1e-5)


def test_argmax_argmin_and_max_with_dim(rng):
    x = data(rng, (4, 6), np.int32, low=0, high=3)  # many ties: the first index wins
    f = data(rng, (4, 6))
    f[2, 3] = np.nan

    def fn(x, f):
        mx = flow.max(f, 1)
        mn = flow.min(x, 0, keepdim=True)
        return (flow.argmax(x), flow.argmax(x, 1), flow.argmin(x, -1, keepdim=True),
                flow.argmax(f, 1), mx.values, mx.indices, mn.values, mn.indices)  # fmt: skip

    def ref(x, f):
        return (np.argmax(x), np.argmax(x, 1), np.argmin(x, -1)[:, None], np.argmax(f, 1),
                np.max(f, 1), np.argmax(f, 1), np.min(x, 0, keepdims=True),
                np.argmin(x, 0)[None])  # fmt: skip

    check(fn, ref, x, f)
    with pytest.raises(ValueError, match="argmax: cannot take the argmax of an empty dim"):
        flow.argmax(flow.zeros(2, 0), 1)
    with pytest.raises(IndexError, match="argmax: dim 2 is out of range"):
        flow.argmax(flow.zeros(2, 3), 2)


def test_sort_argsort_topk(rng):
    x = data(rng, (3, 7), np.int32, low=0, high=4)  # ties: the sort is stable
    f = data(rng, (5, 3))
    f[1, 0] = np.nan

    def fn(x, f):
        s = flow.sort(x, 1)
        d = flow.sort(x, -1, descending=True)
        t = flow.topk(f, 2, dim=0)
        b = flow.topk(x, 3, largest=False)
        return (s.values, s.indices, d.values, d.indices, flow.argsort(f, 0), t.values,
                t.indices, b.values, b.indices)  # fmt: skip

    def ref(x, f):
        si = np.argsort(x, 1, kind="stable")
        di = np.argsort(-x, 1, kind="stable")
        fi = np.argsort(f, 0, kind="stable")  # numpy also sorts NaN last
        ti = np.argsort(np.where(np.isnan(f), -np.inf, -f), 0, kind="stable")[:2]
        ti = np.where(np.isnan(f[1, 0]) & (np.arange(3) == 0), np.array([[1], [0]]), ti)
        ti[1, 0] = np.argsort(-np.nan_to_num(f[:, 0], nan=-np.inf), kind="stable")[0]
        bi = si[:, :3]
        return (np.take_along_axis(x, si, 1), si, np.take_along_axis(x, di, 1), di, fi,
                np.take_along_axis(f, ti, 0), ti, np.take_along_axis(x, bi, 1), bi)  # fmt: skip

    check(fn, ref, x, f)
    with pytest.raises(IndexError, match=r"topk: k \(4\) is out of range for dim -1 of size 3"):
        flow.topk(flow.zeros(2, 3), 4)


def test_cumsum_cumprod(rng):
    x = data(rng, (3, 5))
    i = data(rng, (4,), np.int32, low=-3, high=4)

    def fn(x, i):
        return flow.cumsum(x, 1), flow.cumsum(x, 0), flow.cumprod(x, -1), flow.cumsum(i, 0)

    def ref(x, i):
        return np.cumsum(x, 1), np.cumsum(x, 0), np.cumprod(x, -1), np.cumsum(i, dtype=np.int64)

    check(fn, ref, x, i, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),
])  # fmt: skip
def test_einsum(rng, eq, shapes):
    ops = [data(rng, s) for s in shapes]
    check(lambda *a: flow.einsum(eq, *a), lambda *a: np.einsum(eq, *a), *ops, rtol=1e-4,
          atol=1e-5)  # fmt: skip


def test_einsum_errors():
    with pytest.raises(ValueError, match="einsum: repeated label"):
        flow.einsum("ii->i", flow.ones(2, 2))
    with pytest.raises(ValueError, match="einsum: equation 'ij,jk->ik' has 2 operands, got 1"):
        flow.einsum("ij,jk->ik", flow.ones(2, 2))


def test_bmm_mv_dot_outer(rng):
    a, b = data(rng, (2, 3, 4)), data(rng, (2, 4, 5))
    m, v, w = data(rng, (3, 4)), data(rng, (4,)), data(rng, (3,))

    def fn(a, b, m, v, w):
        return flow.bmm(a, b), flow.mv(m, v), flow.dot(v, v), flow.outer(w, v)

    def ref(a, b, m, v, w):
        return a @ b, m @ v, np.dot(v, v), np.outer(w, v)

    check(fn, ref, a, b, m, v, w, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="bmm: expected 3-D tensors"):
        flow.bmm(flow.ones(2, 2), flow.ones(2, 2))


def test_empty_dims_and_broadcast(rng):
    x = np.zeros((0, 3), F32)
    one = data(rng, (1, 3))
    check(lambda x, o: (flow.sin(x) + o, flow.sum(x, 0), flow.cumsum(x, 0), flow.var(o, 0)),
          lambda x, o: (np.sin(x) + o, x.sum(0), np.cumsum(x, 0),
                        np.full(3, np.nan, F32)), x, one)  # fmt: skip
    with pytest.raises(ValueError, match=r"amax: cannot reduce over an empty dim"):
        flow.amax(flow.tensor(x), 0)


def test_tensor_extras():
    x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    shared = flow.from_dlpack(x)
    shared.numpy()[0, 0] = 9.0
    assert x.numpy()[0, 0] == 9.0  # zero-copy both ways
    y = flow.from_dlpack(np.arange(3, dtype=np.int32))
    assert y.dtype is flow.int32 and y.tolist() == [0, 1, 2]
    c = x.clone()
    c.numpy()[0, 0] = 1.0
    assert x.numpy()[0, 0] == 9.0
    assert x.T.contiguous().numpy().flags.c_contiguous
    assert x.is_floating_point() and x.element_size() == 4 and x.nelement() == 4
    assert flow.tensor([1, 2]).type_as(x).dtype is flow.float32
    assert [r.tolist() for r in x] == [[9.0, 2.0], [3.0, 4.0]]
    assert flow.is_tensor(x) and not flow.is_tensor(np.ones(1))


def test_float64_math_in_compiled_code(rng):
    x = np.abs(data(rng, (4,), np.float64)) + 0.5
    check(lambda x: (flow.log2(x), flow.log10(x), flow.expm1(x)),
          lambda x: (np.log2(x), np.log10(x), np.expm1(x)), x, rtol=1e-12)  # fmt: skip
    assert flow.sin(flow.tensor(x)).dtype is flow.float64  # eager has every f64 kernel
    with pytest.raises(NotImplementedError, match="sin: float64 is not supported in compiled"):
        flow.jit(flow.sin)(x)


def test_float64_tanh_in_compiled_code_is_accurate():
    x = np.concatenate([[-30.0, -1e-9, 0.0, 1e-12, 0.049, 0.051, 25.0, np.inf, -np.inf],
                        np.linspace(-3, 3, 101)])  # fmt: skip
    check(flow.tanh, np.tanh, x, rtol=2e-15, atol=0)
