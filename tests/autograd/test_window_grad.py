"""VJPs of the window primitives (conv, reduce_window) against finite differences, PyTorch's
max-pool routing of ties, and backward inside `flow.jit` against eager."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import gradcheck, jit_grads_match_eager

import flow
import flow.nn.functional as F
from flow.primitives.registry import bind
from flow.primitives.window import reduce_window

# (conv, input shape, weight shape, keyword arguments); every case has a bias.
CONVS = {
    "1d_strided_dilated_grouped_last_row_unread": (
        F.conv1d, (2, 4, 10), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    "1d_same_even_kernel": (F.conv1d, (1, 2, 6), (3, 2, 4), dict(padding="same")),
    "1d_same_dilated": (F.conv1d, (1, 1, 7), (2, 1, 3), dict(padding="same", dilation=2)),
    "1d_windows_in_padding_only": (F.conv1d, (1, 2, 2), (2, 2, 1), dict(stride=4, padding=3)),
    "2d_mixed": (F.conv2d, (1, 2, 6, 5), (3, 2, 3, 2),
                 dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    "2d_depthwise": (F.conv2d, (2, 3, 5, 5), (3, 1, 3, 3), dict(stride=2, padding=1, groups=3)),
    "2d_same_asymmetric": (F.conv2d, (1, 2, 4, 5), (2, 2, 2, 4), dict(padding="same")),
    "2d_unbatched": (F.conv2d, (2, 4, 4), (2, 2, 2, 2), dict(stride=2)),
    "3d_grouped": (F.conv3d, (1, 2, 4, 4, 3), (2, 1, 2, 3, 2),
                   dict(stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CONVS))
def test_conv(rng, name):
    conv, x_shape, w_shape, kw = CONVS[name]
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    gradcheck(lambda t, u, v: conv(t, u, v, **kw), x, w, b, name=name)


POOLS = {
    "max1d": lambda t: F.max_pool1d(t, 3, 2, padding=1, dilation=2),
    "max2d_ceil": lambda t: F.max_pool2d(t, 3, 2, padding=1, ceil_mode=True),
    "max3d": lambda t: F.max_pool3d(t, (2, 2, 1), (1, 2, 1)),
    "avg1d_excl_pad_ceil": lambda t: F.avg_pool1d(t, 3, 2, padding=1, ceil_mode=True,
                                                  count_include_pad=False),
    "avg2d_incl_pad_ceil": lambda t: F.avg_pool2d(t, 3, 2, padding=1, ceil_mode=True),
    "avg2d_excl_pad": lambda t: F.avg_pool2d(t, (2, 3), 1, padding=(1, 1),
                                             count_include_pad=False),
    "avg2d_divisor": lambda t: F.avg_pool2d(t, 2, divisor_override=3),
    "avg3d": lambda t: F.avg_pool3d(t, 2, 1, padding=1, count_include_pad=False),
    "adaptive1d_overlapping": lambda t: F.adaptive_avg_pool1d(t, 3),
    "adaptive2d_uniform": lambda t: F.adaptive_avg_pool2d(t, (2, 1)),
    "adaptive2d_mixed": lambda t: F.adaptive_avg_pool2d(t, (3, 2)),
    "adaptive3d": lambda t: F.adaptive_avg_pool3d(t, (2, 3, None)),
    "nearest_downsample": lambda t: F.interpolate(t, scale_factor=0.5, mode="nearest"),
}  # fmt: skip
POOL_SHAPES = {"1d": (2, 2, 7), "2d": (1, 2, 5, 4), "3d": (1, 1, 3, 4, 3)}


@pytest.mark.parametrize("name", list(POOLS))
def test_pooling(rng, name):
    rank = next(r for r in ("1d", "2d", "3d") if r in name) if "nearest" not in name else "2d"
    gradcheck(POOLS[name], rng.standard_normal(POOL_SHAPES[rank]), name=name)


def _window(t, kind, **kw):
    r = t.ndim
    return bind(reduce_window, t, kind=kind, window=kw.get("window", (1,) * r),
                strides=kw.get("strides", (1,) * r), dilations=kw.get("dilations", (1,) * r),
                padding=kw.get("padding", ((0, 0),) * r))  # fmt: skip


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
def test_reduce_window_every_kind_with_asymmetric_padding(rng, kind):
    kw = dict(window=(2, 3), strides=(1, 2), dilations=(2, 1), padding=((1, 0), (2, 1)))
    gradcheck(lambda t: _window(t, kind, **kw), rng.standard_normal((5, 6)), name=kind)


def test_reduce_window_prod_is_exact_with_zeros(rng):
    x = rng.standard_normal((4, 5))
    x[1, 1] = x[2, 3] = x[2, 4] = 0.0  # windows with one zero and with two
    gradcheck(lambda t: _window(t, "prod", window=(2, 2)), x)


def test_max_pool_routes_ties_to_the_first_element():
    x = flow.tensor([[[[1.0, 3.0, 3.0], [3.0, 0.0, 3.0]]]], requires_grad=True)
    F.max_pool2d(x, 2, 1).sum().backward()  # both windows hold their max 3 more than once
    np.testing.assert_array_equal(x.grad.numpy(), [[[[0, 2, 0], [0, 0, 0]]]])
    y = flow.tensor([[[2.0, 2.0, 2.0, 2.0]]], requires_grad=True)
    (F.max_pool1d(y, 2, 2) * flow.tensor([[[5.0, 7.0]]])).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [[[5, 0, 7, 0]]])


def test_padding_never_takes_the_gradient():
    """A window of padding and -inf elements: its max is -inf, which the padding holds too,
    yet the first real element gets the gradient (as in PyTorch)."""
    x = flow.tensor([[[-np.inf, -np.inf, 1.0]]], requires_grad=True)
    F.max_pool1d(x, 3, 2, padding=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[[1, 0, 1]]])


def test_min_and_prod_route_like_max_and_product():
    x = flow.tensor([[4.0, 1.0, 1.0, 0.0]], requires_grad=True)
    _window(x, "min", window=(1, 3)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0, 1]])
    z = flow.tensor([[2.0, 0.0, 3.0, 5.0]], requires_grad=True)
    _window(z, "prod", window=(1, 2)).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [[0, 5, 5, 3]])


def test_conv_net_gradients_inside_jit(rng):
    def net(x, w, b, lw):
        h = F.max_pool2d(flow.relu(F.conv2d(x, w, b, stride=1, padding=1)), 2)
        return F.linear(flow.flatten(h, 1), lw)

    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((2, 3, 6, 6), (4, 3, 3, 3), (4,), (5, 36))]  # fmt: skip
    jit_grads_match_eager(net, *arrays, atol=1e-5)


def test_strided_grouped_conv_and_pooling_gradients_inside_jit(rng):
    def fn(x, w):
        y = F.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
        return (F.avg_pool2d(y, 3, 2, padding=1, ceil_mode=True, count_include_pad=False).sum()
                + F.max_pool2d(y, 2, 1, padding=1).sum() + _window(y, "prod", window=(1, 1, 2, 2)).sum())  # fmt: skip

    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    jit_grads_match_eager(fn, x, w, atol=1e-4)
