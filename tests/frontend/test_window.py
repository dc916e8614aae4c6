"""Convolution, pooling and interpolation, eagerly and through `flow.jit`, against numpy.

The references below are written from PyTorch's documented (and C++) rules
with plain loops over output positions, independently of flow's formulation
(padding + strided windows, host matrices + matmul). Each `check` compiles one
function, so related variants return several outputs from one function.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from checks import check, data

import flow
import flow.nn.functional as F

F32 = np.float32

# --------------------------------------------------------------------------- references


def _expand(v, n):
    return tuple(v) * (n if len(v) == 1 else 1) if isinstance(v, (tuple, list)) else (v,) * n


def ref_conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation by explicit windows per output position, accumulated in float64."""
    n = w.ndim - 2
    unbatched = x.ndim == n + 1
    x = x[None] if unbatched else x
    s, d, k = _expand(stride, n), _expand(dilation, n), w.shape[2:]
    if padding == "valid":
        pads = [(0, 0)] * n
    elif padding == "same":
        pads = [(di * (ki - 1) // 2, di * (ki - 1) - di * (ki - 1) // 2) for di, ki in zip(d, k)]
    else:
        pads = [(p, p) for p in _expand(padding, n)]
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    outs = [(xp.shape[2 + i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], w.shape[0], *outs))
    axes = list(range(1, n + 2))
    for pos in np.ndindex(*outs):
        taps = np.ix_(*[pos[i] * s[i] + np.arange(k[i]) * d[i] for i in range(n)])
        patch = xp[(slice(None), slice(None), *taps)]
        for g in range(groups):
            wg = w[g * og : (g + 1) * og].astype(np.float64)
            val = np.tensordot(patch[:, g * cg : (g + 1) * cg], wg, axes=(axes, axes))
            out[(slice(None), slice(g * og, (g + 1) * og), *pos)] = val
    if b is not None:
        out += b.reshape(1, -1, *[1] * n)
    out = out.astype(x.dtype)
    return out[0] if unbatched else out


def _pool_out(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def ref_max_pool(x, k, s=None, p=0, d=1, ceil_mode=False, n=None):
    """Max over the in-bounds window positions of every output (padding never counts)."""
    n = n or (len(k) if isinstance(k, tuple) else x.ndim - 2)
    k, p, d = _expand(k, n), _expand(p, n), _expand(d, n)
    s = k if s is None else _expand(s, n)
    sizes = x.shape[-n:]
    outs = [_pool_out(*a, ceil_mode) for a in zip(sizes, k, s, p, d)]
    out = np.zeros((*x.shape[:-n], *outs), x.dtype)
    for pos in np.ndindex(*outs):
        taps = []
        for i in range(n):
            t = pos[i] * s[i] - p[i] + np.arange(k[i]) * d[i]
            taps.append(t[(t >= 0) & (t < sizes[i])])
        patch = x[(..., *np.ix_(*taps))]
        out[(..., *pos)] = patch.max(axis=tuple(range(-n, 0)))
    return out


def ref_avg_pool(x, k, s=None, p=0, ceil_mode=False, count_include_pad=True, divisor=None, n=None):
    """PyTorch's CPU kernel: the window clipped to input + padding gives `pool_size`, clipped
    to the input gives the elements summed (and the count without padding)."""
    n = n or (len(k) if isinstance(k, tuple) else x.ndim - 2)
    k, p = _expand(k, n), _expand(p, n)
    s = k if s is None else _expand(s, n)
    sizes = x.shape[-n:]
    outs = [_pool_out(*a, 1, ceil_mode) for a in zip(sizes, k, s, p)]
    out = np.zeros((*x.shape[:-n], *outs), x.dtype)
    for pos in np.ndindex(*outs):
        box, pool, count = [], 1, 1
        for i in range(n):
            start = pos[i] * s[i] - p[i]
            end = min(start + k[i], sizes[i] + p[i])
            pool *= end - start
            lo, hi = max(start, 0), min(end, sizes[i])
            count *= hi - lo
            box.append(slice(lo, hi))
        total = x[(..., *box)].astype(np.float64).sum(axis=tuple(range(-n, 0)))
        div = divisor or (pool if count_include_pad else count)
        out[(..., *pos)] = total / div
    return out


def ref_adaptive_avg(x, outs):
    n = len(outs)
    sizes = x.shape[-n:]
    out = np.zeros((*x.shape[:-n], *outs), x.dtype)
    for pos in np.ndindex(*outs):
        box = [slice(math.floor(o * L / m), math.ceil((o + 1) * L / m))
               for o, L, m in zip(pos, sizes, outs)]  # fmt: skip
        out[(..., *pos)] = x[(..., *box)].astype(np.float64).mean(axis=tuple(range(-n, 0)))
    return out


def _taps(mode, size, out, o, scale, align_corners, two_d):
    """(source index, weight) pairs of output index `o` along one dim, PyTorch's formulas."""
    f = np.float32
    ratio = f(1.0 / scale) if scale else f(size) / f(out)
    if mode == "nearest":
        if two_d and out in (size, 2 * size):  # PyTorch's 2-D kernel ignores the scale here
            return [(o * size // out, 1.0)]
        return [(min(int(np.floor(f(o) * ratio)), size - 1), 1.0)]
    if mode == "nearest-exact":
        real = max(ratio * (f(o) + f(0.5)) - f(0.5), f(0))
        return [(min(int(np.floor(f(float(real) + 0.5))), size - 1), 1.0)]
    if align_corners:
        real = (f(size - 1) / f(out - 1) if out > 1 else f(0)) * f(o)
    else:
        real = ratio * (f(o) + f(0.5)) - f(0.5)
    if mode == "linear":
        if out == size:
            return [(o, 1.0)]
        real = max(real, f(0))
        i0 = min(int(np.floor(real)), size - 1)
        lam = min(max(real - f(i0), f(0)), f(1))
        return [(i0, f(1) - lam), (i0 + (1 if i0 < size - 1 else 0), lam)]
    # cubic convolution, A = -0.75, source indices clamped to the input
    i0 = min(int(np.floor(real)), size - 1)
    t = min(max(real - f(i0), f(0)), f(1))
    a = -0.75

    def w(x):
        x = abs(x)
        if x <= 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [(min(max(i0 - 1 + j, 0), size - 1), w(float(t) - (j - 1))) for j in range(4)]


def ref_interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    n = x.ndim - 2
    sizes = x.shape[2:]
    if size is not None:
        outs, scales = list(_expand(size, n)), [None] * n
    else:
        scales = list(_expand(scale_factor, n))
        outs = [math.floor(L * sf) for L, sf in zip(sizes, scales)]
    base = "linear" if mode in ("linear", "bilinear", "trilinear") else mode
    base = "cubic" if mode == "bicubic" else base
    out = np.zeros((*x.shape[:2], *outs), np.float64)
    for pos in np.ndindex(*outs):
        taps = [_taps(base, L, m, o, sc, align_corners, n == 2)
                for L, m, o, sc in zip(sizes, outs, pos, scales)]  # fmt: skip
        for combo in itertools.product(*taps):
            weight = np.prod([float(wt) for _, wt in combo])
            out[(slice(None), slice(None), *pos)] += weight * x[(..., *(i for i, _ in combo))]
    return out.astype(x.dtype)


# --------------------------------------------------------------------------- convolution

CONV = [
    # (name, input shape, weight shape, with bias, kwargs)
    ("1d-stride-pad-dilation", (2, 3, 11), (4, 3, 3), True, dict(stride=2, padding=1, dilation=2)),
    ("1d-unbatched-same-even", (3, 9), (2, 3, 4), False, dict(padding="same")),
    ("2d-groups", (2, 4, 9, 8), (6, 2, 3, 2), True,
     dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ("2d-depthwise-same", (1, 3, 6, 7), (3, 1, 3, 3), False, dict(padding="same", groups=3)),
    ("2d-kernel1-stride-gt-kernel", (1, 2, 7, 5), (3, 2, 1, 1), True, dict(stride=3)),
    ("2d-same-dilated-even", (2, 2, 8, 6), (2, 2, 2, 4), False, dict(padding="same", dilation=2)),
    ("3d-padding", (1, 2, 5, 4, 6), (3, 2, 3, 2, 3), True, dict(padding=(1, 0, 1))),
    ("3d-unbatched-strided", (2, 7, 6, 5), (2, 1, 2, 3, 2), False,
     dict(stride=2, dilation=(1, 2, 1), groups=2)),
]  # fmt: skip


@pytest.mark.parametrize("name,xs,ws,bias,kw", CONV, ids=[c[0] for c in CONV])
def test_conv(rng, name, xs, ws, bias, kw):
    op = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(ws)]
    x, w = data(rng, xs), data(rng, ws)
    if bias:
        b = data(rng, ws[:1])
        check(lambda a, c, d: op(a, c, d, **kw), lambda a, c, d: ref_conv(a, c, d, **kw), x, w, b,
              rtol=1e-4, atol=1e-5)  # fmt: skip
    else:
        check(lambda a, c: op(a, c, **kw), lambda a, c: ref_conv(a, c, **kw), x, w,
              rtol=1e-4, atol=1e-5)  # fmt: skip


STRIDE1 = [
    # Stride-1 shapes whose windows run up to the end of each image (so a neighbouring
    # image's first row is one step past the last tap), with dilation, groups and a
    # kernel as large as the input; eager only, against the float64 reference.
    ((3, 2, 7), (4, 2, 3), dict(dilation=3)),
    ((2, 6, 5, 4), (4, 3, 2, 3), dict(padding=(2, 1), dilation=(2, 1), groups=2)),
    ((2, 2, 4, 4), (3, 2, 4, 4), dict()),
    ((2, 4, 3, 4, 5), (4, 1, 2, 2, 3), dict(padding=1, groups=4)),
    ((1, 3, 2, 9), (2, 3, 3, 1), dict(padding=(1, 0))),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("xs,ws,kw", STRIDE1, ids=[str(i) for i in range(len(STRIDE1))])
def test_conv_stride1_eager(rng, xs, ws, kw, dtype):
    op = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(ws)]
    x, w = data(rng, xs, dtype), data(rng, ws, dtype)
    got = op(flow.tensor(x), flow.tensor(w), **kw).numpy()
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), **kw)
    assert got.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def ref_conv_grads(x, w, ct, padding, dilation, groups):
    """The float64 input and weight cotangents of a stride-1 convolution with cotangent `ct`:
    each tap's products spread back over the padded input (cropped), and summed against it."""
    n = w.ndim - 2
    x, w, ct = (a.astype(np.float64) for a in (x, w, ct))
    pads = [(p, p) for p in _expand(padding, n)]
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    cg, og, outs = x.shape[1] // groups, w.shape[0] // groups, ct.shape[2:]
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for tap in np.ndindex(*w.shape[2:]):
        at = tuple(slice(t * d, t * d + o) for t, d, o in zip(tap, _expand(dilation, n), outs))
        for g in range(groups):
            ci, oi = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
            gxp[(slice(None), ci, *at)] += np.einsum("no...,oc->nc...", ct[:, oi],
                                                     w[(oi, slice(None), *tap)])  # fmt: skip
            axes = [0, *range(2, 2 + n)]
            gw[(oi, slice(None), *tap)] += np.tensordot(ct[:, oi], xp[(slice(None), ci, *at)],
                                                        axes=(axes, axes))  # fmt: skip
    crop = tuple(slice(lo, lo + size) for (lo, _), size in zip(pads, x.shape[2:]))
    return gxp[(slice(None), slice(None), *crop)], gw


SAME = [
    # Stride-1 "same" convolutions of small images (LeNet's layers among them): eagerly they
    # run as shifted copies of the unpadded input, and so do their weight cotangents.
    ((32, 1, 8, 8), (8, 1, 3, 3), dict(padding=1)),
    ((32, 8, 4, 4), (16, 8, 3, 3), dict(padding=1)),
    ((3, 4, 7), (6, 2, 5), dict(padding=4, dilation=2, groups=2)),
    ((2, 3, 4, 3, 5), (2, 3, 3, 3, 3), dict(padding=1)),
    ((2, 6, 5, 6), (6, 1, 3, 3), dict(padding=1, groups=6)),
    ((1, 2, 1, 9), (3, 2, 1, 5), dict(padding=(0, 2))),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,kw", SAME, ids=[str(i) for i in range(len(SAME))])
def test_conv_same_eager_with_gradients(rng, xs, ws, kw, dtype):
    op = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(ws)]
    x, w = data(rng, xs, dtype), data(rng, ws, dtype)
    xt, wt = flow.tensor(x, requires_grad=True), flow.tensor(w, requires_grad=True)
    out = op(xt, wt, **kw)
    ct = data(rng, out.shape, dtype)
    (out * flow.tensor(ct)).sum().backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref_conv(x.astype(np.float64), w, **kw), rtol=tol,
                               atol=tol)  # fmt: skip
    gx, gw = ref_conv_grads(x, w, ct, kw["padding"], kw.get("dilation", 1), kw.get("groups", 1))
    np.testing.assert_allclose(xt.grad.numpy(), gx, rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(wt.grad.numpy(), gw, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_conv_same_non_finite_input(rng, bad):
    """A non-finite input value reaches exactly the results whose windows cover it (padding
    stays zero: no 0 * inf), the forward result and the weight cotangent alike."""
    x, w = data(rng, (4, 2, 4, 4)), data(rng, (3, 2, 3, 3))
    x[1, 0, 0, 3] = bad
    xt, wt = flow.tensor(x), flow.tensor(w, requires_grad=True)
    out = F.conv2d(xt, wt, padding=1)
    want = ref_conv(x.astype(np.float64), w, padding=1)
    got = out.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)
    assert finite[0].all() and not finite[1].all()  # only image 1's windows see it
    out.sum().backward()
    _, gw = ref_conv_grads(x, w, np.ones(out.shape), 1, 1, 1)
    np.testing.assert_array_equal(np.isnan(wt.grad.numpy()), np.isnan(gw))


def test_conv_same_many_small_images(rng):
    """So many images that the shifted copies mask each image position alike (one mask per
    position, broadcast over the images, rather than one per element)."""
    x, w = data(rng, (2048, 1, 8, 8)), data(rng, (2, 1, 3, 3))
    got = F.conv2d(flow.tensor(x), flow.tensor(w), padding=1).numpy()
    np.testing.assert_allclose(got, ref_conv(x.astype(np.float64), w, padding=1), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_conv_transposed_input_float64_and_top_level_names(rng):
    """A permuted (non-contiguous) input inside the function, float64, and `flow.conv2d`."""
    x, w = data(rng, (2, 3, 5, 7), np.float64), data(rng, (4, 3, 2, 3), np.float64)
    check(lambda a, c: flow.conv2d(a.permute(0, 1, 3, 2), c, padding="valid"),
          lambda a, c: ref_conv(a.transpose(0, 1, 3, 2), c), x, w, rtol=1e-10)  # fmt: skip


def test_conv_non_contiguous_numpy_input(rng):
    base = data(rng, (3, 2, 12))
    x = flow.from_numpy(base.transpose(1, 0, 2)[:, :, ::2])  # a strided view
    w = data(rng, (2, 3, 3))
    got = F.conv1d(x, flow.tensor(w), padding=2)
    np.testing.assert_allclose(got.numpy(), ref_conv(x.numpy(), w, padding=2), rtol=1e-5,
                               atol=1e-6)  # fmt: skip


def test_conv_as_gemm_half_batch_of_one(rng):
    """Ungrouped static convolutions compile to a product of patches (lowering/_window.py):
    float16 to its rounding, a batch of one, strides and dilations (ints: the lit test)."""
    x, w = data(rng, (1, 3, 9, 8), np.float16), data(rng, (5, 3, 3, 2), np.float16)
    kw = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))
    check(lambda a, c: F.conv2d(a, c, **kw),
          lambda a, c: ref_conv(a.astype(np.float64), c.astype(np.float64), **kw).astype(a.dtype),
          x, w, rtol=1e-2, atol=2e-2)  # fmt: skip


def test_conv_as_gemm_matches_the_direct_loop_nest(rng, monkeypatch, tmp_path):
    """The same convolution compiled both ways, patches and a product or the loop nest that
    reads the input in place (the lowering's choice for patches over IM2COL_MAX_BYTES)."""
    import flow.lowering._window as lowering_window

    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path))  # the module attribute is not in the key
    x, w = data(rng, (3, 4, 10, 9)), data(rng, (6, 4, 3, 3))
    fn = lambda a, c: F.conv2d(a, c, stride=2, padding=1)  # noqa: E731
    gemm = flow.jit(fn, sync_compile=True)(x, w).numpy()
    monkeypatch.setattr(lowering_window, "IM2COL_MAX_BYTES", 0)
    monkeypatch.setenv("FLOW_NO_CACHE", "1")
    direct = flow.jit(fn, sync_compile=True)(x, w).numpy()
    ref = ref_conv(x.astype(np.float64), w.astype(np.float64), stride=2, padding=1)
    np.testing.assert_allclose(gemm, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(direct, ref, rtol=1e-5, atol=1e-5)


def test_conv_empty_batch(rng):
    x, w = data(rng, (0, 4, 6, 5)), data(rng, (2, 2, 3, 3))
    check(lambda a, c: F.conv2d(a, c, padding=1, groups=2),
          lambda a, c: ref_conv(a, c, padding=1, groups=2), x, w)  # fmt: skip


# --------------------------------------------------------------------------- pooling


def test_max_pool1d_variants(rng):
    x, u = data(rng, (2, 3, 10)), data(rng, (3, 10))
    check(lambda a, b: (F.max_pool1d(a, 3, 2, 1, ceil_mode=True), F.max_pool1d(a, 2, dilation=3),
                        F.max_pool1d(b, 4, stride=5), F.max_pool1d(a, 1)),
          lambda a, b: (ref_max_pool(a, 3, 2, 1, ceil_mode=True), ref_max_pool(a, 2, d=3),
                        ref_max_pool(b, 4, 5, n=1), a), x, u)  # fmt: skip


def test_max_pool2d_variants(rng):
    x, u = data(rng, (2, 3, 7, 8)), data(rng, (3, 7, 8))
    check(lambda a, b: (F.max_pool2d(a, (3, 2), padding=(1, 0), dilation=(2, 1)),
                        F.max_pool2d(a, 3, 2, 1, ceil_mode=True),
                        flow.max_pool2d(b, 2, stride=(3, 1), ceil_mode=True)),
          lambda a, b: (ref_max_pool(a, (3, 2), p=(1, 0), d=(2, 1)),
                        ref_max_pool(a, 3, 2, 1, ceil_mode=True),
                        ref_max_pool(b, 2, (3, 1), ceil_mode=True, n=2)), x, u)  # fmt: skip


def test_max_pool_padding_never_wins_and_nan_propagates():
    x = -np.abs(data(np.random.default_rng(1), (1, 2, 5, 5))) - 1  # every value < 0
    x[0, 1, 2, 2] = np.nan
    check(lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True),
          lambda a: ref_max_pool(a, 3, 2, 1, ceil_mode=True), x)  # fmt: skip


def test_max_pool_int_and_3d(rng):
    xi = data(rng, (2, 2, 5, 6), np.int32)
    x3 = data(rng, (1, 2, 5, 4, 6))
    check(lambda a, b: (F.max_pool2d(a, 2, 1, 1), F.max_pool3d(b, 2, ceil_mode=True),
                        F.max_pool3d(b.reshape(2, 5, 4, 6), (3, 2, 2), (1, 2, 3), padding=1)),
          lambda a, b: (ref_max_pool(a, 2, 1, 1), ref_max_pool(b, 2, ceil_mode=True, n=3),
                        ref_max_pool(b[0], (3, 2, 2), (1, 2, 3), 1)), xi, x3)  # fmt: skip


AVG = [
    # (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 7, 6), 3, 2, 1, False, True, None),
    ((2, 3, 7, 6), 3, 2, 1, True, True, None),
    ((2, 3, 7, 6), 3, 2, 1, True, False, None),
    ((1, 2, 8, 5), (2, 3), (3, 1), (1, 1), True, False, None),
    ((2, 5, 6), 2, None, 1, False, True, 3),
]


@pytest.mark.parametrize("xs,k,s,p,ceil,include,divisor", AVG)
def test_avg_pool2d(rng, xs, k, s, p, ceil, include, divisor):
    x = data(rng, xs)
    kw = dict(ceil_mode=ceil, count_include_pad=include, divisor_override=divisor)
    check(lambda a: F.avg_pool2d(a, k, s, p, **kw),
          lambda a: ref_avg_pool(a, k, s, p, ceil, include, divisor, n=2), x)  # fmt: skip


def test_avg_pool1d_and_3d(rng):
    x1, u, x3 = data(rng, (2, 3, 9)), data(rng, (3, 9)), data(rng, (1, 2, 5, 6, 4))
    check(lambda a, u, b: (F.avg_pool1d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                        F.avg_pool1d(u, 4, 5), flow.avg_pool1d(a, 1),
                        F.avg_pool3d(b, (2, 3, 2), padding=(1, 1, 0), ceil_mode=True),
                        F.avg_pool3d(b, 2, 1, 1, count_include_pad=False, divisor_override=2)),
          lambda a, u, b: (ref_avg_pool(a, 3, 2, 1, True, False), ref_avg_pool(u, 4, 5, n=1), a,
                        ref_avg_pool(b, (2, 3, 2), p=(1, 1, 0), ceil_mode=True),
                        ref_avg_pool(b, 2, 1, 1, False, False, 2, n=3)), x1, u, x3)  # fmt: skip


def test_pool_empty_batch(rng):
    x = data(rng, (0, 2, 5, 5))
    check(lambda a: (F.max_pool2d(a, 2), F.avg_pool2d(a, 3, 2, 1, count_include_pad=False)),
          lambda a: (ref_max_pool(a, 2), ref_avg_pool(a, 3, 2, 1, False, False)), x)  # fmt: skip


def test_avg_pool_known_values():
    """Corner windows of a 3x3 average over a padded 4x4 ramp, with and without the padding."""
    x = flow.tensor(np.arange(16, dtype=F32).reshape(1, 1, 4, 4))
    inc = F.avg_pool2d(x, 3, 1, 1).numpy()[0, 0]
    exc = F.avg_pool2d(x, 3, 1, 1, count_include_pad=False).numpy()[0, 0]
    assert inc[0, 0] == pytest.approx((0 + 1 + 4 + 5) / 9)
    assert exc[0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)
    assert exc[1, 1] == pytest.approx(np.arange(16).reshape(4, 4)[:3, :3].mean())


# --------------------------------------------------------------------------- adaptive pooling


def test_adaptive_avg_pool(rng):
    x1, x2, x3 = data(rng, (2, 3, 7)), data(rng, (2, 2, 9, 8)), data(rng, (1, 2, 5, 6, 4))
    check(lambda a, b, c: (F.adaptive_avg_pool1d(a, 3),
                           F.adaptive_avg_pool1d(a.reshape(6, 7), 7),
                           F.adaptive_avg_pool2d(b, (4, None)), F.adaptive_avg_pool2d(b, (3, 4)),
                           flow.adaptive_avg_pool2d(b.reshape(4, 9, 8), 1),
                           F.adaptive_avg_pool3d(c, (2, 3, 1)),
                           F.adaptive_avg_pool3d(c.reshape(2, 5, 6, 4), 4)),
          lambda a, b, c: (ref_adaptive_avg(a, (3,)), a.reshape(6, 7),
                           ref_adaptive_avg(b, (4, 8)), ref_adaptive_avg(b, (3, 4)),
                           ref_adaptive_avg(b.reshape(4, 9, 8), (1, 1)),
                           ref_adaptive_avg(c, (2, 3, 1)), ref_adaptive_avg(c[0], (4, 4, 4))),
          x1, x2, x3)  # fmt: skip


def test_adaptive_avg_pool_overlapping_windows_known_values():
    x = flow.tensor(np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]], F32))
    # windows [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool1d(x, 3).numpy()[0, 0], [1.5, 3.0, 4.5])


# --------------------------------------------------------------------------- interpolation


def test_interpolate_nearest(rng):
    x1, x2 = data(rng, (2, 3, 5)), data(rng, (1, 2, 6, 9))
    check(lambda a, b: (F.interpolate(a, size=12), F.interpolate(a, scale_factor=2.13),
                        F.interpolate(a, size=3), F.interpolate(b, size=(3, 3)),
                        F.interpolate(b, scale_factor=(1.5, 0.7)), F.interpolate(b, size=(18, 9)),
                        F.interpolate(b, scale_factor=(2.1, 1.05)),
                        F.interpolate(b, scale_factor=0.5, mode="nearest-exact"),
                        F.interpolate(b, size=(7, 13), mode="nearest-exact")),
          lambda a, b: (ref_interpolate(a, size=12), ref_interpolate(a, scale_factor=2.13),
                        ref_interpolate(a, size=3), ref_interpolate(b, size=(3, 3)),
                        ref_interpolate(b, scale_factor=(1.5, 0.7)),
                        ref_interpolate(b, size=(18, 9)),
                        ref_interpolate(b, scale_factor=(2.1, 1.05)),
                        ref_interpolate(b, scale_factor=0.5, mode="nearest-exact"),
                        ref_interpolate(b, size=(7, 13), mode="nearest-exact")),
          x1, x2)  # fmt: skip


def test_interpolate_nearest_int_and_3d(rng):
    xi, x3 = data(rng, (1, 2, 4, 3), np.int32), data(rng, (1, 2, 3, 4, 2))
    check(lambda a, b: (F.interpolate(a, size=(7, 6)), F.interpolate(b, scale_factor=(2, 0.5, 1.5))),
          lambda a, b: (ref_interpolate(a, size=(7, 6)),
                        ref_interpolate(b, scale_factor=(2, 0.5, 1.5))), xi, x3)  # fmt: skip


@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_linear_modes(rng, align_corners):
    x1, x2, x3 = data(rng, (2, 3, 5)), data(rng, (1, 2, 4, 6)), data(rng, (1, 1, 3, 4, 2))
    ac = align_corners
    check(lambda a, b, c: (F.interpolate(a, size=9, mode="linear", align_corners=ac),
                           F.interpolate(a, scale_factor=0.6, mode="linear", align_corners=ac),
                           F.interpolate(b, scale_factor=(1.5, 2), mode="bilinear",
                                         align_corners=ac),
                           F.interpolate(b, size=(3, 6), mode="bilinear", align_corners=ac),
                           F.interpolate(b, size=(7, 5), mode="bicubic", align_corners=ac),
                           F.interpolate(c, size=(5, 3, 4), mode="trilinear", align_corners=ac)),
          lambda a, b, c: (ref_interpolate(a, 9, None, "linear", ac),
                           ref_interpolate(a, None, 0.6, "linear", ac),
                           ref_interpolate(b, None, (1.5, 2), "bilinear", ac),
                           ref_interpolate(b, (3, 6), None, "bilinear", ac),
                           ref_interpolate(b, (7, 5), None, "bicubic", ac),
                           ref_interpolate(c, (5, 3, 4), None, "trilinear", ac)),
          x1, x2, x3, rtol=1e-5, atol=1e-5)  # fmt: skip


def test_interpolate_area_and_helpers(rng):
    x = data(rng, (2, 2, 7, 6))
    check(lambda a: (F.interpolate(a, size=(3, 4), mode="area"), F.upsample_nearest(a, size=9),
                     F.upsample_bilinear(a, scale_factor=2), F.upsample(a, size=(5, 5))),
          lambda a: (ref_adaptive_avg(a, (3, 4)), ref_interpolate(a, size=9),
                     ref_interpolate(a, None, 2, "bilinear", True), ref_interpolate(a, (5, 5))),
          x, atol=1e-5)  # fmt: skip


def test_interpolate_known_values():
    x = flow.tensor(np.array([[[1.0, 2.0, 3.0]]], F32))
    y = flow.tensor(np.array([[[0.0, 4.0]]], F32))
    np.testing.assert_array_equal(F.interpolate(x, size=5).numpy()[0, 0], [1, 1, 2, 2, 3])
    np.testing.assert_array_equal(F.interpolate(x, size=5, mode="nearest-exact").numpy()[0, 0],
                                  [1, 1, 2, 3, 3])  # fmt: skip
    np.testing.assert_allclose(F.interpolate(y, size=4, mode="linear").numpy()[0, 0],
                               [0, 1, 3, 4])  # fmt: skip
    np.testing.assert_allclose(F.interpolate(y, size=5, mode="linear", align_corners=True)
                               .numpy()[0, 0], [0, 1, 2, 3, 4])  # fmt: skip
    # PyTorch's 1-D and 3-D kernels floor(i / 2.13); its 2-D kernel halves the index when the
    # output is twice the input, whatever the scale factor.
    r = np.arange(4, dtype=F32)
    one = F.interpolate(flow.tensor(r.reshape(1, 1, 4)), scale_factor=2.13)
    two = F.interpolate(flow.tensor(r.reshape(1, 1, 1, 4)), scale_factor=(1, 2.13))
    np.testing.assert_array_equal(one.numpy().ravel(), [0, 0, 0, 1, 1, 2, 2, 3])
    np.testing.assert_array_equal(two.numpy().ravel(), [0, 0, 1, 1, 2, 2, 3, 3])
    # scale_factor drives the coordinate map (1 / 1.5), not in / out = 3 / 4
    z = F.interpolate(flow.tensor(np.array([[[0.0, 3.0, 6.0]]], F32)), scale_factor=1.5,
                      mode="linear")  # fmt: skip
    np.testing.assert_allclose(z.numpy()[0, 0], [0, 1.5, 3.5, 5.5], atol=1e-6)
    r = F.interpolate(flow.tensor(np.array([[[0.0, 3.0, 6.0]]], F32)), scale_factor=1.5,
                      mode="linear", recompute_scale_factor=True)  # fmt: skip
    np.testing.assert_allclose(r.numpy()[0, 0], [0, 1.875, 4.125, 6], atol=1e-6)


def test_against_torch_when_available(rng):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, w = data(rng, (2, 4, 9, 8)), data(rng, (6, 2, 3, 3))
    cases = [
        (lambda m, a, c: m.conv2d(a, c, stride=2, padding="valid", dilation=2, groups=2), True),
        (lambda m, a, c: m.conv2d(a, c, padding="same", groups=2), True),
        (lambda m, a, c: m.max_pool2d(a, 3, 2, 1, ceil_mode=True), False),
        (lambda m, a, c: m.avg_pool2d(a, 3, 2, 1, ceil_mode=True, count_include_pad=False), False),
        (lambda m, a, c: m.adaptive_avg_pool2d(a, (5, 3)), False),
        (lambda m, a, c: m.interpolate(a, scale_factor=1.3, mode="bilinear"), False),
        (lambda m, a, c: m.interpolate(a, size=(5, 11), mode="bicubic", align_corners=True), False),
        (lambda m, a, c: m.interpolate(a, scale_factor=0.7, mode="nearest"), False),
    ]  # fmt: skip
    for fn, _ in cases:
        expected = fn(tf, torch.from_numpy(x), torch.from_numpy(w)).numpy()
        got = fn(F, flow.tensor(x), flow.tensor(w)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- errors

ERRORS = [
    # (op, input shapes (+ dtypes), kwargs, exception, message pattern)
    (F.conv2d, [(3, 8), (4, 3, 3, 3)], {}, ValueError,
     r"conv2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got input of shape \[3, 8\]"),
    (F.conv2d, [(1, 3, 8, 8), (4, 3, 3)], {}, ValueError,
     r"conv2d: expected a 4-D weight .*got weight of shape \[4, 3, 3\]"),
    (F.conv2d, [(1, 4, 8, 8), (6, 1, 3, 3)], dict(groups=2), ValueError,
     r"conv2d: expected input with 2 channels \(weight of shape \[6, 1, 3, 3\], groups=2\), "
     r"got input of shape \[1, 4, 8, 8\] with 4 channels"),
    (F.conv2d, [(1, 4, 8, 8), (5, 2, 3, 3)], dict(groups=2), ValueError,
     r"conv2d: expected weight dim 0 \(out_channels = 5\) to be divisible by groups=2"),
    (F.conv1d, [(1, 2, 4), (3, 2, 7)], dict(padding=1), ValueError,
     r"conv1d: padded input size per channel \(6\) is smaller than the dilated kernel size \(7\)"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], dict(padding=-1), ValueError,
     r"conv2d: expected padding >= 0, got -1"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], dict(padding="full"), ValueError,
     r"conv2d: expected padding to be 'valid', 'same', an int or a tuple of 2 ints, got 'full'"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], dict(padding="same", stride=2), ValueError,
     r"conv2d: padding='same' is not supported for strided convolutions"),
    (F.conv3d, [(1, 2, 5, 5, 5), (3, 2, 3, 3, 3)], dict(stride=(1, 2)), ValueError,
     r"conv3d: expected stride to be an int or a tuple of 3 ints, got \(1, 2\)"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], dict(dilation=0), ValueError,
     r"conv2d: expected dilation >= 1, got 0"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3)], dict(groups=0), ValueError,
     r"conv2d: expected groups >= 1, got 0"),
    (F.conv2d, [((1, 2, 5, 5), np.int32), ((3, 2, 3, 3), np.int32)], {}, TypeError,
     r"conv2d: expected a floating-point input, got flow.int32"),
    (F.conv2d, [(1, 2, 5, 5), ((3, 2, 3, 3), np.float64)], {}, TypeError,
     r"conv2d: expected input and weight of one dtype, got flow.float32 and flow.float64"),
    (F.conv2d, [(1, 2, 5, 5), (3, 2, 3, 3), (4,)], {}, ValueError,
     r"conv2d: expected bias of shape \[3\], got \[4\]"),
    (F.max_pool2d, [(2, 3, 4, 4, 4)], dict(kernel_size=2), ValueError,
     r"max_pool2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input, got input of shape"),
    (F.max_pool2d, [(1, 3, 5, 5)], dict(kernel_size=3, padding=2), ValueError,
     r"max_pool2d: pad should be at most half of kernel size, but got padding=\[2, 2\] and "
     r"kernel_size=\[3, 3\]"),
    (F.max_pool1d, [(1, 3, 5)], dict(kernel_size=3, padding=-1), ValueError,
     r"max_pool1d: expected padding >= 0, got -1"),
    (F.max_pool2d, [(1, 3, 2, 2)], dict(kernel_size=3), ValueError,
     r"max_pool2d: given input size \(3x2x2\), the calculated output size \(3x0x0\) is too small"),
    (F.max_pool2d, [(1, 0, 4, 4)], dict(kernel_size=2), ValueError,
     r"max_pool2d: expected non-zero sizes for the non-batch dims of the input"),
    (F.max_pool2d, [(1, 3, 4, 4)], dict(kernel_size=2, return_indices=True), NotImplementedError,
     r"max_pool2d: return_indices=True is not supported"),
    (F.max_pool3d, [(1, 3, 4, 4, 4)], dict(kernel_size=0), ValueError,
     r"max_pool3d: expected kernel_size >= 1, got 0"),
    (F.avg_pool2d, [(1, 3, 4, 4)], dict(kernel_size=2.5), TypeError,
     r"avg_pool2d: expected kernel_size to be an int or a tuple of 2 ints, got 2.5"),
    (F.avg_pool2d, [((1, 3, 4, 4), np.int32)], dict(kernel_size=2), TypeError,
     r"avg_pool2d: expected a floating-point input, got flow.int32"),
    (F.avg_pool2d, [(1, 3, 4, 4)], dict(kernel_size=2, divisor_override=0), ValueError,
     r"avg_pool2d: divisor_override must be non-zero"),
    (F.adaptive_avg_pool2d, [(3, 4)], dict(output_size=2), ValueError,
     r"adaptive_avg_pool2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input"),
    (F.adaptive_avg_pool2d, [(1, 3, 4, 4)], dict(output_size=(2, 2, 2)), ValueError,
     r"adaptive_avg_pool2d: expected output_size to be an int or a tuple of 2 ints or None"),
    (F.adaptive_avg_pool1d, [(1, 3, 4)], dict(output_size=-1), ValueError,
     r"adaptive_avg_pool1d: expected output_size >= 0, got -1"),
    (F.interpolate, [(1, 3, 4, 4)], dict(size=8, mode="cubic"), ValueError,
     r"interpolate: expected mode to be one of nearest \| nearest-exact \| linear .*got 'cubic'"),
    (F.interpolate, [(1, 3, 4, 4)], dict(size=8, mode="linear"), ValueError,
     r"interpolate: got 4-D input, but linear mode needs 3-D input"),
    (F.interpolate, [(3, 4)], dict(size=8), ValueError,
     r"interpolate: expected a 3-D, 4-D or 5-D input \(N, C, spatial...\), got input of shape"),
    (F.interpolate, [(1, 3, 4, 4)], dict(size=8, align_corners=True), ValueError,
     r"interpolate: align_corners option can only be set with the interpolating modes"),
    (F.interpolate, [(1, 3, 4, 4)], {}, ValueError,
     r"interpolate: either size or scale_factor should be defined"),
    (F.interpolate, [(1, 3, 4, 4)], dict(size=8, scale_factor=2), ValueError,
     r"interpolate: only one of size or scale_factor should be defined"),
    (F.interpolate, [(1, 3, 4, 4)], dict(size=(8, 8, 8)), ValueError,
     r"interpolate: expected size with 2 entries to match the input's spatial dims \[4, 4\]"),
    (F.interpolate, [(1, 3, 4, 4)], dict(scale_factor=0.1), ValueError,
     r"interpolate: input and output sizes should be greater than 0, got input \[4, 4\] and "
     r"output \[0, 0\]"),
    (F.interpolate, [((1, 3, 4), np.int32)], dict(size=8, mode="linear"), TypeError,
     r"interpolate: expected a floating-point input, got flow.int32"),
]  # fmt: skip


def _error_id(case):
    words = re.sub(r"[^\w ]", "", case[4]).split()[1:7]
    return f"{case[0].__name__}-{'-'.join(words)}"


@pytest.mark.parametrize("op,shapes,kw,cls,pattern", ERRORS, ids=[_error_id(e) for e in ERRORS])
def test_errors_eager_and_jit(rng, op, shapes, kw, cls, pattern):
    arrays = [data(rng, s) if isinstance(s[0], int) else data(rng, *s) for s in shapes]
    with pytest.raises(cls, match=pattern) as eager:
        op(*(flow.tensor(a) for a in arrays), **kw)
    assert "test_window.py" in str(eager.value)  # the user's source line is named
    with pytest.raises(cls, match=pattern):
        flow.jit(lambda *xs: op(*xs, **kw))(*arrays)
