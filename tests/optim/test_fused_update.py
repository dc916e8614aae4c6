"""`foreach=True`: a compiled (nn.Graph) step updates all parameters of a dtype as one flat
vector. Checked against the same optimizer stepping eagerly, per parameter: parameters and
state_dict after several steps, with float32 and float64 parameters in one model and a
parameter without a gradient; the traced IR, whose update does not grow with the number
of parameters; the compiled update, one dispatch per dtype; and global programs on 2 ranks (broadcast parameters share one flat update,
split ones keep their own) against single-device training."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flow
import flow.nn as nn
from flow import optim

RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 3)).astype(np.float32)
Y = RNG.standard_normal((6, 2))
INIT = {
    "lin.weight": RNG.standard_normal((4, 3)).astype(np.float32) * 0.5,
    "lin.bias": RNG.standard_normal(4).astype(np.float32) * 0.1,
    "w64": RNG.standard_normal((4, 2)) * 0.5,
    "b64": RNG.standard_normal(2) * 0.1,
    "scale": np.array(1.5),
    "unused": np.zeros(5, np.float32),
}


class Mixed(nn.Module):
    """A float32 layer feeding float64 parameters (a 0-d one among them); `unused` gets no
    gradient, so every optimizer must skip it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.w64 = nn.Parameter(flow.zeros(4, 2, dtype=flow.float64))
        self.b64 = nn.Parameter(flow.zeros(2, dtype=flow.float64))
        self.scale = nn.Parameter(flow.ones((), dtype=flow.float64))
        self.unused = nn.Parameter(flow.zeros(5))
        self.load_state_dict({k: flow.tensor(v) for k, v in INIT.items()})

    def forward(self, x):
        h = flow.tanh(self.lin(x)).to(flow.float64)
        return (h @ self.w64 + self.b64) * self.scale


class Step(nn.Graph):
    def __init__(self, model, optimizer, sync: bool = True):
        super().__init__(sync_compile=sync)
        self.model = model
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


OPTIMIZERS = {
    "sgd": lambda ps, fe: optim.SGD(ps, lr=0.1, foreach=fe),
    "sgd-nesterov-wd": lambda ps, fe: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                                weight_decay=0.01, foreach=fe),  # fmt: skip
    "sgd-dampening": lambda ps, fe: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3,
                                              foreach=fe),  # fmt: skip
    "adam-amsgrad": lambda ps, fe: optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.01,
                                              foreach=fe),  # fmt: skip
    "adamw-amsgrad": lambda ps, fe: optim.AdamW(ps, lr=0.05, amsgrad=True, foreach=fe),
    "rmsprop-centered": lambda ps, fe: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True,
                                                     weight_decay=0.01, foreach=fe),  # fmt: skip
}
STEPS = 3


def _eager(make):
    model = Mixed()
    opt = make(list(model.parameters()), False)
    x, y = flow.tensor(X), flow.tensor(Y)
    for _ in range(STEPS):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    return model, opt


def _compiled(make, foreach=True):
    model = Mixed()
    opt = make(list(model.parameters()), foreach)
    graph = Step(model, opt)
    for _ in range(STEPS):
        graph(flow.tensor(X), flow.tensor(Y))
    return model, opt, graph


def _close(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=2e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_flat_update_equals_eager_per_parameter(name):
    make = OPTIMIZERS[name]
    ref_model, ref_opt = _eager(make)
    model, opt, graph = _compiled(make)
    assert "flow.concat" in graph._engine.last_lowered.as_text()  # the flat update ran
    for (key, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
        _close(p.numpy(), q.numpy(), f"{name}: parameter {key}")
    np.testing.assert_array_equal(model.unused.numpy(), INIT["unused"])
    ours, ref = opt.state_dict(), ref_opt.state_dict()
    # nn.Graph gives every parameter its initial state before the first step (the unused one
    # too); a parameter without a gradient keeps it untouched
    assert set(ref["state"]) <= set(ours["state"]), f"{name}: parameters with state"
    for i in set(ours["state"]) - set(ref["state"]):
        for key, value in ours["state"][i].items():
            assert not value.numpy().any(), f"{name}: state {i}.{key} of a skipped parameter"
    for i, entries in ref["state"].items():
        assert sorted(ours["state"][i]) == sorted(entries), f"{name}: state keys of {i}"
        for key, value in entries.items():
            _close(ours["state"][i][key].numpy(), value.numpy(), f"{name}: state {i}.{key}")


def test_interpreted_flat_update_equals_eager(tmp_path, monkeypatch):
    """The first calls of a program not compiled yet run on the eager kernels (the
    interpreter tier): the flat update there gives eager's numbers too."""
    from flow.targets import cache

    monkeypatch.setenv("FLOW_CACHE_DIR", str(tmp_path / "cache"))  # empty: not compiled yet
    cache.clear_memory()  # (the programs of the tests above are in the in-process memo)
    make = OPTIMIZERS["adam-amsgrad"]
    ref_model, _ = _eager(make)
    model = Mixed()
    graph = Step(model, make(list(model.parameters()), True), sync=False)
    tiers = []
    for _ in range(STEPS):
        graph(flow.tensor(X), flow.tensor(Y))
        tiers.append(getattr(next(iter(graph._engine.programs.values())), "tier", "compiled"))
    assert tiers[0] == "interpreted", tiers
    for (key, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
        _close(p.numpy(), q.numpy(), f"interpreted: parameter {key}")


def test_state_dict_of_a_flat_update_resumes_per_parameter():
    """A checkpoint of the compiled flat update loads into an eager optimizer, which continues
    as an optimizer that had run eagerly all along."""
    make = OPTIMIZERS["adam-amsgrad"]
    model, opt, _ = _compiled(make)
    ref_model, ref_opt = _eager(make)
    resumed = Mixed()
    resumed.load_state_dict(model.state_dict())
    resumed_opt = make(list(resumed.parameters()), False)
    resumed_opt.load_state_dict(opt.state_dict())
    x, y = flow.tensor(X), flow.tensor(Y)
    for m, o in ((resumed, resumed_opt), (ref_model, ref_opt)):
        o.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        o.step()
    for (key, p), (_, q) in zip(resumed.named_parameters(), ref_model.named_parameters()):
        _close(p.numpy(), q.numpy(), f"resumed parameter {key}")


def _mlp(layers: int) -> nn.Module:
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(4, 4), nn.Tanh()]
    return nn.Sequential(*mods)


def _update_ir(layers: int, foreach: bool) -> str:
    flow.manual_seed(0)
    model = _mlp(layers)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)

    class G(nn.Graph):
        def __init__(self):
            super().__init__(sync_compile=True)
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    g = G()
    g(flow.tensor(X[:, :1].repeat(4, 1)))
    return g._engine.last_lowered.as_text()


def _flat_ops(text: str, n: int) -> int:
    """Ops in `text` whose result is a flat float32 vector of `n` elements (the update)."""
    return sum(1 for line in text.splitlines()
               if "=" in line and line.rstrip().endswith(f"tensor<{n}xf32>"))  # fmt: skip


@pytest.mark.parametrize("layers", [2, 5])
def test_flat_update_does_not_grow_with_the_parameters(layers):
    """One bucket: three concatenations (parameters, gradients, momentum buffers) and the
    same handful of flat ops for 2 or 5 layers; per parameter there is no concatenation."""
    n = layers * (16 + 4)
    text = _update_ir(layers, foreach=True)
    assert text.count("flow.concat") == 3, text.count("flow.concat")
    flat = _flat_ops(text, n)
    assert 3 <= flat <= 12, flat  # concats, momentum and update math: nothing per layer
    assert flat == _flat_ops(_update_ir(2 if layers == 5 else 5, foreach=True),
                             40 if layers == 5 else 100)  # fmt: skip
    assert "flow.concat" not in _update_ir(layers, foreach=False)


def _update_dispatches(foreach: bool) -> tuple[int, list[np.ndarray]]:
    """Dispatches of a compiled SGD step (weight decay, no state) on four parameters of
    different shapes, two float32 and two float64, whose gradients are inputs (nothing for
    a parameter's update to fuse into); and the updated values."""
    from flow.targets import dispatch_count

    shapes = [((3,), np.float32), ((4, 5), np.float32), ((6,), np.float64), ((2, 2), np.float64)]
    rng = np.random.default_rng(3)
    values = [rng.standard_normal(s).astype(dt) for s, dt in shapes]

    def step(*grads):
        params = [flow.tensor(v, requires_grad=True) for v in values]
        opt = optim.SGD(params, lr=0.1, weight_decay=0.1, foreach=foreach)
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        return params

    grads = [np.ones_like(v) for v in values]
    compiled = flow.jit(step).lower(*grads).compile("cpu")
    return dispatch_count(compiled.vmfb), [np.asarray(t.numpy()) for t in compiled(*grads)]


def test_compiled_update_is_one_dispatch_per_dtype():
    flat, flat_values = _update_dispatches(True)
    alone, alone_values = _update_dispatches(False)
    assert flat == 2, f"foreach: expected one update dispatch per dtype (2), got {flat}"
    assert alone == 4, f"per parameter: expected one dispatch per parameter (4), got {alone}"
    rng = np.random.default_rng(3)
    for a, b in zip(flat_values, alone_values):
        v = rng.standard_normal(a.shape).astype(a.dtype)
        _close(a, b, "flat vs per-parameter update")
        _close(a, (v - 0.1 * (1 + 0.1 * v)).astype(a.dtype), "update vs numpy")


def test_foreach_is_a_group_hyperparameter():
    w = nn.Parameter(flow.zeros(2))
    assert optim.SGD([w]).param_groups[0]["foreach"] is None
    assert optim.Adam([w], foreach=True).param_groups[0]["foreach"] is True
    assert optim.RMSprop([{"params": [w], "foreach": True}]).param_groups[0]["foreach"] is True
    with pytest.raises(TypeError, match=r"SGD: foreach must be True, False or None, got 'yes'"):
        optim.SGD([w], foreach="yes")


def test_flat_update_inside_jit_on_captured_parameters():
    """flow.jit, no nn.Graph: plain SGD (no state) on two captured parameters, one update."""
    w = flow.tensor(INIT["lin.weight"], requires_grad=True)
    b = flow.tensor(INIT["lin.bias"], requires_grad=True)
    opt = optim.SGD([w, b], lr=0.1, foreach=True)

    @flow.jit
    def step(gw, gb):
        w.grad, b.grad = gw, gb
        opt.step()
        return w, b

    gw, gb = np.ones_like(INIT["lin.weight"]), np.arange(4, dtype=np.float32)
    step(gw, gb)
    step(gw, gb)
    _close(w.numpy(), INIT["lin.weight"] - 0.2 * gw, "w after two steps")
    _close(b.numpy(), INIT["lin.bias"] - 0.2 * gb, "b after two steps")
    assert "flow.concat" in step.lower(gw, gb).as_text()


RANK_SCRIPT = textwrap.dedent('''
    import numpy as np
    import flow
    import flow.env
    import flow.nn as nn
    import flow.nn.functional as F
    from flow.distributed.placement import placement, sbp

    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    S, B = sbp.split, sbp.broadcast
    pl = placement("cpu", list(range(world)))

    def mlp():
        flow.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))

    class Step(nn.Graph):
        def __init__(self, model, opt):
            super().__init__(sync_compile=True)
            self.model = model
            self.add_optimizer(opt)

        def build(self, xb, yb):
            loss = F.cross_entropy(self.model(xb), yb)
            loss.backward()
            return loss

    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
               for _ in range(3)]
    ref = mlp()
    ref_step = Step(ref, flow.optim.Adam(ref.parameters(), lr=0.05))
    for xb, yb in batches:
        ref_step(flow.tensor(xb), flow.tensor(yb))
    names = ("0.weight", "0.bias", "2.weight", "2.bias")
    layouts = {"data": (dict.fromkeys(names, B), S(0)),
               "tensor": ({"0.weight": S(0), "0.bias": S(0), "2.weight": S(1), "2.bias": B}, B)}
    for name, (layout, batch_sbp) in layouts.items():
        model = mlp()
        model.to_global(pl, lambda n, _: layout[n])
        step = Step(model, flow.optim.Adam(model.parameters(), lr=0.05, foreach=True))
        for xb, yb in batches:
            step(*(flow.tensor(v).to_global(pl, B).to_global(sbp=batch_sbp) for v in (xb, yb)))
        concats = step._engine.last_lowered.as_text().count("flow.concat")
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            assert p.sbp == (layout[n],), (name, n, p.sbp)
            err = float(np.abs(p.numpy() - q.numpy()).max())
            assert err < 1e-4, f"{name} parallel: {n} differs by {err}"
        print(f"rank {rank}: {name} parallel: {concats} concats", flush=True)
    print(f"rank {rank}: OK", flush=True)
''')


def test_global_programs_on_two_ranks(tmp_path):
    """Data parallel: the four broadcast parameters share one flat update (parameters,
    gradients, steps, two moments: five concatenations); tensor parallel: no two parameters
    share a distribution, so each keeps its own. Both equal single-device training."""
    script = tmp_path / "rank_foreach.py"
    script.write_text(RANK_SCRIPT)
    cmd = [sys.executable, "-m", "flow.distributed.launch", "--nproc-per-node", "2", str(script)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env={**os.environ, "FLOW_COLLECTIVE_TIMEOUT": "40"})  # fmt: skip
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"2 ranks did not finish in 240 s\n{out}\n{err[-3000:]}")
    assert proc.returncode == 0, f"{out}\n{err[-3000:]}"
    for r in (0, 1):
        assert f"rank {r}: data parallel: 5 concats" in out, out
        assert f"rank {r}: tensor parallel: 0 concats" in out, out
        assert f"rank {r}: OK" in out, out
