"""`F.unfold` / `F.fold` and `nn.Unfold` / `nn.Fold` against loop references over the sliding
blocks, the adjoint identity <unfold(x), y> == <x, fold(y)>, PyTorch (where installed) and
`flow.jit`."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
import flow.nn.functional as F


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _geometry(sizes, kernel_size, dilation, padding, stride):
    k, d, p, s = (_pair(v) for v in (kernel_size, dilation, padding, stride))
    blocks = [(sizes[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    return k, d, p, s, blocks


def ref_unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    """cols[n, (c * kH + i) * kW + j, bh * Lw + bw] = x[n, c, bh*sH - pH + i*dH, bw*sW - pW +
    j*dW] (zero outside the input), one block at a time."""
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    batch, chans, h, w = x.shape
    k, d, p, s, (lh, lw) = _geometry((h, w), kernel_size, dilation, padding, stride)
    cols = np.zeros((batch, chans * k[0] * k[1], lh * lw), x.dtype)
    for bh in range(lh):
        for bw in range(lw):
            for c in range(chans):
                for i in range(k[0]):
                    for j in range(k[1]):
                        r, q = bh * s[0] - p[0] + i * d[0], bw * s[1] - p[1] + j * d[1]
                        if 0 <= r < h and 0 <= q < w:
                            cols[:, (c * k[0] + i) * k[1] + j, bh * lw + bw] = x[:, c, r, q]
    return cols[0] if unbatched else cols


def ref_fold(cols, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Each column entry added back at the input position `ref_unfold` took it from."""
    h, w = _pair(output_size)
    k, d, p, s, (lh, lw) = _geometry((h, w), kernel_size, dilation, padding, stride)
    chans = cols.shape[1] // (k[0] * k[1])
    out = np.zeros((cols.shape[0], chans, h, w), np.float64)
    for c in range(chans):
        for i in range(k[0]):
            for j in range(k[1]):
                for bh in range(lh):
                    for bw in range(lw):
                        r, q = bh * s[0] - p[0] + i * d[0], bw * s[1] - p[1] + j * d[1]
                        if 0 <= r < h and 0 <= q < w:
                            out[:, c, r, q] += cols[:, (c * k[0] + i) * k[1] + j, bh * lw + bw]
    return out.astype(cols.dtype)


CASES = [
    ((5, 6), {"kernel_size": 2}),
    ((5, 6), {"kernel_size": (2, 3), "stride": 2}),
    ((5, 6), {"kernel_size": 3, "padding": 1}),
    ((7, 6), {"kernel_size": (2, 3), "dilation": (1, 2), "padding": (1, 0), "stride": (2, 1)}),
    ((4, 4), {"kernel_size": 1, "stride": 3}),  # blocks skip rows and columns
]
IDS = ["plain", "rect_stride", "padding", "all_per_dim", "1x1_sparse"]


@pytest.mark.parametrize(("size", "kw"), CASES, ids=IDS)
def test_unfold_matches_loop_reference(rng, size, kw):
    x = rng.standard_normal((2, 3, *size)).astype(np.float32)
    got = F.unfold(flow.tensor(x), **kw)
    want = ref_unfold(x, **kw)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(F.unfold(flow.tensor(x[1]), **kw).numpy(), want[1], rtol=1e-6,
                               atol=1e-7)  # unbatched  # fmt: skip


@pytest.mark.parametrize(("size", "kw"), CASES, ids=IDS)
def test_fold_is_the_adjoint_of_unfold(rng, size, kw):
    x = rng.standard_normal((2, 3, *size))
    y = rng.standard_normal(ref_unfold(x, **kw).shape)
    folded = F.fold(flow.tensor(y), size, **kw)
    assert tuple(folded.shape) == x.shape
    lhs = float((ref_unfold(x, **kw) * y).sum())
    rhs = float((x * folded.numpy()).sum())
    assert rhs == pytest.approx(lhs, rel=1e-10, abs=1e-10)


def test_fold_matches_loop_reference(rng):
    kw = {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": (1, 2)}
    k, _, _, _, blocks = _geometry((5, 7), **kw)
    cols = rng.standard_normal((2, 2 * k[0] * k[1], blocks[0] * blocks[1])).astype(np.float32)
    got = F.fold(flow.tensor(cols), (5, 7), **kw)
    np.testing.assert_allclose(got.numpy(), ref_fold(cols, (5, 7), **kw), rtol=1e-5, atol=1e-6)
    unbatched = F.fold(flow.tensor(cols[0]), (5, 7), **kw)  # (C * K, L) -> (C, H, W)
    np.testing.assert_allclose(unbatched.numpy(), ref_fold(cols, (5, 7), **kw)[0], rtol=1e-5,
                               atol=1e-6)  # fmt: skip


def test_fold_of_ones_counts_the_blocks_covering_each_position():
    cols = np.ones((1, 4, 9), np.float32)  # 2x2 kernel, 3x3 blocks over 4x4
    got = F.fold(flow.tensor(cols), 4, 2).numpy()[0, 0]
    np.testing.assert_array_equal(got, [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]])


def test_layers_forward_and_repr(rng):
    unfold, fold = nn.Unfold((2, 3), padding=1), nn.Fold((4, 5), (2, 3), padding=1)
    assert repr(unfold) == "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=1)"
    assert repr(fold) == ("Fold(output_size=(4, 5), kernel_size=(2, 3), dilation=1, padding=1, "
                          "stride=1)")  # fmt: skip
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    cols = unfold(flow.tensor(x))
    np.testing.assert_allclose(cols.numpy(), ref_unfold(x, (2, 3), padding=1), rtol=1e-6)
    np.testing.assert_allclose(fold(cols).numpy(), ref_fold(cols.numpy(), (4, 5), (2, 3),
                                                            padding=1), rtol=1e-5)  # fmt: skip


# --------------------------------------------------------------------------- PyTorch


@pytest.mark.parametrize(("size", "kw"), CASES, ids=IDS)
def test_outputs_and_gradients_match_torch(rng, size, kw):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, *size)).astype(np.float32)
    fx, tx = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    uf, ut = F.unfold(fx, **kw), torch.nn.functional.unfold(tx, **kw)
    np.testing.assert_allclose(uf.numpy(), ut.detach().numpy(), rtol=1e-6, atol=1e-7)
    y = rng.standard_normal(tuple(ut.shape)).astype(np.float32)
    fy, ty = flow.tensor(y, requires_grad=True), torch.tensor(y, requires_grad=True)
    ff, ft = F.fold(fy, size, **kw), torch.nn.functional.fold(ty, size, **kw)
    np.testing.assert_allclose(ff.numpy(), ft.detach().numpy(), rtol=1e-5, atol=1e-6)
    wu, wf = (rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in (ut, ft))
    ((uf * flow.tensor(wu)).sum() + (ff * flow.tensor(wf)).sum()).backward()
    ((ut * torch.tensor(wu)).sum() + (ft * torch.tensor(wf)).sum()).backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fy.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- compiled


def test_jit_matches_eager(rng):
    kw = {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)

    def f(x):
        x = x.detach().requires_grad_()
        cols = F.unfold(x, **kw)
        back = F.fold(cols * 2.0, (5, 6), **kw)
        return (cols, back, *flow.autograd.grad((back * back).sum(), [x]))

    got = flow.jit(f)(x)
    want = f(flow.tensor(x))
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want[0].numpy(), ref_unfold(x, **kw), rtol=1e-6)


@pytest.mark.parametrize(("size", "kw"), CASES, ids=IDS)
def test_inf_and_nan_stay_in_their_own_entries(rng, size, kw):
    """A copy and its adjoint: a non-finite value reaches only the columns (and the output
    positions) that hold it, eager and compiled, as the loop references say."""
    x = rng.standard_normal((2, 3, *size)).astype(np.float32)
    x[0, 1, 1, 2], x[1, 2, 0, 0] = np.inf, np.nan
    cols = ref_unfold(x, **kw)
    y = rng.standard_normal(cols.shape).astype(np.float32)
    y[0, 0, 0], y[1, -1, -1] = -np.inf, np.nan
    for unfold, fold in ((F.unfold, F.fold),
                         (flow.jit(lambda t: F.unfold(t, **kw)),
                          flow.jit(lambda t: F.fold(t, size, **kw)))):  # fmt: skip
        if unfold is F.unfold:
            got_u, got_f = unfold(flow.tensor(x), **kw), fold(flow.tensor(y), size, **kw)
        else:
            got_u, got_f = unfold(flow.tensor(x)), fold(flow.tensor(y))
        np.testing.assert_array_equal(got_u.numpy(), cols)  # inf, nan and the exact copies
        np.testing.assert_allclose(got_f.numpy(), ref_fold(y, size, **kw), rtol=1e-5,
                                   atol=1e-6)  # fmt: skip


# --------------------------------------------------------------------------- errors


def test_error_input_rank():
    with pytest.raises(ValueError, match=r"unfold: .*expected a 3-D \(unbatched\) or 4-D"):
        F.unfold(flow.zeros(2, 4), 2)
    with pytest.raises(ValueError, match=r"fold: .*expected a 2-D \(unbatched\) or 3-D"):
        F.fold(flow.zeros(1, 4, 2, 2), (3, 3), 2)


def test_error_dtype():
    with pytest.raises(TypeError, match="expected a floating-point input"):
        F.unfold(flow.zeros(1, 1, 3, 3, dtype=flow.int64), 2)
    with pytest.raises(TypeError, match="expected a floating-point input"):
        F.fold(flow.zeros(1, 4, 4, dtype=flow.int64), 3, 2)


def test_error_block_count_does_not_match_output_size():
    with pytest.raises(ValueError, match=r"expected input dim 2 \(5\) to match the number of "
                                         r"sliding blocks.*2 x 2 = 4"):  # fmt: skip
        F.fold(flow.zeros(1, 4, 5), (3, 3), 2)


def test_error_channels_not_divisible_by_the_kernel_size():
    with pytest.raises(ValueError, match=r"expected input dim 1 \(6\) to be divisible by the "
                                         r"product of kernel_size=\[2, 2\] \(4\)"):  # fmt: skip
        F.fold(flow.zeros(1, 6, 4), (3, 3), 2)


def test_error_no_sliding_block():
    with pytest.raises(ValueError, match=r"input size \(3 x 3\).*gives 0 x 0 sliding blocks"):
        F.unfold(flow.zeros(1, 1, 3, 3), 4)
    with pytest.raises(ValueError, match=r"output_size \(2 x 2\).*each must be at least 1"):
        F.fold(flow.zeros(1, 9, 1), 2, 3)


def test_error_bad_arguments():
    with pytest.raises(ValueError, match="expected kernel_size >= 1"):
        F.unfold(flow.zeros(1, 1, 3, 3), 0)
    with pytest.raises(ValueError, match="expected kernel_size to be an int or a tuple of 2 ints"):
        F.unfold(flow.zeros(1, 1, 3, 3), (1, 2, 3))
    with pytest.raises(ValueError, match="expected padding >= 0"):
        F.fold(flow.zeros(1, 4, 4), 3, 2, padding=-1)
    with pytest.raises(TypeError, match="expected output_size to be an int or a tuple"):
        F.fold(flow.zeros(1, 4, 4), "3", 2)
