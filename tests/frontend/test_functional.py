"""`flow.nn.functional` activations, softmax family and dropout vs numpy references.

Each reference is the textbook formula evaluated in float64 numpy (math.erf
for gelu), independent of flow. Inputs include the branch points of the
piecewise functions and values large enough to overflow a naive `exp`;
functions receive `x.T`, a non-contiguous view, eagerly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from checks import check, data

import flow
import flow.nn.functional as F

F32 = np.float32
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def inputs(rng, shape=(5, 4), dtype=F32):
    x = data(rng, shape, np.float64) * 4
    x.flat[:8] = [0.0, -3.0, 3.0, 6.0, 30.0, -30.0, 90.0, -90.0]
    return x.astype(dtype)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _softplus(a, beta=1.0, threshold=20.0):
    return np.where(a * beta > threshold, a, np.log1p(np.exp(a * beta)) / beta)


_erf = np.vectorize(math.erf)

ACTIVATIONS = [
    ("relu", F.relu, lambda a: np.maximum(a, 0)),
    ("relu6", F.relu6, lambda a: np.minimum(np.maximum(a, 0), 6)),
    ("hardtanh", F.hardtanh, lambda a: np.clip(a, -1, 1)),
    ("hardtanh_range", lambda x: F.hardtanh(x, -2.0, 0.5), lambda a: np.clip(a, -2, 0.5)),
    ("leaky_relu", F.leaky_relu, lambda a: np.where(a > 0, a, 0.01 * a)),
    ("leaky_relu_0.2", lambda x: F.leaky_relu(x, 0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    ("threshold", lambda x: F.threshold(x, 1.0, -7.0), lambda a: np.where(a > 1, a, -7.0)),
    ("hardsigmoid", F.hardsigmoid,
     lambda a: np.where(a <= -3, 0, np.where(a >= 3, 1, a / 6 + 0.5))),
    ("hardswish", F.hardswish,
     lambda a: np.where(a <= -3, 0, np.where(a >= 3, a, a * (a + 3) / 6))),
    ("sigmoid", F.sigmoid, _sigmoid),
    ("logsigmoid", F.logsigmoid, lambda a: -np.log1p(np.exp(-a))),
    ("softplus", F.softplus, _softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=5.0),
     lambda a: _softplus(a, 2.0, 5.0)),
    ("elu", F.elu, lambda a: np.where(a > 0, a, np.exp(a) - 1)),
    ("elu_0.5", lambda x: F.elu(x, 0.5), lambda a: np.where(a > 0, a, 0.5 * (np.exp(a) - 1))),
    ("celu_2", lambda x: F.celu(x, 2.0),
     lambda a: np.maximum(a, 0) + np.minimum(0, 2 * (np.exp(a / 2) - 1))),
    ("selu", F.selu, lambda a: SELU_SCALE * np.where(a > 0, a, SELU_ALPHA * (np.exp(a) - 1))),
    ("gelu", F.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))),
    ("silu", F.silu, lambda a: a * _sigmoid(a)),
    ("mish", F.mish, lambda a: a * np.tanh(np.log1p(np.exp(a)))),
    ("softsign", F.softsign, lambda a: a / (1 + np.abs(a))),
    ("tanh", F.tanh, np.tanh),
    ("tanhshrink", F.tanhshrink, lambda a: a - np.tanh(a)),
]  # fmt: skip


def _ref32(ref):
    def run(a):
        with np.errstate(over="ignore"):
            return ref(a.astype(np.float64)).astype(F32)

    return run


@pytest.mark.parametrize("name, op, ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation(rng, name, op, ref):
    x = inputs(rng)
    # 0.5 x (1 + tanh(y)) cancels for x << 0: lavapipe's tanh stops 1.8e-7 short of -1, 8e-6
    # off at x = -30
    device_atol = 3e-5 if name == "gelu_tanh" else None
    check(lambda a: op(a.T), lambda a: _ref32(ref)(a.T), x, name=name, device_atol=device_atol)


@pytest.mark.parametrize("name, op, ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_float64_eager(rng, name, op, ref):
    """float64 keeps its dtype and precision (eager; the CPU compiler lacks f64 erf/tanh)."""
    x = inputs(rng, (3, 7), np.float64)
    with np.errstate(over="ignore"):
        check(op, ref, x, rtol=1e-12, atol=1e-14, jit=False, name=name)


def test_nan_propagates(rng):
    x = inputs(rng, (6,))
    x[1] = np.nan
    ops = [F.relu, F.relu6, F.hardtanh, F.leaky_relu, F.sigmoid, F.softplus, F.elu, F.gelu,
           F.silu, F.logsigmoid]  # fmt: skip
    refs = {op: ref for _, op, ref in ACTIVATIONS}
    outs = check(lambda a: tuple(op(a) for op in ops),
                 lambda a: tuple(_ref32(refs[op])(a) for op in ops), x)  # fmt: skip
    assert all(np.isnan(o.numpy()[1]) for o in outs)


def test_integer_inputs():
    i = flow.tensor([-9, -1, 0, 2, 8], dtype=flow.int32)
    assert F.relu6(i).dtype is flow.int32 and F.relu6(i).tolist() == [0, 0, 0, 2, 6]
    assert F.hardtanh(i).tolist() == [-1, -1, 0, 1, 1] and F.relu(i).dtype is flow.int32
    s = F.sigmoid(i)  # like torch.sigmoid, integers become float32
    assert s.dtype is flow.float32
    np.testing.assert_allclose(s.numpy(), _sigmoid(np.array([-9, -1, 0, 2, 8.0])), rtol=1e-6)
    assert F.tanh(i).dtype is flow.float32


@pytest.mark.parametrize(
    "fn, exc, message",
    [
        (lambda: F.gelu(flow.tensor([1, 2])), TypeError,
         "gelu: expected a floating-point input, got flow.int64"),
        (lambda: F.gelu(flow.ones(2), approximate="erf"), ValueError,
         "gelu: approximate must be 'none' or 'tanh', got 'erf'"),
        (lambda: F.hardtanh(flow.ones(2), 1.0, -1.0), ValueError,
         r"hardtanh: min_val \(1.0\) cannot be greater than max_val \(-1.0\)"),
        (lambda: F.relu6(flow.tensor([True])), TypeError, "relu6: is not defined for bool"),
        (lambda: F.celu(flow.ones(2), 0.0), ValueError, "celu: alpha must not be 0"),
        (lambda: F.softmax(flow.tensor([1, 2]), 0), TypeError,
         "softmax: expected a floating-point input \\(or dtype=\\), got flow.int64"),
        (lambda: F.log_softmax(flow.ones(2, 3), 2), IndexError,
         r"log_softmax: dim 2 is out of range for a tensor of rank 2 \(expected \[-2, 1\]\)"),
        (lambda: F.dropout(flow.ones(2), 1.5), ValueError,
         "dropout: dropout probability has to be between 0 and 1, but got 1.5"),
        (lambda: F.dropout(flow.ones(2), -0.1), ValueError, "but got -0.1"),
        (lambda: F.dropout(flow.tensor([1, 2]), 0.5), TypeError,
         "dropout: expected a floating-point input"),
    ],
)  # fmt: skip
def test_errors(fn, exc, message):
    with pytest.raises(exc, match=message):
        fn()


def test_errors_inside_jit_match_eager():
    x = np.ones((2, 3), F32)
    with pytest.raises(IndexError, match="softmax: dim -3 is out of range"):
        flow.jit(lambda a: F.softmax(a, -3))(x)
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        flow.jit(lambda a: F.gelu(a, approximate="fast"))(x)


# --------------------------------------------------------------------------- softmax


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _np_log_softmax(a, axis):
    s = a - a.max(axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis, keepdims=True))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(rng, dim):
    x = data(rng, (3, 4, 5)) * 5
    x[0, 0, 0], x[1, 2, 3] = 1000.0, -1000.0  # a naive exp overflows

    def fn(a):
        return F.softmax(a, dim), F.log_softmax(a, dim), F.softmin(a, dim)

    def ref(a):
        a = a.astype(np.float64)
        return (_np_softmax(a, dim).astype(F32), _np_log_softmax(a, dim).astype(F32),
                _np_softmax(-a, dim).astype(F32))  # fmt: skip

    check(fn, ref, x, rtol=1e-5, atol=1e-6)


def test_softmax_edge_shapes(rng):
    """Non-contiguous input, a size-1 dim, a scalar, an empty dim, -inf entries, dtype=."""
    x = data(rng, (4, 1, 3))

    def fn(a, s):
        t = a.permute(2, 0, 1)  # (3, 4, 1): softmax over the size-1 dim is all ones
        return F.softmax(t, 0), F.log_softmax(t, 2), F.softmax(s, 0)

    def ref(a, s):
        t = a.transpose(2, 0, 1).astype(np.float64)
        return _np_softmax(t, 0).astype(F32), np.zeros((3, 4, 1), F32), np.ones((1,), F32)

    check(fn, ref, x, np.array([2.5], F32))
    scalar = F.softmax(flow.full((), 3.0, flow.float32), 0)
    assert scalar.shape == () and scalar.item() == 1.0
    for shape, dim in (((0, 3), 1), ((3, 0), 1), ((2, 0), 0)):
        out = F.log_softmax(flow.zeros(*shape), dim)
        assert tuple(out.shape) == shape and out.dtype is flow.float32
    ninf = F.softmax(flow.tensor([[-np.inf, 0.0, np.log(3.0)]]), 1).numpy()
    np.testing.assert_allclose(ninf, [[0.0, 0.25, 0.75]], rtol=1e-6)
    # last: a device target without float64 exp (Vulkan) skips here
    check(lambda a: F.log_softmax(a, -1, dtype=flow.float64),
          lambda a: _np_log_softmax(a.astype(np.float64), -1), x)  # fmt: skip


def test_softmax_implicit_dim_warns():
    with pytest.warns(UserWarning, match="implicit dim is deprecated"):
        out = F.softmax(flow.zeros(2, 4))
    np.testing.assert_allclose(out.numpy(), np.full((2, 4), 0.25))  # dim 1 for rank 2


# --------------------------------------------------------------------------- dropout


def test_dropout_scales_kept_values_and_uses_rand():
    x = np.arange(1, 1 + 600, dtype=F32).reshape(20, 30)
    flow.manual_seed(4)
    out = F.dropout(flow.tensor(x), 0.25).numpy()
    flow.manual_seed(4)
    u = flow.rand(20, 30).numpy()  # the mask is drawn like flow.rand
    np.testing.assert_allclose(out, np.where(u < 0.75, x / F32(0.75), 0), rtol=1e-6)


def test_dropout_rate_and_mean():
    flow.manual_seed(8)
    out = F.dropout(flow.ones(200_000), 0.3).numpy()
    assert set(np.unique(out)) == {0.0, np.float32(1 / 0.7)}
    assert abs((out == 0).mean() - 0.3) < 0.005 and abs(out.mean() - 1) < 0.01


def test_dropout_identity_cases_and_inplace(rng):
    x = flow.tensor(data(rng, (3, 4)))
    state = flow.get_rng_state().tolist()
    for out in (F.dropout(x, 0.5, training=False), F.dropout(x, 0.0), F.dropout(x.T, 1.0).T):
        assert tuple(out.shape) == (3, 4)
    assert flow.get_rng_state().tolist() == state  # no mask was drawn
    np.testing.assert_array_equal(F.dropout(x, 0.5, training=False).numpy(), x.numpy())
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((3, 4), F32))
    y = flow.tensor(np.ones((50,), F32))
    same = F.dropout(y, 0.5, inplace=True)
    assert same is y and (y.numpy() == 0).any() and (y.numpy() == 2).any()
    with pytest.raises(NotImplementedError, match="dropout: inplace=True inside flow.jit"):
        flow.jit(lambda a: F.dropout(a, 0.5, inplace=True))(np.ones(3, F32))


def test_dropout_jit_equals_eager(rng):
    x = data(rng, (8, 16))

    def fn(a):
        return F.dropout(a.T, 0.4), F.dropout(a, 0.5, training=False)

    flow.manual_seed(21)
    eager = fn(flow.tensor(x))
    flow.manual_seed(21)
    compiled = flow.jit(fn)(x)
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c.numpy(), e.numpy())
