"""The composites of softmax, log_softmax and the unweighted NLL (cross-entropy's index-target
case), each one eager kernel with a VJP of its own: the kernel against the primitives it
stands for, bit for bit; the recorded gradient against the decomposition's, against finite
differences, to second order, and compiled (the traced program is the decomposition's).
And the scaled add (`add(x, y, alpha=a)`) an optimizer's update runs as one op."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import gradcheck, jit_grads_match_eager

import flow
import flow.nn.functional as F
from flow.ops import activations as A
from flow.ops import basic as B
from flow.nn import _losses as L
from flow.primitives.registry import bind

SHAPES = [((6, 5), 1), ((5,), 0), ((3, 4, 2, 3), 1), ((4, 7), 0), ((), 0)]  # (logits, dim)
DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _bits(t):
    a = t.numpy()
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same(whole, parts):
    assert whole.dtype is parts.dtype and whole.shape == parts.shape
    np.testing.assert_array_equal(_bits(whole), _bits(parts))


def _logits(rng, shape, dt):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    if x.size > 4:
        x.reshape(-1)[:2] = [np.inf, -np.inf]  # a row with inf gives NaN, as in PyTorch
    return flow.tensor(x).to(getattr(flow, dt))


def _targets(rng, shape, dim, c, ignored=True):
    t = rng.integers(0, c, tuple(s for i, s in enumerate(shape) if i != dim))
    if ignored and t.size > 1:
        t.reshape(-1)[0] = -100
    return flow.tensor(t)


@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_kernels_are_their_decompositions(rng, shape, dim, dt, name):
    fwd, grad = getattr(A, f"_{name}"), getattr(A, f"_{name}_grad")
    x = _logits(rng, shape, dt)
    out = bind(fwd, x, dim=dim)
    _same(out, fwd.decompose(x, dim=dim))
    ct = flow.tensor(rng.standard_normal(shape).astype(np.float32)).to(x.dtype)
    _same(bind(grad, ct, out, dim=dim), grad.decompose(ct, out, dim=dim))


@pytest.mark.parametrize("shape,dim", [s for s in SHAPES if s[1] == 1 or len(s[0]) == 1], ids=str)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_kernels_are_their_decompositions(rng, shape, dim, dt, reduction):
    logp = bind(A._log_softmax, _logits(rng, shape, dt), dim=dim)
    t = _targets(rng, shape, dim, shape[dim])
    kw = dict(class_dim=dim, ignore_index=-100, reduction=reduction)
    out = bind(L._nll, logp, t, **kw)
    _same(out, L._nll.decompose(logp, t, **kw))
    ct = flow.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32)).to(logp.dtype)
    _same(bind(L._nll_grad, ct, logp, t, **kw), L._nll_grad.decompose(ct, logp, t, **kw))


def test_nll_mean_of_no_counted_target_is_nan_with_zero_gradient():
    x = flow.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    loss = F.cross_entropy(x, flow.tensor([-100, -100, -100]))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 4), np.float32))


def _decomposed_grad(x0, t0, reduction):
    """d loss / d logits through the decomposition's primitives (their own VJPs)."""
    x = flow.tensor(x0, requires_grad=True)
    logp = A._log_softmax.decompose(x, dim=1)
    loss = L._nll.decompose(logp, flow.tensor(t0), class_dim=1, ignore_index=-100,
                            reduction=reduction)  # fmt: skip
    (loss if reduction != "none" else loss.sum()).backward()
    return x.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_recorded_gradient_is_the_decompositions(rng, reduction):
    x0 = rng.standard_normal((8, 6))
    t0 = rng.integers(0, 6, 8)
    t0[3] = -100
    x = flow.tensor(x0, requires_grad=True)
    loss = F.cross_entropy(x, flow.tensor(t0), reduction=reduction)
    assert loss.grad_fn is not None
    (loss if reduction != "none" else loss.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), _decomposed_grad(x0, t0, reduction), rtol=1e-12,
                               atol=1e-15)  # fmt: skip


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_log_softmax_gradients_match_finite_differences(rng, reduction):
    t0 = flow.tensor(np.array([2, 0, -100, 4, 1]))
    gradcheck(lambda x: F.cross_entropy(x, t0, reduction=reduction), rng.standard_normal((5, 6)),
              name=f"cross_entropy {reduction}")  # fmt: skip
    gradcheck(lambda x: F.nll_loss(F.log_softmax(x, 0), t0[:3], reduction=reduction),
              rng.standard_normal((3, 6)), name=f"nll_loss {reduction}")  # fmt: skip
    gradcheck(lambda x: F.log_softmax(x, 1), rng.standard_normal((3, 4, 2)))
    gradcheck(lambda x: F.softmax(x, 2) * F.softmax(x, 0), rng.standard_normal((3, 4, 2)))


def test_second_order_through_cross_entropy(rng):
    """create_graph: the recorded VJPs are composites whose own gradients come from their
    decompositions; d/dx of |d loss/dx|^2 against finite differences of the first gradient."""
    t0 = flow.tensor(np.array([1, 3, 0, -100]))

    def grad_norm(x):
        (g,) = flow.autograd.grad(F.cross_entropy(x, t0), [x], create_graph=True)
        return (g * g).sum()

    def first(x0):
        x = flow.tensor(x0, requires_grad=True)
        (g,) = flow.autograd.grad(F.cross_entropy(x, t0), [x])
        return (g.numpy() ** 2).sum()

    x0 = rng.standard_normal((4, 5))
    x = flow.tensor(x0, requires_grad=True)
    (gg,) = flow.autograd.grad(grad_norm(x), [x])
    eps, num = 1e-6, np.zeros_like(x0)
    for idx in np.ndindex(x0.shape):
        plus, minus = x0.copy(), x0.copy()
        plus[idx] += eps
        minus[idx] -= eps
        num[idx] = (first(plus) - first(minus)) / (2 * eps)
    np.testing.assert_allclose(gg.numpy(), num, rtol=1e-5, atol=1e-8)


def test_compiled_cross_entropy_gradients_match_eager(rng):
    t0 = flow.tensor(np.array([1, 3, 0, -100, 2, 2]))
    def fn(x):
        return F.cross_entropy(x, t0) + F.log_softmax(x, 0).sum() + (F.softmax(x, 1) ** 2).sum()

    jit_grads_match_eager(fn, rng.standard_normal((6, 4)).astype(np.float32))


def test_cross_entropy_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x0 = rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    t0 = rng.integers(0, 5, (2, 3, 3))
    t0[0, 1, 2] = 7  # ignore_index=7
    x = flow.tensor(x0, requires_grad=True)
    loss = F.cross_entropy(x, flow.tensor(t0), ignore_index=7)
    loss.backward()
    tx = torch.tensor(x0, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t0), ignore_index=7)
    tl.backward()
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("subtract", [False, True])
def test_scaled_add_kernel_is_its_decomposition(rng, dt, subtract):
    alpha = 3 if dt == "int32" else 0.37
    x, y = (flow.tensor(rng.standard_normal((4, 5)).astype(np.float32) * 9).to(getattr(flow, dt))
            for _ in range(2))  # fmt: skip
    whole = bind(B._add_scaled, x, y, alpha=alpha, subtract=subtract)
    _same(whole, B._add_scaled.decompose(x, y, alpha=alpha, subtract=subtract))
    want = x.numpy().astype(np.float64) + (-1 if subtract else 1) * alpha * y.numpy()
    np.testing.assert_allclose(whole.numpy().astype(np.float64), want, rtol=1e-2, atol=1e-1)


def test_add_and_sub_take_alpha_like_torch(rng):
    x0, y0 = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    x, y = flow.tensor(x0, requires_grad=True), flow.tensor(y0, requires_grad=True)
    out = flow.add(x, y, alpha=-2.5) * 3 + x.sub(y, alpha=4) + flow.add(x, 1.5, alpha=2)
    out.sum().backward()
    np.testing.assert_allclose(out.numpy(), (x0 - 2.5 * y0) * 3 + (x0 - 4 * y0) + (x0 + 3.0))
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 4), 5.0))
    np.testing.assert_allclose(y.grad.numpy(), np.full((4,), 3 * (-7.5 - 4)))
    z = flow.tensor(x0)
    z.add_(flow.tensor(y0), alpha=flow.tensor(2.0))  # a tensor alpha: PyTorch takes a number only
    np.testing.assert_allclose(z.numpy(), x0 + 2 * y0)
    with pytest.raises(TypeError, match=r"add: alpha must be an integer for int64 tensors, got 0.5"):
        flow.add(flow.tensor([1, 2]), flow.tensor([3, 4]), alpha=0.5)
    with pytest.raises(TypeError, match=r"sub: alpha must be a number or a tensor, got str"):
        flow.sub(x, y, alpha="2")


def test_sgd_eager_update_equals_the_compiled_one(rng):
    """The momentum update written with alpha (one op per state eagerly) gives the step the
    compiled nn.Graph gives."""
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    x0 = rng.standard_normal((8, 5)).astype(np.float32)

    def make():
        lin = flow.nn.Linear(5, 3, bias=False)
        lin.weight.copy_(flow.tensor(w0.T))
        return lin, flow.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                   weight_decay=0.01)  # fmt: skip

    eager, opt = make()
    for _ in range(3):
        opt.zero_grad()
        (eager(flow.tensor(x0)) ** 2).mean().backward()
        opt.step()
    compiled, copt = make()

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = compiled
            self.add_optimizer(copt)

        def build(self, x):
            loss = (self.m(x) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    for _ in range(3):
        step(flow.tensor(x0))
    np.testing.assert_allclose(eager.weight.numpy(), compiled.weight.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("shape", [(3, 5), (70, 80)], ids=str)  # (the select kernel's two paths)
def test_relu_kernels_are_their_decompositions(rng, dt, shape):
    x0 = rng.standard_normal(shape).astype(np.float32) * 4
    x0.reshape(-1)[:4] = [np.nan, 0.0, -0.0, -np.inf]
    x = flow.tensor(x0).to(getattr(flow, dt))
    _same(bind(B._relu, x), B._relu.decompose(x))
    if x.dtype.is_floating_point:
        ct = flow.tensor(rng.standard_normal(shape).astype(np.float32)).to(x.dtype)
        _same(bind(B._relu_grad, ct, x), B._relu_grad.decompose(ct, x))


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,dim", [((4, 3, 5, 5), 1), ((6, 7), 1), ((2, 3, 7), 2), ((7,), 0)],
                         ids=str)  # fmt: skip
def test_bias_kernels_are_their_decompositions(rng, dt, shape, dim):
    x = flow.tensor(rng.standard_normal(shape).astype(np.float32)).to(getattr(flow, dt))
    b = flow.tensor(rng.standard_normal(shape[dim]).astype(np.float32)).to(x.dtype)
    _same(bind(B._add_bias, x, b, dim=dim), B._add_bias.decompose(x, b, dim=dim))
    _same(bind(B._bias_grad, x, dim=dim), B._bias_grad.decompose(x, dim=dim))


def test_layer_bias_gradients_match_finite_differences(rng):
    w = flow.tensor(rng.standard_normal((4, 3, 2, 2)))
    lw = flow.tensor(rng.standard_normal((2, 5)))
    gradcheck(lambda x, b: F.conv2d(x, w, b, padding=1), rng.standard_normal((2, 3, 3, 3)),
              rng.standard_normal(4))  # fmt: skip
    gradcheck(lambda x, b: F.linear(x, lw, b), rng.standard_normal((3, 5)), rng.standard_normal(2))
    gradcheck(lambda x, b: F.linear(x, lw, b), rng.standard_normal(5), rng.standard_normal(2))


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int64"])
@pytest.mark.parametrize("shapes", [((3, 4), (5, 4)), ((2, 3, 4), (2, 5, 4)), ((40, 300), (20, 300))],
                         ids=str)  # fmt: skip
@pytest.mark.parametrize("ta,tb,tout", [(False, True, False), (True, False, False),
                                        (False, True, True), (True, False, True)])  # fmt: skip
def test_transposed_product_kernel_is_its_decomposition(rng, dt, shapes, ta, tb, tout):
    """A product's VJP (`ct @ b^T`, `a^T @ ct`, and their transposes for a column-major
    operand) as one kernel: the same bits, shape and layout as transposes and `matmul`."""
    (ma, k), (mb, _) = shapes[0][-2:], shapes[1][-2:]
    lead = shapes[0][:-2]
    a_shape = (*lead, k, ma) if ta else shapes[0]
    b_shape = (*lead, mb, k) if tb else (*lead, k, mb)
    a = flow.tensor((rng.standard_normal(a_shape) * 4).astype(np.float32)).to(getattr(flow, dt))
    b = flow.tensor((rng.standard_normal(b_shape) * 4).astype(np.float32)).to(getattr(flow, dt))
    from flow.primitives import structured as S

    whole, parts = bind(S._matmul_t, a, b, ta=ta, tb=tb, tout=tout), \
        S._matmul_t.decompose(a, b, ta=ta, tb=tb, tout=tout)  # fmt: skip
    _same(whole, parts)
    assert whole._buf.flags.c_contiguous == parts._buf.flags.c_contiguous


def test_linear_gradients_through_transposed_products(rng):
    """A linear layer's weight is read column-major (its transpose): its gradient comes back
    through the transposed-output kernel; first and second order against finite differences,
    and compiled against eager."""
    gradcheck(lambda x, w: F.linear(x, w), rng.standard_normal((3, 5)), rng.standard_normal((2, 5)))
    gradcheck(lambda x, w: x @ w, rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5)))
    jit_grads_match_eager(lambda x, w: F.linear(x, w).tanh(), rng.standard_normal((3, 5)),
                          rng.standard_normal((2, 5)))  # fmt: skip
    x = flow.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    w = flow.tensor(rng.standard_normal((2, 5)), requires_grad=True)
    (gw,) = flow.autograd.grad((F.linear(x, w) ** 2).sum(), [w], create_graph=True)
    (gx,) = flow.autograd.grad(gw.sum(), [x])
    xs, ws = x.numpy(), w.numpy()
    # gw = 2 h^T x with h = x w^T, so sum(gw) = 2 sum_n (sum_i h_ni)(sum_j x_nj), whose
    # derivative in x_nj is 2 ((sum_i w_ij)(sum_j' x_nj') + sum_i h_ni)
    want = 2 * (ws.sum(0)[None, :] * xs.sum(1, keepdims=True)
                + (xs @ ws.T).sum(1, keepdims=True) * np.ones_like(xs))
    np.testing.assert_allclose(gx.numpy(), want, rtol=1e-10)


CONV_GRADS = [
    # (input shape, weight shape, strides, dilations, padding, groups)
    ((32, 8, 4, 4), (16, 8, 3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)), 1),  # LeNet's second
    ((2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 2), ((1, 1), (0, 0)), 2),
    ((1, 3, 7, 5), (2, 3, 2, 2), (3, 2), (1, 1), ((0, 0), (1, 0)), 1),  # rows no window reads
    ((2, 2, 11), (3, 2, 3), (2,), (2,), ((1, 1),), 1),
    ((1, 2, 3, 4, 5), (2, 1, 2, 2, 3), (1, 2, 1), (1, 1, 2), ((1, 0), (0, 1), (1, 1)), 2),
    ((2, 3, 5, 6), (4, 3, 3, 3), (2, 2), (1, 1), ((3, 3), (4, 1)), 1),  # padding past the kernel
]  # fmt: skip


@pytest.mark.parametrize("xs,ws,strides,dilations,padding,groups", CONV_GRADS, ids=str)
@pytest.mark.parametrize("dt", ["float32", "float64", "float16"])
@pytest.mark.parametrize("which", ["weight", "input"])
def test_conv_cotangent_kernels_are_their_decompositions(rng, xs, ws, strides, dilations,
                                                         padding, groups, dt, which):  # fmt: skip
    """A convolution's weight cotangent and its input cotangent (the transposed convolution),
    each as one eager kernel: the same bits as the primitives they stand for, cropped or
    spread by strides alike."""
    from flow.primitives import window as W

    def rand(shape):
        data = (rng.standard_normal(shape) * 2).astype(np.float32)
        return flow.tensor(data).to(getattr(flow, dt))

    x, w = rand(xs), rand(ws)
    kw = dict(strides=strides, dilations=dilations, padding=padding, groups=groups)
    ct = rand(bind(W.conv, x, w, **kw).shape)
    if which == "weight":
        prim, args, shape = W.conv_weight_grad, (ct, x, w), w.shape
    else:
        prim, args, shape = W.conv_input_grad, (ct, w), x.shape
        kw["sizes"] = tuple(xs[2:])
    whole = bind(prim, *args, **kw)
    _same(whole, prim.decompose(*args, **kw))
    assert whole.shape == shape
