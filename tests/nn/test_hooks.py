"""Hooks: Module forward pre-hooks and forward hooks (order, replaced inputs and outputs,
kwargs, prepend, handles), Tensor.register_post_accumulate_grad_hook and
flow.core.autograd.queue_callback (when they run within backward, with what), checked against
hand-computed values, and against torch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.core.autograd import queue_callback


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.tensor([2.0, 3.0]))

    def forward(self, x, shift=0.0):
        return x * self.w + shift


def test_forward_hooks_order_and_values():
    m, log = Scale(), []
    x = flow.tensor([1.0, 1.0])

    def pre(mod, args):
        log.append(("pre", mod is m, np.asarray(args[0].numpy()).tolist()))

    def pre_double(mod, args):
        log.append(("pre_double",))
        return args[0] * 2  # one value: the new single positional argument

    def post(mod, args, out):
        log.append(("post", args[0].numpy().tolist(), out.numpy().tolist()))
        return out + 1

    def first(mod, args):
        log.append(("first",))

    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_pre_hook(pre_double)
    h3 = m.register_forward_hook(post)
    h4 = m.register_forward_pre_hook(first, prepend=True)
    out = m(x)
    # forward saw [2, 2]: [4, 6]; the forward hook adds 1.
    np.testing.assert_allclose(out.numpy(), [5.0, 7.0])
    assert log == [("first",), ("pre", True, [1.0, 1.0]), ("pre_double",),
                   ("post", [2.0, 2.0], [4.0, 6.0])]  # fmt: skip
    for h in (h1, h2, h3, h4):
        h.remove()
    h1.remove()  # removing twice is harmless
    log.clear()
    np.testing.assert_allclose(m(x).numpy(), [2.0, 3.0])
    assert log == []


def test_forward_hooks_with_kwargs_and_handle_as_context():
    m, seen = Scale(), []

    def pre(mod, args, kwargs):
        return args, {**kwargs, "shift": 10.0}

    def post(mod, args, kwargs, out):
        seen.append(kwargs.get("shift", "default"))

    with m.register_forward_pre_hook(pre, with_kwargs=True):
        m.register_forward_hook(post, with_kwargs=True)
        np.testing.assert_allclose(m(flow.tensor([1.0, 1.0])).numpy(), [12.0, 13.0])
    assert seen == [10.0]
    np.testing.assert_allclose(m(flow.tensor([1.0, 1.0])).numpy(), [2.0, 3.0])
    assert seen == [10.0, "default"]  # the pre-hook is gone: no keyword arguments now


def test_forward_hook_errors():
    m = Scale()
    with pytest.raises(TypeError, match="expected a callable hook, got int"):
        m.register_forward_hook(3)
    m.register_forward_pre_hook(lambda mod, a, k: "bad", with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"returned str; expected None or an \(args, kwargs\)"):
        m(flow.tensor([1.0, 1.0]))


def test_hooks_on_submodules_run_in_call_order():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    order = []
    for i, sub in enumerate(net):
        sub.register_forward_pre_hook(lambda mod, a, i=i: order.append(f"pre{i}"))
        sub.register_forward_hook(lambda mod, a, o, i=i: order.append(f"post{i}"))
    net.register_forward_hook(lambda mod, a, o: order.append("net"))
    net(flow.randn(4, 2))
    assert order == ["pre0", "post0", "pre1", "post1", "pre2", "post2", "net"]


def test_post_accumulate_grad_hook_sees_accumulated_grad():
    w = flow.tensor([1.0, 2.0], requires_grad=True)
    b = flow.tensor([0.5], requires_grad=True)
    seen = []

    def hook(t):
        seen.append((t is w, t.grad.numpy().tolist()))

    handle = w.register_post_accumulate_grad_hook(hook)
    (w * w).sum().backward()  # grad 2w = [2, 4]
    (w * 3).sum().backward()  # accumulated: [5, 7]
    assert seen == [(True, [2.0, 4.0]), (True, [5.0, 7.0])]
    handle.remove()
    (w + b).sum().backward()
    assert len(seen) == 2
    # A gradient hook changes what is accumulated; the post hook sees the result.
    w.grad = None
    w.register_hook(lambda g: g * 10)
    w.register_post_accumulate_grad_hook(hook)
    (w * 1).sum().backward()
    assert seen[-1] == (True, [10.0, 10.0])
    # flow.autograd.grad accumulates nothing, so no post hook runs.
    flow.autograd.grad((w * 1).sum(), [w])
    assert len(seen) == 3


def test_post_accumulate_grad_hook_errors():
    x = flow.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="only leaf tensors accumulate gradients"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="does not require grad"):
        flow.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="expected a callable"):
        x.register_post_accumulate_grad_hook(None)


def test_queue_callback_runs_at_end_of_backward():
    a = flow.tensor([1.0], requires_grad=True)
    b = flow.tensor([2.0], requires_grad=True)
    log = []

    def hook(t):
        log.append("a" if t is a else "b")
        if len(log) == 1:
            queue_callback(lambda: log.append(("end", a.grad.item(), b.grad.item())))

    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    (a * b).sum().backward()
    # The callback runs once, after both leaves have their gradients.
    assert sorted(log[:2]) == ["a", "b"] and log[2] == ("end", 2.0, 1.0) and len(log) == 3
    queue_callback(lambda: log.append("next"))  # outside backward: at the end of the next one
    assert log[-1] != "next"
    (a * 1).sum().backward()
    assert log[-1] == "next"
    with pytest.raises(TypeError, match="expected a callable"):
        queue_callback(1)


def test_post_accumulate_hook_inside_jit_on_outside_leaf_raises():
    w = flow.tensor([1.0, 2.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: None)

    @flow.jit
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="hook"):
        step(flow.tensor([1.0, 1.0]))


def test_against_torch_when_installed():
    try:
        import torch
    except ImportError:
        return  # the checks above are the reference; torch only adds a second one
    tw = torch.tensor([1.0, -2.0], requires_grad=True)
    fw = flow.tensor([1.0, -2.0], requires_grad=True)
    logs: dict[str, list] = {"torch": [], "flow": []}
    for name, w, mod in (("torch", tw, torch.nn.Linear(2, 1)), ("flow", fw, nn.Linear(2, 1))):
        log = logs[name]
        w.register_post_accumulate_grad_hook(lambda t, log=log: log.append(t.grad.tolist()))
        mod.register_forward_pre_hook(lambda m, a, log=log: log.append(len(a)))
        mod.register_forward_hook(lambda m, a, o, log=log: log.append(list(o.shape)))
        mod(w.reshape(1, 2) if name == "flow" else w.reshape(1, 2))
        (w * w).sum().backward()
        (w * 3).sum().backward()
    assert logs["flow"] == logs["torch"]
