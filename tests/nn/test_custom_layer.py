"""Custom layers: a Module's own `backward` is its gradient (eager, flow.jit, nn.Graph), checked
against numpy and finite differences; `Module.register_layer` and `flow.nn.build`."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn

RNG = np.random.default_rng(3)
X = RNG.standard_normal((5, 4)).astype(np.float32) * 2
G = RNG.standard_normal((5, 4)).astype(np.float32)


class RoundSTE(nn.Module):
    """round(x) forward; the straight-through estimator backward (the gradient passes as is)."""

    def forward(self, x):
        return flow.round(x)

    def backward(self, grad_output):
        return grad_output


class ScaleGrad(nn.Module):
    """The identity forward, the gradient scaled by `k` backward."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * 1.0

    def backward(self, grad_output):
        return grad_output * self.k


class Scale(nn.Module):
    """y = x * w (w per column) with its true gradient written by hand."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(np.linspace(0.5, 2.0, 4).astype(np.float32)))

    def forward(self, x):
        self.saved = x
        return x * self.w

    def backward(self, g):
        return g * self.w, (g * self.saved).sum(0)


def _grad(layer, x, g):
    xt = flow.tensor(x, requires_grad=True)
    (layer(xt) * flow.tensor(g)).sum().backward()
    return xt.grad.numpy()


def test_straight_through_estimator_eager():
    layer = RoundSTE()
    xt = flow.tensor(X, requires_grad=True)
    y = layer(xt)
    np.testing.assert_array_equal(y.numpy(), np.round(X))
    (y * flow.tensor(G)).sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), G)  # round's own gradient would be 0
    assert not layer(flow.tensor(X)).requires_grad


def test_scaled_gradient_eager_and_jit():
    layer = ScaleGrad(3.0)
    np.testing.assert_allclose(_grad(layer, X, G), 3 * G, rtol=1e-6)

    @flow.jit
    def grad_of(x, g):
        x = x.detach().requires_grad_()
        return flow.autograd.grad((layer(x) * g).sum(), x)[0]

    np.testing.assert_allclose(grad_of(X, G).numpy(), 3 * G, rtol=1e-6)
    np.testing.assert_allclose(grad_of(X, 2 * G).numpy(), 6 * G, rtol=1e-6)


def test_true_custom_gradient_matches_finite_differences():
    layer = Scale()
    w = layer.w.numpy().astype(np.float64)
    xt = flow.tensor(X, requires_grad=True)
    (layer(xt) * flow.tensor(G)).sum().backward()

    def f(x, w):
        return float((x * w * G).sum())

    eps, xd = 1e-3, X.astype(np.float64)
    fd_x = np.zeros_like(xd)
    for i in np.ndindex(xd.shape):
        e = np.zeros_like(xd)
        e[i] = eps
        fd_x[i] = (f(xd + e, w) - f(xd - e, w)) / (2 * eps)
    fd_w = np.array([(f(xd, w + eps * np.eye(4)[j]) - f(xd, w - eps * np.eye(4)[j])) / (2 * eps)
                     for j in range(4)])  # fmt: skip
    np.testing.assert_allclose(xt.grad.numpy(), fd_x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.w.grad.numpy(), fd_w, rtol=1e-4, atol=1e-4)


class QuantNet(nn.Module):
    """Scale (hand-written true gradient) -> Linear -> round (straight through) -> the
    gradient halved -> sum."""

    def __init__(self):
        super().__init__()
        flow.manual_seed(0)
        self.scale = Scale()
        self.fc = nn.Linear(4, 3)
        self.q = RoundSTE()
        self.halve = ScaleGrad(0.5)

    def forward(self, x):
        return self.halve(self.q(self.fc(self.scale(x)))).sum(1, keepdim=True)


class Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x):
        loss = (self.model(x) ** 2).mean()
        loss.backward()
        return loss


def test_custom_backward_in_nn_graph_equals_eager_and_numpy():
    eager, compiled = QuantNet(), QuantNet()
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.01)
    step = Step(compiled, flow.optim.SGD(compiled.parameters(), lr=0.01))
    ws, w, b = (t.numpy().astype(np.float64) for t in (eager.scale.w, eager.fc.weight,
                                                       eager.fc.bias))  # fmt: skip
    for i in range(3):
        opt_e.zero_grad()
        loss_e = (eager(flow.tensor(X)) ** 2).mean()
        loss_e.backward()
        opt_e.step()
        loss_g = step(flow.tensor(X))
        # numpy reference: round passes the gradient straight through, `halve` halves it
        h = X * ws
        out = np.round(h @ w.T + b).sum(1, keepdims=True)
        g_z = 0.5 * (2 * out / out.size) * np.ones((1, 3))
        g_ws = ((g_z @ w) * X).sum(0)
        ws, w, b = ws - 0.01 * g_ws, w - 0.01 * g_z.T @ h, b - 0.01 * g_z.sum(0)
        np.testing.assert_allclose(loss_e.numpy(), (out**2).mean(), rtol=1e-5)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5)
        for model in (eager, compiled):
            np.testing.assert_allclose(model.fc.weight.numpy(), w, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(model.fc.bias.numpy(), b, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(model.scale.w.numpy(), ws, rtol=1e-4, atol=1e-5)


def test_wrong_number_of_gradients_says_what_was_expected():
    class Bad(Scale):
        def backward(self, g):
            return g * self.w

    with pytest.raises(RuntimeError, match=r"Bad.backward returned 1 gradient; expected 2: 1 "
                                           r"for the arguments of forward, then one per "
                                           r"trainable parameter \(w\)"):  # fmt: skip
        _grad(Bad(), X, G)


def test_tensor_keyword_arguments_needing_grad_are_refused():
    class Mul(nn.Module):
        def forward(self, x, *, y):
            return x * y

        def backward(self, g):
            return g

    x = flow.tensor(X, requires_grad=True)
    np.testing.assert_allclose(Mul()(x, y=flow.tensor(G)).numpy(), X * G)
    with pytest.raises(TypeError, match="Mul has its own backward.*pass the tensor y= "
                                        "positionally"):  # fmt: skip
        Mul()(x, y=flow.tensor(G, requires_grad=True))


def test_forward_returning_a_tuple_is_refused():
    class Pair(nn.Module):
        def forward(self, x):
            return x, x

        def backward(self, g):
            return g

    with pytest.raises(TypeError, match="returned tuple; a module with its own backward"):
        Pair()(flow.tensor(X, requires_grad=True))


# --------------------------------------------------------------------------- register_layer


class MyCustomLayer(nn.Module):
    def __init__(self, features, k=2.0):
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.k = k

    def forward(self, x):
        return self.fc(x) * self.k


def test_register_layer_makes_the_class_available_by_name():
    assert nn.Module.register_layer("MyCustomLayer", MyCustomLayer) is MyCustomLayer
    assert flow.nn.MyCustomLayer is MyCustomLayer
    nn.Module.register_layer("MyCustomLayer", MyCustomLayer)  # the same class again: fine

    class Other(nn.Module):
        pass

    with pytest.raises(ValueError, match="'MyCustomLayer' is taken by .*MyCustomLayer; cannot "
                                         "register .*Other"):  # fmt: skip
        nn.Module.register_layer("MyCustomLayer", Other)
    with pytest.raises(ValueError, match="'Linear' is taken by flow.nn"):
        nn.Module.register_layer("Linear", Other)
    with pytest.raises(TypeError, match="expected a subclass of flow.nn.Module"):
        nn.Module.register_layer("NotALayer", int)
    with pytest.raises(ValueError, match="must be a Python identifier"):
        nn.Module.register_layer("my layer", Other)


def test_build_from_a_config():
    nn.Module.register_layer("MyCustomLayer", MyCustomLayer)
    flow.manual_seed(1)
    model = nn.build([
        {"type": "Linear", "in_features": 4, "out_features": 3},
        {"type": "ReLU"},
        {"type": "MyCustomLayer", "args": [3], "k": 0.5},
    ])  # fmt: skip
    assert isinstance(model, nn.Sequential) and isinstance(model[2], MyCustomLayer)
    assert model[2].k == 0.5
    x = flow.tensor(X)
    fc, custom = model[0], model[2].fc
    h = np.maximum(X @ fc.weight.numpy().T + fc.bias.numpy(), 0)
    want = (h @ custom.weight.numpy().T + custom.bias.numpy()) * 0.5
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-5, atol=1e-6)
    nested = nn.build({"type": "Sequential", "args": [{"type": "Tanh"}, {"type": "Identity"}]})
    assert [type(m).__name__ for m in nested] == ["Tanh", "Identity"]


def test_build_errors_name_the_problem():
    with pytest.raises(KeyError, match="no layer named 'Linaer'; did you mean Linear"):
        nn.build({"type": "Linaer", "in_features": 2, "out_features": 2})
    with pytest.raises(TypeError, match="expected a dict with a 'type' key"):
        nn.build({"in_features": 2})
    with pytest.raises(TypeError, match=r"flow.nn.build: Linear\(args=\[\], kwargs="):
        nn.build({"type": "Linear", "in_feature": 2})
