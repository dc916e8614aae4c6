"""`Module.to_global(device, parallel= | model_parallel= | pipeline_parallel=True)` in one
process: what each flag plans (SBP of parameters, balanced stages), the values it computes,
and the errors for what it cannot do. Several ranks: tests/distributed/test_parallel_flags.py."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow.distributed.placement import placement, sbp
from flow.nn._parallel import balance, tensor_parallel_sbp
from flow.targets import RuntimeUnavailableError

S, B = sbp.split, sbp.broadcast
X = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)


def mlp():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


class Attention(nn.Module):
    def __init__(self, e=8):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(e, e), nn.Linear(e, e), nn.Linear(e, e)
        self.out_proj = nn.Linear(e, e)

    def forward(self, x):
        a = flow.softmax(self.q(x) @ self.k(x).transpose(0, 1), dim=-1)
        return self.out_proj(a @ self.v(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, ids):
        h = self.embed(ids)
        h = h + self.attn(h)
        return h + self.mlp(h)


def test_megatron_plan_pairs_column_and_row_linears():
    plan = tensor_parallel_sbp(Block())
    assert plan == {
        "embed.weight": S(1),
        **{f"attn.{n}.{p}": S(0) for n in "qkv" for p in ("weight", "bias")},
        "attn.out_proj.weight": S(1),
        "mlp.0.weight": S(0), "mlp.0.bias": S(0), "mlp.2.weight": S(1),
    }  # fmt: skip


def test_model_parallel_block_computes_the_single_device_values():
    ids = flow.tensor(np.array([1, 4, 4, 9]))
    flow.manual_seed(0)
    want = Block()(ids).numpy()
    flow.manual_seed(0)
    model = Block().to_global(flow.device("cpu"), model_parallel=True)
    assert model.attn.out_proj.weight.sbp == (S(1),) and model.attn.out_proj.bias.sbp == (B,)
    out = model(ids)
    assert out.is_global and out.placement == placement("cpu", [0])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_data_parallel_splits_inputs_and_broadcasts_parameters():
    want = mlp()(flow.tensor(X)).numpy()
    model = mlp()
    assert model.to_global(flow.device("cpu"), parallel=True) is model
    assert all(p.sbp == (B,) and p.placement == placement.all("cpu") for p in model.parameters())
    for x in (flow.tensor(X), flow.tensor(X).to_global(placement.all("cpu"), B)):
        out = model(x)
        assert out.sbp == (S(0),)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    model = mlp().to_global("cpu", parallel=True)  # a device string works too
    np.testing.assert_allclose(model(flow.tensor(X)).numpy(), want, rtol=1e-6)
    model.to_global(placement.all("cpu"), B)  # an explicit distribution replaces the flag's
    assert model(flow.tensor(X).to_global(placement.all("cpu"), B)).sbp != (S(0),)


def test_balance_minimizes_the_largest_stage():
    assert balance([112, 0, 136, 0, 27], 2) == [1, 4]
    assert balance([112, 0, 136, 0, 27], 4) == [1, 1, 1, 2]
    assert balance([5, 5, 5, 5], 2) == [2, 2]
    assert balance([10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2) == [1, 10]
    assert balance([3, 3, 3], 3) == [1, 1, 1]
    assert sum(balance([4, 9, 2, 7, 1], 3)) == 5


def test_pipeline_parallel_on_one_rank_is_one_stage():
    model = mlp().to_global(flow.device("cpu"), pipeline_parallel=True)
    stages = [m.to(nn.graph.GraphModule) for m in model]
    assert [s.stage_id for s in stages] == [0, 0, 0]
    assert all(s.placement == placement("cpu", [0]) for s in stages)
    np.testing.assert_allclose(model(flow.tensor(X)).numpy(), mlp()(flow.tensor(X)).numpy(),
                               rtol=1e-6)  # fmt: skip


def test_a_device_without_a_flag_says_what_is_needed():
    with pytest.raises(ValueError, match=r"a device says where, not how; pass parallel=True "
                                         r"\(data parallel\), model_parallel=True"):  # fmt: skip
        mlp().to_global(flow.device("cpu"))
    with pytest.raises(ValueError, match="choose one of parallel=True, model_parallel=True, "
                                         "pipeline_parallel=True; got parallel and "
                                         "pipeline_parallel"):  # fmt: skip
        mlp().to_global(flow.device("cpu"), parallel=True, pipeline_parallel=True)
    with pytest.raises(ValueError, match="chooses the sbp of every tensor"):
        mlp().to_global(flow.device("cpu"), B, parallel=True)
    with pytest.raises(ValueError, match="name the device"):
        mlp().to_global(parallel=True)
    with pytest.raises(TypeError, match="expected a flow.device or a flow.placement, got 3"):
        mlp().to_global(3, parallel=True)
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        mlp().to_global("tpu", parallel=True)


def test_cuda_placement_or_a_clear_error():
    if flow.cuda.is_available():
        model = mlp().to_global(flow.device("cuda"), parallel=True)
        assert model[0].weight.placement == placement.all("cuda")
    else:
        with pytest.raises(RuntimeUnavailableError, match=r"to_global\('cuda', parallel=True\): "
                                                          "no cuda device can run programs"):
            mlp().to_global(flow.device("cuda"), parallel=True)


def test_pipeline_needs_children_without_own_parameters():
    class Flat(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(flow.ones(3))
            self.fc = nn.Linear(3, 3)

    with pytest.raises(ValueError, match=r"Flat holds parameters of its own \(w\)"):
        Flat().to_global(flow.device("cpu"), pipeline_parallel=True)
    with pytest.raises(ValueError, match="ReLU has no child modules to cut into stages"):
        nn.ReLU().to_global(flow.device("cpu"), pipeline_parallel=True)


def test_two_d_placement_is_refused():
    mesh = placement("cpu", [[0]])
    with pytest.raises(ValueError, match="expected a device or a 1-D placement, got a 2-D one"):
        mlp().to_global(mesh, model_parallel=True)


def test_data_parallel_graph_needs_global_inputs():
    model = mlp().to_global(flow.device("cpu"), parallel=True)

    class Fwd(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    with pytest.raises(ValueError, match="inside nn.Graph / flow.jit its tensor arguments must be "
                                         "global; got a local tensor of shape"):  # fmt: skip
        Fwd()(flow.tensor(X))
    x = flow.tensor(X).to_global(placement.all("cpu"), B)
    np.testing.assert_allclose(Fwd()(x).numpy(), mlp()(flow.tensor(X)).numpy(), rtol=1e-5)
