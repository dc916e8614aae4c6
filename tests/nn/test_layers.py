"""flow.nn layers: parameter names/shapes/initialization as in PyTorch, forward == the
functional call (and numpy for Linear/Conv), BatchNorm statistics, Dropout modes, losses."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

import flow
import flow.nn as nn
import flow.nn.functional as F


def _randn(*shape, seed=0, dtype=np.float32):
    return flow.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _shapes(module: nn.Module) -> dict:
    return {name: tuple(p.shape) for name, p in module.named_parameters()}


# --------------------------------------------------------------------------- Linear


def test_linear_parameters_forward_and_init():
    fc = nn.Linear(20, 7)
    assert _shapes(fc) == {"weight": (7, 20), "bias": (7,)}
    x = _randn(3, 20)
    want = x.numpy() @ fc.weight.numpy().T + fc.bias.numpy()
    np.testing.assert_allclose(fc(x).numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(fc(x).numpy(), F.linear(x, fc.weight, fc.bias).numpy())
    bound = 1 / math.sqrt(20)  # kaiming_uniform_(a=sqrt(5)) and the bias rule both give this
    assert np.abs(fc.weight.numpy()).max() <= bound * (1 + 1e-6)
    assert np.abs(fc.bias.numpy()).max() <= bound * (1 + 1e-6)
    assert np.abs(fc.weight.numpy()).max() > 0.8 * bound

    plain = nn.Linear(4, 2, bias=False)
    assert plain.bias is None and list(plain.state_dict()) == ["weight"]
    assert repr(plain) == "Linear(in_features=4, out_features=2, bias=False)"
    assert nn.Linear(3, 2, dtype=flow.float64).weight.dtype is flow.float64
    assert fc(_randn(2, 5, 20)).shape == (2, 5, 7)


# --------------------------------------------------------------------------- convolution


def _np_conv(x, w, b, stride, padding, dilation, groups):
    """Direct N-d convolution (cross-correlation) in float64."""
    n = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in padding])
    cout, cin_g = w.shape[:2]
    k = w.shape[2:]
    outs = [(x.shape[2 + i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], cout, *outs))
    per_group = cout // groups
    for o in range(cout):
        g = o // per_group
        xs = x[:, g * cin_g : (g + 1) * cin_g]
        for pos in product(*(range(s) for s in outs)):
            window = tuple(
                slice(pos[i] * stride[i], pos[i] * stride[i] + dilation[i] * (k[i] - 1) + 1,
                      dilation[i])
                for i in range(n)
            )  # fmt: skip
            y[(slice(None), o, *pos)] = np.sum(xs[(slice(None), slice(None), *window)] * w[o],
                                               axis=tuple(range(1, n + 2)))  # fmt: skip
    return y + (0 if b is None else b.reshape(1, -1, *(1,) * n))


@pytest.mark.parametrize(
    "cls, n, kwargs",
    [
        (nn.Conv1d, 1, dict(stride=2, padding=1)),
        (nn.Conv2d, 2, dict(stride=(1, 2), padding=(1, 0), dilation=(2, 1), groups=2)),
        (nn.Conv2d, 2, dict(bias=False)),
        (nn.Conv3d, 3, dict(padding=1)),
    ],
)
def test_conv_matches_numpy(cls, n, kwargs):
    conv = cls(4, 6, 3, **kwargs)
    groups = kwargs.get("groups", 1)
    names = {"weight": (6, 4 // groups, *(3,) * n)}
    if kwargs.get("bias", True):
        names["bias"] = (6,)
    assert _shapes(conv) == names
    x = _randn(2, 4, *(7,) * n)
    b = None if conv.bias is None else conv.bias.numpy()
    want = _np_conv(x.numpy(), conv.weight.numpy(), b, conv.stride,
                    conv.padding, conv.dilation, groups)  # fmt: skip
    got = conv(x)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    fn = getattr(F, f"conv{n}d")
    np.testing.assert_array_equal(got.numpy(), fn(x, conv.weight, conv.bias, conv.stride,
                                  conv.padding, conv.dilation, groups).numpy())  # fmt: skip


def test_conv_init_bounds_and_repr():
    conv = nn.Conv2d(3, 8, (3, 5), groups=1)
    fan_in = 3 * 3 * 5
    bound = 1 / math.sqrt(fan_in)
    assert np.abs(conv.weight.numpy()).max() <= bound * (1 + 1e-6)
    assert np.abs(conv.bias.numpy()).max() <= bound * (1 + 1e-6)
    assert repr(conv) == "Conv2d(3, 8, kernel_size=(3, 5), stride=(1, 1))"
    assert repr(nn.Conv1d(2, 4, 3, padding=1, groups=2, bias=False)) == (
        "Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=(1,), groups=2, bias=False)"
    )
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode)
    x = _randn(1, 2, 5, 6)
    want = F.conv2d(flow.pad(x, [1, 1, 1, 1], mode=mode), conv.weight, conv.bias)
    np.testing.assert_allclose(conv(x).numpy(), want.numpy(), rtol=1e-6)
    same = nn.Conv1d(2, 2, 4, padding="same", padding_mode=mode)
    assert same(_randn(1, 2, 9)).shape == (1, 2, 9)


def test_conv_same_and_valid_padding():
    x = _randn(1, 2, 8, 8)
    assert nn.Conv2d(2, 3, (3, 4), padding="same", dilation=2)(x).shape == (1, 3, 8, 8)
    assert nn.Conv2d(2, 3, 3, padding="valid")(x).shape == (1, 3, 6, 6)


# --------------------------------------------------------------------------- pooling


@pytest.mark.parametrize(
    "module, fn",
    [
        (nn.MaxPool1d(3, stride=2, padding=1), lambda x: F.max_pool1d(x, 3, 2, 1)),
        (nn.MaxPool2d(2), lambda x: F.max_pool2d(x, 2)),
        (nn.MaxPool2d(3, 1, 1, dilation=1, ceil_mode=True),
         lambda x: F.max_pool2d(x, 3, 1, 1, ceil_mode=True)),
        (nn.MaxPool3d(2), lambda x: F.max_pool3d(x, 2)),
        (nn.AvgPool1d(2), lambda x: F.avg_pool1d(x, 2)),
        (nn.AvgPool2d(3, 2, 1, count_include_pad=False),
         lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
        (nn.AvgPool3d(2, divisor_override=3), lambda x: F.avg_pool3d(x, 2, divisor_override=3)),
        (nn.AdaptiveAvgPool1d(3), lambda x: F.adaptive_avg_pool1d(x, 3)),
        (nn.AdaptiveAvgPool2d((1, 1)), lambda x: F.adaptive_avg_pool2d(x, (1, 1))),
        (nn.AdaptiveAvgPool3d(2), lambda x: F.adaptive_avg_pool3d(x, 2)),
        (nn.Upsample(scale_factor=2), lambda x: F.interpolate(x, scale_factor=2)),
    ],
)  # fmt: skip
def test_pooling_matches_functional(module, fn):
    n = int(type(module).__name__[-2]) if type(module).__name__[-2].isdigit() else 2
    x = _randn(2, 3, *(6,) * n)
    np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())
    assert list(module.parameters()) == []


def test_pooling_repr():
    assert repr(nn.MaxPool2d(2)) == (
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.AvgPool2d(3, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=0)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"


# --------------------------------------------------------------------------- activations


@pytest.mark.parametrize(
    "module, fn",
    [
        (nn.ReLU(), F.relu),
        (nn.ReLU6(), F.relu6),
        (nn.LeakyReLU(0.2), lambda x: F.leaky_relu(x, 0.2)),
        (nn.ELU(0.5), lambda x: F.elu(x, 0.5)),
        (nn.GELU(), F.gelu),
        (nn.GELU("tanh"), lambda x: F.gelu(x, approximate="tanh")),
        (nn.SiLU(), F.silu),
        (nn.Sigmoid(), F.sigmoid),
        (nn.Tanh(), F.tanh),
        (nn.Softmax(dim=1), lambda x: F.softmax(x, 1)),
        (nn.LogSoftmax(dim=-1), lambda x: F.log_softmax(x, -1)),
        (nn.Hardtanh(-0.5, 0.5), lambda x: F.hardtanh(x, -0.5, 0.5)),
        (nn.Softplus(2.0), lambda x: F.softplus(x, 2.0)),
        (nn.Mish(), F.mish),
        (nn.Hardswish(), F.hardswish),
        (nn.Identity(), lambda x: x),
    ],
)  # fmt: skip
def test_activation_matches_functional(module, fn):
    x = _randn(3, 4)
    np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())


def test_activation_reprs():
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU()) == "LeakyReLU(negative_slope=0.01)"
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"


def test_prelu_has_a_learned_slope_per_channel():
    act = nn.PReLU(3)
    assert _shapes(act) == {"weight": (3,)}
    x = _randn(2, 3, 4)
    w = act.weight.numpy().reshape(1, 3, 1)
    np.testing.assert_allclose(act(x).numpy(), np.where(x.numpy() >= 0, x.numpy(), w * x.numpy()))


# --------------------------------------------------------------------------- normalization


def test_batchnorm_train_step_updates_running_stats():
    bn = nn.BatchNorm2d(3)
    assert _shapes(bn) == {"weight": (3,), "bias": (3,)}
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]  # fmt: skip
    np.testing.assert_array_equal(bn.weight.numpy(), 1)
    np.testing.assert_array_equal(bn.bias.numpy(), 0)
    x = _randn(4, 3, 5, 5) * 2 + 1
    a = x.numpy().astype(np.float64)
    mean, var = a.mean(axis=(0, 2, 3)), a.var(axis=(0, 2, 3))
    n = a.size // 3
    y = bn(x)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1
    want = (a - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)

    bn.eval()  # evaluation: running statistics, no update
    rm, rv = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    want = (a - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(bn(x).numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(bn.running_mean.numpy(), rm)
    assert bn.num_batches_tracked.item() == 1
    expected = F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False)
    np.testing.assert_array_equal(bn(x).numpy(), expected.numpy())


def test_batchnorm_cumulative_average_and_options():
    bn = nn.BatchNorm1d(2, momentum=None)
    xs = [_randn(6, 2, seed=s) for s in (1, 2)]
    for x in xs:
        bn(x)
    means = [x.numpy().mean(0) for x in xs]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, 0), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 2

    free = nn.BatchNorm1d(2, affine=False, track_running_stats=False)
    assert list(free.parameters()) == [] and list(free.state_dict()) == []
    assert free.running_mean is None
    x = _randn(5, 2, 3)
    free.eval()  # without running statistics, eval still uses the batch's
    np.testing.assert_allclose(free(x).numpy(), F.batch_norm(x, None, None, training=True).numpy())
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(2)(x)
    assert repr(nn.BatchNorm3d(4)) == (
        "BatchNorm3d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    )


def test_layer_group_instance_norm_match_functional():
    x = _randn(2, 4, 3, 5)
    ln = nn.LayerNorm([3, 5])
    assert _shapes(ln) == {"weight": (3, 5), "bias": (3, 5)}
    with flow.no_grad():
        ln.weight.copy_(_randn(3, 5, seed=1))
        ln.bias.copy_(_randn(3, 5, seed=2))
    np.testing.assert_array_equal(
        ln(x).numpy(), F.layer_norm(x, (3, 5), ln.weight, ln.bias, 1e-5).numpy()
    )
    assert repr(nn.LayerNorm(8)) == "LayerNorm((8,), eps=1e-05, elementwise_affine=True)"
    assert list(nn.LayerNorm(8, elementwise_affine=False).parameters()) == []

    gn = nn.GroupNorm(2, 4)
    assert _shapes(gn) == {"weight": (4,), "bias": (4,)}
    np.testing.assert_array_equal(gn(x).numpy(), F.group_norm(x, 2, gn.weight, gn.bias).numpy())
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)

    inorm = nn.InstanceNorm2d(4)
    np.testing.assert_array_equal(inorm(x).numpy(), F.instance_norm(x).numpy())
    assert inorm(x[0]).shape == (4, 3, 5)


# --------------------------------------------------------------------- dropout, embedding, shape


def test_dropout_train_and_eval():
    drop = nn.Dropout(0.25)
    x = flow.ones(200, 100)
    flow.manual_seed(3)
    y = drop(x).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    flow.manual_seed(3)
    np.testing.assert_array_equal(drop(x).numpy(), y)  # same seed, same mask
    drop.eval()
    assert drop(x) is x or np.array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_embedding():
    flow.manual_seed(0)
    emb = nn.Embedding(1000, 64, padding_idx=-1)
    assert emb.padding_idx == 999 and _shapes(emb) == {"weight": (1000, 64)}
    w = emb.weight.numpy()
    np.testing.assert_array_equal(w[999], 0)
    assert abs(w[:999].mean()) < 0.02 and abs(w[:999].std() - 1) < 0.02  # 5 sigma
    idx = flow.tensor([[1, 5], [999, 0]])
    np.testing.assert_array_equal(emb(idx).numpy(), w[idx.numpy()])
    assert repr(emb) == "Embedding(1000, 64, padding_idx=999)"
    pre = nn.Embedding.from_pretrained(flow.tensor(np.eye(3, dtype=np.float32)))
    assert not pre.weight.requires_grad and pre(flow.tensor([2])).numpy().tolist() == [[0, 0, 1]]


def test_embedding_padding_row_gets_no_gradient():
    emb = nn.Embedding(4, 2, padding_idx=1)
    emb(flow.tensor([0, 1, 1, 3])).sum().backward()
    g = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g, [[1, 1], [0, 0], [0, 0], [1, 1]])


def test_flatten_unflatten():
    x = _randn(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Unflatten(1, (3, 1))(nn.Flatten(1, 1)(x)).shape == (2, 3, 1, 4, 5)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"


def test_bilinear_matches_numpy():
    bil = nn.Bilinear(3, 4, 2)
    assert _shapes(bil) == {"weight": (2, 3, 4), "bias": (2,)}
    x1, x2 = _randn(5, 3), _randn(5, 4, seed=1)
    want = np.einsum("ni,oij,nj->no", x1.numpy(), bil.weight.numpy(), x2.numpy())
    np.testing.assert_allclose(bil(x1, x2).numpy(), want + bil.bias.numpy(), rtol=1e-5, atol=1e-6)


def test_padding_modules():
    x = _randn(1, 2, 3, 4)
    cases = [
        (nn.ZeroPad2d(1), flow.pad(x, [1, 1, 1, 1])),
        (nn.ConstantPad2d((1, 0, 2, 0), 3.5), flow.pad(x, [1, 0, 2, 0], value=3.5)),
        (nn.ReflectionPad1d(2), flow.pad(x, [2, 2], mode="reflect")),
        (nn.ReplicationPad2d((0, 1, 1, 0)), flow.pad(x, [0, 1, 1, 0], mode="replicate")),
        (nn.CircularPad1d(1), flow.pad(x, [1, 1], mode="circular")),
    ]
    for module, want in cases:
        np.testing.assert_array_equal(module(x).numpy(), want.numpy(), err_msg=repr(module))
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d(padding=(1, 1, 1, 1))"
    assert repr(nn.ConstantPad1d(2, 1.0)) == "ConstantPad1d(padding=(2, 2), value=1.0)"


# --------------------------------------------------------------------------- losses


def test_loss_modules_match_functional():
    x, y = _randn(4, 3), _randn(4, 3, seed=1)
    labels = flow.tensor([0, 2, 1, 2])
    probs, binary = F.sigmoid(x), flow.tensor((y.numpy() > 0).astype(np.float32))
    w = flow.tensor([1.0, 2.0, 0.5])
    cases = [
        (nn.MSELoss(), F.mse_loss(x, y), (x, y)),
        (nn.L1Loss(reduction="sum"), F.l1_loss(x, y, reduction="sum"), (x, y)),
        (nn.SmoothL1Loss(beta=0.5), F.smooth_l1_loss(x, y, beta=0.5), (x, y)),
        (nn.CrossEntropyLoss(), F.cross_entropy(x, labels), (x, labels)),
        (nn.CrossEntropyLoss(weight=w, label_smoothing=0.1, ignore_index=1),
         F.cross_entropy(x, labels, w, ignore_index=1, label_smoothing=0.1), (x, labels)),
        (nn.NLLLoss(reduction="none"),
         F.nll_loss(F.log_softmax(x, 1), labels, reduction="none"), (F.log_softmax(x, 1), labels)),
        (nn.BCELoss(), F.binary_cross_entropy(probs, binary), (probs, binary)),
        (nn.BCEWithLogitsLoss(pos_weight=w),
         F.binary_cross_entropy_with_logits(x, binary, pos_weight=w), (x, binary)),
    ]  # fmt: skip
    for module, want, args in cases:
        np.testing.assert_array_equal(module(*args).numpy(), want.numpy(), err_msg=repr(module))
    assert list(nn.CrossEntropyLoss(weight=w).state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"


def test_legacy_reduction_arguments():
    with pytest.warns(UserWarning, match="reduction"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.L1Loss(reduce=False).reduction == "none"


# --------------------------------------------------------------------------- graph mode


def test_conv_net_inside_jit_matches_eager():
    flow.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16, 3),
    )  # fmt: skip
    net(flow.randn(4, 2, 4, 4))  # one training step gives non-trivial running statistics
    net.eval()
    x = flow.randn(2, 2, 4, 4)
    got = flow.jit(lambda x: net(x))(x)
    np.testing.assert_allclose(got.numpy(), net(x).numpy(), rtol=1e-4, atol=1e-5)
