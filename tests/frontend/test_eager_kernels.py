"""The eager kernels and VJP rules that eager training steps lean on: the bit-select `select`
kernel against `np.where`, matmul cotangents laid out like their operands, and VJP rules
that compute cotangents only for inputs that need them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import flow
from flow import primitives as P
from flow.primitives.registry import bind, register_mode, remove_mode

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.int64,
          np.bool_]  # fmt: skip
SHAPES = [((64, 128), (64, 128), (64, 128)), ((64, 128), (128,), (64, 1)),
          ((64, 128), (), (64, 128)), ((3,), (3,), (3,))]  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_select_kernel_is_np_where_bit_for_bit(rng, dt, shapes):
    sp, sa, sb = shapes
    pred = rng.random(sp) > 0.5
    a = (rng.standard_normal(sa) * 100).astype(dt)
    b = (rng.standard_normal(sb) * 100).astype(dt)
    if np.dtype(dt).kind == "f" and a.size and b.size:
        a.reshape(-1)[:1], b.reshape(-1)[-1:] = np.nan, -np.inf
        b.reshape(-1)[:1] = -0.0
    got, want = P.select.impl(pred, a, b), np.where(pred, a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_select_kernel_strided_operands(rng):
    a = rng.standard_normal((100, 100)).astype(np.float32).T
    b = rng.standard_normal((100, 200)).astype(np.float32)[:, ::-2]
    pred = rng.random((100, 100)) > 0.3
    np.testing.assert_array_equal(P.select.impl(pred, a, b), np.where(pred, a, b))


def test_linear_weight_gradient_is_row_major_and_right(rng):
    x = rng.standard_normal((8, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    ct = rng.standard_normal((8, 3)).astype(np.float32)
    wt = flow.tensor(w, requires_grad=True)
    xt = flow.tensor(x, requires_grad=True)
    (flow.matmul(xt, wt.t()) * flow.tensor(ct)).sum().backward()
    assert wt.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(wt.grad.numpy(), ct.T @ x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xt.grad.numpy(), ct @ w, rtol=1e-5, atol=1e-6)
    # column-major on the left too
    at = flow.tensor(np.ascontiguousarray(x.T), requires_grad=True)
    (flow.matmul(at.t(), wt.t()) * flow.tensor(ct)).sum().backward()
    assert at.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(at.grad.numpy(), (ct @ w).T, rtol=1e-5, atol=1e-6)


class _Probe:
    """Counts the primitives run, by name, while active."""

    def __init__(self):
        self.seen: list[str] = []

    def __enter__(self):
        def process(prim, args, params, trace):
            self.seen.append(prim.name)

        register_mode("probe", lambda prim, args, trace: True, process, before="lazy")
        return self

    def __exit__(self, *exc):
        remove_mode("probe")


@pytest.mark.parametrize("op,expected", [
    (lambda x, c: flow.matmul(c, x), {"matmul": 1}),
    (lambda x, c: flow.matmul(x, c), {"matmul": 1}),
    (lambda x, c: x * c, {"mul": 1}),
    (lambda x, c: c - x, {"neg": 1}),
    (lambda x, c: x - c, {"neg": 0}),
    (lambda x, c: c / x, {"div": 1, "mul": 1, "neg": 1}),
    (lambda x, c: x / c, {"div": 1, "mul": 0, "neg": 0}),
    (lambda x, c: flow.maximum(x, c), {"mul": 1, "sub": 0}),
    (lambda x, c: flow.where(c > 0, x, c), {"select": 1}),
])  # fmt: skip
def test_cotangents_only_for_inputs_that_need_them(rng, op, expected):
    """Backward of `op(x, c)` with only `x` requiring grad runs each rule's work for `x` alone
    (counted per primitive), and the gradient is still right (against finite differences
    elsewhere: here, against the same op with `c` requiring grad too)."""
    x0 = rng.standard_normal((4, 4)).astype(np.float32) + 3
    c0 = rng.standard_normal((4, 4)).astype(np.float32) + 3
    x = flow.tensor(x0, requires_grad=True)
    out = op(x, flow.tensor(c0)).sum()
    with _Probe() as probe:
        out.backward()
    for name, count in expected.items():
        assert probe.seen.count(name) == count, (name, probe.seen)
    x2, c2 = flow.tensor(x0, requires_grad=True), flow.tensor(c0, requires_grad=True)
    op(x2, c2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6)


def test_select_on_large_tensors_through_the_api(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    got = flow.where(flow.tensor(x) > 0, flow.tensor(x), flow.zeros(128, 64)).numpy()
    np.testing.assert_array_equal(got, np.where(x > 0, x, 0))
    assert bind(P.select, flow.tensor(x > 0), flow.tensor(x), flow.tensor(-x)).dtype is flow.float32


@pytest.mark.parametrize("m,k,n", [(512, 72, 16), (2048, 72, 16), (16, 72, 512), (257, 33, 65),
                                   (3, 4, 5), (1000, 300, 10), (4096, 1, 1), (8, 144, 1152),
                                   (10, 300, 1000), (2, 600, 2000)])  # fmt: skip
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64])
def test_host_matmul_agrees_with_matmul(rng, m, k, n, dt):
    """Mid-sized GEMMs run on one BLAS thread: same shape, dtype and values to rounding as
    np.matmul, for a transposed right operand too, and BLAS's thread count is restored."""
    threads = P.structured._blas_threads()
    before = threads[0]() if threads else None
    a = (rng.standard_normal((m, k)) * 4).astype(dt)
    b = (rng.standard_normal((n, k)) * 4).astype(dt).T
    got = P.structured.host_matmul(a, b)
    assert got.dtype == np.dtype(dt) and got.shape == (m, n)
    assert (threads[0]() if threads else None) == before
    if dt == np.int64:
        np.testing.assert_array_equal(got, a @ b)
        return
    # Within the rounding bound of a sum of k products, |error| <= k * eps * (|a| @ |b|):
    # which kernel BLAS picks (and so its rounding) depends on the CPU.
    wide = a.astype(np.float64), b.astype(np.float64)
    bound = k * np.finfo(dt).eps * (np.abs(wide[0]) @ np.abs(wide[1]))
    err = np.abs(got - wide[0] @ wide[1])
    assert (err <= bound).all(), f"max error {err.max()} against the bound {bound[err > bound]}"
