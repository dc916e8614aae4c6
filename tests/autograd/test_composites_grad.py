"""Composite ops (activations, normalization, losses, resampling) against finite differences.

Composites have no VJP of their own: their gradients come from the primitives
they are written in, so these tests check the compositions end to end.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import gradcheck, jit_grads_match_eager

import flow
import flow.nn.functional as F


def _x(rng, *shape):
    return rng.standard_normal(shape)


ACTIVATIONS = {
    "softmax": lambda x: F.softmax(x, 1), "log_softmax": lambda x: F.log_softmax(x, -1),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "elu": F.elu, "selu": F.selu, "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "softplus": F.softplus, "mish": F.mish, "logsigmoid": F.logsigmoid, "hardswish": F.hardswish,
    "sigmoid": F.sigmoid, "tanh": F.tanh, "relu": F.relu,
}  # fmt: skip


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations(rng, name):
    x = _x(rng, 3, 4)
    x[np.abs(x) < 0.05] += 0.2  # away from kinks
    gradcheck(ACTIVATIONS[name], x, name=name)


# relu's gradient at its kink and at NaN: none at 0 (nor -0), all of it at NaN, as
# PyTorch's `threshold_backward` passes it (its values, checked against PyTorch when present).
RELU_X = np.array([-1.5, -0.0, 0.0, 2.0, np.nan, np.inf, -np.inf], np.float32)
RELU_GRAD = np.array([0, 0, 0, 1, 1, 1, 0], np.float32)


def test_relu_gradient_at_zero_and_nan():
    x = flow.tensor(RELU_X, requires_grad=True)
    F.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), RELU_GRAD)
    np.testing.assert_array_equal(F.relu(flow.tensor(RELU_X)).numpy(), np.maximum(RELU_X, 0))
    torch = pytest.importorskip("torch")
    tx = torch.tensor(RELU_X, requires_grad=True)
    torch.relu(tx).sum().backward()
    np.testing.assert_array_equal(tx.grad.numpy(), RELU_GRAD)


def test_relu_gradient_compiled_is_eager():
    jit_grads_match_eager(lambda t: (F.relu(t) * t).sum(), RELU_X[:4])


def test_normalizations(rng):
    x = _x(rng, 4, 3, 5)
    w, b = _x(rng, 3), _x(rng, 3)
    gradcheck(lambda t, w, b: F.layer_norm(t, (5,)) * 2 + F.group_norm(t, 3, w, b), x, w, b)
    gradcheck(lambda t, w, b: F.batch_norm(t, None, None, w, b, training=True), x, w, b)
    gradcheck(lambda t: F.normalize(t, dim=1), x)
    gradcheck(lambda t: F.instance_norm(t), x)


def test_losses(rng):
    logits = _x(rng, 5, 4)
    target = flow.tensor([0, 3, 1, -100, 2])
    weight = flow.tensor(np.array([1.0, 2.0, 0.5, 1.5]))
    gradcheck(lambda t: F.cross_entropy(t, target, weight=weight, label_smoothing=0.1), logits)
    gradcheck(lambda t: F.nll_loss(F.log_softmax(t, 1), target, reduction="sum"), logits)
    probs = flow.softmax(flow.tensor(_x(rng, 5, 4)), 1)
    gradcheck(lambda t: F.cross_entropy(t, probs), logits)
    a, b = _x(rng, 6), _x(rng, 6) + 3
    gradcheck(lambda p, q: F.mse_loss(p, q) + F.l1_loss(p, q) + F.smooth_l1_loss(p, q * 0.2), a, b)
    y = (rng.random(6) > 0.5).astype(np.float64)
    gradcheck(lambda p: F.binary_cross_entropy(flow.sigmoid(p), flow.tensor(y)), a)
    gradcheck(lambda p: F.binary_cross_entropy_with_logits(p, flow.tensor(y),
                                                         pos_weight=flow.tensor(2.0)), a)  # fmt: skip


def test_linear_and_resampling(rng):
    gradcheck(F.linear, _x(rng, 2, 3), _x(rng, 4, 3), _x(rng, 4))
    img = _x(rng, 1, 2, 3, 4)
    gradcheck(lambda t: F.interpolate(t, size=(5, 7), mode="bilinear", align_corners=False), img)
    gradcheck(lambda t: F.interpolate(t, scale_factor=2, mode="nearest"), img)
    gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), img)
