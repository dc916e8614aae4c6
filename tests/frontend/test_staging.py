"""The staging path `flow.jit` and `nn.Graph` share: pytrees, call signatures, one trace and
one compile per call key."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import flow
from flow.compile.signature import describe, signature
from flow.core.pytree import flatten, leaves, unflatten

Pair = namedtuple("Pair", ["a", "b"])


def test_pytree_round_trip_keeps_containers_and_sorts_dict_keys():
    tree = {"z": [1, (2, 3)], "a": Pair(4, {"y": 5, "x": 6}), "m": ()}
    flat, spec = flatten(tree)
    assert flat == [4, 6, 5, 1, 2, 3]  # keys a, m, z; inner keys x, y
    rebuilt = unflatten(spec, [v * 10 for v in flat])
    assert rebuilt == {"z": [10, (20, 30)], "a": Pair(40, {"y": 50, "x": 60}), "m": ()}
    assert type(rebuilt["a"]) is Pair and type(rebuilt["z"]) is list
    assert type(rebuilt["z"][1]) is tuple
    assert leaves([[1], 2]) == [1, 2] and flatten(7) == ([7], None)


def test_signature_describes_tensors_and_static_values():
    sig = signature([np.zeros((2, 3), np.float32), flow.tensor(np.arange(4)), 4, "s"])
    assert describe(sig) == "(float32[2, 3], int64[4], 4, 's')"
    with pytest.raises(TypeError, match="argument of type list is neither a tensor nor hashable"):
        signature([[1, 2]])


def test_jit_traces_once_per_key():
    runs = []

    @flow.jit
    def f(x, k):
        runs.append(k)
        return x * k

    x = flow.tensor(np.ones((2, 2), np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(f(x, 2.0).numpy(), np.full((2, 2), 2.0, np.float32))
    assert runs == [2.0] and len(f._cache) == 1
    f(x, 3.0)  # a new static value
    f(flow.tensor(np.ones((3,), np.float32)), 3.0)  # a new shape
    assert runs == [2.0, 3.0, 3.0] and len(f._cache) == 3


# (optimizer, traces of a graph's step): an optimizer that can make its state before a step
# does so before the first trace, so one traced and compiled program serves every call; SGD
# with dampening makes its first momentum buffer from the gradient, so its first step is a
# program of its own (returning the new state) and the steady step is traced after it.
_OPTIMIZERS = [
    (lambda ps: flow.optim.Adam(ps, lr=0.1), 1),
    (lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9), 1),
    (lambda ps: flow.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True), 1),
    (lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5), 2),
]


@pytest.mark.parametrize("make_opt,traces", _OPTIMIZERS, ids=["adam", "sgd-momentum",
                                                               "rmsprop", "sgd-dampening"])
def test_graph_compiles_one_program_per_step(make_opt, traces):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 1)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 1)).astype(np.float32)
    w = flow.nn.Parameter(flow.tensor(w0))
    opt = make_opt([w])
    builds = []

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.add_optimizer(opt)

        def build(self, xb, yb):
            builds.append(1)
            loss = ((flow.matmul(xb, w) - yb) ** 2).mean()
            loss.backward()
            return loss

    step = Step()
    losses = [float(step(flow.tensor(x), flow.tensor(y)).numpy()) for _ in range(3)]
    assert len(builds) == traces and len(step._compiled) == 1
    # the same three steps, eagerly
    we = flow.nn.Parameter(flow.tensor(w0))
    eager_opt = make_opt([we])
    expected = []
    for _ in range(3):
        loss = ((flow.matmul(flow.tensor(x), we) - flow.tensor(y)) ** 2).mean()
        eager_opt.zero_grad()
        loss.backward()
        eager_opt.step()
        expected.append(float(loss.numpy()))
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), we.numpy(), rtol=1e-5, atol=1e-6)
    state, eager_state = opt.state_dict()["state"], eager_opt.state_dict()["state"]
    assert state.keys() == eager_state.keys()
    for k in state:
        assert state[k].keys() == eager_state[k].keys()
        for name in state[k]:
            np.testing.assert_allclose(np.asarray(state[k][name].numpy()),
                                       np.asarray(eager_state[k][name].numpy()),
                                       rtol=1e-5, atol=1e-6)  # fmt: skip
