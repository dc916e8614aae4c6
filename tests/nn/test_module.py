"""flow.nn.Module and Parameter: registration, traversal, state_dict, modes, containers,
gradients through a model, and a model inside flow.jit."""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np
import pytest

import flow
import flow.nn as nn


class Block(nn.Module):
    """Two layers, a parameter, a persistent and a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.scale = nn.Parameter(flow.ones(3))
        self.register_buffer("steps", flow.zeros(1))
        self.register_buffer("cache", flow.zeros(2), persistent=False)

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(5, 4), nn.Tanh())
        self.block = Block()

    def forward(self, x):
        return self.block(self.layers(x))


# --------------------------------------------------------------------------- Parameter


def test_parameter_is_a_tensor_that_requires_grad():
    t = flow.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, flow.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert np.shares_memory(p.numpy(), t.numpy())  # like PyTorch, built on the same storage
    assert repr(p).startswith("Parameter containing:\ntensor([1., 2.]")
    y = p * 2  # ops on a Parameter give plain tensors
    assert type(y) is flow.Tensor and y.requires_grad and y.grad_fn is not None


def test_parameter_rejects_integer_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(flow.tensor([1, 2]))
    assert not nn.Parameter(flow.tensor([1, 2]), requires_grad=False).requires_grad


# --------------------------------------------------------------------------- registration


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "block.scale", "block.fc.weight",
                     "block.fc.bias"]  # fmt: skip
    assert [tuple(p.shape) for p in net.parameters()] == [(4, 5), (4,), (3,), (3, 4), (3,)]
    assert [n for n, _ in net.named_buffers()] == ["block.steps", "block.cache"]
    assert [n for n, _ in net.named_children()] == ["layers", "block"]
    assert [n for n, _ in net.named_modules()] == [
        "", "layers", "layers.0", "layers.1", "block", "block.fc", "block.act",
    ]  # fmt: skip
    assert list(net.children())[1] is net.block
    assert len(list(net.modules())) == 7
    assert [n for n, _ in net.block.named_parameters(recurse=False)] == ["scale"]
    assert net.get_submodule("layers.0") is net.layers[0]
    assert net.get_parameter("block.fc.bias") is net.block.fc.bias
    with pytest.raises(AttributeError, match="no submodule"):
        net.get_submodule("layers.7")


def test_setattr_rules():
    block = Block()
    with pytest.raises(TypeError, match="parameter 'scale'"):
        block.scale = flow.ones(3)  # a plain tensor cannot replace a parameter
    block.scale = None
    assert "scale" in block._parameters and block.scale is None
    block.steps = flow.ones(1)  # buffers take any tensor
    assert block._buffers["steps"].numpy()[0] == 1
    block.fc = nn.Linear(4, 3, bias=False)
    assert [n for n, _ in block.named_parameters()] == ["fc.weight"]
    block.note = "plain attribute"
    assert "note" in block.__dict__
    block.note = nn.Identity()  # a module replaces a plain attribute
    assert "note" not in block.__dict__ and block._modules["note"] is not None
    del block.note
    assert "note" not in block._modules
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'nope'"):
        block.nope  # noqa: B018
    with pytest.raises(KeyError, match="already exists"):
        block.register_buffer("fc", flow.zeros(1))
    with pytest.raises(KeyError, match="contain"):
        block.register_parameter("a.b", None)


def test_assignment_before_init_is_an_error():
    class Broken(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Broken()


def test_shared_parameters_are_listed_once():
    fc = nn.Linear(3, 3)
    seq = nn.Sequential(fc, nn.ReLU(), fc)
    assert len(list(seq.parameters())) == 2
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(flow.ones(1))


# --------------------------------------------------------------------------- state_dict


def test_state_dict_keys_values_and_persistence():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["layers.0.weight", "layers.0.bias", "block.scale", "block.steps",
                        "block.fc.weight", "block.fc.bias"]  # fmt: skip
    assert not isinstance(sd["block.scale"], nn.Parameter) and not sd["block.scale"].requires_grad
    assert np.shares_memory(sd["layers.0.weight"].numpy(), net.layers[0].weight.numpy())
    assert net.state_dict(keep_vars=True)["block.scale"] is net.block.scale


def test_state_dict_round_trip_copies_in_place():
    flow.manual_seed(1)
    src, dst = Net(), Net()
    x = flow.randn(2, 5)
    assert not np.allclose(src(x).numpy(), dst(x).numpy())
    weight = dst.layers[0].weight
    result = dst.load_state_dict(src.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert dst.layers[0].weight is weight  # same Parameter, new values
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())
    # later changes to the source do not leak into the copy
    with flow.no_grad():
        src.layers[0].weight.add_(1.0)
    assert not np.allclose(dst.layers[0].weight.numpy(), src.layers[0].weight.numpy())


def test_load_state_dict_accepts_numpy_arrays():
    fc = nn.Linear(2, 2)
    fc.load_state_dict({"weight": np.eye(2), "bias": np.array([1.0, 2.0])})
    assert fc.weight.dtype is flow.float32
    np.testing.assert_array_equal(fc.weight.numpy(), np.eye(2))


def test_load_state_dict_strict_errors():
    net = Net()
    sd = net.state_dict()
    del sd["block.fc.bias"]
    sd["extra.weight"] = flow.zeros(1)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "block.fc.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert missing == ["block.fc.bias"] and unexpected == ["extra.weight"]


def test_load_state_dict_shape_mismatch_names_key_and_shapes():
    net = Net()
    sd = net.state_dict()
    sd["layers.0.weight"] = flow.zeros(4, 6)
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for layers\.0\.weight: copying a "
                           r"param with shape \[4, 6\] from checkpoint, the shape in current "
                           r"model is \[4, 5\]"):  # fmt: skip
            net.load_state_dict(sd, strict=strict)


def test_state_dict_through_save_and_load(tmp_path):
    src, dst = Net(), Net()
    flow.save(src.state_dict(), tmp_path / "net.safetensors")
    dst.load_state_dict(flow.load(tmp_path / "net.safetensors"))
    x = flow.randn(3, 5)
    np.testing.assert_array_equal(dst(x).numpy(), src(x).numpy())


# --------------------------------------------------------------------------- modes, grads, dtypes


def test_train_eval_recurse():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert net.block.fc.training
    with pytest.raises(ValueError, match="boolean"):
        net.train("no")


def test_zero_grad_and_requires_grad():
    net = Net()
    net(flow.randn(2, 5)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_apply_visits_children_first():
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Tanh", "Sequential", "Linear", "ReLU", "Block", "Net"]


def test_to_dtype_casts_in_place_and_devices():
    net = Net()
    weight = net.layers[0].weight
    assert net.to(flow.float64) is net
    assert net.layers[0].weight is weight and weight.dtype is flow.float64
    assert net.block.steps.dtype is flow.float64
    assert net(flow.randn(2, 5, dtype=flow.float64)).dtype is flow.float64
    net.float()
    assert weight.dtype is flow.float32 and weight.requires_grad
    assert net.to("cpu") is net and net.cpu() is net
    if "cuda" not in flow.targets.available():  # moving to a missing device says so
        with pytest.raises(RuntimeError, match="no CUDA device"):
            net.to("cuda")
    with pytest.raises(TypeError, match="floating point"):
        net.to(flow.int32)


def test_repr_is_nested():
    assert repr(Net()) == (
        "Net(\n"
        "  (layers): Sequential(\n"
        "    (0): Linear(in_features=5, out_features=4, bias=True)\n"
        "    (1): Tanh()\n"
        "  )\n"
        "  (block): Block(\n"
        "    (fc): Linear(in_features=4, out_features=3, bias=True)\n"
        "    (act): ReLU()\n"
        "  )\n"
        ")"
    )


def test_deepcopy_is_independent():
    net = Net()
    twin = copy.deepcopy(net)
    x = flow.randn(2, 5)
    np.testing.assert_array_equal(twin(x).numpy(), net(x).numpy())
    assert twin.layers[0].weight is not net.layers[0].weight
    assert isinstance(twin.layers[0].weight, nn.Parameter)
    with flow.no_grad():
        twin.layers[0].weight.zero_()
    assert np.any(net.layers[0].weight.numpy() != 0)


# --------------------------------------------------------------------------- containers


def test_sequential_indexing():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == [a, b]
    x = flow.randn(4, 2)
    np.testing.assert_allclose(seq(x).numpy(), c(b(a(x))).numpy(), rtol=1e-6)
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and isinstance(seq[3], nn.Sigmoid)
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"] and seq[1] is c
    seq[0] = nn.Identity()
    assert isinstance(seq[0], nn.Identity)
    with pytest.raises(IndexError):
        seq[5]


def test_sequential_from_ordered_dict():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(seq.state_dict()) == ["fc.weight", "fc.bias"]
    assert seq.fc is seq[0]


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and [n for n, _ in layers.named_children()] == ["0", "1", "2"]
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    assert isinstance(layers[-1], nn.Tanh) and len(layers[1:3]) == 2
    del layers[0]
    assert len(list(layers.parameters())) == 4
    assert list(layers.state_dict())[:2] == ["0.weight", "0.bias"]

    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})
    assert list(heads) == ["a", "b"] and "a" in heads and len(heads) == 2
    heads["c"] = nn.Identity()
    assert list(heads.keys()) == ["a", "b", "c"]
    assert list(heads.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert isinstance(heads.pop("c"), nn.Identity) and len(heads) == 2


def test_parameter_list_and_dict():
    plist = nn.ParameterList([flow.ones(2), nn.Parameter(flow.zeros(3))])
    assert all(isinstance(p, nn.Parameter) for p in plist) and len(plist) == 2
    pdict = nn.ParameterDict({"w": flow.ones(2, 2)})
    holder = nn.Module()
    holder.plist, holder.pdict = plist, pdict
    assert list(holder.state_dict()) == ["plist.0", "plist.1", "pdict.w"]


# --------------------------------------------------------------------------- autograd and jit


def _mlp() -> nn.Module:
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()


def test_gradients_fill_every_parameter_and_match_finite_differences():
    model = _mlp()
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((4, 3)))
    target = flow.tensor(rng.standard_normal((4, 2)))
    loss_fn = nn.MSELoss()
    loss = loss_fn(model(x), target)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name

    w = model[0].weight
    numeric = np.zeros(w.shape)
    eps = 1e-6
    with flow.no_grad():
        for idx in np.ndindex(*w.shape):
            base = w.numpy()[idx]
            values = []
            for delta in (eps, -eps):
                w.numpy()[idx] = base + delta
                values.append(loss_fn(model(x), target).item())
            w.numpy()[idx] = base
            numeric[idx] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(w.grad.numpy(), numeric, rtol=1e-5, atol=1e-8)


def test_module_inside_jit_matches_eager_and_sees_updates():
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
    x = flow.randn(5, 4)
    fn = flow.jit(lambda x: model(x))
    lowered = fn.lower(x)
    assert len(lowered.captured) == 6  # every parameter is a function argument, not a constant
    np.testing.assert_allclose(fn(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
    with flow.no_grad():
        model[0].weight.mul_(2.0)  # parameters updated in place: the compiled code sees them
    np.testing.assert_allclose(fn(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_load_state_dict_assign_takes_the_tensors():
    fc = nn.Linear(2, 2)
    w = flow.ones(2, 2)
    fc.load_state_dict({"weight": w, "bias": flow.zeros(2)}, assign=True)
    assert isinstance(fc.weight, nn.Parameter) and fc.weight.requires_grad
    assert np.shares_memory(fc.weight.numpy(), w.numpy())


def test_parameter_of_a_global_tensor_keeps_placement_and_sbp():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    placement = flow.placement("cpu", ranks=[0])
    x = flow.tensor(a).to_global(placement=placement, sbp=flow.sbp.split(0))
    p = nn.Parameter(x)
    assert p.is_global and p.placement == placement and p.sbp == (flow.sbp.split(0),)
    assert p.requires_grad and tuple(p.shape) == (3, 4)
    np.testing.assert_array_equal(p.to_local().numpy(), a)
    frozen = nn.Parameter(x.to_global(sbp=flow.sbp.broadcast), requires_grad=False)
    assert frozen.sbp == (flow.sbp.broadcast,) and not frozen.requires_grad
    # A module holding it trains it as a global tensor: the gradient is global too.
    (p * p).sum().backward()
    assert p.grad.is_global and p.grad.placement == placement
    np.testing.assert_allclose(p.grad.numpy(), 2 * a)
    twin = copy.deepcopy(p)
    assert twin.is_global and twin.sbp == p.sbp and twin is not p
    np.testing.assert_array_equal(twin.numpy(), a)
