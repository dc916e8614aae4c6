"""Transposed convolutions (`F.conv_transpose1d/2d/3d`, `nn.ConvTranspose1d/2d/3d`) against a
scatter-add numpy reference, PyTorch (where installed) and finite differences, eagerly,
through `flow.jit` and in an `nn.Graph` training step.

The reference is written from PyTorch's definition, independently of flow's formulation
(a stride-1 convolution of the spread input with the flipped, regrouped weight): every input
element adds `x * w` into each output position it reaches.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import flow
import flow.nn as nn
import flow.nn.functional as F


def _expand(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def ref_conv_transpose(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                       dilation=1):  # fmt: skip
    """out[n, g*og + o, i*s - p + k*d] += x[n, g*ig + c, i] * w[g*ig + c, o, k], in float64."""
    n = w.ndim - 2
    unbatched = x.ndim == n + 1
    x = x[None] if unbatched else x
    s, p, e, d = (_expand(v, n) for v in (stride, padding, output_padding, dilation))
    kernel, ins = w.shape[2:], x.shape[2:]
    outs = [(ins[i] - 1) * s[i] - 2 * p[i] + d[i] * (kernel[i] - 1) + e[i] + 1 for i in range(n)]
    ig, og = x.shape[1] // groups, w.shape[1]
    out = np.zeros((x.shape[0], og * groups, *outs))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for g in range(groups):
        for c in range(ig):
            for o in range(og):
                for pos in np.ndindex(*ins):
                    for k in np.ndindex(*kernel):
                        q = [pos[i] * s[i] - p[i] + k[i] * d[i] for i in range(n)]
                        if all(0 <= q[i] < outs[i] for i in range(n)):
                            out[(slice(None), g * og + o, *q)] += (
                                x64[(slice(None), g * ig + c, *pos)] * w64[(g * ig + c, o, *k)]
                            )
    if b is not None:
        out += b.reshape(1, -1, *[1] * n)
    out = out.astype(x.dtype)
    return out[0] if unbatched else out


def _fn(n):
    return getattr(F, f"conv_transpose{n}d")


def _data(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


CASES = [
    {},
    {"stride": 2},
    {"padding": 1},
    {"stride": 2, "output_padding": 1},
    {"dilation": 2},
    {"dilation": 2, "output_padding": 1},  # output_padding < dilation (stride 1)
    {"groups": 2},
    {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 2, "groups": 2},
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
                         or "plain")  # fmt: skip
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_matches_scatter_add_reference(rng, n, kw, bias):
    size = {1: 5, 2: 4, 3: 3}[n]
    x = _data(rng, 2, 4, *(size,) * n)
    w = _data(rng, 4, 3, *(3, 2, 2)[:n])  # C_out = 3 * groups
    groups = kw.get("groups", 1)
    b = _data(rng, 3 * groups) if bias else None
    got = _fn(n)(flow.tensor(x), flow.tensor(w), None if b is None else flow.tensor(b), **kw)
    want = ref_conv_transpose(x, w, b, **kw)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_unbatched_input(rng, n):
    x = _data(rng, 2, *(3,) * n)
    w = _data(rng, 2, 2, *(2,) * n)
    b = _data(rng, 4)
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}
    got = _fn(n)(flow.tensor(x), flow.tensor(w), flow.tensor(b), **kw)
    want = ref_conv_transpose(x, w, b, **kw)
    assert tuple(got.shape) == want.shape == (4, *(5,) * n)  # (3 - 1) * 2 - 2 + 1 + 1 + 1
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_per_dim_arguments_and_float64(rng):
    x, w = _data(rng, 1, 2, 3, 4, dtype=np.float64), _data(rng, 2, 2, 2, 3, dtype=np.float64)
    kw = {"stride": (2, 1), "padding": (0, 1), "output_padding": (1, 0), "dilation": (1, 2)}
    got = flow.conv_transpose2d(flow.tensor(x), flow.tensor(w), **kw)  # a top-level name too
    assert got.dtype is flow.float64
    np.testing.assert_allclose(got.numpy(), ref_conv_transpose(x, w, **kw), rtol=1e-12)


def test_gradient_by_central_differences():
    rng = np.random.default_rng(3)
    x, w, b = _data(rng, 1, 2, 3, 3, dtype=np.float64), _data(rng, 2, 2, 2, 2, dtype=np.float64), \
        _data(rng, 2, dtype=np.float64)  # fmt: skip
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 1}
    cot = _data(rng, *ref_conv_transpose(x, w, b, **kw).shape, dtype=np.float64)

    def objective(xv, wv, bv):
        return float((ref_conv_transpose(xv, wv, bv, **kw) * cot).sum())

    xt, wt, bt = (flow.tensor(a, requires_grad=True) for a in (x, w, b))
    (F.conv_transpose2d(xt, wt, bt, **kw) * flow.tensor(cot)).sum().backward()
    eps = 1e-6
    for arr, tensor in ((x, xt), (w, wt), (b, bt)):
        numeric = np.zeros_like(arr)
        for idx in np.ndindex(*arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += eps
            lo[idx] -= eps
            args_hi = [hi if a is arr else a for a in (x, w, b)]
            args_lo = [lo if a is arr else a for a in (x, w, b)]
            numeric[idx] = (objective(*args_hi) - objective(*args_lo)) / (2 * eps)
        np.testing.assert_allclose(tensor.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- PyTorch


@pytest.mark.parametrize("n", [1, 2, 3])
def test_outputs_and_gradients_match_torch(rng, n):
    torch = pytest.importorskip("torch")
    x = _data(rng, 2, 4, *(4, 3, 3)[:n])
    w = _data(rng, 4, 3, *(3, 2, 2)[:n])
    b = _data(rng, 6)
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 2, "groups": 2}
    fx, fw, fb = (flow.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out_f = _fn(n)(fx, fw, fb, **kw)
    out_t = getattr(torch.nn.functional, f"conv_transpose{n}d")(tx, tw, tb, **kw)
    np.testing.assert_allclose(out_f.numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-5)
    weights = _data(rng, *out_t.shape)
    (out_f * flow.tensor(weights)).sum().backward()
    (out_t * torch.tensor(weights)).sum().backward()
    for got, want in ((fx, tx), (fw, tw), (fb, tb)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_layer_loads_a_torch_state_dict(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": 1}
    ref = torch.nn.ConvTranspose2d(4, 6, 3, **kw)
    layer = nn.ConvTranspose2d(4, 6, 3, **kw)
    assert list(layer.state_dict().keys()) == list(ref.state_dict().keys()) == ["weight", "bias"]
    assert tuple(layer.weight.shape) == tuple(ref.weight.shape) == (4, 3, 3, 3)
    layer.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                           ref.state_dict().items()})  # fmt: skip
    x = _data(rng, 2, 4, 5, 5)
    np.testing.assert_allclose(layer(flow.tensor(x)).numpy(),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    for size in ([9, 10], [2, 6, 10, 9]):
        got = layer(flow.tensor(x), output_size=size)
        want = ref(torch.tensor(x), output_size=size).detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- layers


@pytest.mark.parametrize("n", [1, 2, 3])
def test_layer_shapes_init_and_forward(rng, n):
    layer = getattr(nn, f"ConvTranspose{n}d")(4, 6, 3, stride=2, groups=2, bias=True)
    assert tuple(layer.weight.shape) == (4, 3, *(3,) * n)
    assert layer.transposed and layer.output_padding == (0,) * n
    bound = 1 / np.sqrt(3 * 3**n)  # fan_in from weight dims 1 and up, as in PyTorch
    assert np.abs(layer.weight.numpy()).max() <= bound * (1 + 1e-6)
    assert np.abs(layer.bias.numpy()).max() <= bound * (1 + 1e-6)
    x = _data(rng, 1, 4, *(3,) * n)
    want = ref_conv_transpose(x, layer.weight.numpy(), layer.bias.numpy(), stride=2, groups=2)
    np.testing.assert_allclose(layer(flow.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_layer_output_size_picks_output_padding(rng):
    layer = nn.ConvTranspose1d(2, 2, 3, stride=3, padding=1, bias=False)
    x = _data(rng, 1, 2, 4)
    for size in (10, 11, 12):  # (4 - 1) * 3 - 2 + 2 + 1 = 10, up to 10 + stride - 1
        got = layer(flow.tensor(x), output_size=[size])
        want = ref_conv_transpose(x, layer.weight.numpy(), stride=3, padding=1,
                                  output_padding=size - 10)  # fmt: skip
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert tuple(layer(flow.tensor(x[0]), output_size=[2, 11]).shape) == (2, 11)  # unbatched
    with pytest.raises(ValueError, match=r"valid sizes range from \[10\] to \[12\]"):
        layer(flow.tensor(x), output_size=[13])
    with pytest.raises(ValueError, match="output_size must have 1 or 3 elements"):
        layer(flow.tensor(x), output_size=[1, 10])


def test_layer_repr_and_constructor_errors():
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, bias=False)
    assert repr(layer) == ("ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), "
                           "output_padding=(1, 1), bias=False)")  # fmt: skip
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="as padding"):
        nn.ConvTranspose2d(2, 2, 3, padding="same")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.ConvTranspose2d(3, 4, 3, groups=2)


# --------------------------------------------------------------------------- compiled


def test_jit_matches_eager_with_gradients(rng):
    x, w, b = _data(rng, 2, 4, 3, 3), _data(rng, 4, 2, 3, 3), _data(rng, 4)
    cot = _data(rng, 2, 4, 6, 6)
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}

    def f(x, w, b, cot):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        out = F.conv_transpose2d(x, w, b, **kw)
        return (out, *flow.autograd.grad((out * cot).sum(), [x, w]))

    got = flow.jit(f)(x, w, b, cot)
    want = f(*(flow.tensor(a) for a in (x, w, b, cot)))
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want[0].numpy(), ref_conv_transpose(x, w, b, **kw), rtol=1e-5,
                               atol=1e-5)  # fmt: skip


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def test_graph_training_steps_match_eager():
    flow.manual_seed(0)
    eager = nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.ReLU(),
                          nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1))
    compiled = copy.deepcopy(eager)
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    step = _Step(compiled, flow.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9))
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = _data(rng, 2, 2, 6, 6), _data(rng, 2, 2, 6, 6)
        opt_e.zero_grad()
        loss_e = ((eager(flow.tensor(x)) - flow.tensor(y)) ** 2).mean()
        loss_e.backward()
        opt_e.step()
        loss_g = step(x, y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5, atol=1e-6)
    state_e, state_g = eager.state_dict(), compiled.state_dict()
    assert state_e.keys() == state_g.keys()
    for key in state_e:
        np.testing.assert_allclose(state_g[key].numpy(), state_e[key].numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=key)  # fmt: skip


# --------------------------------------------------------------------------- errors

X2, W2 = np.zeros((1, 4, 3, 3), np.float32), np.zeros((4, 2, 3, 3), np.float32)


def _call(x=X2, w=W2, b=None, **kw):
    return F.conv_transpose2d(flow.tensor(x), flow.tensor(w), None if b is None else
                              flow.tensor(b), **kw)  # fmt: skip


def test_error_input_rank():
    with pytest.raises(ValueError, match=r"expected a 3-D \(unbatched\) or 4-D \(batched\) input"):
        _call(x=np.zeros((4, 3), np.float32))


def test_error_weight_rank():
    with pytest.raises(ValueError, match=r"expected a 4-D weight \[in_channels, out_channels"):
        _call(w=np.zeros((4, 2, 3), np.float32))


def test_error_dtypes():
    with pytest.raises(TypeError, match="expected input and weight of one dtype"):
        _call(w=W2.astype(np.float64))
    with pytest.raises(TypeError, match="expected a floating-point input"):
        _call(x=X2.astype(np.int64), w=W2.astype(np.int64))
    with pytest.raises(TypeError, match="expected bias of dtype"):
        _call(b=np.zeros(2, np.float64))


def test_error_channels_do_not_match_the_weight():
    with pytest.raises(ValueError, match="expected input with 4 channels"):
        _call(x=np.zeros((1, 3, 3, 3), np.float32))


def test_error_groups():
    with pytest.raises(ValueError, match=r"in_channels = 4\) to be divisible by groups=3"):
        _call(groups=3)
    with pytest.raises(ValueError, match="expected groups >= 1"):
        _call(groups=0)
    with pytest.raises(TypeError, match="expected groups to be an int"):
        _call(groups=1.5)


def test_error_output_padding():
    with pytest.raises(ValueError, match="expected output_padding to be smaller than stride or "
                                         "dilation"):  # fmt: skip
        _call(stride=2, output_padding=2)
    with pytest.raises(ValueError, match="expected output_padding to be smaller"):
        _call(output_padding=(0, 1))  # stride and dilation 1
    with pytest.raises(ValueError, match="expected output_padding >= 0"):
        _call(output_padding=-1)


def test_error_bias_shape():
    with pytest.raises(ValueError, match=r"expected bias of shape \[2\] \(out_channels\)"):
        _call(b=np.zeros(4, np.float32))


def test_error_bad_arguments_and_empty_output():
    with pytest.raises(TypeError, match="expected padding to be an int or a tuple of 2 ints"):
        _call(padding="same")
    with pytest.raises(ValueError, match="expected stride >= 1"):
        _call(stride=0)
    with pytest.raises(ValueError, match="is too small"):
        _call(padding=3)
