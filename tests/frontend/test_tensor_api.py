"""OneFlow's documented tensor API as its tutorials use it: `flow.cuda`, `f"{loss:>7f}"`,
`retain_grad`, `register_hook`, `is_leaf` and `grad_fn` (cross-checked with PyTorch)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flow
from flow import nn
from flow.targets import RuntimeUnavailableError, device_names

# --------------------------------------------------------------------------- flow.cuda


def _to_cuda_works() -> bool:
    try:
        flow.ones(2).to("cuda")
    except RuntimeUnavailableError:
        return False
    return True


def test_cuda_is_available_answers_as_moving_a_tensor_to_cuda_does():
    available = flow.cuda.is_available()
    assert isinstance(available, bool)
    assert available == _to_cuda_works()
    expected = len(device_names("cuda")) if available else 0
    assert flow.cuda.device_count() == expected
    assert flow.cuda.device_count() >= (1 if available else 0)


def test_current_device_and_set_device():
    flow.cuda.set_device(-1)  # a negative index is a no-op, as in PyTorch
    with pytest.raises(ValueError, match="expected a cuda device"):
        flow.cuda.set_device("cpu")
    with pytest.raises(ValueError, match="expected a cuda device"):
        flow.cuda.set_device(1.5)
    if flow.cuda.is_available():
        flow.cuda.set_device(0)
        flow.cuda.set_device("cuda:0")
        flow.cuda.set_device(flow.device("cuda", 0))
        assert flow.cuda.current_device() == 0
        flow.cuda.synchronize()
    else:
        for call in (flow.cuda.current_device, flow.cuda.synchronize,
                     lambda: flow.cuda.set_device(0)):  # fmt: skip
            with pytest.raises(RuntimeUnavailableError, match="no CUDA device"):
                call()


def test_cuda_manual_seed_seeds_the_generator_of_cuda_tensors_when_there_is_one():
    flow.manual_seed(1)
    before = flow.default_generator.get_state().numpy().copy()
    flow.cuda.manual_seed(5)
    flow.cuda.manual_seed_all(5)
    after = flow.default_generator.get_state().numpy()
    if flow.cuda.is_available():  # one generator serves every device
        assert after.tolist() == flow.Generator().manual_seed(5).get_state().numpy().tolist()
    else:  # ignored without CUDA, as OneFlow and PyTorch document
        assert after.tolist() == before.tolist()


# --------------------------------------------------------------------------- __format__


@pytest.mark.parametrize(
    ("value", "dtype", "spec"),
    [(0.123456, "float32", ">7f"), (2.5, "float64", ".3e"), (-1.25, "float32", "8.2%"),
     (7, "int64", "d"), (7, "int32", ">5"), (3.0, "float32", "g")],
)  # fmt: skip
def test_a_0d_tensor_formats_as_its_number_like_torch(value, dtype, spec):
    torch = pytest.importorskip("torch")
    t = flow.tensor(value, dtype=getattr(flow, dtype))
    expected = format(torch.tensor(value, dtype=getattr(torch, dtype)), spec)
    assert format(t, spec) == expected
    assert f"{t:{spec}}" == expected


def test_a_one_element_tensor_formats_as_the_number_it_holds():
    loss = flow.tensor([[0.5]])
    assert f"loss: {loss:>7f}" == "loss: 0.500000"
    assert format(flow.tensor([3]), "03d") == "003"


def test_an_empty_spec_gives_str():
    for t in (flow.tensor(1.5), flow.tensor([[1.0, 2.0]])):
        assert f"{t}" == str(t) == format(t, "")


def test_a_multi_element_tensor_with_a_spec_is_a_type_error_naming_its_shape():
    with pytest.raises(TypeError, match=r"shape \[2, 3\]"):
        format(flow.ones(2, 3), ">7f")
    with pytest.raises(TypeError, match=r"shape \[0\]"):
        format(flow.ones(0), ".2f")


def test_a_global_tensor_formats_as_its_value():
    t = flow.tensor([0.25]).to_global(flow.placement("cpu", [0]), flow.sbp.broadcast)
    assert t.is_global
    assert f"{t:.3f}" == "0.250" == format(t.item(), ".3f")


# --------------------------------------------------------------------------- is_leaf, grad_fn


def test_is_leaf_and_grad_fn_like_torch():
    torch = pytest.importorskip("torch")

    def cases(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        c = lib.tensor([3.0, 4.0])
        with lib.no_grad():
            under_no_grad = x * 2
        return {"user-created": x, "no grad": c, "op without grad": c * 2,
                "op": x * c, "no_grad": under_no_grad, "detach": (x * 2).detach()}  # fmt: skip

    for (name, f), t in zip(cases(flow).items(), cases(torch).values()):
        assert f.is_leaf == t.is_leaf, name
        assert (f.grad_fn is None) == (t.grad_fn is None), name
        assert f.requires_grad == t.requires_grad, name


def test_grad_fn_names_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (flow, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        names = [(x * 3).grad_fn.name(), (x + 1).grad_fn.name(), x.sum().grad_fn.name(),
                 x.exp().grad_fn.name()]  # fmt: skip
        if lib is flow:
            got = names
        else:
            assert got == names
    assert repr((flow.tensor([1.0], requires_grad=True) * 2).grad_fn) == "<MulBackward0>"


# --------------------------------------------------------------------------- retain_grad, hooks


def _graph(lib, x0, w0, *, hooks: bool):
    """y = x * w, z = y.sin(), loss = (z * y).sum() with y retained and hooked."""
    x = lib.tensor(x0, requires_grad=True)
    w = lib.tensor(w0, requires_grad=True)
    y = x * w
    y.retain_grad()
    seen = []
    if hooks:
        y.register_hook(lambda g: g * 3)
        y.register_hook(lambda g: seen.append(g.numpy().copy()))  # sees the first's result
        x.register_hook(lambda g: g + 1)  # a leaf: what is accumulated into x.grad
    z = y.sin()
    z.retain_grad()
    loss = (z * y).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # retained gradients accumulate, as leaves do
    return x, w, y, z, seen


@pytest.mark.parametrize("hooks", [False, True])
def test_retain_grad_and_hooks_give_torchs_gradients(hooks):
    torch = pytest.importorskip("torch")
    x0, w0 = [0.5, -1.0, 2.0], [1.5, 0.25, -0.75]
    fx, fw, fy, fz, fseen = _graph(flow, x0, w0, hooks=hooks)
    tx, tw, ty, tz, tseen = _graph(torch, x0, w0, hooks=hooks)
    for f, t in ((fx, tx), (fw, tw), (fy, ty), (fz, tz)):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    assert len(fseen) == len(tseen) == (2 if hooks else 0)
    for f, t in zip(fseen, tseen):
        np.testing.assert_allclose(f, t, rtol=1e-6)
    assert fy.retains_grad and not fx.retains_grad
    assert not fy.grad.requires_grad  # detached, as without create_graph


def test_retain_grad_and_hooks_under_lazy_mode():
    x0, w0 = [0.5, -1.0, 2.0], [1.5, 0.25, -0.75]
    eager = [t.grad.numpy().copy() for t in _graph(flow, x0, w0, hooks=True)[:4]]
    with flow.lazy():
        lazy = [t.grad.numpy().copy() for t in _graph(flow, x0, w0, hooks=True)[:4]]
    for got, want in zip(lazy, eager):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_removed_hook_no_longer_runs():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (flow, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        calls = []
        handle = x.register_hook(lambda g: calls.append(1) or g * 10)
        (x * x).sum().backward()
        handle.remove()
        handle.remove()  # twice is fine
        (x * x).sum().backward()
        results.append((x.grad.numpy().tolist(), len(calls)))
    assert results[0] == results[1] == ([22.0, 44.0], 1)
    x = flow.tensor([1.0], requires_grad=True)
    with x.register_hook(lambda g: g * 0):
        (x * 2).sum().backward()
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_hooks_under_autograd_grad_like_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib in (flow, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        a.register_hook(lambda g: g * 10)
        b = a * 2
        b.retain_grad()
        b.register_hook(lambda g: g + 1)
        ga, gb = lib.autograd.grad((b * b).sum(), [a, b])
        out.append([ga.numpy().tolist(), gb.numpy().tolist(), b.grad.numpy().tolist()])
    assert out[0] == out[1]


def test_hooks_and_retain_grad_errors_like_torch():
    c = flow.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        c.retain_grad()
    with pytest.raises(RuntimeError, match="does not require grad"):
        c.register_hook(lambda g: g)
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="expected a callable"):
        x.register_hook(3)
    x.retain_grad()  # a leaf retains its gradient already: a no-op
    assert not x.retains_grad
    x.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' returned a gradient of shape \[\]"):
        (x * 2).sum().backward()


def test_hooks_on_values_the_traced_function_computes_are_compiled_in():
    w = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def step(x):
        y = x * w
        y.register_hook(lambda g: g * 2)
        y.retain_grad()
        loss = (y * y).sum()
        loss.backward()
        g = w.grad
        w.grad = None
        return loss, g, y.grad

    x = flow.tensor([0.5, 1.0, 2.0])
    eager = [t.numpy() for t in step(x)]
    yv = x.numpy() * w.numpy()
    np.testing.assert_allclose(eager[2], 4 * yv)  # d(sum y^2)/dy, doubled by the hook
    np.testing.assert_allclose(eager[1], 4 * yv * x.numpy())
    jitted = flow.jit(step)
    for _ in range(2):  # traced, then the cached program
        for got, want in zip(jitted(x), eager):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_a_hook_on_a_tensor_from_outside_a_trace_is_a_clear_error():
    w = flow.tensor([1.0, 2.0], requires_grad=True)

    def step(x):
        (x * w).sum().backward()
        g = w.grad
        w.grad = None
        return g

    jitted = flow.jit(step)
    x = flow.tensor([3.0, 4.0])
    assert jitted(x).tolist() == [3.0, 4.0]
    handle = w.register_hook(lambda g: g * 2)  # the cached program would ignore it
    with pytest.raises(RuntimeError, match="reaches has a gradient hook now"):
        jitted(x)
    handle.remove()
    assert jitted(x).tolist() == [3.0, 4.0]
    w.register_hook(lambda g: g * 2)
    with pytest.raises(RuntimeError, match="hooks and retain_grad"):
        flow.jit(step)(x)  # a first trace meets the hook

    def hook_inside(x):
        w.register_hook(lambda g: g)
        return x

    with pytest.raises(RuntimeError, match="register_hook on a tensor of shape"):
        flow.jit(hook_inside)(x)


def test_a_hook_on_a_parameter_of_an_nn_graph_is_a_clear_error():
    model = nn.Linear(2, 1)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    model.weight.register_hook(lambda g: g * 0)
    with pytest.raises(RuntimeError, match="hooks and retain_grad"):
        Step()(flow.ones(4, 2))


# --------------------------------------------------------------------------- a tutorial script


def test_a_tutorial_script_runs(tmp_path):
    script = tmp_path / "tutorial.py"
    script.write_text(textwrap.dedent("""
        import flow
        from flow import nn

        DEVICE = "cuda" if flow.cuda.is_available() else "cpu"
        model = nn.Linear(3, 1).to(DEVICE)
        loss_fn = nn.MSELoss()
        opt = flow.optim.SGD(model.parameters(), lr=0.1)
        x, y = flow.ones(4, 3).to(DEVICE), flow.zeros(4, 1).to(DEVICE)
        for step in range(3):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"loss: {loss:>7f}  [{step:>2d}]")
        print("device", DEVICE, flow.cuda.device_count())
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ})  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("loss: ") for line in lines[:3])
    float(lines[0].split()[1])  # a number, formatted
    expected = "cuda" if flow.cuda.is_available() else "cpu"
    assert lines[3] == f"device {expected} {flow.cuda.device_count()}"
