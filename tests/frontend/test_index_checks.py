"""Out-of-range indices: compiled code raises eager's error (type and message), not a clamp.

One program holds every index-consuming op, each reading its own index input, so one
compile serves every case: a case makes one input bad and expects the error eager mode
raises for the same call (frontend/_index_checks.py). nn.Graph and flow.lazy() follow.
"""

from __future__ import annotations

import numpy as np
import pytest

import flow
import flow.nn.functional as F
from flow import optim
from flow.nn._graph import Graph

from checks import TARGET

RNG = np.random.default_rng(13)
X = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal((6, 2)).astype(np.float32)
LOGITS = RNG.standard_normal((3, 5)).astype(np.float32)

GOOD = {
    "gi": np.array([[0, 2], [1, 1], [2, 0], [0, 1]]),  # gather along dim 1 (size 3)
    "ti": np.array([[3, 0, 1]]),  # take_along_dim along dim 0 (size 4)
    "si": np.array([3, 0, 2]),  # index_select on dim 0 (size 4)
    "ei": np.array([[5, 0], [1, 4]], np.int32),  # embedding rows (6), int32 ids
    "ai": np.array([-1, 0, -4]),  # x[ai]: negative indices wrap, as in eager
    "bi": np.array([2, -3]),  # x[:, bi]
    "oi": np.array([0, 4, 2]),  # one_hot with 5 classes
    "nl": np.array([1, -100, 4]),  # nll_loss targets (-100: ignored)
    "cl": np.array([-1, 0, 4]),  # cross_entropy targets, ignore_index=-1
}
NAMES = list(GOOD)


def many(x, w, logits, gi, ti, si, ei, ai, bi, oi, nl, cl):
    return (
        flow.gather(x, 1, gi),
        flow.take_along_dim(x, ti, 0),
        flow.index_select(x, 0, si),
        F.embedding(ei, w),
        x[ai],
        x[:, bi],
        F.one_hot(oi, 5),
        F.nll_loss(F.log_softmax(logits, 1), nl),
        F.cross_entropy(logits, cl, ignore_index=-1),
    )


_compiled = flow.jit(many, target=TARGET)


def _args(**bad) -> list:
    values = {**GOOD, **bad}
    return [X, W, LOGITS, *(values[k] for k in NAMES)]


def _eager(args: list):
    return many(*(flow.tensor(a) for a in args))


def test_in_range_compiled_equals_eager():
    args = _args()
    for got, want in zip(_compiled(*args), _eager(args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


BAD = [
    ("gi", np.array([[0, 2], [1, 3], [2, 0], [0, 1]])),
    ("gi", np.array([[0, 2], [1, 1], [-1, 0], [0, 1]])),  # gather rejects negatives
    ("ti", np.array([[3, 4, 1]])),
    ("si", np.array([3, -1, 2])),  # so does index_select
    ("ei", np.array([[5, 0], [6, 4]], np.int32)),
    ("ai", np.array([-1, -5, 9])),  # the first bad value is the one named
    ("bi", np.array([2, 3])),
    ("oi", np.array([0, 5, 2])),  # ValueError, as eager
    ("oi", np.array([0, -2, 2])),
    ("nl", np.array([1, 5, 4])),
    ("cl", np.array([-2, 0, 4])),  # -2 is not ignore_index
]


@pytest.mark.parametrize(("name", "value"), BAD, ids=[f"{n}{i}" for i, (n, _) in enumerate(BAD)])
def test_compiled_raises_the_eager_error(name, value):
    args = _args(**{name: value})
    with pytest.raises((IndexError, ValueError)) as eager:
        _eager(args)
    with pytest.raises(eager.type) as compiled:
        _compiled(*args)
    assert str(compiled.value) == str(eager.value)
    assert "test_index_checks.py" in str(compiled.value)  # the user's source line


def test_check_indices_false_runs_unchecked():
    def pick(x, i, t):
        return flow.gather(x, 1, i), F.cross_entropy(x, t)

    x, i, t = X, np.array([[0], [7], [1], [2]]), np.array([0, 9, 1, 2])
    with pytest.raises(IndexError):
        flow.jit(pick, target=TARGET)(x, i, t)
    out = flow.jit(pick, target=TARGET, check_indices=False)(x, i, t)  # clamped: not asserted
    assert [tuple(o.shape) for o in out] == [(4, 1), ()]


def test_env_knob_removes_the_checks(monkeypatch):
    def pick(x, i):
        return flow.index_select(x, 0, i)

    args = (X, np.array([0, 1]))
    assert len(flow.jit(pick).lower(*args).checks) == 1
    monkeypatch.setenv("FLOW_CHECK_INDICES", "0")
    lowered = flow.jit(pick).lower(*args)
    assert lowered.checks == []
    assert len(lowered.module.body.block.first_op.function_type.outputs.data) == 1


class Classifier(Graph):
    def __init__(self, model, opt):
        super().__init__(target=TARGET)
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def _state(model, opt) -> tuple[list, list]:
    params = [p.numpy().copy() for p in model.parameters()]
    state = [v.numpy().copy() for st in opt.state.values() for v in st.values()
             if isinstance(v, flow.Tensor)]  # fmt: skip
    return params, state


def _assert_same(a, b):
    for u, v in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_array_equal(u, v)
    assert len(a[1]) == len(b[1])


def test_graph_step_with_a_bad_label_raises_and_changes_nothing():
    flow.manual_seed(0)
    model = flow.nn.Linear(3, 5)
    opt = optim.Adam(model.parameters(), lr=0.1)
    graph = Classifier(model, opt)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    good, bad = np.array([0, 4, 2, 1]), np.array([0, 4, 5, 1])
    with pytest.raises(IndexError) as eager:
        graph.build(flow.tensor(x), flow.tensor(bad))
    before = _state(model, opt)
    for step in range(2):  # the first step (it creates Adam's state), then a steady one
        with pytest.raises(IndexError) as compiled:
            graph(x, bad)
        assert str(compiled.value) == str(eager.value)
        _assert_same(_state(model, opt), before)
        graph(x, good)
        after = _state(model, opt)
        assert not np.array_equal(after[0][0], before[0][0])  # a good step does update
        before = after

    # the graph's steps equal eager ones with the bad steps left out
    flow.manual_seed(0)
    ref = flow.nn.Linear(3, 5)
    ref_opt = optim.Adam(ref.parameters(), lr=0.1)
    for _ in range(2):
        ref_opt.zero_grad()
        F.cross_entropy(ref(flow.tensor(x)), flow.tensor(good)).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_mode_raises_on_a_pending_index():
    x = flow.tensor(X)
    idx = np.array([[0], [2], [1], [0]])
    with pytest.raises(IndexError) as eager:
        flow.gather(x, 1, flow.tensor(idx) + 2)
    with flow.lazy():
        with pytest.raises(IndexError) as lazy:
            flow.gather(x, 1, flow.tensor(idx) + 2)  # the index is pending here
        t = flow.tensor(np.array([1, 0, 4])) + 1
        with pytest.raises(IndexError, match="target 5 is out of bounds for 5 classes"):
            F.cross_entropy(flow.tensor(LOGITS), t)
        ok = flow.gather(x, 1, flow.tensor(idx) + 0)
    assert str(lazy.value).split("\n")[0] == str(eager.value).split("\n")[0]
    np.testing.assert_array_equal(ok.numpy(), np.take_along_axis(X, idx, 1))
