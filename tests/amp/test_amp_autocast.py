"""flow.autocast op dtypes (eager and jit), gradients to f32 params, eager GradScaler."""

from __future__ import annotations

import numpy as np
import pytest

import flow


def _ops(x, w):
    y = flow.matmul(x, w)
    return y, flow.softmax(y, dim=-1), flow.nn.functional.linear(x, w.T), flow.bmm(x[None], w[None])


def test_autocast_dtypes_eager_and_jit():
    x, w = flow.randn(4, 8), flow.randn(8, 3)
    with flow.autocast("cpu", dtype=flow.bfloat16):
        eager = _ops(x, w)
        traced = flow.jit(_ops)(x, w)
    for outs in (eager, traced):
        assert [o.dtype for o in outs] == [flow.bfloat16, flow.float32, flow.bfloat16,
                                           flow.bfloat16]  # fmt: skip
    ref = x.numpy() @ w.numpy()
    np.testing.assert_allclose(eager[0].float().numpy(), ref, rtol=3e-2, atol=5e-2)
    np.testing.assert_allclose(traced[1].numpy(), eager[1].numpy(), rtol=5e-2, atol=2e-3)  # bf16
    assert flow.matmul(x, w).dtype is flow.float32  # off again outside
    with flow.autocast("cpu", dtype=flow.bfloat16), flow.autocast("cpu", enabled=False):
        assert flow.matmul(x, w).dtype is flow.float32


def test_autocast_gradients_reach_f32_params():
    lin = flow.nn.Linear(8, 3)
    x = flow.randn(5, 8)

    @flow.autocast(device_type="cpu", dtype=flow.bfloat16)
    def loss_of(x):
        return flow.nn.functional.log_softmax(lin(x), dim=-1).sum()

    loss_of(x).backward()
    assert lin.weight.grad.dtype is flow.float32
    xs, w, b = x.numpy(), lin.weight.numpy(), lin.bias.numpy()
    z = xs @ w.T + b
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = ((1 - 3 * p).T @ xs)  # d/dz of sum(log_softmax) = 1 - 3 softmax
    np.testing.assert_allclose(lin.weight.grad.numpy(), ref, rtol=5e-2, atol=5e-2)


def test_autocast_bad_arguments():
    with pytest.raises(ValueError, match="device_type 'cpu' or 'cuda'"):
        flow.autocast("tpu")
    with pytest.raises(ValueError, match="bfloat16 or flow.float16"):
        flow.autocast("cpu", dtype=flow.float64)


def test_grad_scaler_eager_skip_and_growth():
    w = flow.nn.Parameter(flow.ones(3))
    opt = flow.optim.SGD([w], lr=0.5)
    scaler = flow.amp.GradScaler(init_scale=8.0, growth_interval=2)
    scaler.scale((w * 2).sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 16.0)  # scaled gradient
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.numpy(), 0.0)  # 1 - 0.5 * 2 (unscaled)
    assert scaler.get_scale() == 8.0
    opt.zero_grad()
    scaler.scale((w * float("inf")).sum()).backward()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.numpy(), 0.0)  # skipped
    assert scaler.get_scale() == 4.0
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(w.sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0  # grown after growth_interval finite steps
    sd = scaler.state_dict()
    assert sd["scale"] == 8.0 and sd["_growth_tracker"] == 0
    static = flow.amp.StaticGradScaler(4.0)
    static.scale((w * float("nan")).sum()).backward()
    static.step(opt)
    static.update()
    assert static.get_scale() == 4.0


def test_autocast_conv_and_f32_ops():
    x, w, b = flow.randn(2, 3, 6, 6), flow.randn(4, 3, 3, 3), flow.randn(4)
    h, tgt = flow.randn(5, 8), flow.tensor(np.array([0, 1, 2, 3, 4]))
    with flow.autocast("cpu"):  # cpu: bfloat16 by default
        y = flow.nn.functional.conv2d(x, w, b, padding=1)
        z = flow.matmul(h, flow.randn(8, 8))
        ce = flow.nn.functional.cross_entropy(z, tgt)
        ln = flow.nn.functional.layer_norm(z, (8,))
        lsm = flow.nn.functional.log_softmax(z, dim=-1)
        m = z.mean()
    assert y.dtype is flow.bfloat16 and z.dtype is flow.bfloat16
    assert [t.dtype for t in (ce, ln, lsm, m)] == [flow.float32] * 4
    ref = flow.nn.functional.conv2d(x, w, b, padding=1).numpy()
    np.testing.assert_allclose(y.float().numpy(), ref, rtol=5e-2, atol=1e-1)


def test_jit_program_depends_on_autocast_state():
    f = flow.jit(lambda a, b: flow.matmul(a, b))
    a, b = flow.randn(3, 4), flow.randn(4, 2)
    assert f(a, b).dtype is flow.float32
    with flow.autocast("cpu", dtype=flow.bfloat16):
        assert f(a, b).dtype is flow.bfloat16
    with flow.autocast("cpu", dtype=flow.float16):
        assert f(a, b).dtype is flow.float16
    assert f(a, b).dtype is flow.float32


def test_grad_scaler_matches_torch_where_installed():
    """Scale sequence and parameters over finite / inf / nan steps vs torch's GradScaler."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(5).astype(np.float32)
    mults = [1.0, float("inf"), 2.0, 1.0, float("nan"), 3.0, 1.0, 1.0]
    w = flow.nn.Parameter(flow.tensor(w0))
    opt = flow.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = flow.amp.GradScaler(init_scale=16.0, growth_factor=4.0, backoff_factor=0.25,
                                 growth_interval=2)  # fmt: skip
    tw = torch.nn.Parameter(torch.tensor(w0))
    topt = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    tscaler = torch.amp.GradScaler("cpu", init_scale=16.0, growth_factor=4.0,
                                   backoff_factor=0.25, growth_interval=2)  # fmt: skip
    for m in mults:
        opt.zero_grad()
        scaler.scale((w * w * m).sum()).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        topt.zero_grad()
        tscaler.scale((tw * tw * m).sum()).backward()
        tscaler.unscale_(topt)
        tscaler.step(topt)
        tscaler.update()
        assert scaler.get_scale() == tscaler.get_scale()
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert scaler.state_dict()["_growth_tracker"] == tscaler.state_dict()["_growth_tracker"]


def test_grad_scaler_bad_input():
    with pytest.raises(ValueError, match="backoff_factor < 1"):
        flow.amp.GradScaler(backoff_factor=2.0)
    with pytest.raises(ValueError, match="growth_interval >= 1"):
        flow.amp.GradScaler(growth_interval=0)
    w = flow.nn.Parameter(flow.ones(2))
    opt = flow.optim.SGD([w], lr=0.1)
    scaler = flow.amp.GradScaler()
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already called on this optimizer"):
        scaler.unscale_(opt)
    with pytest.raises(TypeError, match="expected a tensor or a list/tuple"):
        scaler.scale(3.0)

    class G(flow.nn.Graph):
        def build(self, x):
            return x

    with pytest.raises(TypeError, match="expected a flow.amp.GradScaler, got float"):
        G().set_grad_scaler(2.0)
    off = flow.amp.GradScaler(enabled=False)
    assert off.get_scale() == 1.0 and off.state_dict() == {}
