"""flow-fuse-elementwise and flow.fused: what is fused, and fused programs compute like numpy.

Programs are compiled with IREE on the cpu and compared with numpy; the
pipeline's `FLOW_FUSION` knob is checked to switch fusion off (and to change
the compile cache key), and jit programs and a training step are compared
with eager mode under both settings.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from _lowering_build import function, module, tensor
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f32, i1, i32, i64

import flow
import flow.dialect as fd
import flow.nn as nn
from flow.lowering import expand_pipeline, run_pipeline, to_iree_text
from flow.lowering.fuse_elementwise import fuse_elementwise
from flow.targets import compile_flags, compile_mlir, load
from flow.targets.cache import cache_key


@pytest.fixture(autouse=True)
def _default_fusion(monkeypatch):
    """The tests assume the pipeline's default unless they set `FLOW_FUSION` themselves."""
    monkeypatch.delenv("FLOW_FUSION", raising=False)


def _fused_ops(mod) -> list[fd.FusedOp]:
    return [op for op in mod.walk() if isinstance(op, fd.FusedOp)]


def _run(mod, *args, spec="flow-to-iree-input"):
    """Lower `mod` with `spec` (ending in the hand-off), compile for the cpu, call it."""
    text = to_iree_text(run_pipeline(mod, spec, verify=True))
    name = mod.body.block.first_op.sym_name.data
    out = load(compile_mlir(text, "cpu"), "cpu")[name](*args)
    return [np.asarray(o) for o in out]


def _full(value, el, *shape):
    attr = FloatAttr(value, el) if el in (f32,) else IntegerAttr(value, el)
    return lambda b: b(fd.FullOp, value=attr, shape=list(shape))


# --------------------------------------------------------------------------- numerics


def test_chain_with_broadcasts_is_one_generic_and_equals_numpy(rng):
    """`tanh(exp((a*2 + b) * c - a) * 0.5 + b) + s - r` with b a row, s a scalar, r a column."""
    shape = [6, 5]

    def build(b, a, bias, c, s, r):
        rows = b(fd.BroadcastInDimOp, bias, dims=[1], shape=shape)
        y = b(fd.MulOp, a, _full(2.0, f32, *shape)(b))
        y = b(fd.MulOp, b(fd.AddOp, y, rows), c)
        y = b(fd.ExpOp, b(fd.SubOp, y, a))
        y = b(fd.TanhOp, b(fd.AddOp, b(fd.MulOp, y, _full(0.5, f32, *shape)(b)), rows))
        y = b(fd.AddOp, y, b(fd.BroadcastInDimOp, s, dims=[], shape=shape))
        return [b(fd.SubOp, y, b(fd.BroadcastInDimOp, r, dims=[0, 1], shape=shape))]

    types = [tensor(f32, 6, 5), tensor(f32, 5), tensor(f32, 6, 5), tensor(f32), tensor(f32, 6, 1)]
    mod = module(function("chain", types, build))
    fused = mod.clone()
    assert fuse_elementwise(fused) == 1
    (op,) = _fused_ops(fused)
    assert len(op.res) == 1 and len(op.inputs) == 5
    text = to_iree_text(run_pipeline(mod.clone(), "flow-to-iree-input"))
    assert text.count('"linalg.generic"') == 1 and '"linalg.fill"' not in text

    a, c = (rng.standard_normal((6, 5)).astype(np.float32) * 0.3 for _ in range(2))
    bias = rng.standard_normal(5).astype(np.float32)
    s = np.array(0.25, np.float32)
    r = rng.standard_normal((6, 1)).astype(np.float32)
    (got,) = _run(mod, a, bias, c, s, r)
    want = np.tanh(np.exp((a * 2 + bias) * c - a) * 0.5 + bias) + s - r
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_multi_output_fusion_equals_numpy(rng):
    """With multi-output=true, values used outside the group are extra results of one generic."""

    def build(b, x, y, z):
        e = b(fd.ExpOp, b(fd.MulOp, x, y))
        p = b(fd.CompareOp, e, z, direction="lt")
        out = b(fd.NegOp, b(fd.SelectOp, p, e, z))
        s = b(fd.ReduceOp, e, kind="sum", dims=[1])  # e is also used outside: extra result
        return [out, p, s]

    mod = module(function("multi", [tensor(f32, 4, 8)] * 3, build))
    fused = mod.clone()
    assert fuse_elementwise(fused, multi_output=True) == 1
    (op,) = _fused_ops(fused)
    assert [str(r.type) for r in op.res] == ["tensor<4x8xf32>", "tensor<4x8xi1>", "tensor<4x8xf32>"]
    spec = "flow-fuse-elementwise{multi-output=true},flow-to-iree-input"
    text = to_iree_text(run_pipeline(mod.clone(), spec))
    assert text.count('"linalg.generic"') == 2  # the fused one and the reduction

    x, y, z = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3))
    got = _run(mod, x, y, z, spec=spec)
    e = np.exp(x * y)
    want = [-np.where(e < z, e, z), e < z, e.sum(1)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_casts_compares_selects_and_integers_equal_numpy(rng):
    def build(b, x, n, m):
        xi = b(fd.CastOp, x, element_type=i32)  # truncates toward zero
        q = b(fd.DivOp, b(fd.AddOp, xi, n), b(fd.MaximumOp, m, _full(1, i32, 7)(b)))
        odd = b(fd.CastOp, b(fd.AndOp, q, _full(1, i32, 7)(b)), element_type=i1)
        big = b(fd.CompareOp, b(fd.AbsOp, q), _full(2, i32, 7)(b), direction="ge")
        either = b(fd.OrOp, odd, big)
        out = b(fd.SelectOp, either, b(fd.CastOp, q, element_type=f32), x)
        return [b(fd.CastOp, out, element_type=i64), either]

    mod = module(function("ints", [tensor(f32, 7), tensor(i32, 7), tensor(i32, 7)], build))
    fused = mod.clone()
    assert fuse_elementwise(fused) == 3  # `q` and `either` are used several times: groups end
    x = (rng.standard_normal(7) * 6).astype(np.float32)
    n = rng.integers(-5, 5, 7).astype(np.int32)
    m = rng.integers(-3, 4, 7).astype(np.int32)
    got = _run(mod, x, n, m)
    xi = np.trunc(x).astype(np.int32) + n
    q = (np.sign(xi) * (np.abs(xi) // np.maximum(m, 1))).astype(np.int32)  # C division
    either = ((q & 1) != 0) | (np.abs(q) >= 2)
    want = np.where(either, q.astype(np.float32), x).astype(np.int64)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], either)


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_fused_equal_unfused(seed):
    """Random elementwise programs with reductions and broadcasts in between: every fusion mode
    gives IR that IREE compiles (values defined before use) and the same numbers."""
    rng = np.random.default_rng(seed)
    shape = [3, 4]

    def build(b, x, y):
        full, row = [x, y], []
        for _ in range(14):
            k = rng.integers(0, 6)
            if k == 0 and len(full) > 2:
                row.append(b(fd.ReduceOp, full[rng.integers(len(full))], kind="max", dims=[1]))
            elif k == 1 and row:
                src = row[rng.integers(len(row))]
                full.append(b(fd.BroadcastInDimOp, src, dims=[0], shape=shape))
            elif k == 2 and row:
                row.append(b(fd.TanhOp, row[rng.integers(len(row))]))
            elif k == 3:
                full.append(b(fd.TanhOp, full[rng.integers(len(full))]))
            else:
                op = (fd.AddOp, fd.MulOp, fd.SubOp, fd.MaximumOp)[rng.integers(4)]
                i, j = rng.integers(len(full), size=2)
                full.append(b(op, full[i], full[j]))
        return full[2:][-3:] + row[-1:]

    mod = module(function("rand", [tensor(f32, 3, 4)] * 2, build))
    x, y = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    outs = [
        _run(mod.clone(), x, y, spec=spec)
        for spec in ("flow-lower-to-linalg", "flow-fuse-elementwise,flow-lower-to-linalg",
                     "flow-fuse-elementwise{multi-output=true},flow-lower-to-linalg")
    ]  # fmt: skip
    for got in outs[1:]:
        for g, w in zip(got, outs[0]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- the pipeline knob


def test_fusion_is_in_the_pipeline_and_flow_fusion_0_turns_it_off(monkeypatch):
    names = [s.name for s in expand_pipeline("flow-to-iree-input")]
    assert "flow-fuse-elementwise" in names
    assert names.index("flow-fuse-elementwise") < names.index("flow-lower-to-linalg")
    for off in ("0", "off", "false"):
        monkeypatch.setenv("FLOW_FUSION", off)
        assert "flow-fuse-elementwise" not in [
            s.name for s in expand_pipeline("flow-to-iree-input")
        ]
        # a pass named explicitly still runs
        assert [s.name for s in expand_pipeline("flow-fuse-elementwise")] == [
            "flow-fuse-elementwise"
        ]
    monkeypatch.setenv("FLOW_FUSION", "1")
    assert "flow-fuse-elementwise" in [s.name for s in expand_pipeline("flow-to-iree-input")]


def test_the_compile_cache_key_differs_with_fusion_on_and_off(monkeypatch, rng):
    def f(a, b):
        return ((a * 2 + b) * a - b).exp()

    a, b = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    lowered = flow.jit(f).lower(a, b)
    texts = {}
    for knob in ("1", "0"):
        monkeypatch.setenv("FLOW_FUSION", knob)
        texts[knob] = to_iree_text(run_pipeline(lowered.module.clone(), "flow-to-iree-input"))
    assert texts["1"].count('"linalg.generic"') == 1
    assert texts["0"].count('"linalg.generic"') == 5
    flags = compile_flags("cpu")
    assert cache_key(texts["1"], "cpu", flags) != cache_key(texts["0"], "cpu", flags)


def test_pipeline_fused_ops_of_a_training_step_have_one_result():
    """Multi-result generics trip IREE 3.13's transpose propagation: the pipeline makes none."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
    opt = flow.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    x = np.ones((4, 6), np.float32)
    mod = flow.jit(step).lower(x, np.zeros(4, np.int64)).module.clone()
    n_flow = sum(1 for op in mod.walk() if isinstance(op, fd.ElementwiseOp))
    made = fuse_elementwise(mod)
    mod.verify()
    assert made > 0
    assert all(len(op.res) == 1 for op in _fused_ops(mod))
    left = sum(1 for op in mod.walk() if isinstance(op, fd.ElementwiseOp)
               and not isinstance(op.parent_op(), fd.FusedOp))  # fmt: skip
    assert left + made < n_flow / 2, (n_flow, made, left)


# --------------------------------------------------------------------------- jit == eager, both ways


@pytest.fixture(params=["1", "0"], ids=["fusion-on", "fusion-off"])
def fusion(request, monkeypatch):
    monkeypatch.setenv("FLOW_FUSION", request.param)
    return request.param


JIT_CASES = {
    "gelu_tanh": lambda x, y: nn.functional.gelu(x * y + 1.0, approximate="tanh"),
    "softmax": lambda x, y: flow.softmax(x - y, 1),
    "layer_norm": lambda x, y: nn.functional.layer_norm(x * 2 + y, (5,)),
    "where_clamp": lambda x, y: flow.where(x > y, flow.clamp(x, -0.5, 0.5), y.exp() - 1),
    "sigmoid_silu": lambda x, y: flow.sigmoid(x) * nn.functional.silu(y) / (1 + x * x),
    "cast_round_trip": lambda x, y: (
        (x * 10).to(flow.int32).to(flow.float32) + (x > 0).to(flow.float32)
    ),
    "pow_abs": lambda x, y: flow.pow(flow.abs(x) + 0.5, y) - x.abs().sqrt(),
}


@pytest.mark.parametrize("name", sorted(JIT_CASES))
def test_jit_equals_eager(name, fusion, rng):
    fn = JIT_CASES[name]
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = rng.standard_normal((4, 5)).astype(np.float32)
    eager = fn(flow.tensor(x), flow.tensor(y)).numpy()
    jit = flow.jit(lambda a, b: fn(a, b))(x, y).numpy()
    np.testing.assert_allclose(
        jit, eager, rtol=1e-5, atol=1e-5, err_msg=f"{name} FLOW_FUSION={fusion}"
    )


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def test_mlp_training_step_equals_eager(fusion):
    flow.manual_seed(0)
    eager = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                          nn.Linear(16, 4))  # fmt: skip
    graph_model = copy.deepcopy(eager)
    opt_e = flow.optim.AdamW(eager.parameters(), lr=1e-2)
    step = _Step(graph_model, flow.optim.AdamW(graph_model.parameters(), lr=1e-2))
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((8, 10)).astype(np.float32)
        y = rng.integers(0, 4, 8).astype(np.int64)
        opt_e.zero_grad()
        loss_e = nn.functional.cross_entropy(eager(flow.tensor(x)), flow.tensor(y))
        loss_e.backward()
        opt_e.step()
        np.testing.assert_allclose(step(x, y).numpy(), loss_e.numpy(), rtol=1e-4, atol=1e-5)
    for key, value in eager.state_dict().items():
        np.testing.assert_allclose(graph_model.state_dict()[key].numpy(), value.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=key)  # fmt: skip
