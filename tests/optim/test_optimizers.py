"""flow.optim: each optimizer against a numpy implementation of PyTorch's update equations,
param groups, state_dict round trips, zero_grad, input errors, and steps inside flow.jit."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow import optim

# --------------------------------------------------------------------------- problem

_RNG = np.random.default_rng(0)
X = _RNG.standard_normal((8, 3))
Y = _RNG.standard_normal((8, 2))
W0 = _RNG.standard_normal((3, 2))
B0 = _RNG.standard_normal(2)


def np_grads(w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Gradients of mean((X @ w + b - Y) ** 2), by hand."""
    dr = 2 * (X @ w + b - Y) / Y.size
    return [X.T @ dr, dr.sum(0)]


def flow_params(dtype=flow.float64) -> list[flow.Tensor]:
    return [flow.tensor(W0, dtype=dtype, requires_grad=True),
            flow.tensor(B0, dtype=dtype, requires_grad=True)]  # fmt: skip


def train(opt: optim.Optimizer, params: list[flow.Tensor], steps: int) -> None:
    w, b = params
    x, y = flow.tensor(X, dtype=w.dtype), flow.tensor(Y, dtype=w.dtype)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        opt.step()


# --------------------------------------------------------------------------- references


def ref_sgd(steps, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):  # fmt: skip
    params, bufs = [W0.copy(), B0.copy()], [None, None]
    for _ in range(steps):
        for i, g in enumerate(np_grads(*params)):
            g = -g if maximize else g
            g = g + weight_decay * params[i]
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = params[i] - lr * g
    return params, [{"momentum_buffer": buf} for buf in bufs if buf is not None]


def ref_adam(steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, decoupled=False, do_bias_correction=True):  # fmt: skip
    b1, b2 = betas
    params = [W0.copy(), B0.copy()]
    m, v, vmax = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params], [0, 0]
    for t in range(1, steps + 1):
        for i, g in enumerate(np_grads(*params)):
            g = -g if maximize else g
            if decoupled:
                params[i] = params[i] * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            vmax[i] = np.maximum(vmax[i], v[i])
            second = vmax[i] if amsgrad else v[i]
            c1, c2 = (1 - b1**t, 1 - b2**t) if do_bias_correction else (1, 1)
            params[i] = params[i] - lr / c1 * m[i] / (np.sqrt(second) / np.sqrt(c2) + eps)
    states = []
    for i in range(2):
        s = {"step": steps, "exp_avg": m[i], "exp_avg_sq": v[i]}
        if amsgrad:
            s["max_exp_avg_sq"] = vmax[i]
        states.append(s)
    return params, states


def ref_rmsprop(steps, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False, maximize=False):  # fmt: skip
    params = [W0.copy(), B0.copy()]
    sq, ga, buf = ([np.zeros_like(p) for p in params] for _ in range(3))
    for _ in range(steps):
        for i, g in enumerate(np_grads(*params)):
            g = -g if maximize else g
            g = g + weight_decay * params[i]
            sq[i] = alpha * sq[i] + (1 - alpha) * g * g
            if centered:
                ga[i] = alpha * ga[i] + (1 - alpha) * g
                avg = np.sqrt(sq[i] - ga[i] ** 2) + eps
            else:
                avg = np.sqrt(sq[i]) + eps
            if momentum > 0:
                buf[i] = momentum * buf[i] + g / avg
                params[i] = params[i] - lr * buf[i]
            else:
                params[i] = params[i] - lr * g / avg
    states = []
    for i in range(2):
        s = {"step": steps, "square_avg": sq[i]}
        if momentum > 0:
            s["momentum_buffer"] = buf[i]
        if centered:
            s["grad_avg"] = ga[i]
        states.append(s)
    return params, states


def check(opt, params, ref, rtol=1e-10, atol=1e-12):
    """Parameters and every state entry equal the reference's."""
    ref_params, ref_states = ref
    for p, r in zip(params, ref_params):
        np.testing.assert_allclose(p.numpy(), r, rtol=rtol, atol=atol)
    assert len(opt.state) == len(ref_states)
    for p, r in zip(params, ref_states):
        state = opt.state[p]
        assert sorted(state) == sorted(r), f"state keys {sorted(state)} != {sorted(r)}"
        for key, value in r.items():
            assert isinstance(state[key], flow.Tensor), f"state[{key!r}] is not a flow.Tensor"
            np.testing.assert_allclose(state[key].numpy(), value, rtol=rtol, atol=atol,
                                       err_msg=f"state[{key!r}]")  # fmt: skip


STEPS = 5

SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.5),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, momentum=0.9, weight_decay=0.1),
    dict(lr=0.1, weight_decay=0.05, maximize=True),
]
ADAM_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1),
    dict(lr=0.1, amsgrad=True),
    dict(lr=0.1, maximize=True, eps=1e-3),
    dict(lr=0.1, do_bias_correction=False),
]
RMSPROP_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, centered=True),
    dict(lr=0.005, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1),
    dict(lr=0.01, maximize=True),
]


@pytest.mark.parametrize("kwargs", SGD_CASES, ids=str)
def test_sgd_matches_reference(kwargs):
    params = flow_params()
    opt = optim.SGD(params, **kwargs)
    train(opt, params, STEPS)
    check(opt, params, ref_sgd(STEPS, **kwargs))


@pytest.mark.parametrize("kwargs", ADAM_CASES, ids=str)
def test_adam_matches_reference(kwargs):
    params = flow_params()
    opt = optim.Adam(params, **kwargs)
    train(opt, params, STEPS)
    check(opt, params, ref_adam(STEPS, **kwargs))


@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.1, weight_decay=0.5, amsgrad=True)],
                         ids=str)  # fmt: skip
def test_adamw_matches_reference(kwargs):
    params = flow_params()
    opt = optim.AdamW(params, **kwargs)
    train(opt, params, STEPS)
    check(opt, params, ref_adam(STEPS, decoupled=True, **{"weight_decay": 1e-2, **kwargs}))


@pytest.mark.parametrize("kwargs", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_reference(kwargs):
    params = flow_params()
    opt = optim.RMSprop(params, **kwargs)
    train(opt, params, STEPS)
    check(opt, params, ref_rmsprop(STEPS, **kwargs))


def test_float32_parameters_and_step_state():
    params = flow_params(flow.float32)
    opt = optim.Adam(params, lr=0.1, amsgrad=True)
    train(opt, params, STEPS)
    check(opt, params, ref_adam(STEPS, lr=0.1, amsgrad=True), rtol=1e-4, atol=1e-5)
    step = opt.state[params[0]]["step"]
    assert step.shape == () and step.dtype is flow.float32 and step.item() == STEPS
    assert all(opt.state[params[0]][k].dtype is flow.float32 for k in ("exp_avg", "exp_avg_sq"))


def test_defaults():
    w = flow_params()[0]
    assert optim.SGD([w]).defaults["lr"] == 1e-3
    adam = optim.Adam([w]).defaults
    assert (adam["lr"], adam["betas"], adam["eps"], adam["weight_decay"]) == (1e-3, (0.9, 0.999),
                                                                              1e-8, 0)  # fmt: skip
    assert optim.AdamW([w]).defaults["weight_decay"] == 1e-2
    rms = optim.RMSprop([w]).defaults
    assert (rms["lr"], rms["alpha"], rms["eps"]) == (1e-2, 0.99, 1e-8)


# --------------------------------------------------------------------------- groups, grads


def test_param_groups_with_their_own_hyperparameters():
    w, b = flow_params()
    opt = optim.SGD([{"params": [w]}, {"params": b, "lr": 0.01, "momentum": 0.5}],
                    lr=0.1, momentum=0.9)  # fmt: skip
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    train(opt, [w, b], STEPS)
    # b sees w's trajectory through the shared loss, so follow both with their own rules.
    params, bufs = [W0.copy(), B0.copy()], [None, None]
    for _ in range(STEPS):
        for i, (g, lr, mom) in enumerate(zip(np_grads(*params), (0.1, 0.01), (0.9, 0.5))):
            bufs[i] = g.copy() if bufs[i] is None else mom * bufs[i] + g
            params[i] = params[i] - lr * bufs[i]
    np.testing.assert_allclose(w.numpy(), params[0], rtol=1e-10)
    np.testing.assert_allclose(b.numpy(), params[1], rtol=1e-10)


def test_add_param_group_fills_defaults():
    w, b = flow_params()
    opt = optim.Adam([w], lr=0.1)
    opt.add_param_group({"params": [b], "betas": (0.5, 0.6)})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["betas"] == (0.5, 0.6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [w]})


def test_parameters_without_grad_are_skipped():
    w, b = flow_params()
    opt = optim.Adam([w, b], lr=0.1)
    w.grad = flow.ones_like(w)
    opt.step()
    np.testing.assert_array_equal(b.numpy(), B0)
    assert b not in opt.state and w in opt.state
    assert not np.array_equal(w.numpy(), W0)


def test_lr_as_a_tensor():
    params, ref_params = flow_params(), flow_params()
    opt = optim.Adam(params, lr=flow.tensor(0.1, dtype=flow.float64), weight_decay=0.1)
    train(opt, params, 3)
    ref = optim.Adam(ref_params, lr=0.1, weight_decay=0.1)
    train(ref, ref_params, 3)
    np.testing.assert_allclose(params[0].numpy(), ref_params[0].numpy(), rtol=1e-12)


def test_closure_is_evaluated_with_grad():
    w, b = flow_params()
    opt = optim.SGD([w, b], lr=0.1)
    x, y = flow.tensor(X), flow.tensor(Y)

    def closure():
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        return loss

    with flow.no_grad():
        loss = opt.step(closure)
    np.testing.assert_allclose(loss.item(), np.mean((X @ W0 + B0 - Y) ** 2))
    np.testing.assert_allclose(w.numpy(), ref_sgd(1, lr=0.1)[0][0], rtol=1e-12)


def test_zero_grad():
    w, b = flow_params()
    opt = optim.SGD([w, b], lr=0.1)
    train(opt, [w, b], 1)
    opt.zero_grad(set_to_none=False)
    for p in (w, b):
        assert p.grad is not None and not p.grad.requires_grad
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))
    opt.zero_grad()
    assert w.grad is None and b.grad is None


def test_step_updates_in_place():
    arr = W0.copy()
    w = flow.from_numpy(arr).requires_grad_()
    opt = optim.SGD([w], lr=0.5)
    w.grad = flow.ones_like(w)
    opt.step()
    np.testing.assert_allclose(arr, W0 - 0.5)  # the caller's buffer sees the update


@pytest.mark.parametrize("dtype", [flow.float16, flow.float32, flow.float64])
@pytest.mark.parametrize("kwargs", [dict(lr=0.05), dict(lr=1.0, momentum=1.0),
                                    dict(lr=0.05, momentum=0.9)], ids=str)  # fmt: skip
def test_sgd_in_place_update_equals_its_ops_bit_for_bit(monkeypatch, dtype, kwargs):
    """Eager SGD writes simple updates straight into the parameter and buffer arrays with the
    ops' kernels (`_update_in_place`); run with the ops instead, every bit agrees."""
    from flow.optim import _sgd

    taken = _in_place_against_ops(monkeypatch, _sgd, lambda ps: optim.SGD(ps, **kwargs), dtype)
    assert len(taken) == 2 * STEPS and all(taken[2:])  # (a first step makes the buffers)


def _in_place_against_ops(monkeypatch, module, make_opt, dtype) -> list[bool]:
    """Train with `module._update_in_place` and with the ops alone (it declining): the
    parameters stay the same arrays, and they and every state tensor agree bit for bit.
    Returns what the in-place update answered, call by call."""
    taken = []
    in_place = module._update_in_place

    def spy(*args):
        taken.append(in_place(*args))
        return taken[-1]

    runs = {}
    for how, fn in (("in place", spy), ("ops", lambda *args: False)):
        monkeypatch.setattr(module, "_update_in_place", fn)
        params = flow_params(dtype)
        arrays = [p.numpy() for p in params]
        opt = make_opt(params)
        train(opt, params, STEPS)
        assert all(p.numpy() is a for p, a in zip(params, arrays))  # updated in place
        runs[how] = [p.numpy().copy() for p in params]
        runs[how] += [t.numpy().copy() for s in opt.state.values() for t in s.values()]
    for a, b in zip(runs["in place"], runs["ops"], strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return taken


def test_sgd_in_place_update_stays_off_where_the_ops_must_run():
    x = flow.tensor(np.ones(3))
    cases = {
        "weight decay": (flow.tensor(np.ones(3)), dict(weight_decay=0.1)),
        "a tensor lr": (flow.tensor(np.ones(3)), dict(lr=flow.tensor(0.1))),
        "bfloat16": (flow.tensor(np.ones(3), dtype=flow.bfloat16), {}),
    }
    from flow.optim import _sgd

    for name, (p, extra) in cases.items():
        group = dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                     maximize=False)  # fmt: skip
        group.update(extra)
        assert not _sgd._update_in_place(p, x.to(p.dtype), None, group, group["lr"]), name
    p = flow.tensor(np.ones(3))
    group = dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False)  # fmt: skip
    with flow.lazy():  # recorded, not run: the lazy step compiles it
        assert not _sgd._update_in_place(p, x, None, group, 0.1)


IN_PLACE = [
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.5, 0.9), eps=1e-3, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.1, maximize=True, do_bias_correction=False)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.1, weight_decay=0.3, amsgrad=True, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-4, weight_decay=0.1, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, maximize=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [flow.float32, flow.float64])
@pytest.mark.parametrize("name,kwargs", IN_PLACE, ids=str)
def test_adaptive_in_place_updates_equal_their_ops_bit_for_bit(monkeypatch, dtype, name,
                                                                kwargs):  # fmt: skip
    """Eager Adam, AdamW and RMSprop write their update straight into the parameter and state
    arrays with the ops' kernels (`_update_in_place`); run with the ops instead, every bit of
    the parameters and the state agrees."""
    from flow.optim import _adam, _rmsprop

    module = _rmsprop if name == "RMSprop" else _adam
    make_opt = lambda ps: getattr(optim, name)(ps, **kwargs)  # noqa: E731
    taken = _in_place_against_ops(monkeypatch, module, make_opt, dtype)
    assert len(taken) == 2 * STEPS and all(taken)


@pytest.mark.parametrize("name", ["Adam", "RMSprop"])
def test_adaptive_in_place_updates_stay_off_where_the_ops_must_run(name):
    from flow.optim import _adam, _rmsprop

    def in_place(p, lr):
        opt = getattr(optim, name)([p], lr=0.1)
        group = opt.param_groups[0]
        state = opt._initial_state(p, group)
        grad = p.detach().clone()
        if name == "Adam":
            return _adam._update_in_place(p, grad, state, group, lr, False)
        return _rmsprop._update_in_place(p, grad, state, group, lr)

    for dtype, lr in ((flow.float16, 0.1), (flow.bfloat16, 0.1), (flow.float32, flow.tensor(0.1))):
        assert not in_place(flow.tensor(np.ones(3), dtype=dtype), lr), (dtype, lr)
    with flow.lazy():  # recorded, not run: the lazy step compiles it
        assert not in_place(flow.tensor(np.ones(3)), 0.1)
    assert in_place(flow.tensor(np.ones(3)), 0.1)  # and otherwise taken


def test_repr():
    w = flow_params()[0]
    text = repr(optim.SGD([w], lr=0.1, momentum=0.9))
    assert text.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.1\n" in text
    assert "    momentum: 0.9\n" in text and text.endswith(")")


def test_training_an_nn_module():
    model = flow.nn.Linear(3, 2).to(flow.float64)
    with flow.no_grad():
        model.weight.copy_(flow.tensor(W0.T))
        model.bias.copy_(flow.tensor(B0))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = flow.tensor(X), flow.tensor(Y)
    for _ in range(STEPS):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    (ref_w, ref_b), _ = ref_sgd(STEPS, lr=0.1, momentum=0.9)
    np.testing.assert_allclose(model.weight.numpy(), ref_w.T, rtol=1e-10)
    np.testing.assert_allclose(model.bias.numpy(), ref_b, rtol=1e-10)


def test_frozen_parameters_are_accepted_and_left_alone():
    w, b = flow_params()
    frozen = flow.tensor(B0)  # like a Parameter with requires_grad=False
    opt = optim.Adam([w, frozen], lr=0.1)
    w.grad = flow.ones_like(w)
    opt.step()
    np.testing.assert_array_equal(frozen.numpy(), B0)
    assert frozen not in opt.state


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize(
    "make",
    [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
     lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True),
     lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True)],
    ids=["sgd", "adam", "rmsprop"],
)  # fmt: skip
def test_state_dict_round_trip_continues_identically(make):
    params = flow_params()
    opt = make(params)
    train(opt, params, 3)
    saved = opt.state_dict()
    assert sorted(saved["state"]) == [0, 1]
    assert saved["param_groups"][0]["params"] == [0, 1]

    clones = [flow.tensor(p.numpy(), requires_grad=True) for p in params]
    resumed = make(clones)
    resumed.param_groups[0]["lr"] = 123.0  # restored from the state dict
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == opt.param_groups[0]["lr"]

    before = {k: v.numpy().copy() for k, v in saved["state"][0].items()}
    train(opt, params, 3)
    train(resumed, clones, 3)
    for p, q in zip(params, clones):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    for key, value in opt.state[params[0]].items():
        np.testing.assert_array_equal(value.numpy(), resumed.state[clones[0]][key].numpy())
    for key, value in before.items():  # the saved dict is a snapshot
        np.testing.assert_array_equal(saved["state"][0][key].numpy(), value)


def test_state_dict_through_flow_save(tmp_path):
    params = flow_params()
    opt = optim.Adam(params, lr=0.1)
    train(opt, params, 2)
    flow.save(opt.state_dict(), tmp_path / "opt.safetensors")
    clones = [flow.tensor(p.numpy(), requires_grad=True) for p in params]
    resumed = optim.Adam(clones, lr=0.1)
    resumed.load_state_dict(flow.load(tmp_path / "opt.safetensors"))
    train(opt, params, 2)
    train(resumed, clones, 2)
    np.testing.assert_array_equal(params[0].numpy(), clones[0].numpy())


def test_load_state_dict_validates_layout():
    w, b = flow_params()
    opt = optim.Adam([w, b], lr=0.1)
    train(opt, [w, b], 1)
    saved = opt.state_dict()
    with pytest.raises(ValueError, match="has 1 parameter groups, but the optimizer has 2"):
        optim.Adam([{"params": [w]}, {"params": [b]}]).load_state_dict(saved)
    with pytest.raises(ValueError, match="group 0 of the state dict has 2 parameters, but"):
        optim.Adam([w]).load_state_dict(saved)
    other = flow.tensor(np.zeros((5,)), requires_grad=True)
    with pytest.raises(ValueError, match=r"'exp_avg' of parameter 1 has shape \[2\], but the "
                                         r"parameter has shape \[5\]"):  # fmt: skip
        optim.Adam([w, other]).load_state_dict(saved)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


# --------------------------------------------------------------------------- errors


def test_bad_params():
    w, b = flow_params()
    with pytest.raises(TypeError, match="iterable of tensors"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="parameter 1 of param group 0 is a int"):
        optim.SGD([w, 3], lr=0.1)
    with pytest.raises(TypeError, match="parameter 0 of param group 1 has dtype flow.int64"):
        optim.SGD([{"params": [w]}, {"params": [flow.tensor([1, 2])]}], lr=0.1)
    with pytest.raises(ValueError, match="not a leaf"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w, b]}, {"params": [b]}], lr=0.1)
    with pytest.raises(ValueError, match="appears twice"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(TypeError, match="set"):
        optim.SGD([{"params": {w}}])


@pytest.mark.parametrize(
    "make, message",
    [(lambda ps: optim.SGD(ps, lr=-0.1), "SGD: invalid lr -0.1"),
     (lambda ps: optim.SGD(ps, momentum=-1), "invalid momentum -1"),
     (lambda ps: optim.SGD(ps, weight_decay=-1), "invalid weight_decay -1"),
     (lambda ps: optim.SGD(ps, nesterov=True), "nesterov=True requires momentum > 0"),
     (lambda ps: optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "lr": -1}]),
      "invalid lr -1 in param group 1"),
     (lambda ps: optim.Adam(ps, betas=(0.9, 1.0)), "invalid beta parameter at index 1"),
     (lambda ps: optim.Adam(ps, eps=-1.0), "Adam: invalid eps"),
     (lambda ps: optim.AdamW(ps, lr=-1.0), "AdamW: invalid lr"),
     (lambda ps: optim.RMSprop(ps, alpha=-0.5), "RMSprop: invalid alpha"),
     (lambda ps: optim.RMSprop(ps, momentum=-0.5), "RMSprop: invalid momentum")],
)  # fmt: skip
def test_bad_hyperparameters(make, message):
    with pytest.raises(ValueError, match=message):
        make(flow_params())


def test_required_hyperparameter():
    class Plain(optim.Optimizer):
        def __init__(self, params, lr=optim._optimizer.required):
            super().__init__(params, {"lr": lr})

    w, b = flow_params()
    with pytest.raises(ValueError, match="required hyperparameter 'lr'"):
        Plain([w])
    opt = Plain([{"params": [w], "lr": 0.1}])
    w.grad = flow.ones_like(w)
    with pytest.raises(NotImplementedError, match="Plain does not implement"):
        opt.step()


# --------------------------------------------------------------------------- flow.jit


def test_sgd_step_inside_jit_matches_eager():
    """State created inside the trace is updated by rebinding; the result comes back out."""

    def two_steps(w, g):
        w = w.detach()
        w.grad = g
        opt = optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
        opt.step()
        opt.step()
        return w, opt.state[w]["momentum_buffer"]

    w0 = W0.astype(np.float32)
    g = np.ones_like(w0)
    out_w, out_buf = flow.jit(two_steps)(w0, g)
    ref_w, ref_buf = two_steps(flow.tensor(w0), flow.tensor(g))
    np.testing.assert_allclose(out_w.numpy(), ref_w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(out_buf.numpy(), ref_buf.numpy(), rtol=1e-6)


def test_adam_training_step_inside_jit():
    """Forward, backward and an Adam step (bias correction from the step tensor) in one trace."""

    def train_step(w, b, x, y):
        w, b = w.detach().requires_grad_(), b.detach().requires_grad_()
        opt = optim.Adam([w, b], lr=0.1, amsgrad=True)
        for _ in range(2):
            opt.zero_grad()
            loss = ((x @ w + b - y) ** 2).mean()
            loss.backward()
            opt.step()
        return w, b, opt.state[w]["step"]

    args = [a.astype(np.float32) for a in (W0, B0, X, Y)]
    lowered = flow.jit(train_step).lower(*args)
    assert "flow.pow" in lowered.as_text()  # bias correction computed from the step tensor
    w, b, step = lowered.compile("cpu")(*args)
    (ref_w, ref_b), _ = ref_adam(2, lr=0.1, amsgrad=True)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), ref_b, rtol=1e-4, atol=1e-5)
    assert step.item() == 2


def test_step_on_captured_eager_parameters_inside_jit():
    """The compiled step writes the updated parameter back (momentum-free: no state to keep;
    optimizer state created by a compiled step is nn.Graph's job)."""
    w = flow.tensor(W0.astype(np.float32), requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    @flow.jit
    def step(g):
        w.grad = g
        opt.step()
        return w

    step(np.ones_like(W0, dtype=np.float32))
    np.testing.assert_allclose(w.numpy(), W0 - 0.1, rtol=1e-6)
    step(np.ones_like(W0, dtype=np.float32))
    np.testing.assert_allclose(w.numpy(), W0 - 0.2, rtol=1e-6)
