"""nn.RNN / LSTM / GRU and their cells against a numpy reference of the gate equations, against
PyTorch (state_dict names, outputs and parameter gradients) where it is installed, against
central finite differences, and compiled in an nn.Graph training step against eager steps."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import flow
import flow.nn as nn

RNG = np.random.default_rng(17)
MODES = ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]


# --------------------------------------------------------------------------- numpy reference


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_cell(mode, x, h, c, p, sfx=""):
    """One step of PyTorch's equations, with the parameters `p` (numpy) named `<kind><sfx>`."""
    gi = x @ p["weight_ih" + sfx].T + p.get("bias_ih" + sfx, 0.0)
    gh = h @ p["weight_hh" + sfx].T + p.get("bias_hh" + sfx, 0.0)
    if mode == "RNN_TANH":
        return np.tanh(gi + gh), None
    if mode == "RNN_RELU":
        return np.maximum(gi + gh, 0.0), None
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, -1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        if "weight_hr" + sfx in p:
            h = h @ p["weight_hr" + sfx].T
        return h, c
    ir, iz, in_ = np.split(gi, 3, -1)
    hr, hz, hn = np.split(gh, 3, -1)
    r, z = _sig(ir + hr), _sig(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h, None


def np_rnn(mode, p, x, h0, c0, num_layers, bidirectional):
    """x (L, N, H_in), h0 / c0 (D*num_layers, N, H): (output, h_n, c_n)."""
    d_count, length = (2 if bidirectional else 1), x.shape[0]
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(d_count):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            h, c = h0[layer * d_count + d], None if c0 is None else c0[layer * d_count + d]
            ys = [None] * length
            for t in reversed(range(length)) if d else range(length):
                h, c = np_cell(mode, x[t], h, c, p, sfx)
                ys[t] = h
            outs.append(np.stack(ys))
            hn.append(h)
            cn.append(c)
        x = np.concatenate(outs, -1)
    return x, np.stack(hn), (None if c0 is None else np.stack(cn))


def _make(mode, *args, **kw):
    if mode.startswith("RNN"):
        kw["nonlinearity"] = "relu" if mode == "RNN_RELU" else "tanh"
        return nn.RNN(*args, **kw)
    return getattr(nn, mode)(*args, **kw)


def _params(m):
    return {k: v.numpy() for k, v in m.state_dict().items()}


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------- against numpy

CONFIGS = {
    "layers2": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "batch_first": dict(batch_first=True),
    "unbatched": dict(),
    "h0": dict(num_layers=2, bidirectional=True),
    "no_bias": dict(bias=False),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("mode", MODES)
def test_layers_match_numpy(mode, config):
    kw = CONFIGS[config]
    hin, hid, length, n = 3, 4, 5, 2
    m = _make(mode, hin, hid, **kw)
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    x = _rand(length, n, hin)
    given = config in ("h0", "unbatched")  # unbatched: an unbatched h0 too
    h0 = _rand(layers, n, hid) if given else np.zeros((layers, n, hid), np.float32)
    c0 = (_rand(layers, n, hid) if given else np.zeros_like(h0)) if mode == "LSTM" else None
    want_out, want_h, want_c = np_rnn(mode, _params(m), x, h0, c0, kw.get("num_layers", 1),
                                      kw.get("bidirectional", False))  # fmt: skip
    if config == "unbatched":
        x, want_out, want_h, h0 = x[:, 0], want_out[:, 0], want_h[:, 0], h0[:, 0]
        want_c = None if want_c is None else want_c[:, 0]
        c0 = None if c0 is None else c0[:, 0]
    if config == "batch_first":
        x, want_out = x.transpose(1, 0, 2), want_out.transpose(1, 0, 2)
    hx = None
    if given:
        hx = (flow.tensor(h0), flow.tensor(c0)) if mode == "LSTM" else flow.tensor(h0)
    out, state = m(flow.tensor(x), hx)
    h, c = state if mode == "LSTM" else (state, None)
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), want_h, rtol=1e-5, atol=1e-6)
    if mode == "LSTM":
        np.testing.assert_allclose(c.numpy(), want_c, rtol=1e-5, atol=1e-6)
    assert out.shape == want_out.shape and h.shape == want_h.shape


def test_lstm_proj_size_matches_numpy():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    assert m.weight_hr_l1_reverse.shape == (2, 5) and m.weight_ih_l1.shape == (20, 4)
    assert m.weight_hh_l0.shape == (20, 2)
    x, h0, c0 = _rand(4, 2, 3), _rand(4, 2, 2), _rand(4, 2, 5)
    out, (h, c) = m(flow.tensor(x), (flow.tensor(h0), flow.tensor(c0)))
    want_out, want_h, want_c = np_rnn("LSTM", _params(m), x, h0, c0, 2, True)
    assert out.shape == (4, 2, 4)
    for got, want in ((out, want_out), (h, want_h), (c, want_c)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_cells_match_numpy(mode, with_hx, batched):
    hin, hid = 3, 4
    if mode.startswith("RNN"):
        cell = nn.RNNCell(hin, hid, nonlinearity="relu" if mode == "RNN_RELU" else "tanh")
    else:
        cell = getattr(nn, mode + "Cell")(hin, hid)
    x, h, c = _rand(2, hin), _rand(2, hid), _rand(2, hid)
    if not with_hx:
        h, c = np.zeros_like(h), np.zeros_like(c)
    want_h, want_c = np_cell(mode, x, h, c, _params(cell))
    if not batched:
        x, h, c, want_h = x[0], h[0], c[0], want_h[0]
        want_c = None if want_c is None else want_c[0]
    hx = None
    if with_hx:
        hx = (flow.tensor(h), flow.tensor(c)) if mode == "LSTM" else flow.tensor(h)
    got = cell(flow.tensor(x), hx)
    if mode == "LSTM":
        got, got_c = got
        np.testing.assert_allclose(got_c.numpy(), want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy(), want_h, rtol=1e-5, atol=1e-6)


def test_parameters_start_uniform_within_one_over_sqrt_hidden():
    flow.manual_seed(3)
    m = nn.GRU(6, 16, num_layers=2, bidirectional=True)
    bound = 1 / math.sqrt(16)
    names = [n for n, _ in m.named_parameters()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert len(names) == 16 and len(m.all_weights) == 4
    for name, p in m.named_parameters():
        v = p.numpy()
        assert np.all(np.abs(v) <= bound), name
        assert v.std() > bound / 3, name  # spread over the interval, not a constant
    cell = nn.LSTMCell(5, 9, bias=False)
    assert [n for n, _ in cell.named_parameters()] == ["weight_ih", "weight_hh"]
    assert np.all(np.abs(cell.weight_hh.numpy()) <= 1 / 3)


# --------------------------------------------------------------------------- against PyTorch


def _torch_pair(torch, mode, *args, **kw):
    if mode.startswith("RNN"):
        kw["nonlinearity"] = "relu" if mode == "RNN_RELU" else "tanh"
        name = "RNN"
    else:
        name = mode
    tm = getattr(torch.nn, name)(*args, **kw)
    fm = getattr(nn, name)(*args, **kw)
    assert list(fm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(fm.state_dict()[k].shape) == tuple(v.shape), k
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.parametrize("mode,kw", [
    ("RNN_TANH", {}), ("RNN_RELU", {"bias": False}), ("GRU", {}), ("LSTM", {}),
    ("LSTM", {"proj_size": 3}),
])  # fmt: skip
def test_layers_match_torch_outputs_and_gradients(mode, kw):
    torch = pytest.importorskip("torch")
    tm, fm = _torch_pair(torch, mode, 4, 6, num_layers=2, bidirectional=True, batch_first=True,
                         **kw)  # fmt: skip
    x = _rand(3, 5, 4)
    tx, fx = torch.tensor(x, requires_grad=True), flow.tensor(x, requires_grad=True)
    t_out, t_state = tm(tx)
    f_out, f_state = fm(fx)
    t_states = t_state if mode == "LSTM" else (t_state,)
    f_states = f_state if mode == "LSTM" else (f_state,)
    np.testing.assert_allclose(f_out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for f, t in zip(f_states, t_states):
        np.testing.assert_allclose(f.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = _rand(*t_out.shape)
    (torch.sum(t_out * torch.tensor(w)) + sum(s.sum() for s in t_states)).backward()
    loss = (f_out * flow.tensor(w)).sum()
    for s in f_states:
        loss = loss + s.sum()
    loss.backward()
    named = dict(fm.named_parameters())
    for name, tp in tm.named_parameters():
        np.testing.assert_allclose(named[name].grad.numpy(), tp.grad.numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)  # fmt: skip
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_cells_match_torch(mode):
    torch = pytest.importorskip("torch")
    tc = getattr(torch.nn, mode + "Cell")(3, 5)
    fc = getattr(nn, mode + "Cell")(3, 5)
    assert list(fc.state_dict()) == list(tc.state_dict())
    fc.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tc.state_dict().items()})
    x, h = _rand(2, 3), _rand(2, 5)
    hx_t = (torch.tensor(h), torch.tensor(h * 0.5)) if mode == "LSTM" else torch.tensor(h)
    hx_f = (flow.tensor(h), flow.tensor(h * 0.5)) if mode == "LSTM" else flow.tensor(h)
    t_out, f_out = tc(torch.tensor(x), hx_t), fc(flow.tensor(x), hx_f)
    t_out = t_out if mode == "LSTM" else (t_out,)
    f_out = f_out if mode == "LSTM" else (f_out,)
    sum(o.sum() for o in t_out).backward()
    loss = f_out[0].sum()
    for o in f_out[1:]:
        loss = loss + o.sum()
    loss.backward()
    for f, t in zip(f_out, t_out):
        np.testing.assert_allclose(f.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    named = dict(fc.named_parameters())
    for name, tp in tc.named_parameters():
        np.testing.assert_allclose(named[name].grad.numpy(), tp.grad.numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)  # fmt: skip


# --------------------------------------------------------------------------- finite differences


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradients_match_central_differences(mode):
    m = _make(mode, 2, 3, bidirectional=True, dtype=flow.float64)
    x = RNG.standard_normal((3, 2, 2))
    w = RNG.standard_normal((3, 2, 6))
    p = {k: v.astype(np.float64) for k, v in _params(m).items()}
    zeros = np.zeros((2, 2, 3))

    def loss_np(p, x):
        out, h, _ = np_rnn(mode, p, x, zeros, zeros if mode == "LSTM" else None, 1, True)
        return float((out * w).sum() + h.sum())

    fx = flow.tensor(x, dtype=flow.float64, requires_grad=True)
    out, state = m(fx)
    h = state[0] if mode == "LSTM" else state
    assert out.dtype is flow.float64
    ((out * flow.tensor(w, dtype=flow.float64)).sum() + h.sum()).backward()
    eps = 1e-6
    named = dict(m.named_parameters())
    for name in p:
        fd = np.zeros_like(p[name])
        for i in np.ndindex(p[name].shape):
            hi, lo = dict(p), dict(p)
            hi[name], lo[name] = p[name].copy(), p[name].copy()
            hi[name][i] += eps
            lo[name][i] -= eps
            fd[i] = (loss_np(hi, x) - loss_np(lo, x)) / (2 * eps)
        np.testing.assert_allclose(named[name].grad.numpy(), fd, rtol=1e-6, atol=1e-8,
                                   err_msg=name)  # fmt: skip
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        fd[i] = (loss_np(p, hi) - loss_np(p, lo)) / (2 * eps)
    np.testing.assert_allclose(fx.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- compiled


class _Tagger(nn.Module):
    def __init__(self, mode, **kw):
        super().__init__()
        self.rnn = _make(mode, 4, 8, **kw)
        self.head = nn.Linear(16 if kw.get("bidirectional") else 8, 2)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


class _Step(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


@pytest.mark.parametrize("mode,kw", [("LSTM", dict(bidirectional=True)),
                                     ("GRU", dict(num_layers=2))])  # fmt: skip
def test_graph_training_steps_match_eager(mode, kw):
    flow.manual_seed(0)
    eager = _Tagger(mode, **kw)
    compiled = copy.deepcopy(eager)
    opt_e = flow.optim.Adam(eager.parameters(), lr=0.01)
    step = _Step(compiled, flow.optim.Adam(compiled.parameters(), lr=0.01))
    for _ in range(3):
        x, y = _rand(5, 3, 4), _rand(5, 3, 2)
        opt_e.zero_grad()
        loss_e = ((eager(flow.tensor(x)) - flow.tensor(y)) ** 2).mean()
        loss_e.backward()
        opt_e.step()
        loss_g = step(x, y)
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5, atol=1e-6)
    state_e, state_g = eager.state_dict(), compiled.state_dict()
    assert state_e.keys() == state_g.keys()
    for key in state_e:
        np.testing.assert_allclose(state_g[key].numpy(), state_e[key].numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=key)  # fmt: skip
    assert len(step._compiled) == 1


def test_jit_forward_matches_eager():
    m = nn.RNN(3, 4, nonlinearity="relu", batch_first=True)
    cell = nn.LSTMCell(3, 4)
    x, h = flow.tensor(_rand(2, 3, 3)), flow.tensor(_rand(1, 2, 4))

    def fn(x, h):
        out, h_n = m(x, h)
        h1, c1 = cell(x[:, 0], (h_n[0], h_n[0]))
        return out, h1 + c1

    got, want = flow.jit(fn)(x, h), fn(x, h)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- dropout


def test_dropout_acts_between_layers_in_training_only():
    flow.manual_seed(1)
    m = nn.LSTM(4, 6, num_layers=3, dropout=0.5)
    ref = nn.LSTM(4, 6, num_layers=3)
    ref.load_state_dict(m.state_dict())
    x = flow.tensor(_rand(5, 2, 4))
    m.eval()
    ref.eval()
    out_eval, (h_eval, _) = m(x)
    np.testing.assert_array_equal(out_eval.numpy(), ref(x)[0].numpy())
    m.train()
    out_train, (h_train, _) = m(x)
    assert out_train.shape == out_eval.shape
    assert not np.allclose(out_train.numpy(), out_eval.numpy())
    # the first layer's final state sees no dropout (it acts on the layers' outputs only)
    np.testing.assert_allclose(h_train.numpy()[0], h_eval.numpy()[0], rtol=1e-6)
    out_train.sum().backward()
    assert m.weight_ih_l0.grad is not None


def test_dropout_with_one_layer_warns():
    with pytest.warns(UserWarning, match="no effect"):
        nn.GRU(3, 4, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.GRU(3, 4, num_layers=2, dropout=0.2)


# --------------------------------------------------------------------------- errors


def test_input_of_wrong_rank_is_refused():
    m = nn.GRU(3, 4)
    with pytest.raises(ValueError, match=r"expected input of 3 dims.*got shape \[2, 5, 3, 1\]"):
        m(flow.zeros(2, 5, 3, 1))
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 3\) or \(3,\)"):
        nn.GRUCell(3, 4)(flow.zeros(2, 2, 3))


def test_input_of_wrong_feature_size_is_refused():
    with pytest.raises(ValueError, match=r"expected input with 3 features \(input_size\)"):
        nn.LSTM(3, 4)(flow.zeros(5, 2, 7))
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 3\)"):
        nn.RNNCell(3, 4)(flow.zeros(2, 5))


def test_initial_state_of_wrong_shape_is_refused():
    m = nn.LSTM(3, 4, num_layers=2)
    x = flow.zeros(5, 2, 3)
    good = flow.zeros(2, 2, 4)
    with pytest.raises(ValueError, match=r"expected h_0 of shape \[2, 2, 4\] for this batched"):
        m(x, (flow.zeros(1, 2, 4), good))
    with pytest.raises(ValueError, match=r"expected c_0 of shape \[2, 2, 4\].*got \[2, 3, 4\]"):
        m(x, (good, flow.zeros(2, 3, 4)))
    with pytest.raises(ValueError, match=r"expected hx of shape \[1, 4\] for this unbatched"):
        nn.GRU(3, 4)(flow.zeros(5, 3), flow.zeros(1, 1, 4))
    with pytest.raises(TypeError, match=r"expected hx to be a tuple \(h_0, c_0\)"):
        m(x, good)
    with pytest.raises(TypeError, match=r"expected hx to be one tensor"):
        nn.RNN(3, 4)(x, (good, good))
    with pytest.raises(ValueError, match=r"expected h of shape \[2, 4\]"):
        nn.LSTMCell(3, 4)(flow.zeros(2, 3), (flow.zeros(3, 4), flow.zeros(2, 4)))


def test_unknown_nonlinearity_is_refused():
    with pytest.raises(ValueError, match=r"unknown nonlinearity 'gelu'; expected 'tanh' or"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="unknown nonlinearity 'sigmoid'"):
        nn.RNNCell(3, 4, nonlinearity="sigmoid")


@pytest.mark.parametrize("p", [-0.1, 1.5, "0.5"])
def test_dropout_outside_0_1_is_refused(p):
    with pytest.raises(ValueError, match=r"dropout should be a number in \[0, 1\]"):
        nn.LSTM(3, 4, num_layers=2, dropout=p)


@pytest.mark.parametrize("arg,kw", [
    ("hidden_size", dict(hidden_size=0)), ("num_layers", dict(num_layers=0)),
    ("input_size", dict(input_size=-2)), ("hidden_size", dict(hidden_size=2.5)),
])  # fmt: skip
def test_non_positive_sizes_are_refused(arg, kw):
    args = {"input_size": 3, "hidden_size": 4, **kw}
    with pytest.raises(ValueError, match=f"{arg} should be a positive integer"):
        nn.GRU(**args)
    if arg != "num_layers":
        with pytest.raises(ValueError, match=f"{arg} should be a positive integer"):
            nn.GRUCell(**args)


def test_bad_proj_size_is_refused():
    with pytest.raises(ValueError, match=r"proj_size \(4\) has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="proj_size should be a non-negative integer"):
        nn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(ValueError, match="proj_size is only supported by LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)


def test_packed_sequence_and_non_tensors_are_refused():
    class PackedSequence:  # what torch.nn.utils.rnn.pack_padded_sequence returns
        pass

    with pytest.raises(TypeError, match="PackedSequence inputs are not supported"):
        nn.LSTM(3, 4)(PackedSequence())
    with pytest.raises(TypeError, match="expected input to be a flow.Tensor, got ndarray"):
        nn.GRU(3, 4)(np.zeros((5, 2, 3), np.float32))


def test_wrong_dtypes_are_refused():
    with pytest.raises(TypeError, match="expected input to be floating point"):
        nn.RNN(3, 4)(flow.zeros(5, 2, 3, dtype=flow.int64))
    with pytest.raises(TypeError, match="expected hx of dtype"):
        nn.GRU(3, 4)(flow.zeros(5, 2, 3), flow.zeros(1, 2, 4, dtype=flow.float64))


def test_empty_sequence_is_refused():
    with pytest.raises(ValueError, match="expected a sequence of at least one step"):
        nn.GRU(3, 4)(flow.zeros(0, 2, 3))

