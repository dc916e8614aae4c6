"""flow.utils.checkpoint: gradients equal those without checkpointing (and numpy's), the
block really runs again in the backward pass (eager: counted; traced: its ops twice in the
IR, kept apart from the forward ones through IREE's CSE), dropout masks replayed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.utils.checkpoint import checkpoint


def _mlp(dropout: float = 0.0) -> nn.Module:
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Dropout(dropout), nn.Linear(12, 3))


def _grads(model: nn.Module, x: flow.Tensor) -> list[np.ndarray]:
    out = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    return out


def _close(a, b, atol=1e-6) -> None:
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=atol)


class _Counted:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


def test_eager_gradients_match_numpy_and_the_block_runs_again():
    model = _mlp()
    x = flow.tensor(np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32),
                    requires_grad=True)  # fmt: skip
    block = _Counted(model)
    y = checkpoint(block, x, use_reentrant=False)
    assert block.calls == 1 and y.grad_fn is not None
    (y * y).sum().backward()
    assert block.calls == 2  # recomputed in the backward pass
    got = _grads(model, x)
    # numpy reference
    w1, b1, w2, b2 = (p.numpy() for p in model.parameters())
    xv = x.numpy()
    h = np.tanh(xv @ w1.T + b1)
    out = h @ w2.T + b2
    g_out = 2 * out
    g_h = g_out @ w2 * (1 - h * h)
    want = [g_h @ w1, g_h.T @ xv, g_h.sum(0), g_out.T @ h, g_out.sum(0)]
    _close(got, want, atol=1e-5)


def test_eager_dropout_masks_replayed_with_preserve_rng_state():
    model = _mlp(0.5)
    x = flow.randn(8, 6, requires_grad=True)
    flow.manual_seed(7)
    (model(x) ** 2).sum().backward()
    plain = _grads(model, x)
    flow.manual_seed(7)
    (checkpoint(model, x, use_reentrant=False) ** 2).sum().backward()
    _close(_grads(model, x), plain)
    flow.manual_seed(7)
    (checkpoint(model, x, use_reentrant=False, preserve_rng_state=False) ** 2).sum().backward()
    other = _grads(model, x)
    assert not np.allclose(other[1], plain[1])  # a new mask in the recomputation


def test_non_tensor_args_kwargs_and_multiple_outputs():
    flow.manual_seed(2)
    w = flow.randn(5, 5, requires_grad=True)
    a = flow.randn(3, 5, requires_grad=True)
    b = flow.randn(3, 5, requires_grad=True)

    def fn(x, scale, *, other, mode="sum"):
        h = flow.tanh(x @ w) * scale
        return {"h": h, "mix": h * other if mode == "sum" else h}, 42

    def loss(out):
        return (out[0]["h"] ** 2).sum() + out[0]["mix"].sum()

    loss(fn(a, 3.0, other=b)).backward()
    plain = [t.grad.numpy().copy() for t in (w, a, b)]
    for t in (w, a, b):
        t.grad = None
    out = checkpoint(fn, a, 3.0, other=b, use_reentrant=False)
    assert out[1] == 42
    loss(out).backward()
    _close([t.grad.numpy() for t in (w, a, b)], plain)


def test_an_unused_output_and_autograd_grad():
    w = flow.randn(4, 4, requires_grad=True)
    x = flow.randn(2, 4, requires_grad=True)
    y1, y2 = checkpoint(lambda t: (t @ w, flow.sin(t @ w)), x, use_reentrant=False)
    gw, gx = flow.autograd.grad(y2.sum(), [w, x])
    c = np.cos(x.numpy() @ w.numpy())
    np.testing.assert_allclose(gw.numpy(), x.numpy().T @ c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx.numpy(), c @ w.numpy().T, rtol=1e-5, atol=1e-6)


def test_nested_checkpoints():
    model = _mlp()
    inner = _Counted(model[2:])
    x = flow.randn(4, 6, requires_grad=True)
    (model(x) ** 2).sum().backward()
    plain = _grads(model, x)

    def outer(t):
        return checkpoint(inner, model[1](model[0](t)), use_reentrant=False)

    (checkpoint(outer, x, use_reentrant=False) ** 2).sum().backward()
    # forward (1), outer's recomputation (2), inner's own recomputation (3)
    assert inner.calls == 3
    _close(_grads(model, x), plain)


def test_reentrant_rules_and_errors():
    x = flow.randn(2, 3, requires_grad=True)
    with pytest.raises(ValueError, match="use_reentrant=False for keyword arguments"):
        checkpoint(lambda t, k=1: t * k, x, k=2, use_reentrant=True)
    with pytest.warns(UserWarning, match="pass use_reentrant explicitly"):
        y = checkpoint(lambda t: t * 2, x)
    y.sum().backward()
    assert x.grad.tolist() == [[2.0] * 3] * 2
    w = flow.randn(3, 3, requires_grad=True)
    with pytest.warns(UserWarning, match="none of the inputs have requires_grad"):
        y = checkpoint(lambda t: t @ w, flow.randn(2, 3), use_reentrant=True)
    assert not y.requires_grad  # PyTorch's reentrant rule
    with pytest.raises(TypeError, match="expected a callable"):
        checkpoint(3, x, use_reentrant=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with flow.no_grad():
            assert not checkpoint(lambda t: t * 2, x, use_reentrant=False).requires_grad


def test_eager_batchnorm_updates_running_stats_twice_as_pytorch():
    flow.manual_seed(3)
    bn = nn.BatchNorm1d(4)
    x = flow.randn(6, 4, requires_grad=True)
    checkpoint(bn, x, use_reentrant=False).sum().backward()
    mean = x.numpy().mean(0)
    once = 0.1 * mean
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.9 * once + 0.1 * mean, rtol=1e-5)


# --------------------------------------------------------------------------- traced


def _jit_step(model, ck: bool, **kw):
    def step(x):
        x = x.requires_grad_()
        y = checkpoint(model, x, use_reentrant=False, **kw) if ck else model(x)
        return flow.autograd.grad((y * y).sum(), [x] + list(model.parameters()))

    return flow.jit(step)


def _after_iree_cse(fn, x) -> str:
    from iree.compiler import ir, passmanager

    from flow.lowering import run_pipeline, to_iree_text

    text = to_iree_text(run_pipeline(fn.lower(x).module.clone(), "flow-to-iree-input"))
    with ir.Context():
        mod = ir.Module.parse(text)
        pm = passmanager.PassManager.parse("builtin.module(func.func(canonicalize,cse))")
        pm.run(mod.operation)
        return str(mod)


def test_jit_gradients_equal_and_the_recomputation_survives_cse():
    model = _mlp(0.5)
    x = flow.randn(5, 6)
    plain, ck = _jit_step(model, False), _jit_step(model, True)
    flow.manual_seed(4)
    want = [g.numpy() for g in plain(x)]
    flow.manual_seed(4)
    got = [g.numpy() for g in ck(x)]
    _close(got, want, atol=1e-5)  # dropout inside: the traced keys are replayed
    flow.manual_seed(4)
    eager_x = x.clone().requires_grad_()
    (model(eager_x) ** 2).sum().backward()
    _close(got, _grads(model, eager_x), atol=1e-5)
    a, b = plain.lower(x).as_text(), ck.lower(x).as_text()
    assert a.count("flow.matmul") == 6 and b.count("flow.matmul") == 8  # 2 forward again
    assert b.count("flow.random_bits") == 2 and "optimization_barrier" not in a
    # what the recomputation reads from before: the input, the dropout key, the 4 parameters
    assert b.count("flow.optimization_barrier") == 6
    # IREE's CSE would merge an unprotected recomputation with the forward ops
    fa, fb = _after_iree_cse(plain, x), _after_iree_cse(ck, x)
    assert fb.count("util.optimization_barrier") == 6
    assert fb.count('"reduction"]') > fa.count('"reduction"]')


def test_jit_without_preserved_rng_draws_new_keys():
    model = _mlp(0.5)
    x = flow.randn(5, 6)
    text = _jit_step(model, True, preserve_rng_state=False).lower(x).as_text()
    # a new key for the recomputation, and barriers on the input and the 4 parameters only
    assert text.count("rng_key") >= 2 and text.count("flow.optimization_barrier") == 5


def test_traced_block_updating_module_state_is_refused():
    bn = nn.BatchNorm1d(6)
    step = _jit_step(nn.Sequential(nn.Linear(6, 6), bn), True)
    with pytest.raises(RuntimeError, match=r"checkpoint\(.*updates a tensor of shape \[6\]"):
        step(flow.randn(4, 6))
    bn.eval()
    step(flow.randn(4, 6))  # eval mode: nothing updated
