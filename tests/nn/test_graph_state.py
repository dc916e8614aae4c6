"""nn.Graph.state_dict / load_state_dict (resuming a compiled training loop exactly) and
print(graph) (OneFlow's module tree with each block's inputs and outputs)."""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn as nn

RNG = np.random.default_rng(11)
X = RNG.standard_normal((8, 4)).astype(np.float32)
Y = RNG.standard_normal((8, 1)).astype(np.float32)
INIT = {
    "0.weight": RNG.standard_normal((6, 4)).astype(np.float32) * 0.5,
    "0.bias": RNG.standard_normal(6).astype(np.float32) * 0.1,
    "2.weight": RNG.standard_normal((1, 6)).astype(np.float32) * 0.5,
    "2.bias": np.zeros(1, np.float32),
}


class TrainGraph(nn.Graph):
    def __init__(self, model, optimizer, lr_sch=None):
        super().__init__(sync_compile=True)
        self.model = model
        self.loss_fn = nn.MSELoss()
        self.add_optimizer(optimizer, lr_sch=lr_sch)

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def _model(seed_values=True):
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    if seed_values:
        model.load_state_dict({k: flow.tensor(v) for k, v in INIT.items()})
    return model


OPTIMIZERS = {
    "sgd_momentum": lambda ps: flow.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: flow.optim.Adam(ps, lr=0.01),
}


def _graph(make_opt, seed_values=True):
    model = _model(seed_values)
    optimizer = make_opt(model.parameters())
    lr_sch = flow.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return TrainGraph(model, optimizer, lr_sch), model


def _train(graph, steps):
    x, y = flow.tensor(X), flow.tensor(Y)
    return [graph(x, y).numpy().copy() for _ in range(steps)]


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_resuming_from_a_saved_graph_state_gives_the_same_training(opt_name, tmp_path):
    make_opt = OPTIMIZERS[opt_name]
    reference, ref_model = _graph(make_opt)
    ref_losses = _train(reference, 6)

    first, _ = _graph(make_opt)
    losses = _train(first, 3)
    path = tmp_path / "graph_state"
    saved = first.state_dict()
    # tensors only where state has one per parameter (OneFlow's layout, which its distributed
    # save splits tensor by tensor): a learning rate is a number, as in PyTorch
    groups = [g for k, v in saved.items() if k.startswith("_optimizer") for g in v["param_groups"]]
    assert groups and all(isinstance(g["lr"], float) for g in groups)
    flow.save(saved, str(path))
    _train(first, 2)  # training on does not change what was saved

    resumed, model = _graph(make_opt, seed_values=False)  # fresh model and optimizer
    resumed.load_state_dict(flow.load(str(path)))
    assert resumed.state_dict()["System-Train-TrainStep"].item() == 3
    losses += _train(resumed, 3)
    np.testing.assert_array_equal(np.array(losses), np.array(ref_losses))
    for key, value in _params(ref_model).items():
        np.testing.assert_array_equal(_params(model)[key], value)
    assert float(resumed._engine.optimizers[0].param_groups[0]["lr"]) == pytest.approx(
        float(reference._engine.optimizers[0].param_groups[0]["lr"]))


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_loading_into_a_compiled_graph_updates_what_its_program_reads(opt_name):
    make_opt = OPTIMIZERS[opt_name]
    reference, ref_model = _graph(make_opt)
    ref_losses = _train(reference, 5)

    graph, model = _graph(make_opt)
    losses = _train(graph, 2)
    state = graph.state_dict()
    _train(graph, 3)  # compiled, and moved on past the checkpoint
    assert len(graph._compiled) == 1
    graph.load_state_dict(state)
    losses += _train(graph, 3)
    assert len(graph._compiled) == 1  # the same program, run on the loaded values
    np.testing.assert_array_equal(np.array(losses), np.array(ref_losses))
    for key, value in _params(ref_model).items():
        np.testing.assert_array_equal(_params(model)[key], value)


def test_state_dict_keys_and_strict_loading():
    graph, _ = _graph(OPTIMIZERS["adam"])
    _train(graph, 1)
    state = graph.state_dict()
    assert list(state) == ["model", "loss_fn", "_optimizer_0", "_lr_scheduler_0",
                           "System-Train-TrainStep"]  # fmt: skip
    assert set(state["model"]) == set(INIT) and state["loss_fn"] == {}
    assert set(state["_optimizer_0"]["state"]) == {0, 1, 2, 3}
    assert state["_lr_scheduler_0"]["last_epoch"] == 1
    fresh, _ = _graph(OPTIMIZERS["adam"])
    with pytest.raises(KeyError, match=r"missing keys \['_lr_scheduler_0'\]"):
        fresh.load_state_dict({k: v for k, v in state.items() if k != "_lr_scheduler_0"})
    with pytest.raises(KeyError, match=r"unexpected keys \['extra'\]"):
        fresh.load_state_dict({**state, "extra": {}})
    fresh.load_state_dict({"model": state["model"]}, strict=False)  # the modules only
    np.testing.assert_array_equal(fresh.model[0].weight.numpy(), state["model"]["0.weight"].numpy())
    assert fresh.state_dict()["System-Train-TrainStep"].item() == 0


def test_print_graph_shows_the_module_tree_with_inputs_and_outputs():
    graph, _ = _graph(OPTIMIZERS["sgd_momentum"])
    before = repr(graph)
    assert before.splitlines()[0] == "(GRAPH:TrainGraph:TrainGraph): ("
    assert "  (MODULE:model:Sequential()): (" in before
    assert "    (MODULE:model.0:Linear(in_features=4, out_features=6, bias=True)): (" in before
    assert "INPUT" not in before  # not traced yet
    _train(graph, 1)
    text = str(graph)
    lines = text.splitlines()
    f32 = "dtype=flow.float32"
    expected = [
        "(GRAPH:TrainGraph:TrainGraph): (",
        f"  (INPUT:_TrainGraph_input.0:tensor(size=(8, 4), {f32}))",
        f"  (INPUT:_TrainGraph_input.1:tensor(size=(8, 1), {f32}))",
        "  (MODULE:model:Sequential()): (",
        f"    (INPUT:_model_input.0:tensor(size=(8, 4), {f32}))",
        "    (MODULE:model.0:Linear(in_features=4, out_features=6, bias=True)): (",
        f"      (INPUT:_model.0_input.0:tensor(size=(8, 4), {f32}))",
        f"      (OUTPUT:_model.0_output.0:tensor(size=(8, 6), {f32}))",
        "    )",
        "    (MODULE:model.1:Tanh()): (",
    ]
    assert lines[: len(expected)] == expected
    assert f"    (OUTPUT:_model_output.0:tensor(size=(8, 1), {f32}))" in lines
    assert "  (MODULE:loss_fn:MSELoss()): (" in lines
    assert lines[-2:] == [f"  (OUTPUT:_TrainGraph_output.0:tensor(size=(), {f32}))", ")"]
    assert "func.func" not in text and "func.func @TrainGraph" in graph.ir()
