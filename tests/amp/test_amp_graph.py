"""nn.Graph with config.enable_amp and a GradScaler: the scaling runs inside the compiled step."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn


def _setup(seed=0):
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt


def _graph(model, opt, *, amp, scaler=None):
    loss_fn = nn.CrossEntropyLoss()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            if amp:
                self.config.enable_amp(True)
            if scaler is not None:
                self.set_grad_scaler(scaler)

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()
            return loss

    return G()


def _data(seed, scale=1.0):
    rng = np.random.default_rng(seed)
    x = flow.tensor((rng.standard_normal((8, 16)) * scale).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 8).astype(np.int64))
    return x, y


def test_amp_graph_tracks_f32_losses():
    m32, o32 = _setup()
    mlo, olo = _setup()
    g32 = _graph(m32, o32, amp=False)
    scaler = flow.amp.GradScaler(init_scale=2.0**12, growth_interval=1000)
    glo = _graph(mlo, olo, amp=True, scaler=scaler)
    for step in range(4):
        x, y = _data(step)
        l32, llo = float(g32(x, y).item()), float(glo(x, y).item())
        assert abs(l32 - llo) < 3e-2 * max(1.0, abs(l32)), (step, l32, llo)
    assert scaler.get_scale() == 2.0**12
    for a, b in zip(m32.parameters(), mlo.parameters()):
        assert b.dtype is flow.float32
        np.testing.assert_allclose(b.numpy(), a.numpy(), atol=3e-2)


def test_amp_graph_skips_step_on_inf_like_eager():
    """Compiled step vs the eager GradScaler path, step by step: finite, inf, inf, finite,
    finite (growth_interval=2); an inf step leaves parameters and momentum unchanged."""
    model, opt = _setup()
    scaler = flow.amp.GradScaler(init_scale=2.0**10, growth_interval=2)
    g = _graph(model, opt, amp=True, scaler=scaler)
    m2, o2 = _setup()
    s2 = flow.amp.GradScaler(init_scale=2.0**10, growth_interval=2)
    loss_fn = nn.CrossEntropyLoss()
    inf = np.float32(np.inf)
    scales = []
    for seed, sc in ((0, 1.0), (1, inf), (1, inf), (2, 1.0), (3, 1.0)):
        x, y = _data(seed, sc)
        before = [p.numpy().copy() for p in model.parameters()]
        state = [s["momentum_buffer"].numpy().copy() for s in opt.state.values()]
        g(x, y)
        if sc is inf:
            for p, b in zip(model.parameters(), before):
                np.testing.assert_array_equal(p.numpy(), b)  # the update was skipped
            for s, b in zip(opt.state.values(), state):
                np.testing.assert_array_equal(s["momentum_buffer"].numpy(), b)
        with flow.autocast("cpu", dtype=flow.bfloat16):
            loss = loss_fn(m2(x), y)
        s2.scale(loss).backward()
        s2.step(o2)
        s2.update()
        o2.zero_grad()
        assert scaler.get_scale() == s2.get_scale()
        scales.append(scaler.get_scale())
        for a, b in zip(m2.parameters(), model.parameters()):
            np.testing.assert_allclose(b.numpy(), a.numpy(), atol=3e-2)
    assert scales == [2.0**10, 2.0**9, 2.0**8, 2.0**8, 2.0**9]


def test_oneflow_amp_doc_example_runs_on_cpu():
    """OneFlow's AMP tutorial (cookies/amp.md) with DEVICE = "cpu" and fewer steps."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).to("cpu")
    model.train()
    loss_fn = nn.CrossEntropyLoss().to("cpu")
    optimizer = flow.optim.SGD(model.parameters(), lr=1e-3)
    start = [p.numpy().copy() for p in model.parameters()]

    class CustomGraph(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.loss_fn = loss_fn
            self.add_optimizer(optimizer)
            self.config.enable_amp(True)
            grad_scaler = flow.amp.GradScaler(init_scale=2**12, growth_factor=2.0,
                                              backoff_factor=0.5, growth_interval=1000)
            self.set_grad_scaler(grad_scaler)
            self.scaler = grad_scaler

        def build(self, x, y):
            y_pred = self.model(x)
            loss = self.loss_fn(y_pred, y)
            loss.backward()
            return y_pred

    graph_model = CustomGraph()
    for _ in range(3):
        x = flow.randn(128, 256).to("cpu")
        y = flow.ones(128, dtype=flow.int64).to("cpu")
        y_pred = graph_model(x, y)
    assert y_pred.dtype is flow.bfloat16  # the last Linear ran in bf16
    assert graph_model.scaler.get_scale() == 2.0**12  # finite steps, no growth yet
    for p, s in zip(model.parameters(), start):
        assert p.dtype is flow.float32 and not np.array_equal(p.numpy(), s)


def test_float16_amp_program_on_portable_vulkan_is_refused():
    """An f16 autocast program for a Vulkan architecture without 16-bit storage is refused
    with the dtypes it supports, before IREE compiles it."""
    from flow.lowering import run_pipeline, to_iree_text
    from flow.targets import UnsupportedError, compile_mlir

    @flow.autocast("cpu", dtype=flow.float16)
    def f(a, b):
        return flow.matmul(a, b).sum()

    a, b = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
    lowered = flow.jit(f).lower(a, b)
    text = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))
    try:
        compile_mlir(text, "vulkan", use_cache=False)
    except UnsupportedError as err:
        assert "float16 (no 16-bit storage" in str(err)
        assert "Dtypes it supports: float32, int32, int64, bfloat16" in str(err)
    else:
        raise AssertionError("float16 compiled for the portable Vulkan architecture")


@pytest.mark.parametrize("dtype,adam", [(flow.bfloat16, True), (flow.float16, False)])
def test_amp_graph_skip_keeps_optimizer_state(dtype, adam):
    """Adam's moments and step count, too, are unchanged by a skipped compiled step; f16
    activations (f32 parameters) compile and run on the cpu as well."""
    model, _ = _setup()
    opt = (flow.optim.Adam(model.parameters(), lr=1e-2) if adam
           else flow.optim.SGD(model.parameters(), lr=0.1))  # fmt: skip
    scaler = flow.amp.GradScaler(init_scale=2.0**8)
    g = _graph(model, opt, amp=False, scaler=scaler)
    g.config.enable_amp(True, dtype=dtype)
    first = float(g(*_data(0)).item())
    assert np.isfinite(first)
    def state_of():
        return {(i, k): v.numpy().copy() for i, s in enumerate(opt.state.values())
                for k, v in s.items()}  # fmt: skip

    state = state_of()
    params = [p.numpy().copy() for p in model.parameters()]
    assert not np.isfinite(float(g(*_data(1, np.float32(np.inf))).item()))
    assert scaler.get_scale() == 2.0**7
    for p, b in zip(model.parameters(), params):
        np.testing.assert_array_equal(p.numpy(), b)
    after = state_of()
    assert after.keys() == state.keys() and (len(state) == 12 if adam else True)
    for k, v in after.items():
        np.testing.assert_array_equal(v, state[k])
    if adam:
        assert [float(s["step"].item()) for s in opt.state.values()] == [1.0] * 4
    g(*_data(2))
    assert not np.array_equal(next(iter(model.parameters())).numpy(), params[0])


def test_enable_amp_after_a_call_traces_a_new_step():
    model, opt = _setup()
    g = _graph(model, opt, amp=False)
    x, y = _data(0)
    g(x, y)
    assert "bf16" not in g.ir()
    g.config.enable_amp(True)
    g(x, y)
    assert "bf16" in g.ir()


def test_graph_state_dict_carries_the_grad_scaler(tmp_path):
    """The scale and its growth counter are part of the graph's state: a graph resumed from
    `flow.save(graph.state_dict())` scales, skips and grows as the graph that went on."""
    def run(scaler, g, steps):
        out = []
        for seed, sc in steps:
            x, y = _data(seed, sc)
            out.append(float(g(x, y).item()))
        return out, scaler.get_scale()

    inf = np.float32(np.inf)
    first, rest = [(0, 1.0), (1, inf), (2, 1.0)], [(3, 1.0), (4, 1.0), (1, inf), (5, 1.0)]
    model, opt = _setup()
    scaler = flow.amp.GradScaler(init_scale=2.0**10, growth_interval=2)
    g = _graph(model, opt, amp=True, scaler=scaler)
    run(scaler, g, first)
    state = g.state_dict()
    assert state["_grad_scaler"]["scale"] == 2.0**9
    assert state["_grad_scaler"]["_growth_tracker"] == 1
    flow.save(state, str(tmp_path / "ckpt"))
    want, want_scale = run(scaler, g, rest)

    model2, opt2 = _setup(seed=7)  # other weights: all of them come from the checkpoint
    scaler2 = flow.amp.GradScaler(init_scale=2.0**3, growth_interval=2)
    g2 = _graph(model2, opt2, amp=True, scaler=scaler2)
    g2.load_state_dict(flow.load(str(tmp_path / "ckpt")))
    assert scaler2.get_scale() == 2.0**9
    got, got_scale = run(scaler2, g2, rest)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got_scale == want_scale == 2.0**9  # grew once (2 finite steps), then halved
    for a, b in zip(model.parameters(), model2.parameters()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6)
